// What distinguishes one decoder family from another, as data: the tensors each layer has (said once, in use order,
// with their shapes), which of them a family requires, allows or lacks, and its RoPE layout. A family is one row of
// k_families (below); the layer body in decoder_model.cpp runs whatever tensors a model has.
#pragma once

#include <strata/plugin_abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace strata::decoder {

// Every per-layer tensor a supported family can carry, in the order the layer uses them.
// wqkv / bqkv and w_gate_up are fused tensors (Phi-3): the loader splits each into views of its parts (k_fused), so
// the layer body only ever reads the separate roles.
enum class role : uint8_t {
    attn_norm, wqkv, bqkv, wq, bq, wk, bk, wv, bv, q_norm, k_norm, wo, bo, attn_post_norm, ffn_norm, w_gate_up, w_gate,
    b_gate, w_up, b_up, w_down, b_down, router, gate_exps, up_exps, down_exps, shexp_gate_inp, shexp_gate, shexp_up,
    shexp_down, ffn_post_norm,
    count
};
inline constexpr size_t role_count = static_cast<size_t>(role::count);

// A dimension of a layer tensor, resolved from the hyperparameters: n_embd, n_head * head_dim, n_head_kv * head_dim,
// q + 2 kv (fused Q/K/V), head_dim, n_ff, 2 n_ff (fused gate and up), 1 (a vector), the expert count, an expert's inner
// size n_ff_exp, the shared expert's inner size.
enum class dim : uint8_t { embd, q, kv, qkv, head, ff, ff2, one, expert, ff_exp, ff_shexp };

struct layer_tensor {
    role r;
    const char *name;        // after "blk.N."
    dim cols, rows;          // GGUF ne0, ne1
    bool is_vector;          // a norm weight or bias: F32, read by element-wise ops
    dim stack = dim::one;    // GGUF ne2: a 3-D expert tensor [cols, rows, n_expert], read as n_expert stacked matrices
};

inline constexpr layer_tensor k_layer_tensors[role_count] = {
    {role::attn_norm, "attn_norm.weight", dim::embd, dim::one, true},
    {role::wqkv, "attn_qkv.weight", dim::embd, dim::qkv, false},
    {role::bqkv, "attn_qkv.bias", dim::qkv, dim::one, true},
    {role::wq, "attn_q.weight", dim::embd, dim::q, false},
    {role::bq, "attn_q.bias", dim::q, dim::one, true},
    {role::wk, "attn_k.weight", dim::embd, dim::kv, false},
    {role::bk, "attn_k.bias", dim::kv, dim::one, true},
    {role::wv, "attn_v.weight", dim::embd, dim::kv, false},
    {role::bv, "attn_v.bias", dim::kv, dim::one, true},
    {role::q_norm, "attn_q_norm.weight", dim::head, dim::one, true},
    {role::k_norm, "attn_k_norm.weight", dim::head, dim::one, true},
    {role::wo, "attn_output.weight", dim::q, dim::embd, false},
    {role::bo, "attn_output.bias", dim::embd, dim::one, true},
    {role::attn_post_norm, "post_attention_norm.weight", dim::embd, dim::one, true}, // Gemma 2/3
    {role::ffn_norm, "ffn_norm.weight", dim::embd, dim::one, true},
    {role::w_gate_up, "ffn_up.weight", dim::embd, dim::ff2, false}, // Phi-3: gate rows, then up rows
    {role::w_gate, "ffn_gate.weight", dim::embd, dim::ff, false},
    {role::b_gate, "ffn_gate.bias", dim::ff, dim::one, true},
    {role::w_up, "ffn_up.weight", dim::embd, dim::ff, false},
    {role::b_up, "ffn_up.bias", dim::ff, dim::one, true},
    {role::w_down, "ffn_down.weight", dim::ff, dim::embd, false},
    {role::b_down, "ffn_down.bias", dim::embd, dim::one, true},
    // Mixture of experts (Mixtral, Qwen3-MoE): the router and the experts' gate, up and down matrices.
    {role::router, "ffn_gate_inp.weight", dim::embd, dim::expert, false},
    {role::gate_exps, "ffn_gate_exps.weight", dim::embd, dim::ff_exp, false, dim::expert},
    {role::up_exps, "ffn_up_exps.weight", dim::embd, dim::ff_exp, false, dim::expert},
    {role::down_exps, "ffn_down_exps.weight", dim::ff_exp, dim::embd, false, dim::expert},
    // Qwen2-MoE's shared expert: a dense SwiGLU every token takes, scaled by the sigmoid of one logit (a 1-row matrix).
    {role::shexp_gate_inp, "ffn_gate_inp_shexp.weight", dim::embd, dim::one, false},
    {role::shexp_gate, "ffn_gate_shexp.weight", dim::embd, dim::ff_shexp, false},
    {role::shexp_up, "ffn_up_shexp.weight", dim::embd, dim::ff_shexp, false},
    {role::shexp_down, "ffn_down_shexp.weight", dim::ff_shexp, dim::embd, false},
    {role::ffn_post_norm, "post_ffw_norm.weight", dim::embd, dim::one, true}, // Gemma 2/3
};

