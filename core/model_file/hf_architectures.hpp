// Hugging Face architectures Strata reads from a safetensors folder, as one table: the GGUF architecture a model
// plugin runs it as, its config.json defaults, and how its tensor names map to GGUF's (llama.cpp's
// convert_hf_to_gguf.py and vLLM's load_weights hold the same facts). The HF reader and tools/hf_export both derive
// from it, in opposite directions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// When a tensor of the name table is in a checkpoint (for `runtime plan` on a folder without its shards).
enum class hf_presence {
    always,
    untied,    // lm_head.weight: unless tie_word_embeddings
    qkv_bias,  // the architecture's qkv_bias, or config.json attention_bias
    o_bias,    // config.json attention_bias
    mlp_bias,  // config.json mlp_bias
    qk_norm,   // the architecture's qk_norm
};

// One tensor name pair; "{L}" stands for the layer index in both. An expert row's HF name also holds "{E}", the
// expert's index: the checkpoint has one matrix per expert, GGUF (and Strata) one 3-D tensor [cols, rows, experts]
// stacking them in expert order. `shape` is the HF shape (outermost first; an expert row's is one expert's) in terms
// of config.json: vocab, embd (hidden_size), q (heads x head_dim), kv (KV heads x head_dim), qkv (q + 2 kv), ff
// (intermediate_size), ff2 (2 x ff), head (head_dim), experts (the expert count), ff_exp (moe_intermediate_size),
// ff_shexp (shared_expert_intermediate_size), one (1).
struct hf_name_pair {
    const char *hf;
    const char *gguf;
    const char *shape;
    hf_presence presence;
};

struct hf_architecture {
    const char *hf_name;    // config.json "architectures"[0]: "LlamaForCausalLM"
    const char *model_type; // config.json "model_type": "llama"
    const char *arch;       // the GGUF general.architecture a model plugin runs it as
    // The HF config class's defaults for keys a config.json may leave out.
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    bool tie_word_embeddings = false;
    uint64_t kv_heads = 0;       // num_key_value_heads; 0: num_attention_heads
    uint64_t head_dim = 0;       // 0: hidden_size / num_attention_heads
    uint64_t sliding_window = 0; // Mistral's 4096
    bool sliding_window_key = false; // config.json's sliding_window is the model's (Mistral), not a disabled option (Qwen2)
    // GGUF's form of this architecture has Q/K rows permuted for adjacent-pair RoPE (llama.cpp's converter permutes
    // llama-family rows); HF keeps rotate-half for all. Writers of HF checkpoints undo the permutation.
    bool gguf_qk_pairs = false;
    bool qkv_bias = false; // Q/K/V projections always carry biases (Qwen2)
    bool qk_norm = false;  // per-head Q/K RMSNorm weights (Qwen3, Gemma 3)
    const char *activation = "silu"; // the one hidden_act / hidden_activation implemented
    // RMSNorm weights stored as w - 1 (Gemma computes x * (1 + w)); GGUF stores w, as llama.cpp's converter adds 1.
    bool norm_minus_one = false;
    // Embedding rows beyond the tokenizer's tokens are cut off (llama.cpp's Gemma3Model: "remove OOV rows") rather
    // than becoming unused [PAD] tokens.
    bool trim_vocab = false;
    // Mixtures of experts: the config.json key of the expert count (nullptr: a dense model); whether the experts'
    // inner size is moe_intermediate_size (Qwen) rather than intermediate_size (Mixtral); whether a shared expert
    // runs beside them (shared_expert_intermediate_size); and norm_topk_prob, the config class's default and what the
    // GGUF architecture computes (the selected experts' weights renormalised to sum 1 or not): a config.json that
    // asks otherwise is refused.
    const char *expert_count_key = nullptr;
    bool expert_ff_key = false;
    bool shared_expert = false;
    bool norm_topk_prob_default = true;
    bool norm_topk_prob_computed = true;
    const std::vector<hf_name_pair> *names = nullptr;
};

// nullptr when Strata has no mapping for the architecture.
const hf_architecture *find_hf_architecture(std::string_view hf_name);
const hf_architecture *find_hf_architecture_for_gguf(std::string_view gguf_arch); // the first listed for it
// "LlamaForCausalLM, MistralForCausalLM, ..." for messages.
std::string hf_architecture_names();

// HF -> GGUF tensor name ("model.layers.3.mlp.up_proj.weight" -> "blk.3.ffn_up.weight"; an expert's matrix -> the
// stacked tensor it is part of); nullopt when unmapped.
std::optional<std::string> gguf_tensor_name(const hf_architecture &a, std::string_view hf_name);
// The expert index of an expert row's HF name ("...experts.5.w1.weight" -> 5); nullopt for any other name.
std::optional<int64_t> hf_expert_index(const hf_architecture &a, std::string_view hf_name);
// GGUF -> HF, for writers of HF checkpoints (tools/hf_export): a stacked expert tensor's `expert`-th matrix (expert
// >= 0), or any other tensor (expert -1); nullopt when unmapped or when `expert` does not fit the row.
std::optional<std::string> hf_tensor_name(const hf_architecture &a, std::string_view gguf_name, int64_t expert = -1);

// The table row an HF name matches; nullptr when none.
const hf_name_pair *find_hf_name_pair(const hf_architecture &a, std::string_view hf_name);
// Whether the row is one expert's matrix of a stacked tensor ("{E}" in its HF name).
bool is_expert_row(const hf_name_pair &n);
// The row's HF name for `layer` and `expert` (rows without "{L}" / "{E}" ignore them).
std::string hf_name_in_layer(const hf_name_pair &n, int64_t layer, int64_t expert = 0);

// A Gemma3ForConditionalGeneration tensor's name as Gemma3ForCausalLM names it ("language_model.model.X" and
// transformers >= 4.52's "model.language_model.X" -> "model.X", "language_model.lm_head.weight" -> "lm_head.weight";
// any other name as it is), or nullopt for the vision tower's and the projector's, which are not run.
std::optional<std::string> multimodal_text_name(std::string_view hf_name);

// HF tensors that hold no weight of the model (a cached RoPE table old checkpoints carry): skipped with a note.
bool is_hf_buffer_tensor(std::string_view hf_name);

} // namespace strata
