// The GGML type of each tensor for a make-model --type: a single type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,
// iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs) or one of llama.cpp's mixtures (q2_k, q3_k_s/m/l, q4_k_s/m,
// q5_k_s/m, q6_k, iq4_nl, iq4_xs as llama-quantize names them). The rules are llama.cpp's llama_tensor_get_type for a
// non-Falcon model (src/llama-quant.cpp of the llama.cpp node-llama-cpp bundles), mixtures of experts included (every
// *ffn_down* tensor, experts' and shared expert's, by its layer; 8 experts move attn_k/attn_v to Q8_0 and attn_output
// to Q5_K; a fused attn_qkv takes attn_v's rules): which tensors get more bits, and the
// fallback when a tensor's row length does not fit the type's block, so a file made here has the tensor types
// llama-quantize would give it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::tools {

struct model_shape {
    int64_t n_layer = 1;
    int64_t n_gqa = 1;     // heads / kv heads
    bool tied = true;      // no output.weight: token_embd doubles as the output matrix
    int64_t n_expert = 0;  // a mixture of experts' expert count (8: llama.cpp's Mixtral rules)
};

struct mixture {
    std::string name;       // as given to --type
    uint32_t base_type;     // GGML type of the plain tensors
    uint32_t file_type;     // general.file_type (llama_ftype)
};

// The mixture for a --type name; throws strata::error listing the names when unknown.
mixture mixture_named(const std::string &name);
std::vector<std::string> mixture_names();

// The type of a 2-D weight `tensor` ("token_embd.weight", "output.weight", "blk.N.attn_v.weight", ...) of `cols`
// elements per row in layer `layer` (-1 outside the blocks); block_elems_of gives a type's block size. pure: every
// tensor gets the base type (llama-quantize --pure), only the fallback for rows that do not fit still applies.
using block_size_fn = std::function<int64_t(uint32_t type)>;
uint32_t tensor_type(const mixture &m, const model_shape &shape, const std::string &tensor, int64_t layer,
                     int64_t cols, bool pure, const block_size_fn &block_elems_of);

} // namespace strata::tools
