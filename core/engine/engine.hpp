// The engine (vLLM v1's EngineCore): owns the model file, its tokenizer and chat templates, the requests, the paged KV
// cache's block manager and the scheduler, and runs the step loop that serves many requests at once (continuous
// batching): the scheduler decides a step, the executor runs it on the workers (worker.hpp: the device, the model's
// weights, the KV memory, the forward pass), the engine samples and streams the tokens. Frontends reach it only
// through the C `strata_engine_api` (engine_api.hpp), so a frontend plugin never depends on core's C++ types.
#pragma once

#include "engine/engine_options.hpp"
#include "engine/executor.hpp"
#include "engine/scheduler.hpp"
#include "engine/sequence.hpp"
#include "engine/step_builder.hpp"
#include "engine/tiered_weights.hpp"
#include "model_file/open_model_file.hpp"
#include "model_file/tensor_parallel_shard.hpp"
#include "kv/kv_cache.hpp"
#include "planner/memory_planner.hpp"
#include "plugin_host/registry.hpp"
#include "chat/chat_formatter.hpp"
#include "tokenizer/tokenizer.hpp"

#include <strata/plugin_abi.h>
#include <strata/thread_pool.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace strata::engine {

class prefix_store_adapter;

class engine {
  public:
    // Loads the model and creates the device; throws strata::error with a user-facing message.
    engine(const plugins::registry &registry, const strata_host_services *host, engine_options opts);
    ~engine();
    engine(const engine &) = delete;
    engine &operator=(const engine &) = delete;

    strata_request_id submit(const strata_request &req);
    // Submits every request or none (the first bad one throws, the queue's limit counts them all), under one lock:
    // the step thread takes them in together, so they are scheduled as one arrival whatever the threads' timing.
    std::vector<strata_request_id> submit_all(std::span<const strata_request> reqs);
    strata_request_result wait(strata_request_id id);
    void cancel(strata_request_id id);
    strata_engine_stats stats() const;
    // Requests submitted and not yet finished, exact at the call (what a data-parallel front balances on).
    int64_t unfinished() const;

    const class tokenizer &tokenizer() const { return *tokenizer_; }
    // The model's chat prompts ([model] chat_template, else the file's templates): engine_chat.cpp.
    const chat::chat_formatter &chat() const { return *chat_; }
    const strata_model_hparams &hparams() const { return hp_; }
    int32_t max_model_len() const { return n_ctx_; }
    const std::string &model_name() const { return model_name_; }
    const engine_options &options() const { return opts_; }
    // A string metadata value of the model file (NUL-terminated, valid for the engine's life); nullptr when absent.
    const char *metadata_string(const char *key) const;
    const std::string &device_name() const { return executor_->driver_worker().device_name(); }
    const planner::plan &memory_plan() const { return executor_->driver_worker().memory_plan(); }
    const planner::inputs &memory_plan_inputs() const { return executor_->driver_worker().memory_plan_inputs(); }
    // Per-tier bytes, streamed bytes per token, read bandwidth and prefetch stalls (empty without offload).
    std::string offload_report() const { return executor_->driver_worker().offload_report(); }
    ring_stats offload_stats() const { return executor_->driver_worker().offload_stats(); }
    // Hybrid placement: the layers the CPU computes (empty when none), the batch size from which they stream, and
    // how many steps ran each way.
    using hybrid_report = worker::hybrid_report;
    hybrid_report hybrid() const { return executor_->driver_worker().hybrid(); }
    // The threads the device computes with (tensor-parallel ranks: all of theirs together, those of one stage).
    int32_t device_threads() const {
        if (!executor_->tensor_parallel()) return executor_->driver_worker().device_threads();
        int32_t n = 0;
        for (const auto &w : executor_->workers())
            if (w->stage().rank == 0) n += w->device_threads();
        return n;
    }
    // Each pipeline rank's stage (one rank: every layer; tensor-parallel ranks inside stages: each worker's, in
    // ranks()' order). memory_plan(), offload_report(), offload_stats() and hybrid() above are rank 0's.
    std::vector<pipeline_stage> pipeline_stages() const {
        std::vector<pipeline_stage> out;
        for (const pipeline_rank *r : executor_->ranks()) out.push_back(r->stage());
        return out;
    }
    // Each rank's worker, rank by rank (one without pipeline or tensor parallel; tensor-parallel ranks inside pipeline
    // stages rank-major, worker t * S + s being rank t of stage s): its stage and memory plan.
    std::vector<const worker *> ranks() const {
        std::vector<const worker *> out;
        for (const auto &r : executor_->workers()) out.push_back(r.get());
        return out;
    }
    uint64_t fingerprint() const { return fingerprint_; }

    // Runs one forward pass over `tokens` at `positions` of a private sequence slot and returns the last token's
    // logits (n_vocab floats, valid until the next call). Only for tools and tests that drive the model directly.
    // The pass runs on the step thread between steps (the KV cache and the step buffers have that one owner);
    // the caller waits for it.
    const float *forward_for_testing(const int32_t *tokens, const int32_t *positions, int32_t n);

