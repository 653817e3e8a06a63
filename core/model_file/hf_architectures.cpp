#include "model_file/hf_architectures.hpp"

#include <array>
#include <charconv>

namespace strata {

namespace {

// The Llama attention block and norms, shared by Mistral, Qwen2, Qwen3 and their mixtures of experts (Qwen adds Q/K/V
// biases or Q/K norms).
const std::vector<hf_name_pair> k_llama_attention_names = {
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
};

// The dense SwiGLU feed-forward (Llama, Mistral, Qwen2, Qwen3).
const std::vector<hf_name_pair> k_dense_mlp_names = {
    {"model.layers.{L}.mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.mlp.up_proj.weight", "blk.{L}.ffn_up.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight", "embd,ff", hf_presence::always},
    {"model.layers.{L}.mlp.gate_proj.bias", "blk.{L}.ffn_gate.bias", "ff", hf_presence::mlp_bias},
    {"model.layers.{L}.mlp.up_proj.bias", "blk.{L}.ffn_up.bias", "ff", hf_presence::mlp_bias},
    {"model.layers.{L}.mlp.down_proj.bias", "blk.{L}.ffn_down.bias", "embd", hf_presence::mlp_bias},
};

// Mixtral's experts: expert {E}'s w1 (gate), w3 (up) and w2 (down), stacked into GGUF's 3-D *_exps tensors.
const std::vector<hf_name_pair> k_mixtral_moe_names = {
    {"model.layers.{L}.block_sparse_moe.gate.weight", "blk.{L}.ffn_gate_inp.weight", "experts,embd", hf_presence::always},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight", "blk.{L}.ffn_gate_exps.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight", "blk.{L}.ffn_up_exps.weight", "ff,embd", hf_presence::always},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight", "blk.{L}.ffn_down_exps.weight", "embd,ff", hf_presence::always},
};

// Qwen2-MoE's and Qwen3-MoE's experts (moe_intermediate_size wide), stacked the same way.
const std::vector<hf_name_pair> k_qwen_moe_names = {
    {"model.layers.{L}.mlp.gate.weight", "blk.{L}.ffn_gate_inp.weight", "experts,embd", hf_presence::always},
    {"model.layers.{L}.mlp.experts.{E}.gate_proj.weight", "blk.{L}.ffn_gate_exps.weight", "ff_exp,embd", hf_presence::always},
    {"model.layers.{L}.mlp.experts.{E}.up_proj.weight", "blk.{L}.ffn_up_exps.weight", "ff_exp,embd", hf_presence::always},
    {"model.layers.{L}.mlp.experts.{E}.down_proj.weight", "blk.{L}.ffn_down_exps.weight", "embd,ff_exp", hf_presence::always},
};

// Qwen2-MoE's shared expert, gated by the sigmoid of one logit (a 1-row matrix in both forms).
const std::vector<hf_name_pair> k_qwen2_shared_expert_names = {
    {"model.layers.{L}.mlp.shared_expert.gate_proj.weight", "blk.{L}.ffn_gate_shexp.weight", "ff_shexp,embd", hf_presence::always},
    {"model.layers.{L}.mlp.shared_expert.up_proj.weight", "blk.{L}.ffn_up_shexp.weight", "ff_shexp,embd", hf_presence::always},
    {"model.layers.{L}.mlp.shared_expert.down_proj.weight", "blk.{L}.ffn_down_shexp.weight", "embd,ff_shexp", hf_presence::always},
    {"model.layers.{L}.mlp.shared_expert_gate.weight", "blk.{L}.ffn_gate_inp_shexp.weight", "one,embd", hf_presence::always},
};

std::vector<hf_name_pair> joined(std::initializer_list<const std::vector<hf_name_pair> *> parts) {
    std::vector<hf_name_pair> out;
    for (const auto *p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
}

const std::vector<hf_name_pair> k_llama_names = joined({&k_llama_attention_names, &k_dense_mlp_names});
const std::vector<hf_name_pair> k_mixtral_names = joined({&k_llama_attention_names, &k_mixtral_moe_names});
const std::vector<hf_name_pair> k_qwen3moe_names = joined({&k_llama_attention_names, &k_qwen_moe_names});
const std::vector<hf_name_pair> k_qwen2moe_names =
    joined({&k_llama_attention_names, &k_qwen_moe_names, &k_qwen2_shared_expert_names});

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

// Defaults are those of transformers' LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Phi3Config, Gemma2Config,
// Gemma3TextConfig, MixtralConfig, Qwen2MoeConfig and Qwen3MoeConfig.
const std::array<hf_architecture, 10> k_architectures = {{
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
    // GGUF runs Mixtral as llama with experts; Qwen's mixtures as qwen2moe / qwen3moe.
    {.hf_name = "MixtralForCausalLM", .model_type = "mixtral", .arch = "llama", .rms_norm_eps = 1e-5,
     .rope_theta = 1000000.0, .kv_heads = 8, .sliding_window_key = true, .gguf_qk_pairs = true,
     .expert_count_key = "num_local_experts", .names = &k_mixtral_names},
    {.hf_name = "Qwen2MoeForCausalLM", .model_type = "qwen2_moe", .arch = "qwen2moe", .kv_heads = 16,
     .qkv_bias = true, .expert_count_key = "num_experts", .expert_ff_key = true, .shared_expert = true,
     .norm_topk_prob_default = false, .norm_topk_prob_computed = false, .names = &k_qwen2moe_names},
    {.hf_name = "Qwen3MoeForCausalLM", .model_type = "qwen3_moe", .arch = "qwen3moe", .kv_heads = 4, .head_dim = 128,
     .qk_norm = true, .expert_count_key = "num_experts", .expert_ff_key = true, .norm_topk_prob_default = false,
     .names = &k_qwen3moe_names},
}};

// The indices a name fills a pattern's placeholders with ("{L}": the layer, "{E}": the expert), as decimal text ("" for
// a placeholder the pattern lacks).
struct placeholders {
    std::string_view layer, expert;
};

// A decimal index as the checkpoints write it: 1 to 6 digits, no leading zero.
bool is_index(std::string_view digits) {
    if (digits.empty() || digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return false;
    for (const char c : digits)
        if (c < '0' || c > '9') return false;
    return true;
}

// Matches `name` against `pattern` ("{L}" and "{E}" each a decimal index, at most once each); nullopt when it does not.
std::optional<placeholders> match(std::string_view pattern, std::string_view name) {
    placeholders out;
    for (;;) {
        const size_t at = pattern.find('{');
        if (at == std::string_view::npos) return pattern == name ? std::optional<placeholders>(out) : std::nullopt;
        if (name.substr(0, at) != pattern.substr(0, at)) return std::nullopt;
        const char which = pattern[at + 1];
        pattern.remove_prefix(at + 3);
        name.remove_prefix(at);
        // The index runs to the next literal the pattern continues with ('.' in every table row).
        const size_t end = pattern.empty() ? name.size() : name.find(pattern[0]);
        if (end == std::string_view::npos || !is_index(name.substr(0, end))) return std::nullopt;
        (which == 'L' ? out.layer : out.expert) = name.substr(0, end);
        name.remove_prefix(end);
    }
}

std::string fill(std::string_view pattern, std::string_view layer, std::string_view expert = {}) {
    std::string out(pattern);
    if (const size_t at = out.find("{L}"); at != std::string::npos) out.replace(at, 3, layer);
    if (const size_t at = out.find("{E}"); at != std::string::npos) out.replace(at, 3, expert);
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
        if (auto m = match(n.hf, hf_name)) return fill(n.gguf, m->layer);
    return std::nullopt;
}

std::optional<int64_t> hf_expert_index(const hf_architecture &a, std::string_view hf_name) {
    for (const auto &n : *a.names)
        if (auto m = match(n.hf, hf_name); m && !m->expert.empty()) {
            int64_t e = 0;
            std::from_chars(m->expert.data(), m->expert.data() + m->expert.size(), e);
            return e;
        }
    return std::nullopt;
}

std::optional<std::string> hf_tensor_name(const hf_architecture &a, std::string_view gguf_name, int64_t expert) {
    for (const auto &n : *a.names)
        if (auto m = match(n.gguf, gguf_name)) {
            if (is_expert_row(n) != (expert >= 0)) return std::nullopt;
            return fill(n.hf, m->layer, std::to_string(expert));
        }
    return std::nullopt;
}

const hf_name_pair *find_hf_name_pair(const hf_architecture &a, std::string_view hf_name) {
    for (const auto &n : *a.names)
        if (match(n.hf, hf_name)) return &n;
    return nullptr;
}

bool is_expert_row(const hf_name_pair &n) { return std::string_view(n.hf).find("{E}") != std::string_view::npos; }

std::string hf_name_in_layer(const hf_name_pair &n, int64_t layer, int64_t expert) {
    return fill(n.hf, std::to_string(layer), std::to_string(expert));
}

std::optional<std::string> multimodal_text_name(std::string_view hf_name) {
    for (const std::string_view vision : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                          "model.multi_modal_projector."})
        if (hf_name.starts_with(vision)) return std::nullopt;
    for (const auto &[from, to] : {std::pair<std::string_view, std::string_view>{"language_model.model.", "model."},
                                   {"model.language_model.", "model."},
                                   {"language_model.lm_head.", "lm_head."}})
        if (hf_name.starts_with(from)) return std::string(to) + std::string(hf_name.substr(from.size()));
    return std::string(hf_name);
}

bool is_hf_buffer_tensor(std::string_view hf_name) { return hf_name.ends_with(".self_attn.rotary_emb.inv_freq"); }

} // namespace strata
