// A decoder's RoPE as llama.cpp runs it: the scaling type and factor, frequency factors (Llama 3.1+'s rope_freqs,
// Phi-3's LongRoPE long/short pair), YaRN's ramp and magnitude, and the attention factor; read once at load from the
// file's keys and tensors, applied per step with the least device op that expresses it.
#pragma once

#include "decoder_family.hpp"

#include <strata/plugin_abi.h>

#include <string>
#include <vector>

namespace strata::decoder {

struct rope_config {
    float theta_base = 10000.0f; // <arch>.rope.freq_base (a windowed Gemma layer's: rope.freq_base_swa)
    float freq_scale = 1.0f;  // 1 / the scaling factor
    std::vector<float> freqs; // rot_dims / 2 frequency factors, empty: none
    float attn_factor = 1.0f; // magnitude of cos and sin (LongRoPE's attn_factor; YaRN's, with ext_factor)
    float ext_factor = 0.0f;  // YaRN: 1, else 0
    float corr_low = 0.0f, corr_high = 0.0f;
    int64_t n_ctx_orig = 0; // rope.scaling.original_context_length (YaRN's ramp is over it)
    // The device op rotate() calls beyond plain `rope` (0: none), and what in the file needs it, for device_op_need.
    int32_t op = 0;
    std::string op_reason;
    // A line for the log: which frequency factors a LongRoPE model took (empty otherwise).
    std::string note;
};

// Reads the RoPE keys and factor tensors of family `fam` (hp: the hyperparameters read so far). Throws
// std::runtime_error naming a key or tensor this plugin does not implement or finds malformed.
rope_config read_rope(const strata_model_source *src, const family &fam, const strata_model_hparams &hp);

// The RoPE of a family's windowed layers (Gemma 2/3): `global`'s with another base and scale, as llama.cpp passes
// freq_base_swa / freq_scale_swa to the same ggml_rope_ext (YaRN's ramp follows the base; its magnitude the scale).
rope_config windowed_rope(const rope_config &global, float theta_base, float freq_scale,
                          const strata_model_hparams &hp);

// RoPE of n tokens of `heads` heads in x with the model's configuration.
int32_t rotate(const rope_config &rope, const strata_model_hparams &hp, const strata_device_desc *ops,
               strata_device *dev, float *x, int32_t n, int32_t heads, const int32_t *positions, strata_status *st);

} // namespace strata::decoder