    // Teacher forcing (perplexity, KL divergence: core/app/perplexity_command.cpp): runs tokens[0..n) at positions
    // 0..n-1 of the private slot, from an empty context, and writes the logits of positions first_row..n-1 to `out`,
    // one row of n_vocab floats each ((n - first_row) rows, in order). The text runs in pieces of at most
    // max_num_batched_tokens tokens asking at most max_num_seqs rows each (the workspace and the logits buffer), so
    // nothing grows with n but `out`; a position's logits do not depend on the pieces (every op computes a token
    // independently of the others in its batch: tests/model/test_engine_forward_logits.cpp). n <= max_model_len.
    // Runs on the step thread between steps, like forward_for_testing; throws strata::error on a bad token id.
    void forward_logits(const int32_t *tokens, int32_t n, int32_t first_row, float *out);

  private:
    void init();
    void release_resources(bool persist);
    void setup_kv();
    // Returns the whole model's hyperparameters.
    strata_model_hparams start_tensor_parallel_ranks(const plugins::handle<strata_model_arch_desc> &arch,
                                                     std::vector<std::unique_ptr<worker>> &workers);
    void step_loop();
    // Runs fn on the step thread between two steps and waits for it; rethrows what fn threw.
    void run_between_steps(const std::function<void()> &fn);
    void run_pending_task();
    const float *forward_between_steps(const int32_t *tokens, const int32_t *positions, int32_t n);
    step_output forward_private_piece(const int32_t *tokens, const int32_t *positions, int32_t m, int32_t first_row);
    void run_step(const std::vector<scheduled_seq> &batch);
    void sample_rows(const step_output &out, int32_t n_rows);
    step_output execute_step();
    void emit_token(sequence &s, int32_t tok, bool eos);
    void setup_chat();
    void finish(sequence &s, int32_t reason, const std::string &error = std::string());
    std::shared_ptr<sequence> prepare(const strata_request &req);
    void check_queue_room_locked(size_t n) const;
    strata_request_id enqueue_locked(std::shared_ptr<sequence> r);
    void publish_stats();
    void publish_stats_locked(const kv::kv_cache_stats &ks);

    const plugins::registry &registry_;
    const strata_host_services *host_;
    engine_options opts_;
    std::unique_ptr<model_file> file_;
    // Tensor parallel: each rank's part of the file (its workers read it; declared before executor_ to outlive it).
    std::vector<std::unique_ptr<tensor_parallel_shard>> shards_;
    std::unique_ptr<class tokenizer> tokenizer_;
    std::unique_ptr<chat::chat_formatter> chat_;
    // Constrained decoding's view of the vocabulary, built by the first request that needs it.
    std::unique_ptr<constraint_vocab> constraint_vocab_;
    std::once_flag constraint_vocab_once_;
    std::unique_ptr<executor> executor_; // its worker holds the device, the weights and the KV memory
    strata_model_hparams hp_{};
    std::string model_name_;
    int32_t n_ctx_ = 0;
    uint64_t fingerprint_ = 0;

    // KV cache and scheduler (used by the step thread only).
    std::unique_ptr<kv::kv_cache> kv_;
    std::unique_ptr<prefix_store_adapter> store_;
    std::unique_ptr<scheduler> sched_;
    kv::seq_blocks testing_kv_;
    std::vector<float> testing_logits_; // forward_for_testing's result
    std::vector<int32_t> positions_scratch_; // forward_logits' positions 0..n-1 (step thread)

    // The step as the scheduler decided it (step_input), in buffers allocated once: nothing per token or per step.
    step_builder step_;
    std::vector<sequence *> step_logits_owner_;
    // Each logits row's draw: its token, or why its sequence fails. Rows depend only on their own sequence's state
    // (sampler, penalties, constraint, logprobs), so a step with many rows draws them on the sampling pool.
    struct sampled_row {
        int32_t token = -1;
        bool failed = false;
        std::string error; // when failed
    };
    std::vector<sampled_row> step_sampled_;
    std::unique_ptr<thread_pool> sampling_pool_;
    std::vector<scheduled_seq> batch_;
    std::vector<std::pair<sequence *, std::string>> failed_;
    std::vector<std::shared_ptr<sequence>> live_; // admitted to the scheduler (step thread)

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<sequence>> incoming_;
    std::map<strata_request_id, std::shared_ptr<sequence>> requests_;
    strata_request_id next_id_ = 1;
    uint64_t next_arrival_ = 0;
    bool stopping_ = false;
    int64_t submitted_ = 0, finished_ = 0, prompt_tokens_total_ = 0, generation_tokens_total_ = 0;
    int64_t running_snapshot_ = 0, waiting_snapshot_ = 0;
    kv::kv_cache_stats kv_snapshot_{};
    const std::function<void()> *pending_task_ = nullptr; // run_between_steps' task (guarded by mu_)
    std::exception_ptr pending_task_error_;
    bool pending_task_done_ = false;
    scheduler_counters sched_snapshot_{};
    std::thread step_thread_;
};

} // namespace strata::engine
