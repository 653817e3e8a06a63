// The Llama forward pass expressed in a device's ops. Shapes and names follow llama.cpp's GGUF conventions.
#pragma once

#include <strata/plugin_abi.h>

#include <string>
#include <vector>

namespace strata::llama {

struct layer_weights {
    strata_tensor_view attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
};

struct model {
    strata_model_hparams hp{};
    strata_tensor_view tok_embd{}, output_norm{}, output{};
    std::vector<layer_weights> layers;
    // The same weights as host memory (strata_model_source.get_host_tensor, ABI 1.7), for layers the host device
    // computes (hybrid placement); empty when the host offers none.
    std::vector<layer_weights> host_layers;
    std::vector<std::string> tensor_names; // storage for names handed out in views
    // RoPE beyond the plain rotation (rope_ext, ABI 1.11): 1 / the linear scaling factor, and the per-pair frequency
    // factors of a rope_freqs tensor (Llama 3.1+), copied at load (empty: none).
    float rope_freq_scale = 1.0f;
    std::vector<float> rope_freqs;
};

// Reads hyperparameters and resolves every tensor, checking shapes; throws std::runtime_error with a clear message.
model *load(const strata_model_source *src);

// Covers a batch of n_tokens in either KV layout, with logits for up to n_tokens of them.
uint64_t workspace_bytes(const model &m, int32_t n_tokens);

// One forward step. With the ABI 1.5 tail and paged_kv set: a batch of several sequences over the paged KV cache
// (device kv_store + paged_attention per layer, logits of the tokens in logits_tokens); otherwise one sequence over
// its contiguous per-layer cache with the logits of the last token. Per token both give the same bits.
// Returns a strata_code; fills st on failure.
int32_t forward(const model &m, const strata_forward_args *args, strata_status *st);

} // namespace strata::llama
