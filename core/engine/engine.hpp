// The engine: owns the loaded model, the device, the KV cache and the request queue. Frontends reach it only through
// the C `strata_engine_api` (engine_api.hpp), so a frontend plugin never depends on core's C++ types.
#pragma once

#include "engine/sampler.hpp"
#include "engine/tiered_weights.hpp"
#include "planner/memory_planner.hpp"
#include "gguf/gguf_file.hpp"
#include "plugin_host/registry.hpp"
#include "tokenizer/spm_tokenizer.hpp"

#include <strata/plugin_abi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::engine {

class model_source;

struct engine_options {
    std::string model_path;
    int32_t max_model_len = 0;    // 0 = the model's trained context length
    int32_t prefill_chunk = 256;  // tokens per prefill forward pass (workspace is sized for this)
    std::string device = "auto";  // device plugin name, or "auto" for the best scoring one
    const strata_config_view *device_config = nullptr; // the device plugin's table (borrowed)
    offload_options offload;                           // [memory] and the tiers' tables
    bool print_plan = true;                            // the memory plan table on stderr at start-up
};

struct request_state;

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

    const spm_tokenizer &tokenizer() const { return *tokenizer_; }
    const strata_model_hparams &hparams() const { return hp_; }
    int32_t max_model_len() const { return n_ctx_; }
    const std::string &model_name() const { return model_name_; }
    // A string metadata value of the model file (NUL-terminated, valid for the engine's life); nullptr when absent.
    const char *metadata_string(const char *key) const;
    const std::string &device_name() const { return device_name_; }
    const planner::plan &memory_plan() const { return plan_; }
    // Per-tier bytes, streamed bytes per token, read bandwidth and prefetch stalls (empty without offload).
    std::string offload_report() const { return weights_ ? weights_->report() : std::string(); }
    ring_stats offload_stats() const { return weights_ ? weights_->stats() : ring_stats{}; }
    int32_t device_threads() const;

    // Runs one forward pass over `tokens` at `positions` into the KV cache of the single sequence slot and returns
    // the last token's logits (n_vocab floats, valid until the next call). Only for tools and tests that drive the
    // model directly; must not run concurrently with requests.
    const float *forward_for_testing(const int32_t *tokens, const int32_t *positions, int32_t n);

  private:
    void place_weights();
    void prefault_weights();
    void worker_loop();
    void run_request(request_state &r);
    void forward(const int32_t *tokens, const int32_t *positions, int32_t n);

    const plugins::registry &registry_;
    const strata_host_services *host_;
    engine_options opts_;
    std::unique_ptr<gguf::file> file_;
    std::unique_ptr<model_source> source_;
    std::unique_ptr<spm_tokenizer> tokenizer_;
    plugins::handle<strata_model_arch_desc> arch_;
    plugins::handle<strata_device_desc> device_desc_;
    strata_device *device_ = nullptr;
    strata_model *model_ = nullptr;
    strata_model_hparams hp_{};
    planner::plan plan_;
    std::unique_ptr<tiered_weights> weights_;
    std::string model_name_;
    std::string device_name_;
    int32_t n_ctx_ = 0;

    // Buffers allocated once from the device; nothing is allocated per token.
    std::vector<void *> device_allocations_;
    std::vector<float *> k_cache_, v_cache_;
    void *workspace_ = nullptr;
    uint64_t workspace_size_ = 0;
    float *logits_ = nullptr;
    std::vector<int32_t> positions_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<request_state>> queue_;
    std::map<strata_request_id, std::shared_ptr<request_state>> requests_;
    strata_request_id next_id_ = 1;
    bool stopping_ = false;
    int64_t running_ = 0, finished_ = 0, prompt_tokens_total_ = 0, generation_tokens_total_ = 0;
    std::thread worker_;
};

} // namespace strata::engine
