// The engine: owns the loaded model, the device, the paged KV cache and the scheduler, and runs the step loop that
// serves many requests at once (continuous batching). Frontends reach it only through the C `strata_engine_api`
// (engine_api.hpp), so a frontend plugin never depends on core's C++ types.
#pragma once

#include "engine/hybrid_policy.hpp"
#include "engine/scheduler.hpp"
#include "engine/sequence.hpp"
#include "engine/tiered_weights.hpp"
#include "gguf/gguf_file.hpp"
#include "model_file/open_model_file.hpp"
#include "kv/kv_cache.hpp"
#include "planner/memory_planner.hpp"
#include "plugin_host/registry.hpp"
#include "chat/chat_formatter.hpp"
#include "tokenizer/tokenizer.hpp"

#include <strata/plugin_abi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace strata::topology {
struct machine;
}

namespace strata::engine {

class config_override_view;
class model_source;
class prefix_store_adapter;

// The paged KV cache and where its blocks may live ([scheduler] and the KV keys of [memory]).
struct kv_options {
    uint32_t kv_type = STRATA_KV_F32;     // [memory] kv_cache_dtype: the element type of every KV block (strata_kv_type)
    int32_t block_size = 16;
    bool enable_prefix_caching = true;
    double swap_space_gib = 4.0;          // host tier for swapped and spilled blocks (0 = none)
    std::string host_tier = "numa_ram";   // tier plugin holding them
    double nvme_space_gib = 0.0;          // NVMe ("nvme" tier) for swapped blocks when the host tier is full
    std::string prefix_store_dir;         // persistent prefix store ("" = none)
    double prefix_store_gib = 16.0;
};

struct engine_options {
    std::string model_path;
    std::string model_argument;   // the model as the user named it (--model / serve MODEL / [model] path), unchanged
    gguf::open_options file_open; // [memory] mmap, mlock
    std::string quantization = "auto"; // [model] quantization (check_quantization)
    bool check_tensors = false;        // [model] check_tensors (tensor_check.hpp)
    std::string chat_template;         // [model] chat_template: "" (the model's), a built-in name, a file, or Jinja
    std::string chat_template_base_dir; // where a relative chat_template file is looked for besides the working dir
    std::string chat_content_format = "auto"; // [model] chat_template_content_format
    bool cpu_kv_cache = false;         // [memory] cpu_kv_cache (check_cpu_kv_cache)
    int32_t max_model_len = 0;    // 0 = the model's trained context length
    int32_t prefill_chunk = 512;  // most prompt tokens of one sequence per step ([engine] prefill_chunk)
    std::string device = "auto";  // device plugin name, or "auto" for the best scoring one
    const strata_config_view *device_config = nullptr; // the device plugin's table (borrowed), or:
    std::map<std::string, const strata_config_view *> device_configs; // each device plugin's table by name
    offload_options offload;                           // [memory] and the tiers' tables
    scheduler_config scheduler;                        // [scheduler]; its prefill_chunk is set from the field above
    kv_options kv;
    bool print_plan = true;                            // the memory plan table on stderr at start-up
    // `runtime plan`: start-up runs as for serving (the same device choice with its fallback, the same measurements
    // and hybrid decisions) and stops once the memory plan is made: no weight is copied or read, no KV or workspace
    // is allocated, no request can be submitted. memory_plan() and memory_plan_inputs() are what start-up prints.
    bool plan_only = false;
    // With plan_only: plan for a GPU of this many bytes ([memory] plan_gpu_memory) instead of the device found here.
    std::optional<uint64_t> plan_gpu_memory;
    // The app's start-up discovery (borrowed), for the GPU's nearest NUMA node; null: discovered here when needed.
    const topology::machine *machine = nullptr;
};

struct model_shape;

class engine {
  public:
    // Loads the model and creates the device; throws strata::error with a user-facing message.
    engine(const plugins::registry &registry, const strata_host_services *host, engine_options opts);
    ~engine();
    engine(const engine &) = delete;
    engine &operator=(const engine &) = delete;

    strata_request_id submit(const strata_request &req);
    strata_request_result wait(strata_request_id id);
    void cancel(strata_request_id id);
    strata_engine_stats stats() const;