inline constexpr const layer_tensor &layer_tensor_of(role r) { return k_layer_tensors[static_cast<size_t>(r)]; }

inline constexpr bool layer_tensors_in_role_order() {
    for (size_t i = 0; i < role_count; ++i)
        if (static_cast<size_t>(k_layer_tensors[i].r) != i) return false;
    return true;
}
static_assert(layer_tensors_in_role_order(), "k_layer_tensors must list every role once, in enum order");

// A fused tensor and the consecutive parts it holds, in order: rows of a matrix, or elements of a bias vector (as
// llama.cpp's build_qkv views attn_qkv's output and ggml_swiglu splits Phi-3's ffn_up output: gate first).
struct fused_tensor {
    role whole;
    std::array<role, 3> parts;
    std::array<dim, 3> sizes;
    int n_parts;
};

inline constexpr fused_tensor k_fused[] = {
    {role::wqkv, {role::wq, role::wk, role::wv}, {dim::q, dim::kv, dim::kv}, 3},
    {role::bqkv, {role::bq, role::bk, role::bv}, {dim::q, dim::kv, dim::kv}, 3},
    {role::w_gate_up, {role::w_gate, role::w_up, role::w_up}, {dim::ff, dim::ff, dim::ff}, 2},
};

// The roles the layer body needs in every family, from the file or from a fused tensor, and the feed-forward's: dense
// (SwiGLU / GeGLU) or mixture-of-experts.
inline constexpr role k_layer_needs[] = {role::attn_norm, role::wq, role::wk, role::wv, role::wo, role::ffn_norm};
inline constexpr role k_dense_ffn[] = {role::w_gate, role::w_up, role::w_down};
inline constexpr role k_expert_ffn[] = {role::router, role::gate_exps, role::up_exps, role::down_exps};
inline constexpr role k_shared_expert[] = {role::shexp_gate_inp, role::shexp_gate, role::shexp_up, role::shexp_down};

// Whether a family's layers have a tensor: never (a file that has it is refused, the tensor named as unused), may, or
// must.
enum class presence : uint8_t { absent, optional, required };

// RoPE frequency factors a family reads (llama.cpp's llama_model::get_rope_factors): none, one rope_freqs.weight
// (Llama 3.1+), or Phi-3's LongRoPE pair rope_factors_long / rope_factors_short, the long one when the context exceeds
// rope.scaling.original_context_length.
enum class freq_factors : uint8_t { none, rope_freqs, long_short };

// The feed-forward's gate activation: SiLU (SwiGLU) or GELU's tanh approximation (GeGLU, Gemma).
enum class ffn_activation : uint8_t { silu, gelu };

// What a family does with <arch>.attention.sliding_window: refuse a window > 0 (it runs none), read it and attend over
// the whole context anyway (Phi-3, as llama.cpp does: its converter's window is unreliable), or window the layers of
// its pattern (Gemma 2/3, llama.cpp's LLAMA_SWA_TYPE_STANDARD: a query at position p attends to keys > p - window).
enum class window_use : uint8_t { refused, ignored, pattern };

struct sliding_window {
    window_use use = window_use::refused;
    // pattern: the window when the file gives none (Gemma 2: 4096; 0: only a file's window > 0 turns it on, Gemma 3)
    // and the period of <arch>.attention.sliding_window_pattern's default: layer il is windowed when
    // il % period < period - 1 (llama_hparams::set_swa_pattern).
    uint32_t default_window = 0;
    uint32_t default_period = 0;
    // The windowed layers' RoPE: <arch>.rope.freq_base_swa, defaulting to the global base and scale (Gemma 2) or to
    // 10000 and no scaling (Gemma 3, whose linear scaling is its global layers' only).
    bool swa_rope_inherits = true;
};

