// A pre-norm decoder's forward pass expressed in a device's ops, for every family of decoder_family.hpp. Shapes and
// names follow llama.cpp's GGUF conventions.
#pragma once

#include "decoder_family.hpp"
#include "decoder_rope.hpp"

#include <strata/plugin_abi.h>

#include <array>
#include <string>
#include <vector>

namespace strata::decoder {

// One layer's tensors by role; a tensor the file lacks (an optional bias) has data == nullptr.
struct layer_weights {
    std::array<strata_tensor_view, role_count> t{};
    const strata_tensor_view &operator[](role r) const { return t[static_cast<size_t>(r)]; }
    strata_tensor_view &operator[](role r) { return t[static_cast<size_t>(r)]; }
    bool has(role r) const { return (*this)[r].data != nullptr; }
};

// A weight in use order, as tensor_at lists it for the planner (layer -1: before the layers, n_layer: after).
struct listed_tensor {
    strata_tensor_view view;
    int32_t layer;
    int32_t role_index = -1; // a layer tensor's role, -1 for the embedding, output norm, classifier and its bias
};

// A mixture-of-experts model's expert count, experts used per token, the experts' inner size and the shared
// expert's (all 0: dense; n_ff_shared 0: no shared expert).
struct expert_dims {
    int32_t n_expert = 0, n_used = 0, n_ff = 0, n_ff_shared = 0;
};

// A layer tensor's dimension (decoder_family.hpp's `dim`) for a model's hyperparameters and experts.
inline int64_t resolve(dim d, const strata_model_hparams &hp, const expert_dims &ex) {
    switch (d) {
    case dim::embd: return hp.n_embd;
    case dim::q: return static_cast<int64_t>(hp.n_head) * hp.head_dim;
    case dim::kv: return static_cast<int64_t>(hp.n_head_kv) * hp.head_dim;
    case dim::qkv: return static_cast<int64_t>(hp.n_head + 2 * hp.n_head_kv) * hp.head_dim;
    case dim::head: return hp.head_dim;
    case dim::ff: return hp.n_ff;
    case dim::ff2: return 2 * static_cast<int64_t>(hp.n_ff);
    case dim::one: return 1;
    case dim::expert: return ex.n_expert;
    case dim::ff_exp: return ex.n_ff;
    case dim::ff_shexp: return ex.n_ff_shared;
    }
    return 0;
}

struct model {
    const family *fam = nullptr;
    strata_model_hparams hp{};
    expert_dims experts;
    strata_tensor_view tok_embd{}, output_norm{}, output{};
    strata_tensor_view output_bias{}; // data == nullptr: none
    std::vector<layer_weights> layers;
    // The same weights as host memory (strata_model_source.get_host_tensor, ABI 1.7), for layers the host device
    // computes (hybrid placement); empty when the host offers none.
    std::vector<layer_weights> host_layers;
    std::vector<listed_tensor> listed; // every weight in use order (tensor_count / tensor_at)
    rope_config rope; // scaling, frequency factors, YaRN, read at load
    // Attention as the family runs it, read at load: the score scale (1 / sqrt(head_dim) unless the family says
    // otherwise), Gemma 2's soft-cap (0: none), the sliding window (0: none) and the layers it applies to, which
    // rotate with rope_windowed.
    float attn_scale = 1.0f;
    float query_scale = 0.0f; // > 0: the queries times this after RoPE, attention at scale 1 (Gemma)
    float attn_softcap = 0.0f;
    int32_t window = 0;
    std::vector<uint8_t> windowed; // per layer, 1: windowed
    rope_config rope_windowed;
    // Gemma: the embedding scale (0: none) and the final logits' soft-cap (0: none).
    float embed_scale = 0.0f;
    float final_softcap = 0.0f;
    // The optional device ops this model's forward calls, with what in the file needs each (device_op_need).
    struct op_need {
        int32_t op;
        std::string what;
    };
    std::vector<op_need> op_needs;
    // Tensor parallel (ABI 1.29): this model is part tp_rank of tp_size (hp's head counts and FFN size are the
    // part's); n_head_whole is the file's head count.
    int32_t tp_rank = 0, tp_size = 1;
    int32_t n_head_whole = 0;
    int32_t vocab_rows = 0; // the classifier's rows: n_vocab, or a tensor-parallel rank's piece (strata_split_piece)
    int64_t vocab_first = 0; // the first token of that piece
    // The host's model source is ABI 1.30 or later: it tells a part the whole vocabulary and cuts stacked experts, so
    // the embedding splits by vocabulary as the classifier does and a mixture's experts by their FFN columns
    // (tensor_split).
    bool host_1_30 = false;
    // A part's forward: the step's tokens as rows of its piece of the embedding (grows to the largest step once), and
    // the zeros written over the rows of the tokens other ranks hold (n_embd floats, host memory).
    mutable std::vector<int32_t> piece_tokens;
    std::vector<float> zero_row;
};

// Reads hyperparameters and resolves every tensor of family `fam`, checking shapes; throws std::runtime_error with a
// clear message.
model *load(const family &fam, const strata_model_source *src);

// Covers a batch of n_tokens in either KV layout, with logits for up to n_tokens of them.
uint64_t workspace_bytes(const model &m, int32_t n_tokens);

// How listed tensor `t` of the whole model splits among tensor-parallel ranks (ABI 1.29): along its per-rank size
// (heads, KV heads, FFN columns; k_layer_tensors' dims), in the parts a fused tensor holds (k_fused).
strata_tensor_split tensor_split(const model &m, const listed_tensor &t);

// One forward step. With the ABI 1.5 tail and paged_kv set: a batch of several sequences over the paged KV cache
// (device kv_store + paged_attention per layer, logits of the tokens in logits_tokens); otherwise one sequence over
// its contiguous per-layer cache with the logits of the last token. Per token both give the same bits.
// Returns a strata_code; fills st on failure.
int32_t forward(const model &m, const strata_forward_args *args, strata_status *st);

} // namespace strata::decoder
