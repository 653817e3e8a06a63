#include "model_file/hf_architectures.hpp"

#include <array>
#include <charconv>

namespace strata {

namespace {

// The Llama layout, shared by Mistral, Qwen2 and Qwen3 (the last two add Q/K/V biases and Q/K norms).
const std::vector<hf_name_pair> k_llama_names = {
    {"model.embed_tokens.weight", "token_embd.weight", "vocab,embd", hf_presence::always},
    {"model.norm.weight", "output_norm.weight", "embd", hf_presence::always},
    {"lm_head.weight", "output.weight", "vocab,embd", hf_presence::untied},
    {"model.layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight", "q,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.k_proj.weight", "blk.{L}.attn_k.weight", "kv,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.v_proj.weight", "blk.{L}.attn_v.weight", "kv,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight", "embd,q", hf_presence::always},
    {"model.layers.{L}.self_attn.q_proj.bias", "blk.{L}.attn_q.bias", "q", hf_presence::qkv_bias},
    {"model.layers.{L}.self_attn.k_proj.bias", "blk.{L}.attn_k.bias", "kv", hf_presence::qkv_bias},
    {"model.layers.{L}.self_attn.v_proj.bias", "blk.{L}.attn_v.bias", "kv", hf_presence::qkv_bias},
    {"model.layers.{L}.self_attn.o_proj.bias", "blk.{L}.attn_output.bias", "embd", hf_presence::o_bias},
    {"model.layers.{L}.self_attn.q_norm.weight", "blk.{L}.attn_q_norm.weight", "head", hf_presence::qk_norm},
    {"model.layers.{L}.self_attn.k_norm.weight", "blk.{L}.attn_k_norm.weight", "head", hf_presence::qk_norm},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.mlp.up_proj.weight", "blk.{L}.ffn_up.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight", "embd,ff", hf_presence::always},
    {"model.layers.{L}.mlp.gate_proj.bias", "blk.{L}.ffn_gate.bias", "ff", hf_presence::mlp_bias},
    {"model.layers.{L}.mlp.up_proj.bias", "blk.{L}.ffn_up.bias", "ff", hf_presence::mlp_bias},
    {"model.layers.{L}.mlp.down_proj.bias", "blk.{L}.ffn_down.bias", "embd", hf_presence::mlp_bias},
};

// Phi-3 / Phi-3.5 / Phi-4: Q/K/V fused in qkv_proj, gate and up fused in gate_up_proj (gate first), as the GGUF
// phi3 architecture keeps them (attn_qkv, a 2 x ff ffn_up).
const std::vector<hf_name_pair> k_phi3_names = {
    {"model.embed_tokens.weight", "token_embd.weight", "vocab,embd", hf_presence::always},
    {"model.norm.weight", "output_norm.weight", "embd", hf_presence::always},
    {"lm_head.weight", "output.weight", "vocab,embd", hf_presence::untied},
    {"model.layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.self_attn.qkv_proj.weight", "blk.{L}.attn_qkv.weight", "qkv,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight", "embd,q", hf_presence::always},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.mlp.gate_up_proj.weight", "blk.{L}.ffn_up.weight", "ff2,embd", hf_presence::always},
    {"model.layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight", "embd,ff", hf_presence::always},
};

// Gemma 2 / Gemma 3 text: four norms per layer (post-attention and post-feed-forward besides the pre-norms; HF's
// post_attention_layernorm is GGUF's post_attention_norm, its pre_feedforward_layernorm GGUF's ffn_norm), Gemma 3 with
// per-head Q/K norms; the classifier is the embedding.
const std::vector<hf_name_pair> k_gemma_names = {
    {"model.embed_tokens.weight", "token_embd.weight", "vocab,embd", hf_presence::always},
    {"model.norm.weight", "output_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight", "q,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.k_proj.weight", "blk.{L}.attn_k.weight", "kv,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.v_proj.weight", "blk.{L}.attn_v.weight", "kv,embd", hf_presence::always},
    {"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight", "embd,q", hf_presence::always},
    {"model.layers.{L}.self_attn.q_norm.weight", "blk.{L}.attn_q_norm.weight", "head", hf_presence::qk_norm},
    {"model.layers.{L}.self_attn.k_norm.weight", "blk.{L}.attn_k_norm.weight", "head", hf_presence::qk_norm},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.post_attention_norm.weight", "embd",
     hf_presence::always},
    {"model.layers.{L}.pre_feedforward_layernorm.weight", "blk.{L}.ffn_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.post_feedforward_layernorm.weight", "blk.{L}.post_ffw_norm.weight", "embd", hf_presence::always},
    {"model.layers.{L}.mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.mlp.up_proj.weight", "blk.{L}.ffn_up.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight", "embd,ff", hf_presence::always},
};

// Defaults are those of transformers' LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Phi3Config, Gemma2Config
// and Gemma3TextConfig.
const std::array<hf_architecture, 7> k_architectures = {{
    {.hf_name = "LlamaForCausalLM", .model_type = "llama", .arch = "llama", .gguf_qk_pairs = true,
     .names = &k_llama_names},
    {.hf_name = "MistralForCausalLM", .model_type = "mistral", .arch = "llama", .kv_heads = 8, .sliding_window = 4096,
     .sliding_window_key = true, .gguf_qk_pairs = true, .names = &k_llama_names},
    {.hf_name = "Qwen2ForCausalLM", .model_type = "qwen2", .arch = "qwen2", .kv_heads = 32, .qkv_bias = true,
     .names = &k_llama_names},
    {.hf_name = "Qwen3ForCausalLM", .model_type = "qwen3", .arch = "qwen3", .kv_heads = 32, .head_dim = 128,
     .qk_norm = true, .names = &k_llama_names},
    {.hf_name = "Phi3ForCausalLM", .model_type = "phi3", .arch = "phi3", .rms_norm_eps = 1e-5,
     .sliding_window_key = true, .names = &k_phi3_names},
    {.hf_name = "Gemma2ForCausalLM", .model_type = "gemma2", .arch = "gemma2", .tie_word_embeddings = true,
     .kv_heads = 4, .head_dim = 256, .sliding_window_key = true, .activation = "gelu_pytorch_tanh",
     .norm_minus_one = true, .names = &k_gemma_names},
    {.hf_name = "Gemma3ForCausalLM", .model_type = "gemma3_text", .arch = "gemma3", .rope_theta = 1000000.0,
     .tie_word_embeddings = true, .kv_heads = 4, .head_dim = 256, .sliding_window_key = true, .qk_norm = true,
     .activation = "gelu_pytorch_tanh", .norm_minus_one = true, .trim_vocab = true, .names = &k_gemma_names},
}};

// Matches `name` against `pattern` ("{L}" = a decimal layer index); returns the index text ("" when the pattern has
// none), nullopt when it does not match.
std::optional<std::string_view> match(std::string_view pattern, std::string_view name) {
    const size_t at = pattern.find("{L}");
    if (at == std::string_view::npos) return pattern == name ? std::optional<std::string_view>("") : std::nullopt;
    const std::string_view head = pattern.substr(0, at), tail = pattern.substr(at + 3);
    if (name.size() <= head.size() + tail.size() || !name.starts_with(head) || !name.ends_with(tail))
        return std::nullopt;
    const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
    if (digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    for (const char c : digits)
        if (c < '0' || c > '9') return std::nullopt;
    return digits;
}

std::string fill(std::string_view pattern, std::string_view layer) {
    std::string out(pattern);
    if (const size_t at = out.find("{L}"); at != std::string::npos) out.replace(at, 3, layer);
    return out;
}

} // namespace

const hf_architecture *find_hf_architecture(std::string_view hf_name) {
    for (const auto &a : k_architectures)
        if (hf_name == a.hf_name) return &a;
    return nullptr;
}

const hf_architecture *find_hf_architecture_for_gguf(std::string_view gguf_arch) {
    for (const auto &a : k_architectures)
        if (gguf_arch == a.arch) return &a;
    return nullptr;
}

std::string hf_architecture_names() {
    std::string out;
    for (const auto &a : k_architectures) out += (out.empty() ? "" : ", ") + std::string(a.hf_name);
    return out;
}

std::optional<std::string> gguf_tensor_name(const hf_architecture &a, std::string_view hf_name) {
    for (const auto &n : *a.names)
        if (auto layer = match(n.hf, hf_name)) return fill(n.gguf, *layer);
    return std::nullopt;
}

std::optional<std::string> hf_tensor_name(const hf_architecture &a, std::string_view gguf_name) {
    for (const auto &n : *a.names)
        if (auto layer = match(n.gguf, gguf_name)) return fill(n.hf, *layer);
    return std::nullopt;
}

const hf_name_pair *find_hf_name_pair(const hf_architecture &a, std::string_view hf_name) {
    for (const auto &n : *a.names)
        if (match(n.hf, hf_name)) return &n;
    return nullptr;
}

std::string hf_name_in_layer(const hf_name_pair &n, int64_t layer) { return fill(n.hf, std::to_string(layer)); }

bool is_hf_buffer_tensor(std::string_view hf_name) { return hf_name.ends_with(".self_attn.rotary_emb.inv_freq"); }

} // namespace strata