// Gemma's scalings, as llama.cpp's gemma2/gemma3 graphs apply them; all off for the other families.
struct gemma_terms {
    bool embed_scale = false;     // the embedding times sqrt(n_embd)
    bool attn_softcap = false;    // reads <arch>.attn_logit_softcapping (default 50): scores capped after the scale
    float final_softcap = 0.0f;   // > 0: reads <arch>.final_logit_softcapping with this default (Gemma 2: 30);
    bool final_softcap_key = false; // the key alone turns it on (Gemma 3)
    // The block count of the 27B model, whose queries are scaled by 1 / sqrt(n_embd / n_head) instead of
    // 1 / sqrt(head_dim) (gemma_pytorch's query_pre_attn_scalar, as llama.cpp picks it by layer count); 0: never.
    int32_t embd_per_head_scale_layers = 0;
    // The queries are multiplied by that scale after RoPE and attention runs with scale 1 (llama.cpp's Gemma graphs:
    // ggml_scale of Qcur, kq_scale 1), rather than the scores being scaled.
    bool scale_queries = false;
};

struct family {
    const char *arch;        // general.architecture, and the prefix of its metadata keys
    const char *description; // for `runtime plugins`
    int32_t rope_mode;       // STRATA_ROPE_PAIRS (llama.cpp's NORM: Q/K rows permuted by the converter) or NEOX
    freq_factors factors;    // where RoPE frequency factors come from, if anywhere
    std::array<presence, role_count> layer;
    sliding_window window{};
    // output.bias, added to the logits (llama.cpp's qwen2 reads it when present).
    presence output_bias = presence::absent;
    // output.weight: optional (absent: the classifier is the embedding), or absent (Gemma 2 always ties them).
    presence output = presence::optional;
    ffn_activation activation = ffn_activation::silu;
    gemma_terms gemma{};
    // Mixture-of-experts feed-forwards (<arch>.expert_count > 0): never, when the file says so in place of the dense
    // one (llama: Mixtral), or always (qwen3moe). Routing is softmax, top expert_used_count, weights normalised to
    // sum 1 (llama.cpp's build_moe_ffn with norm_w for both).
    presence experts = presence::absent;
    // The experts' inner size comes from <arch>.expert_feed_forward_length (default feed_forward_length /
    // expert_used_count, Qwen2/3-MoE), else it is feed_forward_length (llama).
    bool expert_ff_key = false;
    // The selected experts' weights divided by their sum (llama.cpp's norm_w: Mixtral, Qwen3-MoE; not Qwen2-MoE).
    bool normalize_expert_weights = true;
    // A shared expert beside the routed ones (Qwen2-MoE: its inner size <arch>.expert_shared_feed_forward_length,
    // default feed_forward_length).
    bool shared_expert = false;
};

namespace detail {
using enum role;

// The layer every family shares: pre-norm attention and SwiGLU feed-forward, RMSNorm. Q/K/V come fused (attn_qkv,
// with an optional fused bias) or separate, as llama.cpp's create_tensor_qkv reads them for every family; the loader
// checks that one of the two is complete (k_layer_needs).
inline constexpr std::array<presence, role_count> base_layer() {
    std::array<presence, role_count> p{};
    for (role r : {attn_norm, wo, ffn_norm, w_gate, w_up, w_down}) p[static_cast<size_t>(r)] = presence::required;
    for (role r : {wqkv, bqkv, wq, wk, wv}) p[static_cast<size_t>(r)] = presence::optional;
    return p;
}

inline constexpr std::array<presence, role_count> with(std::array<presence, role_count> p,
                                                       std::initializer_list<role> roles, presence how) {
    for (role r : roles) p[static_cast<size_t>(r)] = how;
    return p;
}

// llama.cpp's llama: optional Q/K/V/output biases and MLP biases (create_tensor_qkv, "optional bias tensors").
inline constexpr auto llama_layer = with(base_layer(), {bq, bk, bv, bo, b_gate, b_up, b_down}, presence::optional);
// qwen2: Q/K/V biases (optional in llama.cpp's create_tensor_qkv; every Qwen2/2.5 checkpoint has them).
inline constexpr auto qwen2_layer = with(base_layer(), {bq, bk, bv}, presence::optional);
// qwen3: per-head RMSNorm of Q and K before RoPE; Q/K/V biases optional as for qwen2.
inline constexpr auto qwen3_layer =
    with(with(base_layer(), {q_norm, k_norm}, presence::required), {bq, bk, bv}, presence::optional);

// phi3: gate and up fused in ffn_up (2 n_ff rows, gate first), no ffn_gate; Q/K/V fused in attn_qkv in every
// converted checkpoint; separate Q/K/V biases as llama.cpp's create_tensor_qkv allows them.
inline constexpr auto phi3_layer =
    with(with(with(base_layer(), {w_gate, w_up}, presence::absent), {w_gate_up}, presence::required), {bq, bk, bv},
         presence::optional);

// gemma2: RMSNorm after attention and after the feed-forward (post_attention_norm, post_ffw_norm) besides the pre-norms.
inline constexpr auto gemma2_layer = with(base_layer(), {attn_post_norm, ffn_post_norm}, presence::required);
// gemma3: gemma2's layer with qwen3's per-head Q/K RMSNorm.
inline constexpr auto gemma3_layer = with(gemma2_layer, {q_norm, k_norm}, presence::required);

} // namespace detail

