// Adapts an open GGUF file plus the quant plugins to the C `strata_model_source` a model_arch plugin reads.
#pragma once

#include "model_file/model_file.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <set>
#include <string>

namespace strata::engine {

class tiered_weights;

class model_source {
  public:
    // Both references are borrowed and must outlive this object (and the model created from it).
    model_source(const model_file &file, const plugins::registry &registry, const strata_host_services *host);
    const strata_model_source *view() const { return &view_; }
    // The context one sequence may reach as the user set it (max_model_len; 0: unset), for models whose forward
    // depends on it (strata_model_source.n_ctx_seq, ABI 1.13: Phi-3's LongRoPE factors).
    void set_context_per_sequence(int64_t n_ctx_seq) { view_.n_ctx_seq = n_ctx_seq; }
    // The model is created as tensor-parallel rank `rank` of `size` (ABI 1.29); the file is that rank's part, and
    // n_vocab the whole model's vocabulary (ABI 1.30: a part's embedding may hold only its piece of it).
    void set_tensor_parallel(int32_t rank, int32_t size, int32_t n_vocab) {
        view_.tensor_parallel_rank = rank;
        view_.tensor_parallel_size = size;
        view_.tensor_parallel_n_vocab = n_vocab;
    }
    // From now on tensors the placement moved resolve to their new address (tier memory or a ring slot).
    void set_placement(const class tiered_weights *placement) { placement_ = placement; }
    // Every metadata key the plugin asked for, found or not (model_coverage: a key nobody read is refused).
    const std::set<std::string> &keys_read() const { return keys_read_; }
    // Every tensor the plugin resolved (found or not): one it reads itself at create (a small constant it copies,
    // such as rope_freqs) counts as used even if it is not among its placed weights.
    const std::set<std::string> &tensors_read() const { return tensors_read_; }

  private:
    static int32_t get_u64(void *ctx, const char *key, uint64_t *out);
    static int32_t get_f64(void *ctx, const char *key, double *out);
    static int32_t get_str(void *ctx, const char *key, const char **out);
    static int32_t get_tensor(void *ctx, const char *name, strata_tensor_view *out);
    static int32_t get_host_tensor(void *ctx, const char *name, strata_tensor_view *out);
    int32_t resolve(const char *name, bool host, strata_tensor_view *out) const;
    void describe(const gguf::tensor_info &t, const void *data, strata_tensor_view *out) const;

    const model_file &file_;
    const plugins::registry &registry_;
    const tiered_weights *placement_ = nullptr;
    strata_model_source view_{};
    mutable std::set<std::string> keys_read_;
    mutable std::set<std::string> tensors_read_;
};

} // namespace strata::engine
