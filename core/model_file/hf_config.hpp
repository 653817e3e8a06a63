// config.json of an HF checkpoint -> the GGUF metadata keys the model plugins read (llama.embedding_length, ...).
// Every key is mapped, checked to hold the one value Strata implements, or listed as not changing inference
// (training-only keys, bookkeeping); any other key is refused by name, so no setting of a checkpoint is silently
// dropped. Where the GGUF form of a setting is a tensor (Llama 3's rope_scaling -> rope_freqs.weight, as llama.cpp's
// converter writes it), the tensor is computed here.
#pragma once

#include "model_file/hf_architectures.hpp"
#include "model_file/hf_quantization.hpp"
#include "model_file/metadata_table.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace strata {

// A small F32 tensor the reader computes from config.json rather than reads from a shard.
struct computed_tensor {
    std::string name; // GGUF name
    std::vector<float> values;
};

struct hf_config {
    const hf_architecture *architecture = nullptr;
    int64_t n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_embd = 0, n_ff = 0, n_vocab = 0;
    int64_t n_ctx = 0, n_ctx_orig = 0, rope_dims = 0; // max_position_embeddings, the original one, rotated dims
    int64_t n_expert = 0, n_ff_exp = 0, n_ff_shexp = 0; // a mixture's experts, their and the shared expert's inner size
    bool tie_word_embeddings = false;
    bool multimodal = false; // Gemma3ForConditionalGeneration: its language model is read, its vision tower set aside
    bool attention_bias = false, mlp_bias = false; // config.json's
    std::string torch_dtype;                       // "bfloat16", "float16", "float32" or empty
    hf_quantization quant;                         // quantization_config (method "" when unquantized)
    std::vector<computed_tensor> computed;
};

// `origin` names the file in messages ("./llama-hf/config.json"). Throws strata::error naming the file and field.
hf_config map_hf_config(std::string_view config_json, const std::string &origin, metadata_table &out);

} // namespace strata