// The families this plugin runs, one model_arch descriptor each (decoder_plugin.cpp). Each row follows llama.cpp's
// src/models/<arch>.cpp (which tensors its load_tensors creates, required or TENSOR_NOT_REQUIRED) and
// llama_model_rope_type; a family that needs no new kind of op is one row here.
inline constexpr family k_families[] = {
    {"llama", "Llama 1/2/3.x, Mixtral (rope_freqs factors, linear RoPE scaling, optional biases, experts)",
     STRATA_ROPE_PAIRS, freq_factors::rope_freqs, detail::llama_layer, {}, presence::absent, presence::optional,
     ffn_activation::silu, {}, presence::optional},
    // llama.cpp's converter writes Mistral 7B as "llama"; some tools write "mistral".
    {"mistral", "Mistral 7B-shaped files labelled 'mistral' (run as llama)", STRATA_ROPE_PAIRS, freq_factors::rope_freqs,
     detail::llama_layer},
    {"qwen2", "Qwen2 / Qwen2.5 (Q/K/V biases, NEOX RoPE, YaRN)", STRATA_ROPE_NEOX, freq_factors::none,
     detail::qwen2_layer, {}, presence::optional},
    {"qwen3", "Qwen3 dense (per-head Q/K RMSNorm, NEOX RoPE, YaRN)", STRATA_ROPE_NEOX, freq_factors::none,
     detail::qwen3_layer},
    {"phi3", "Phi-3 / Phi-3.5 / Phi-4 (fused Q/K/V and gate-up weights, NEOX RoPE, LongRoPE)", STRATA_ROPE_NEOX,
     freq_factors::long_short, detail::phi3_layer, {window_use::ignored}},
    {"gemma2", "Gemma 2 (GeGLU, post-norms, soft-capped attention and logits, sliding window on every other layer)",
     STRATA_ROPE_NEOX, freq_factors::none, detail::gemma2_layer, {window_use::pattern, 4096, 2, true},
     presence::absent, presence::absent, ffn_activation::gelu, {true, true, 30.0f, false, 46, true}},
    {"gemma3", "Gemma 3 text (gemma2's layer with Q/K norms; 5 windowed layers to 1 global, their own RoPE base)",
     STRATA_ROPE_NEOX, freq_factors::none, detail::gemma3_layer, {window_use::pattern, 0, 6, false},
     presence::absent, presence::optional, ffn_activation::gelu, {true, false, 0.0f, true, 62, true}},
    {"qwen3moe", "Qwen3 mixture-of-experts (Qwen3-30B-A3B, 235B-A22B: qwen3's attention, routed experts)",
     STRATA_ROPE_NEOX, freq_factors::none, detail::qwen3_layer, {}, presence::absent, presence::optional,
     ffn_activation::silu, {}, presence::required, true},
    {"qwen2moe", "Qwen1.5-MoE / Qwen2-MoE (qwen2's attention, routed experts unnormalised, a sigmoid-gated shared "
                 "expert)",
     STRATA_ROPE_NEOX, freq_factors::none, detail::qwen2_layer, {}, presence::absent, presence::required,
     ffn_activation::silu, {}, presence::required, true, false, true},
};

inline constexpr size_t family_count = sizeof k_families / sizeof k_families[0];

} // namespace strata::decoder