    const class tokenizer &tokenizer() const { return *tokenizer_; }
    // The model's chat prompts ([model] chat_template, else the file's templates): engine_chat.cpp.
    const chat::chat_formatter &chat() const { return *chat_; }
    const strata_model_hparams &hparams() const { return hp_; }
    int32_t max_model_len() const { return n_ctx_; }
    const std::string &model_name() const { return model_name_; }
    const engine_options &options() const { return opts_; }
    // A string metadata value of the model file (NUL-terminated, valid for the engine's life); nullptr when absent.
    const char *metadata_string(const char *key) const;
    const std::string &device_name() const { return device_name_; }
    const planner::plan &memory_plan() const { return plan_; }
    const planner::inputs &memory_plan_inputs() const { return plan_inputs_; }
    // Per-tier bytes, streamed bytes per token, read bandwidth and prefetch stalls (empty without offload).
    std::string offload_report() const { return weights_ ? weights_->report() : std::string(); }
    ring_stats offload_stats() const { return weights_ ? weights_->stats() : ring_stats{}; }
    // Hybrid placement: the layers the CPU computes (empty when none), the batch size from which they stream, and
    // how many steps ran each way.
    struct hybrid_report {
        std::vector<int32_t> host_layers;
        std::vector<int32_t> expert_layers; // layers whose routed experts the CPU computes (--n-cpu-moe)
        int32_t min_batch = 0;
        uint64_t cpu_steps = 0, streamed_steps = 0;
    };
    hybrid_report hybrid() const;
    int32_t device_threads() const;
    uint64_t fingerprint() const { return fingerprint_; }

    // Runs one forward pass over `tokens` at `positions` of a private sequence slot and returns the last token's
    // logits (n_vocab floats, valid until the next call). Only for tools and tests that drive the model directly.
    // The pass runs on the worker thread between steps (the KV cache and the step buffers have that one owner);
    // the caller waits for it.
    const float *forward_for_testing(const int32_t *tokens, const int32_t *positions, int32_t n);

    // Teacher forcing (perplexity, KL divergence: core/app/perplexity_command.cpp): runs tokens[0..n) at positions
    // 0..n-1 of the private slot, from an empty context, and writes the logits of positions first_row..n-1 to `out`,
    // one row of n_vocab floats each ((n - first_row) rows, in order). The text runs in pieces of at most
    // max_num_batched_tokens tokens asking at most max_num_seqs rows each (the workspace and the logits buffer), so
    // nothing grows with n but `out`; a position's logits do not depend on the pieces (every op computes a token
    // independently of the others in its batch: tests/model/test_engine_forward_logits.cpp). n <= max_model_len.
    // Runs on the worker thread between steps, like forward_for_testing; throws strata::error on a bad token id.
    void forward_logits(const int32_t *tokens, int32_t n, int32_t first_row, float *out);

  private:
    void init();
    void start_device();
    void bind_pinned_staging();
    void release_resources(bool persist);
    void place_weights();
    void plan_hybrid(planner::inputs in);
    void plan_cpu_experts(planner::inputs &in);
    void plan_for_gpu(const model_shape &shape);
    void prepare_host_compute();
    bool experts_on_cpu_planned() const;
    bool can_host_experts() const;
    void check_device_computes_experts() const;
    bool start_host_device(bool required);
    void stop_host_device();
    void measure_link();
    void measure_link_latency();
    std::pair<double, double> measure_cpu_layer(int32_t layer);
    void prefault_weights();
    void setup_kv();
    void worker_loop();
    // Runs fn on the worker thread between two steps and waits for it; rethrows what fn threw.
    void run_on_worker(const std::function<void()> &fn);
    void run_worker_task();
    const float *forward_on_worker(const int32_t *tokens, const int32_t *positions, int32_t n);
    void forward_private_piece(const int32_t *tokens, const int32_t *positions, int32_t m, int32_t n_rows);
    void run_step(const std::vector<scheduled_seq> &batch);
    void forward_batch(int32_t n_tokens, int32_t n_seqs, int32_t n_logits);
    void fetch_logits(int32_t n_logits);
    float *logits_row(int32_t i);
    void emit_token(sequence &s, int32_t tok, bool eos);
    void setup_chat();
    void finish(sequence &s, int32_t reason, const std::string &error = std::string());
    void publish_stats();
    void publish_stats_locked(const kv::kv_cache_stats &ks);

    const plugins::registry &registry_;
    const strata_host_services *host_;
    engine_options opts_;
    std::unique_ptr<model_file> file_;
    std::unique_ptr<model_source> source_;
    std::unique_ptr<class tokenizer> tokenizer_;
    std::unique_ptr<chat::chat_formatter> chat_;
    // Constrained decoding's view of the vocabulary, built by the first request that needs it.
    std::unique_ptr<constraint_vocab> constraint_vocab_;
    std::once_flag constraint_vocab_once_;
    plugins::handle<strata_model_arch_desc> arch_;
    plugins::handle<strata_device_desc> device_desc_;
    strata_device *device_ = nullptr;
    strata_model *model_ = nullptr;
    strata_model_hparams hp_{};
    planner::plan plan_;
    planner::inputs plan_inputs_;
    std::unique_ptr<tiered_weights> weights_;
    std::string model_name_;
    std::string device_name_;
    int32_t n_ctx_ = 0;
    uint64_t fingerprint_ = 0;
    bool device_reads_host_ = false;
    // [pinned_ram] with numa_node set to the GPU's nearest node (opts_.offload.tier_configs points at it).
    std::vector<std::unique_ptr<config_override_view>> staging_configs_; // tiers bound near the GPU

    // Hybrid placement (engine_hybrid.cpp): the CPU computes layer_on_host_ layers where they live, except in steps
    // of hybrid_min_batch_+ tokens (when > 0), which stream them to the device.
    plugins::handle<strata_device_desc> host_desc_;
    strata_device *host_device_ = nullptr;
    std::vector<uint8_t> layer_on_host_;
    std::vector<uint8_t> experts_on_host_; // layers whose routed experts the host device computes (empty: none)
    int32_t hybrid_min_batch_ = 0;
    int32_t host_workspace_tokens_ = 0;    // the largest step the host device computes layers of
    std::vector<unsigned char> host_workspace_;
    double link_h2d_ = 0, link_d2h_ = 0; // measured link to a device with its own memory (bytes/s, 0 = unknown)
    double link_latency_ = 0;            // one small synchronous copy (s), measured at each start
    std::atomic<uint64_t> hybrid_steps_{0}, hybrid_streamed_steps_{0};

    // KV cache and scheduler (used by the worker thread only).
    std::unique_ptr<kv::kv_cache> kv_;
    std::unique_ptr<prefix_store_adapter> store_;
    std::unique_ptr<scheduler> sched_;
    kv::seq_blocks testing_kv_;
    std::vector<float> testing_logits_; // forward_for_testing's result
    std::vector<int32_t> positions_scratch_; // forward_logits' positions 0..n-1 (worker thread)

    // Buffers allocated once; nothing is allocated per token or per step.
    std::vector<void *> device_allocations_;
    std::vector<void *> registered_; // host memory page-locked for the device (host_register)
    void *workspace_ = nullptr;
    uint64_t workspace_size_ = 0;
    float *logits_ = nullptr;          // device memory: max_num_seqs rows of n_vocab
    std::vector<float> logits_host_;   // host mirror when the device has its own memory
    std::vector<int32_t> step_tokens_, step_positions_, step_token_seq_, step_logits_tokens_, step_seq_block_start_;
    std::vector<void *> step_block_base_;
    std::vector<sequence *> step_logits_owner_;
    std::vector<scheduled_seq> batch_;
    std::vector<std::pair<sequence *, std::string>> failed_;
    std::vector<std::shared_ptr<sequence>> live_; // admitted to the scheduler (worker thread)

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<sequence>> incoming_;
    std::map<strata_request_id, std::shared_ptr<sequence>> requests_;
    strata_request_id next_id_ = 1;
    uint64_t next_arrival_ = 0;
    bool stopping_ = false;
    int64_t finished_ = 0, prompt_tokens_total_ = 0, generation_tokens_total_ = 0;
    int64_t running_snapshot_ = 0, waiting_snapshot_ = 0;
    kv::kv_cache_stats kv_snapshot_{};
    const std::function<void()> *worker_task_ = nullptr; // run_on_worker's pending task (guarded by mu_)
    std::exception_ptr worker_task_error_;
    bool worker_task_done_ = false;
    scheduler_counters sched_snapshot_{};
    std::thread worker_;
};

} // namespace strata::engine
