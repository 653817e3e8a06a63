#include "decoder_model.hpp"

#include "decoder_source.hpp"

#include <strata/device_copy.hpp>
#include <strata/kv_layout.hpp>
#include <strata/plugin.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace strata::decoder {

namespace {


std::string layer_prefix(size_t l) { return "blk." + std::to_string(l) + "."; }

// Host copies of every layer's weights when the host offers them (ABI 1.7), for hybrid placement. Shapes were
// checked on the device views; a host view must describe the same tensor.
void load_host_views(const strata_model_source *src, model &m) {
    if (src->struct_size < offsetof(strata_model_source, get_host_tensor) + sizeof(src->get_host_tensor) ||
        src->get_host_tensor == nullptr)
        return;
    std::vector<layer_weights> host(m.layers.size());
    for (size_t l = 0; l < m.layers.size(); ++l) {
        for (const layer_tensor &lt : k_layer_tensors) {
            const strata_tensor_view &dv = m.layers[l][lt.r];
            if (dv.data == nullptr) continue;
            const std::string name = layer_prefix(l) + lt.name;
            strata_tensor_view v{};
            v.struct_size = sizeof v;
            if (!src->get_host_tensor(src->ctx, name.c_str(), &v)) return; // no host copies: no hybrid
            if (v.cols != dv.cols || v.rows != dv.rows || v.ggml_type != dv.ggml_type)
                throw std::runtime_error("the host copy of tensor '" + name + "' differs from the device's");
            host[l][lt.r] = v;
        }
    }
    m.host_layers = std::move(host);
}

// Views of each fused tensor's parts (k_fused): consecutive rows of a matrix (a whole number of rows, so quantized
// blocks stay whole and aligned) or consecutive elements of a bias vector. A layer may hold a tensor fused or
// separate, not both; after splitting, every role the layer body needs must be there.
void split_fused(layer_weights &w, const strata_model_hparams &hp, const family &fam, size_t l) {
    const expert_dims no_experts{}; // fused tensors never hold experts
    const std::string b = layer_prefix(l);
    for (const fused_tensor &f : k_fused) {
        const strata_tensor_view &whole = w[f.whole];
        if (whole.data == nullptr) continue;
        const bool vector = layer_tensor_of(f.whole).is_vector;
        int64_t at = 0;
        for (int i = 0; i < f.n_parts; ++i) {
            const role part = f.parts[static_cast<size_t>(i)];
            if (w.has(part))
                throw std::runtime_error("the file has both '" + b + layer_tensor_of(f.whole).name + "' and '" + b +
                                         layer_tensor_of(part).name + "'; a layer holds a tensor fused or separate, "
                                         "not both");
            const int64_t size = resolve(f.sizes[static_cast<size_t>(i)], hp, no_experts);
            strata_tensor_view v = whole;
            if (vector) {
                v.cols = size;
                v.row_bytes = size * static_cast<int64_t>(sizeof(float));
                v.data = static_cast<const char *>(whole.data) + at * static_cast<int64_t>(sizeof(float));
            } else {
                v.rows = size;
                v.data = static_cast<const char *>(whole.data) + at * whole.row_bytes;
            }
            w[part] = v;
            at += size;
        }
    }
    for (const role r : k_layer_needs) {
        if (w.has(r)) continue;
        std::string fused;
        for (const fused_tensor &f : k_fused)
            for (int i = 0; i < f.n_parts; ++i)
                if (f.parts[static_cast<size_t>(i)] == r && fam.layer[static_cast<size_t>(f.whole)] != presence::absent)
                    fused = std::string(" (or the fused '") + b + layer_tensor_of(f.whole).name + "')";
        throw std::runtime_error("missing tensor '" + b + layer_tensor_of(r).name + "'" + fused +
                                 "; the file is not a complete " + fam.arch + " model");
    }
    // The feed-forward: the dense matrices or the experts', whichever the model has (load made the other absent).
    const bool experts = w.has(role::router);
    std::vector<role> ffn(experts ? std::begin(k_expert_ffn) : std::begin(k_dense_ffn),
                          experts ? std::end(k_expert_ffn) : std::end(k_dense_ffn));
    if (experts && fam.shared_expert) ffn.insert(ffn.end(), std::begin(k_shared_expert), std::end(k_shared_expert));
    for (const role r : ffn)
        if (!w.has(r))
            throw std::runtime_error("missing tensor '" + b + layer_tensor_of(r).name + "'" +
                                     ((r == role::w_gate || r == role::w_up) && fam.layer[static_cast<size_t>(role::w_gate_up)] !=
                                                               presence::absent
                                          ? " (or the fused '" + b + layer_tensor_of(role::w_gate_up).name + "')"
                                          : std::string()) +
                                     "; the file is not a complete " + fam.arch + " model");
}

// Which tensors a layer must, may or must not have: the family's row, with the dense feed-forward swapped for the
// experts' when the model has experts.
std::array<presence, role_count> layer_presence(const family &fam, bool experts) {
    std::array<presence, role_count> p = fam.layer;
    for (const role r : k_expert_ffn) p[static_cast<size_t>(r)] = experts ? presence::required : presence::absent;
    for (const role r : k_shared_expert)
        p[static_cast<size_t>(r)] = experts && fam.shared_expert ? presence::required : presence::absent;
    if (experts)
        for (const role r : {role::w_gate_up, role::w_gate, role::b_gate, role::w_up, role::b_up, role::w_down,
                             role::b_down})
            p[static_cast<size_t>(r)] = presence::absent;
    return p;
}

// <arch>.expert_count and the rest of the experts' shape, as llama.cpp reads them; a family without experts refuses a
// count > 0 and one that always has them (qwen3moe) refuses 0.
expert_dims read_experts(const strata_model_source *src, const family &fam, const strata_model_hparams &hp) {
    const std::string p = std::string(fam.arch) + ".";
    expert_dims ex;
    const uint64_t count = meta_u64(src, p + "expert_count", false, 0);
    const uint64_t used = meta_u64(src, p + "expert_used_count", false, 0);
    if (fam.experts == presence::absent) {
        if (count > 0)
            throw std::runtime_error("'" + p + "expert_count' is " + std::to_string(count) + ": " + fam.arch +
                                     " has no mixture-of-experts layers");
        if (used > 0)
            throw std::runtime_error("'" + p + "expert_used_count' is " + std::to_string(used) + " in a " + fam.arch +
                                     " model, which has no experts to use");
        return ex;
    }
    if (count == 0) {
        if (fam.experts == presence::required)
            throw std::runtime_error("'" + p + "expert_count' is missing or 0; a " + std::string(fam.arch) +
                                     " model routes every layer's feed-forward to experts");
        if (used > 0)
            throw std::runtime_error("'" + p + "expert_used_count' is " + std::to_string(used) + " without '" + p +
                                     "expert_count'; the file's experts are incomplete");
        return ex;
    }
    if (count > 1024 || used == 0 || used > count)
        throw std::runtime_error("'" + p + "expert_count' " + std::to_string(count) + " and '" + p +
                                 "expert_used_count' " + std::to_string(used) +
                                 ": need 0 < expert_used_count <= expert_count <= 1024");
    ex.n_expert = static_cast<int32_t>(count);
    ex.n_used = static_cast<int32_t>(used);
    ex.n_ff = hp.n_ff;
    // A length key of 0 means the default, as llama.cpp's `n_ff_exp ? n_ff_exp : ...` reads it.
    const auto length = [&](const std::string &key, uint64_t fallback) -> int32_t {
        const uint64_t v = meta_u64(src, key, false, 0);
        const uint64_t n = v == 0 ? fallback : v;
        if (n == 0 || n > (1u << 22))
            throw std::runtime_error("'" + key + "' gives " + std::to_string(n) + "; a feed-forward length must be in "
                                     "1.." + std::to_string(1u << 22));
        return static_cast<int32_t>(n);
    };
    if (fam.expert_ff_key)
        ex.n_ff = length(p + "expert_feed_forward_length", static_cast<uint64_t>(hp.n_ff / ex.n_used));
    if (fam.shared_expert)
        ex.n_ff_shared = length(p + "expert_shared_feed_forward_length", static_cast<uint64_t>(hp.n_ff));
    return ex;
}

// Keys a decoder file may carry whose meaning this forward pass does not implement: each is refused with what it is
// unless its value is the neutral one. (The engine refuses every `<arch>.` key no plugin read at all.)
void refuse_unimplemented_keys(const strata_model_source *src, const family &fam, const strata_model_hparams &hp) {
    const std::string p = std::string(fam.arch) + ".";
    if (fam.window.use != window_use::pattern) {
        const uint64_t window = meta_u64(src, p + "attention.sliding_window", false, 0);
        if (window > 0 && fam.window.use == window_use::refused)
            throw std::runtime_error("'" + p + "attention.sliding_window' is " + std::to_string(window) +
                                     ": sliding-window attention is not implemented for " + fam.arch + " yet");
        if (window > 0 && src->host != nullptr && src->host->log != nullptr) {
            const std::string msg = "'" + p + "attention.sliding_window' " + std::to_string(window) +
                                    " is not applied: attention spans the whole context, as llama.cpp runs Phi-3 (its "
                                    "window is disabled there); beyond " + std::to_string(window) +
                                    " tokens the output may differ from Hugging Face transformers";
            src->host->log(src->host->ctx, STRATA_LOG_WARN, "decoder", msg.c_str());
        }
    }
    const uint64_t value_length = meta_u64(src, p + "attention.value_length", false, static_cast<uint64_t>(hp.head_dim));
    if (value_length != static_cast<uint64_t>(hp.head_dim))
        throw std::runtime_error("'" + p + "attention.value_length' " + std::to_string(value_length) +
                                 " differs from the key length " + std::to_string(hp.head_dim) +
                                 ": separate V head sizes are not implemented");
}

// A number for a log line, as printf's %g writes it (0.25, 50, 1e+06).
std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// A soft-cap from `key` (default `fallback`; 0 = none when `zero_is_off`): finite and > 0.
float read_softcap(const strata_model_source *src, const std::string &key, double fallback, bool zero_is_off) {
    const double value = meta_f64(src, key, fallback);
    if (zero_is_off && value == 0.0) return 0.0f;
    const auto cap = static_cast<float>(value); // the float the ops use must itself be finite and > 0
    if (!(cap > 0.0f) || !std::isfinite(cap))
        throw std::runtime_error("'" + key + "' is " + num(value) + "; a soft-cap must be a finite float > 0");
    return cap;
}

// Attention and Gemma's scalings as llama.cpp's gemma2/gemma3 load_arch_hparams read them (the score scale, the
// soft-caps, the sliding window, its layer pattern and those layers' RoPE), with the device ops they need; logged.
void read_attention(const strata_model_source *src, const family &fam, model &m) {
    const std::string p = std::string(fam.arch) + ".";
    const strata_model_hparams &hp = m.hp;
    const gemma_terms &g = fam.gemma;
    const float scale = g.embd_per_head_scale_layers == hp.n_layer
                            ? 1.0f / std::sqrt(static_cast<float>(hp.n_embd / m.n_head_whole))
                            : 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    m.attn_scale = g.scale_queries ? 1.0f : scale;
    m.query_scale = g.scale_queries ? scale : 0.0f;
    if (g.attn_softcap) m.attn_softcap = read_softcap(src, p + "attn_logit_softcapping", 50.0, false);
    if (g.final_softcap > 0.0f)
        m.final_softcap = read_softcap(src, p + "final_logit_softcapping", g.final_softcap, false);
    else if (g.final_softcap_key)
        m.final_softcap = read_softcap(src, p + "final_logit_softcapping", 0.0, true);
    if (g.embed_scale) m.embed_scale = std::sqrt(static_cast<float>(hp.n_embd));
    m.windowed.assign(static_cast<size_t>(hp.n_layer), 0);
    m.rope_windowed = m.rope;
    std::string window_note;
    if (fam.window.use == window_use::pattern) {
        const std::string key = p + "attention.sliding_window";
        const uint64_t window = meta_u64(src, key, false, fam.window.default_window);
        if (window == 0 && fam.window.default_window > 0)
            throw std::runtime_error("'" + key + "' is 0; " + fam.arch +
                                     " windows its layers' attention and needs a window > 0");
        if (window > (1u << 30)) throw std::runtime_error("'" + key + "' is " + std::to_string(window) + "; too large");
        // Read even without a window (Gemma 3 converted with a pattern of 1 has neither window nor windowed layers
        // but keeps the keys; llama.cpp loads it), so neither is refused as unread.
        const uint64_t period = meta_u64(src, p + "attention.sliding_window_pattern", false, fam.window.default_period);
        const double swa_base =
            meta_f64(src, p + "rope.freq_base_swa", fam.window.swa_rope_inherits ? m.rope.theta_base : 10000.0);
        if (window > 0) {
            m.window = static_cast<int32_t>(window);
            int32_t count = 0;
            for (int32_t l = 0; l < hp.n_layer; ++l) {
                const bool w = period == 0 || static_cast<uint64_t>(l) % period < period - 1;
                m.windowed[static_cast<size_t>(l)] = w ? 1 : 0;
                count += w ? 1 : 0;
            }
            const auto base = static_cast<float>(swa_base);
            if (!(base > 0.0f) || !std::isfinite(base))
                throw std::runtime_error("'" + p + "rope.freq_base_swa' must be finite and > 0");
            m.rope_windowed =
                windowed_rope(m.rope, base, fam.window.swa_rope_inherits ? m.rope.freq_scale : 1.0f, hp);
            window_note = "a sliding window of " + std::to_string(window) + " on " + std::to_string(count) + " of " +
                          std::to_string(hp.n_layer) + " layers (layer l when l % " + std::to_string(period) + " < " +
                          std::to_string(period == 0 ? 0 : period - 1) + "), RoPE base " +
                          num(m.rope_windowed.theta_base) + " scale " +
                          num(m.rope_windowed.freq_scale) + " there and base " +
                          num(m.rope.theta_base) + " scale " + num(m.rope.freq_scale) +
                          " elsewhere";
        }
    }
    if (m.experts.n_expert > 0)
        m.op_needs.push_back({STRATA_DEVICE_OP_MOE, "the experts ('" + p + "expert_count' " +
                                                        std::to_string(m.experts.n_expert) + ")"});
    if (m.experts.n_ff_shared > 0)
        m.op_needs.push_back({STRATA_DEVICE_OP_SHARED_EXPERT, "the shared expert (tensor 'blk.0.ffn_gate_inp_shexp.weight')"});
    if (m.embed_scale != 0.0f || m.query_scale != 0.0f)
        m.op_needs.push_back({STRATA_DEVICE_OP_SCALE, std::string(fam.arch) + "'s embedding and query scales"});
    if (fam.activation == ffn_activation::gelu)
        m.op_needs.push_back({STRATA_DEVICE_OP_GEGLU, std::string(fam.arch) + "'s GeGLU feed-forward"});
    if (m.final_softcap != 0.0f)
        m.op_needs.push_back({STRATA_DEVICE_OP_SOFTCAP, "the final logits' soft-cap ('" + p + "final_logit_softcapping')"});
    if (m.attn_softcap != 0.0f || m.window != 0)
        m.op_needs.push_back({STRATA_DEVICE_OP_ATTENTION_TERMS,
                              m.window != 0 ? "the sliding window ('" + p + "attention.sliding_window')"
                                            : "the attention soft-cap ('" + p + "attn_logit_softcapping')"});
    if (m.rope_windowed.op != 0 && m.rope_windowed.op != m.rope.op)
        m.op_needs.push_back({m.rope_windowed.op, m.rope_windowed.op_reason});
    if (fam.window.use != window_use::pattern && !g.embed_scale) return;
    std::string msg = std::string(fam.arch) + ": attention scale " + num(scale);
    if (m.attn_softcap != 0.0f) msg += ", scores soft-capped at " + num(m.attn_softcap);
    msg += window_note.empty() ? ", no sliding window" : ", " + window_note;
    if (m.final_softcap != 0.0f) msg += "; final logits soft-capped at " + num(m.final_softcap);
    if (m.embed_scale != 0.0f) msg += "; embedding scaled by " + num(m.embed_scale);
    if (src->host != nullptr && src->host->log != nullptr)
        src->host->log(src->host->ctx, STRATA_LOG_INFO, "decoder", msg.c_str());
}

strata_model_hparams read_hparams(const strata_model_source *src, const family &fam) {
    const std::string p = std::string(fam.arch) + ".";
    strata_model_hparams hp{};
    hp.struct_size = sizeof hp;
    hp.n_embd = static_cast<int32_t>(meta_u64(src, p + "embedding_length", true, 0));
    hp.n_layer = static_cast<int32_t>(meta_u64(src, p + "block_count", true, 0));
    hp.n_head = static_cast<int32_t>(meta_u64(src, p + "attention.head_count", true, 0));
    hp.n_head_kv = static_cast<int32_t>(meta_u64(src, p + "attention.head_count_kv", false, hp.n_head));
    hp.n_ff = static_cast<int32_t>(meta_u64(src, p + "feed_forward_length", true, 0));
    hp.n_ctx_train = static_cast<int32_t>(meta_u64(src, p + "context_length", false, 2048));
    hp.norm_eps = static_cast<float>(meta_f64(src, p + "attention.layer_norm_rms_epsilon", 1e-5));
    hp.rope_theta = static_cast<float>(meta_f64(src, p + "rope.freq_base", 10000.0));
    if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_ff <= 0 ||
        hp.n_embd > (1 << 20) || hp.n_layer > 4096 || hp.n_ff > (1 << 22)) {
        throw std::runtime_error("implausible hyperparameters (embedding_length " + std::to_string(hp.n_embd) +
                                 ", block_count " + std::to_string(hp.n_layer) + ", head_count " +
                                 std::to_string(hp.n_head) + ", feed_forward_length " + std::to_string(hp.n_ff) + ")");
    }
    if (hp.n_head % hp.n_head_kv != 0) {
        throw std::runtime_error("head_count " + std::to_string(hp.n_head) + " must be a multiple of head_count_kv " +
                                 std::to_string(hp.n_head_kv));
    }
    // The head size is embedding_length / head_count unless the file says otherwise (Qwen3: 128 with 1024 / 16).
    const uint64_t head_dim = meta_u64(src, p + "attention.key_length", false,
                                       hp.n_embd % hp.n_head == 0 ? static_cast<uint64_t>(hp.n_embd / hp.n_head) : 0);
    if (head_dim == 0 || head_dim > 4096)
        throw std::runtime_error("head_count " + std::to_string(hp.n_head) + " does not divide embedding_length " +
                                 std::to_string(hp.n_embd) + " and '" + p +
                                 "attention.key_length' gives no plausible head size");
    hp.head_dim = static_cast<int32_t>(head_dim);
    hp.rope_dims = static_cast<int32_t>(meta_u64(src, p + "rope.dimension_count", false, static_cast<uint64_t>(hp.head_dim)));
    if (hp.rope_dims <= 0 || hp.rope_dims > hp.head_dim || hp.rope_dims % 2 != 0) {
        throw std::runtime_error("rope.dimension_count " + std::to_string(hp.rope_dims) +
                                 " must be even and at most the head size " + std::to_string(hp.head_dim));
    }
    // The rotation follows the file, not only the family: llama.cpp's converter permutes llama-family Q/K rows for
    // adjacent pairs, while an HF checkpoint keeps every family's rows in the rotate-half (NEOX) layout; Strata's
    // HF reader says so in strata.rope.layout.
    const std::string layout = meta_str(src, "strata.rope.layout", "");
    if (layout.empty()) hp.rope_mode = fam.rope_mode;
    else if (layout == "neox") hp.rope_mode = STRATA_ROPE_NEOX;
    else if (layout == "pairs") hp.rope_mode = STRATA_ROPE_PAIRS;
    else throw std::runtime_error("'strata.rope.layout' is '" + layout + "'; expected 'neox' or 'pairs'");
    return hp;
}

// Tensor parallel (ABI 1.29): this model is rank r's part of `size`, as Megatron splits a layer — its share of the
// query and KV heads and of the FFN's inner columns; every other size stays the file's. The host hands the weights
// already sliced to these shapes, so the shape checks below hold them to the part's sizes.
void split_for_tensor_parallel(const strata_model_source *src, const family &fam, model &m) {
    const bool has = src->struct_size >= offsetof(strata_model_source, tensor_parallel_size) +
                                             sizeof(src->tensor_parallel_size);
    const int32_t size = has ? src->tensor_parallel_size : 0;
    if (size <= 1) return;
    const int32_t rank = src->tensor_parallel_rank;
    if (rank < 0 || rank >= size)
        throw std::runtime_error("tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                 " is out of range");
    if (m.experts.n_expert > 0 && !m.host_1_30)
        throw std::runtime_error(std::string(fam.arch) + "'s experts are split by tensor parallel only by a host of ABI "
                                 "1.30 or later; upgrade Strata or run it with tensor_parallel_size 1");
    strata_model_hparams &hp = m.hp;
    auto divide = [&](int32_t &n, const char *what) {
        if (n % size != 0)
            throw std::runtime_error(std::string(what) + " " + std::to_string(n) + " is not a multiple of "
                                     "tensor_parallel_size " + std::to_string(size) + ": every rank must hold as many; "
                                     "choose a size that divides it");
        n /= size;
    };
    divide(hp.n_head, "head_count");
    divide(hp.n_head_kv, "head_count_kv");
    divide(hp.n_ff, "feed_forward_length");
    // A mixture's experts (and its shared expert) by their inner columns, as vLLM's FusedMoE splits them.
    if (m.experts.n_expert > 0) divide(m.experts.n_ff, "the experts' feed_forward_length");
    if (m.experts.n_ff_shared > 0) divide(m.experts.n_ff_shared, "the shared expert's feed_forward_length");
    m.tp_rank = rank;
    m.tp_size = size;
}

} // namespace

model *load(const family &fam, const strata_model_source *src) {
    auto m = std::make_unique<model>();
    m->fam = &fam;
    const std::string p = std::string(fam.arch) + ".";
    strata_model_hparams &hp = m->hp;
    hp = read_hparams(src, fam);
    refuse_unimplemented_keys(src, fam, hp);
    m->experts = read_experts(src, fam, hp);
    m->n_head_whole = hp.n_head;
    // A host at ABI 1.30 gives a tensor-parallel part the whole vocabulary and cuts stacked experts.
    m->host_1_30 = src->struct_size >= offsetof(strata_model_source, tensor_parallel_n_vocab) +
                                           sizeof(src->tensor_parallel_n_vocab);
    split_for_tensor_parallel(src, fam, *m);
    const std::array<presence, role_count> layer = layer_presence(fam, m->experts.n_expert > 0);

    strata_tensor_view probe{};
    probe.struct_size = sizeof probe;
    if (!src->get_tensor(src->ctx, "token_embd.weight", &probe))
        throw std::runtime_error(std::string("missing tensor 'token_embd.weight'; the file is not a complete ") +
                                 fam.arch + " model");
    const int64_t d = hp.n_embd;
    // The vocabulary: the file's key, else the embedding's rows; none (a 0-row embedding), or more than int32 holds,
    // is refused rather than narrowed (fuzz_model_load's second finding: a phi3 file with token_embd [8, 0] loaded).
    uint64_t vocab = meta_u64(src, p + "vocab_size", false, static_cast<uint64_t>(std::max<int64_t>(probe.rows, 0)));
    if (m->tp_size > 1) {
        // A part's embedding holds its piece of the vocabulary: the whole one comes from the host.
        const int64_t whole = m->host_1_30 ? src->tensor_parallel_n_vocab : 0;
        if (whole < 1)
            throw std::runtime_error("a tensor-parallel part needs the whole model's vocabulary from the host "
                                     "(strata_model_source.tensor_parallel_n_vocab, ABI 1.30); upgrade Strata");
        if (meta_u64(src, p + "vocab_size", false, 0) != 0 && vocab != static_cast<uint64_t>(whole))
            throw std::runtime_error("'" + p + "vocab_size' is " + std::to_string(vocab) + " but the host says the "
                                     "model's vocabulary is " + std::to_string(whole));
        vocab = static_cast<uint64_t>(whole);
    }
    if (vocab < 1 || vocab > static_cast<uint64_t>(INT32_MAX))
        throw std::runtime_error("the vocabulary has " + std::to_string(vocab) + " tokens ('" + p +
                                 "vocab_size', else the rows of token_embd.weight); a model needs 1 to 2147483647");
    hp.n_vocab = static_cast<int32_t>(vocab);
    // A tensor-parallel rank's embedding and classifier hold its piece of the vocabulary (ABI 1.29/1.30; vLLM's
    // VocabParallelEmbedding and ParallelLMHead).
    int64_t vocab_first = 0, vocab_rows = hp.n_vocab;
    if (m->tp_size > 1) strata_split_piece(hp.n_vocab, m->tp_rank, m->tp_size, &vocab_first, &vocab_rows);
    if (vocab_rows == 0)
        throw std::runtime_error("a vocabulary of " + std::to_string(hp.n_vocab) + " tokens leaves tensor-parallel "
                                 "rank " + std::to_string(m->tp_rank) + " of " + std::to_string(m->tp_size) +
                                 " none; use fewer ranks");
    m->vocab_rows = static_cast<int32_t>(vocab_rows);
    m->vocab_first = vocab_first;
    m->tok_embd = tensor(src, fam, "token_embd.weight", d, vocab_rows);
    if (m->tp_size > 1) m->zero_row.assign(static_cast<size_t>(d), 0.0f); // written over other ranks' tokens' rows
    m->output_norm = tensor(src, fam, "output_norm.weight", d, 1);
    bool has_output = false;
    if (fam.output != presence::absent)
        m->output = tensor(src, fam, "output.weight", d, vocab_rows, fam.output == presence::required, &has_output);
    if (!has_output) {
        // Tied classifier, as llama.cpp does when output.weight is absent: the embedding (a rank's: its piece).
        m->output = m->tok_embd;
    }
    if (m->output_norm.ggml_type != 0) throw std::runtime_error("output_norm.weight must be F32");
    if (fam.output_bias != presence::absent) {
        m->output_bias = tensor(src, fam, "output.bias", vocab_rows, 1, fam.output_bias == presence::required);
        if (m->output_bias.data != nullptr && m->output_bias.ggml_type != 0)
            throw std::runtime_error("tensor 'output.bias' must be F32 (norm weights and biases are)");
    }
    // RoPE's scaling and frequency factors (read once here, host memory for the rope ops, so no placement moves
    // them; a family without factor tensors leaves them unused, which the engine refuses).
    m->rope = read_rope(src, fam, hp);
    if (!m->rope.note.empty() && src->host != nullptr && src->host->log != nullptr)
        src->host->log(src->host->ctx, STRATA_LOG_INFO, "decoder", m->rope.note.c_str());
    m->listed.push_back({m->tok_embd, -1});
    m->layers.resize(static_cast<size_t>(hp.n_layer));
    for (int32_t l = 0; l < hp.n_layer; ++l) {
        const std::string b = layer_prefix(static_cast<size_t>(l));
        layer_weights &w = m->layers[static_cast<size_t>(l)];
        for (const layer_tensor &lt : k_layer_tensors) {
            const presence how = layer[static_cast<size_t>(lt.r)];
            if (how == presence::absent) continue;
            bool found = false;
            w[lt.r] = tensor(src, fam, b + lt.name, resolve(lt.cols, hp, m->experts), resolve(lt.rows, hp, m->experts),
                             how == presence::required, &found, resolve(lt.stack, hp, m->experts));
            if (!found) continue;
            if (lt.is_vector && w[lt.r].ggml_type != 0)
                throw std::runtime_error("tensor '" + b + lt.name + "' must be F32 (norm weights and biases are)");
            m->listed.push_back({w[lt.r], l, static_cast<int32_t>(lt.r)});
        }
    }
    m->listed.push_back({m->output_norm, hp.n_layer});
    m->listed.push_back({has_output ? m->output : m->tok_embd, hp.n_layer});
    if (m->output_bias.data != nullptr) m->listed.push_back({m->output_bias, hp.n_layer});
    // What the forward will ask of the device beyond the required ops (checked by the host at load).
    if (m->rope.op != 0) m->op_needs.push_back({m->rope.op, m->rope.op_reason});
    read_attention(src, fam, *m);
    for (const listed_tensor &t : m->listed)
        if (t.view.rows == 1 && t.view.name != nullptr && std::string(t.view.name).ends_with(".bias")) {
            m->op_needs.push_back({STRATA_DEVICE_OP_ADD_ROWS, "tensor '" + std::string(t.view.name) + "' (a bias)"});
            break;
        }
    load_host_views(src, *m);
    for (size_t l = 0; l < m->layers.size(); ++l) {
        split_fused(m->layers[l], hp, fam, l);
        if (!m->host_layers.empty()) split_fused(m->host_layers[l], hp, fam, l);
    }
    return m.release();
}

strata_tensor_split tensor_split(const model &m, const listed_tensor &t) {
    strata_tensor_split out{};
    out.struct_size = sizeof out;
    out.axis = STRATA_SPLIT_NONE;
    if (t.role_index < 0) {
        // The classifier and its bias by vocabulary (each rank its piece of the logits), the embedding too when the
        // host tells the parts the vocabulary (each rank looks up its piece's tokens; ABI 1.30); the output norm
        // whole.
        const std::string name = t.view.name != nullptr ? t.view.name : "";
        if (name == "output.weight" || name == "output.bias" || (name == "token_embd.weight" && m.host_1_30)) {
            out.axis = name == "output.bias" ? STRATA_SPLIT_COLS : STRATA_SPLIT_ROWS;
            out.n_parts = 1;
            out.part[0] = m.hp.n_vocab;
        }
        return out;
    }
    const layer_tensor &lt = k_layer_tensors[static_cast<size_t>(t.role_index)];
    auto per_rank = [](dim d) {
        return d == dim::q || d == dim::kv || d == dim::qkv || d == dim::ff || d == dim::ff2 || d == dim::ff_exp ||
               d == dim::ff_shexp;
    };
    // A vector's elements are its columns (a bias of q is split as q's rows are).
    const bool rows = !lt.is_vector && per_rank(lt.rows);
    const dim along = rows ? lt.rows : lt.cols;
    if (!per_rank(along)) return out;
    out.axis = rows ? STRATA_SPLIT_ROWS : STRATA_SPLIT_COLS;
    out.n_parts = 1;
    out.part[0] = resolve(along, m.hp, m.experts);
    // A stack of experts' matrices splits each expert's rows alike (ABI 1.30); its columns are every row's anyway.
    if (rows && lt.stack != dim::one) out.repeat = static_cast<int32_t>(resolve(lt.stack, m.hp, m.experts));
    for (const fused_tensor &f : k_fused) {
        if (f.whole != lt.r) continue;
        out.n_parts = f.n_parts;
        for (int i = 0; i < f.n_parts; ++i)
            out.part[i] = resolve(f.sizes[static_cast<size_t>(i)], m.hp, m.experts);
    }
    return out;
}

namespace {

// Offsets (in floats) of each activation buffer inside the host-provided workspace.
struct workspace_layout {
    size_t x, xb, q, k, v, attn, gate, up, last, router, ids, weights, expert_out, shared_out, shared_gate, total;
};

// ex: a mixture-of-experts model's experts (gate and up then hold every selected expert's rows, and the routing and
// the experts' outputs get buffers of their own).
workspace_layout layout(const strata_model_hparams &hp, const expert_dims &ex, int32_t n) {
    const size_t N = static_cast<size_t>(n);
    const size_t d = static_cast<size_t>(hp.n_embd);
    const size_t dq = static_cast<size_t>(hp.n_head) * static_cast<size_t>(hp.head_dim);
    const size_t dkv = static_cast<size_t>(hp.n_head_kv) * static_cast<size_t>(hp.head_dim);
    const size_t slots = N * static_cast<size_t>(ex.n_used);
    const size_t ff = std::max({static_cast<size_t>(hp.n_ff), static_cast<size_t>(ex.n_used) * static_cast<size_t>(ex.n_ff),
                                static_cast<size_t>(ex.n_ff_shared)});
    const size_t shared = ex.n_ff_shared > 0 ? N : 0;
    workspace_layout w{};
    size_t off = 0;
    // Each buffer starts on a 64-byte boundary (16 floats) for aligned SIMD loads.
    auto take = [&](size_t floats) {
        size_t at = off;
        off += (floats + 15) / 16 * 16;
        return at;
    };
    w.x = take(N * d);
    w.xb = take(N * std::max(d, dq));
    w.q = take(N * dq);
    w.k = take(N * dkv);
    w.v = take(N * dkv);
    w.attn = take(N * dq);
    w.gate = take(N * ff);
    w.up = take(N * ff);
    w.last = take(N * d); // the final norm's input and output: up to every token of the batch (paged logits)
    w.router = take(N * static_cast<size_t>(ex.n_expert));
    w.ids = take(slots); // int32 expert ids, one float's room each
    w.weights = take(slots);
    w.expert_out = take(slots * d);
    w.shared_out = take(shared * d);
    w.shared_gate = take(shared);
    w.total = off;
    return w;
}

} // namespace

uint64_t workspace_bytes(const model &m, int32_t n_tokens) {
    return static_cast<uint64_t>(layout(m.hp, m.experts, n_tokens).total) * sizeof(float) + 64;
}

namespace {

using strata::plugin::fail;

#define STRATA_TRY(call)                                                                                               \
    do {                                                                                                               \
        int32_t rc_ = (call);                                                                                          \
        if (rc_ != STRATA_OK) return rc_;                                                                              \
    } while (0)

// The activation buffers of one forward call, carved out of the host's workspace.
struct activations {
    float *x, *xb, *q, *k, *v, *attn, *gate, *up, *last, *router;
    int32_t *ids;
    float *weights, *expert_out, *shared_out, *shared_gate;
};

activations carve(const model &m, void *workspace, int32_t n_tokens) {
    const workspace_layout L = layout(m.hp, m.experts, n_tokens);
    float *base = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(workspace) + 63) & ~uintptr_t{63});
    return {base + L.x,    base + L.xb,  base + L.q,    base + L.k,
            base + L.v,    base + L.attn, base + L.gate, base + L.up,
            base + L.last, base + L.router, reinterpret_cast<int32_t *>(base + L.ids), base + L.weights,
            base + L.expert_out, base + L.shared_out, base + L.shared_gate};
}

// True when the caller's struct holds the ABI 1.5 tail and asks for the paged KV cache.
bool wants_paged(const strata_forward_args *a) {
    return a->struct_size >= offsetof(strata_forward_args, n_logits) + sizeof(a->n_logits) && a->paged_kv != nullptr;
}

// Hybrid placement (ABI 1.7): the host device and its buffers for the layers marked layer_on_host.
struct host_side {
    const strata_device_desc *ops = nullptr;
    strata_device *dev = nullptr;
    const uint8_t *on_host = nullptr;         // whole layers on the host device (may be NULL since 1.17)
    const uint8_t *experts_on_host = nullptr; // routed experts on the host device (ABI 1.17; NULL: none)
    activations b{};
};

// The ABI 1.17 experts_on_host flags when the caller's struct holds them, else NULL.
const uint8_t *experts_on_host(const strata_forward_args *a) {
    return a->struct_size >= offsetof(strata_forward_args, experts_on_host) + sizeof(a->experts_on_host)
               ? a->experts_on_host
               : nullptr;
}

bool wants_hybrid(const strata_forward_args *a) {
    return a->struct_size >= offsetof(strata_forward_args, host_workspace_size) + sizeof(a->host_workspace_size) &&
           a->host_device_ops != nullptr && (a->layer_on_host != nullptr || experts_on_host(a) != nullptr);
}

// Pipeline stage (ABI 1.24): the layers this call runs, [first, end), and where the residual stream comes from and
// goes to when the stage does not start at the embedding or end at the classifier; the first layer whose KV the
// blocks hold (ABI 1.25: a rank keeps only its layers' KV).
struct stage_range {
    int32_t first = 0, end = 0;
    const float *hidden_in = nullptr;
    float *hidden_out = nullptr;
    bool is_stage = false; // layer_end was set
    int32_t kv_first = 0;
};

stage_range stage_of(const model &m, const strata_forward_args *a) {
    stage_range r;
    r.end = m.hp.n_layer;
    if (a->struct_size >= offsetof(strata_forward_args, hidden_out) + sizeof(a->hidden_out) && a->layer_end > 0) {
        r.first = a->layer_first;
        r.end = a->layer_end;
        r.hidden_in = a->hidden_in;
        r.hidden_out = a->hidden_out;
        r.is_stage = true;
    }
    if (a->struct_size >= offsetof(strata_forward_args, kv_first_layer) + sizeof(a->kv_first_layer))
        r.kv_first = a->kv_first_layer;
    return r;
}

// A copy between two buffers in the device's memory (strata::device_copy).
int32_t copy_on_device(const strata_device_desc *ops, strata_device *dev, float *dst, const float *src, int64_t floats,
                       strata_status *st) {
    return device_copy(ops, dev, dst, src, sizeof(float) * static_cast<uint64_t>(floats), STRATA_COPY_D2D, st);
}

// Moves `floats` floats between the device's buffers and host memory (strata::device_copy).
int32_t transfer(const strata_device_desc *ops, strata_device *dev, float *dst, const float *src, int64_t floats,
                 int32_t kind, strata_status *st) {
    return device_copy(ops, dev, dst, src, sizeof(float) * static_cast<uint64_t>(floats), kind, st);
}

// out += the bias row (broadcast over the n tokens) when the layer has that bias (add_rows, ABI 1.12).
int32_t add_bias(const strata_device_desc *ops, strata_device *dev, const strata_tensor_view &bias, float *out,
                 int32_t n, strata_status *st) {
    if (bias.data == nullptr) return STRATA_OK;
    if (!STRATA_HAS_SLOT(ops, add_rows))
        return fail(st, STRATA_ERR_UNSUPPORTED,
                    "decoder forward: tensor '%s' is a bias, which needs the add_rows op (ABI 1.12) that device '%s' "
                    "does not offer",
                    bias.name != nullptr ? bias.name : "(unnamed)", ops->header.name);
    return ops->add_rows(dev, out, static_cast<const float *>(bias.data), n, static_cast<int32_t>(bias.cols), out, st);
}

// gate = act(gate) * up over n elements: SwiGLU, or GeGLU for Gemma.
int32_t activate(const model &m, const strata_device_desc *ops, strata_device *dev, float *gate, const float *up,
                 int64_t n, strata_status *st) {
    if (m.fam->activation == ffn_activation::silu) return ops->swiglu(dev, gate, up, n, gate, st);
    if (!STRATA_HAS_SLOT(ops, geglu))
        return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: %s needs the geglu op (ABI 1.14), which device '%s' "
                    "does not offer", m.fam->arch, ops->header.name);
    return ops->geglu(dev, gate, up, n, gate, st);
}

// The routed experts of n tokens, from b.xb and the router's logits in b.router into b.xb, as llama.cpp's
// build_moe_ffn: the top experts and their (normalised) weights, each selected expert's gate, up and down, the
// weighted sum. Runs wherever the experts' weights are: the layer's device, or the host device (experts_on_host).
int32_t routed_experts(const model &m, const strata_device_desc *ops, strata_device *dev, const layer_weights &w,
                       const activations &b, int32_t n, strata_status *st) {
    const expert_dims &ex = m.experts;
    if (!STRATA_HAS_SLOT(ops, moe_route) || !STRATA_HAS_SLOT(ops, matmul_id) || !STRATA_HAS_SLOT(ops, moe_combine))
        return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: %s's experts need the moe_route, matmul_id and "
                    "moe_combine ops (ABI 1.16), which device '%s' does not offer", m.fam->arch, ops->header.name);
    strata_moe_route_args r{};
    r.struct_size = sizeof r;
    r.n_tokens = n;
    r.n_expert = ex.n_expert;
    r.k = ex.n_used;
    r.normalize = m.fam->normalize_expert_weights ? 1 : 0;
    r.logits = b.router;
    r.ids = b.ids;
    r.weights = b.weights;
    STRATA_TRY(ops->moe_route(dev, &r, st));
    auto experts = [&](role weight, const float *x, int32_t per_slot, float *y) {
        strata_matmul_id_args a{};
        a.struct_size = sizeof a;
        a.w = &w[weight];
        a.n_expert = ex.n_expert;
        a.n_tokens = n;
        a.k = ex.n_used;
        a.ids = b.ids;
        a.x = x;
        a.x_per_slot = per_slot;
        a.y = y;
        return ops->matmul_id(dev, &a, st);
    };
    const int64_t slots = static_cast<int64_t>(n) * ex.n_used;
    STRATA_TRY(experts(role::gate_exps, b.xb, 0, b.gate));
    STRATA_TRY(experts(role::up_exps, b.xb, 0, b.up));
    STRATA_TRY(activate(m, ops, dev, b.gate, b.up, slots * ex.n_ff, st));
    STRATA_TRY(experts(role::down_exps, b.gate, 1, b.expert_out));
    return ops->moe_combine(dev, b.expert_out, b.weights, n, ex.n_used, m.hp.n_embd, b.xb, st);
}

// The mixture-of-experts feed-forward of n tokens from b.xb into b.xb: Qwen2-MoE's shared expert (its SwiGLU and its
// gate logit, while b.xb still holds the normed input), the router's logits, the routed experts — on this device, or
// wherever `routed(b)` runs them — and the shared expert's sigmoid-gated sum; a tensor-parallel part's partial sums
// then joined.
template <class Routed>
int32_t experts_ffn(const model &m, const strata_forward_args *a, const strata_device_desc *ops, strata_device *dev,
                    const layer_weights &w, const activations &b, int32_t n, const Routed &routed, strata_status *st) {
    const expert_dims &ex = m.experts;
    const bool shared = w.has(role::shexp_gate_inp);
    if (shared) {
        if (!STRATA_HAS_SLOT(ops, sigmoid_gate_add))
            return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: %s's shared expert needs the sigmoid_gate_add op "
                        "(ABI 1.16), which device '%s' does not offer", m.fam->arch, ops->header.name);
        STRATA_TRY(ops->matmul(dev, &w[role::shexp_gate], b.xb, n, b.gate, st));
        STRATA_TRY(ops->matmul(dev, &w[role::shexp_up], b.xb, n, b.up, st));
        STRATA_TRY(activate(m, ops, dev, b.gate, b.up, static_cast<int64_t>(n) * ex.n_ff_shared, st));
        STRATA_TRY(ops->matmul(dev, &w[role::shexp_down], b.gate, n, b.shared_out, st));
        STRATA_TRY(ops->matmul(dev, &w[role::shexp_gate_inp], b.xb, n, b.shared_gate, st));
    }
    STRATA_TRY(ops->matmul(dev, &w[role::router], b.xb, n, b.router, st));
    STRATA_TRY(routed(b));
    if (shared) STRATA_TRY(ops->sigmoid_gate_add(dev, b.shared_out, b.shared_gate, n, m.hp.n_embd, b.xb, st));
    // A tensor-parallel part computed its share of every expert's inner columns (the router, so the routing, is
    // every rank's whole): the ranks' partial sums joined, as after ffn_down (ABI 1.29).
    if (m.tp_size > 1) return a->all_reduce(a->all_reduce_user, b.xb, static_cast<int64_t>(n) * m.hp.n_embd, st);
    return STRATA_OK;
}

// One layer's ops on `ops`/`dev` over buffers `b` with weights `w`: whatever tensors the layer has (the family table
// says which), in llama.cpp's order. attend(b) stores the layer's K/V rows (b.k, b.v, after RoPE) wherever the cache
// keeps them and writes the attention of b.q into b.attn.
template <class Attend, class Routed>
int32_t run_layer(const model &m, const strata_forward_args *a, const strata_device_desc *ops, strata_device *dev,
                  int32_t l, const layer_weights &w, const activations &b, const Attend &attend, const Routed &routed,
                  strata_status *st) {
    const strata_model_hparams &hp = m.hp;
    const int32_t n = a->n_tokens;
    const int32_t d = hp.n_embd;
    const int64_t nd = static_cast<int64_t>(n) * d;
    // y = W x (+ bias): a linear layer of the n tokens.
    auto linear = [&](role weight, role bias, const float *x, float *y) -> int32_t {
        STRATA_TRY(ops->matmul(dev, &w[weight], x, n, y, st));
        return add_bias(ops, dev, w[bias], y, n, st);
    };
    // A linear layer whose input is this tensor-parallel rank's share (its heads, its FFN columns): the ranks'
    // partial products summed (all_reduce, ABI 1.29), then the bias once. Alone, `linear`.
    auto row_parallel = [&](role weight, role bias, const float *x, float *y) -> int32_t {
        if (m.tp_size <= 1) return linear(weight, bias, x, y);
        STRATA_TRY(ops->matmul(dev, &w[weight], x, n, y, st));
        STRATA_TRY(a->all_reduce(a->all_reduce_user, y, nd, st));
        return add_bias(ops, dev, w[bias], y, n, st);
    };
    // Per-head RMSNorm (Qwen3's attn_q_norm / attn_k_norm): every head of every token is a row of head_dim.
    auto head_norm = [&](role norm, float *x, int32_t heads) -> int32_t {
        if (!w.has(norm)) return STRATA_OK;
        return ops->rms_norm(dev, x, static_cast<const float *>(w[norm].data), n * heads, hp.head_dim, hp.norm_eps, x,
                             st);
    };
    // RMSNorm of n rows of the residual width by a norm weight, in place when x == out.
    auto norm = [&](role weight, const float *x, float *out) {
        return ops->rms_norm(dev, x, static_cast<const float *>(w[weight].data), n, d, hp.norm_eps, out, st);
    };
    const rope_config &rope = m.windowed[static_cast<size_t>(l)] != 0 ? m.rope_windowed : m.rope;
    // Attention block.
    STRATA_TRY(norm(role::attn_norm, b.x, b.xb));
    STRATA_TRY(linear(role::wq, role::bq, b.xb, b.q));
    STRATA_TRY(linear(role::wk, role::bk, b.xb, b.k));
    STRATA_TRY(linear(role::wv, role::bv, b.xb, b.v));
    STRATA_TRY(head_norm(role::q_norm, b.q, hp.n_head));
    STRATA_TRY(rotate(rope, hp, ops, dev, b.q, n, hp.n_head, a->positions, st));
    STRATA_TRY(head_norm(role::k_norm, b.k, hp.n_head_kv));
    STRATA_TRY(rotate(rope, hp, ops, dev, b.k, n, hp.n_head_kv, a->positions, st));
    if (m.query_scale != 0.0f) // Gemma: the queries scaled, attention at scale 1 (read_attention asked for `scale`)
        STRATA_TRY(ops->scale(dev, b.q, static_cast<int64_t>(n) * hp.n_head * hp.head_dim, m.query_scale, b.q, st));
    STRATA_TRY(attend(b));
    STRATA_TRY(row_parallel(role::wo, role::bo, b.attn, b.xb));
    if (w.has(role::attn_post_norm)) STRATA_TRY(norm(role::attn_post_norm, b.xb, b.xb));
    STRATA_TRY(ops->add(dev, b.x, b.xb, nd, b.x, st));
    // Feed-forward block (SwiGLU, or GeGLU for Gemma; dense or the experts').
    STRATA_TRY(norm(role::ffn_norm, b.x, b.xb));
    if (w.has(role::router)) {
        STRATA_TRY(experts_ffn(m, a, ops, dev, w, b, n, routed, st));
    } else {
        STRATA_TRY(linear(role::w_gate, role::b_gate, b.xb, b.gate));
        STRATA_TRY(linear(role::w_up, role::b_up, b.xb, b.up));
        STRATA_TRY(activate(m, ops, dev, b.gate, b.up, static_cast<int64_t>(n) * hp.n_ff, st));
        STRATA_TRY(row_parallel(role::w_down, role::b_down, b.gate, b.xb));
    }
    if (w.has(role::ffn_post_norm)) STRATA_TRY(norm(role::ffn_post_norm, b.xb, b.xb));
    return ops->add(dev, b.x, b.xb, nd, b.x, st);
}

// The embedding rows of the step's tokens into x (n_tokens x n_embd). A tensor-parallel part holds the rows of its
// piece of the vocabulary only (ABI 1.30), as vLLM's VocabParallelEmbedding: it looks up its piece's tokens, writes
// zeros over the rows of the others (copied from a zero row, not scaled by 0, so that a NaN or Inf in the row looked up
// in their place cannot reach them) and the ranks' rows are summed (all_reduce), exactly one of them not zero.
int32_t embed(const model &m, const strata_forward_args *a, float *x, strata_status *st) {
    const strata_device_desc *ops = a->device_ops;
    strata_device *dev = a->device;
    const int32_t n = a->n_tokens;
    if (m.tp_size <= 1) return ops->embedding(dev, &m.tok_embd, a->tokens, n, x, st);
    std::vector<int32_t> &rows = m.piece_tokens;
    if (rows.size() < static_cast<size_t>(n)) rows.resize(static_cast<size_t>(n));
    for (int32_t t = 0; t < n; ++t) {
        const int32_t token = a->tokens[t];
        if (token < 0 || token >= m.hp.n_vocab)
            return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: token %d at %d is outside the vocabulary of "
                        "%d", token, t, m.hp.n_vocab);
        const int64_t row = token - m.vocab_first;
        rows[static_cast<size_t>(t)] = row >= 0 && row < m.vocab_rows ? static_cast<int32_t>(row) : 0;
    }
    STRATA_TRY(ops->embedding(dev, &m.tok_embd, rows.data(), n, x, st));
    const int64_t d = m.hp.n_embd;
    for (int32_t t = 0; t < n; ++t) {
        const int64_t row = a->tokens[t] - m.vocab_first;
        if (row < 0 || row >= m.vocab_rows)
            STRATA_TRY(transfer(ops, dev, x + t * d, m.zero_row.data(), d, STRATA_COPY_H2D, st));
    }
    return a->all_reduce(a->all_reduce_user, x, n * d, st);
}

// Embedding and every layer. attend(l, b) stores layer l's K/V rows wherever the cache keeps them and writes the
// attention of b.q into b.attn; everything else is the same for both KV layouts, so a token's activations do not
// depend on which layout, or which batch, it ran in.
//
// Hybrid (hs set): a layer flagged on_host runs the same ops in the same order on the host device, from the host
// copies of its weights, over the host buffers; only its KV store and attention run on the device that holds the KV
// blocks (Q, K, V go over, the attention output comes back). The residual stream stays on the host across
// consecutive host layers. A device layer flagged experts_on_host runs only its routed experts there (ABI 1.17). A
// host device with the same kernels therefore gives the same bits.
template <class Attend>
int32_t run_layers(const model &m, const strata_forward_args *a, const stage_range &stage, const activations &b,
                   const Attend &attend, strata_status *st, const host_side *hs = nullptr) {
    const strata_model_hparams &hp = m.hp;
    const strata_device_desc *ops = a->device_ops;
    strata_device *dev = a->device;
    const int32_t n = a->n_tokens;
    const int64_t nd = static_cast<int64_t>(n) * hp.n_embd;
    const int64_t nq = static_cast<int64_t>(n) * hp.n_head * hp.head_dim;
    const int64_t nkv = static_cast<int64_t>(n) * hp.n_head_kv * hp.head_dim;
    if (stage.first > 0) {
        // A later pipeline stage: the residual stream the stage before left.
        STRATA_TRY(copy_on_device(ops, dev, b.x, stage.hidden_in, nd, st));
    } else {
        STRATA_TRY(embed(m, a, b.x, st));
    }
    if (stage.first == 0 && m.embed_scale != 0.0f) {
        if (!STRATA_HAS_SLOT(ops, scale))
            return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: %s scales its embedding with the scale op (ABI "
                        "1.14), which device '%s' does not offer", m.fam->arch, ops->header.name);
        STRATA_TRY(ops->scale(dev, b.x, nd, m.embed_scale, b.x, st));
    }
    bool x_on_host = false; // hybrid: the residual stream is in hs->b.x, not b.x
    for (int32_t l = stage.first; l < stage.end; ++l) {
        if (a->layer_begin) STRATA_TRY(a->layer_begin(a->user, l, st));
        const bool on_host = hs != nullptr && hs->on_host != nullptr && hs->on_host[l] != 0;
        if (on_host != x_on_host) {
            STRATA_TRY(on_host ? transfer(ops, dev, hs->b.x, b.x, nd, STRATA_COPY_D2H, st)
                               : transfer(ops, dev, b.x, hs->b.x, nd, STRATA_COPY_H2D, st));
            x_on_host = on_host;
        }
        const auto ul = static_cast<size_t>(l);
        if (!on_host) {
            auto attend_here = [&](const activations &buf) { return attend(l, buf); };
            auto routed_here = [&](const activations &buf) {
                return routed_experts(m, ops, dev, m.layers[ul], buf, n, st);
            };
            // experts_on_host: the normed input and the router's logits go over, the routed experts' sum comes back.
            auto routed_on_host = [&](const activations &buf) -> int32_t {
                STRATA_TRY(transfer(ops, dev, hs->b.xb, buf.xb, nd, STRATA_COPY_D2H, st));
                STRATA_TRY(transfer(ops, dev, hs->b.router, buf.router,
                                    static_cast<int64_t>(n) * m.experts.n_expert, STRATA_COPY_D2H, st));
                STRATA_TRY(routed_experts(m, hs->ops, hs->dev, m.host_layers[ul], hs->b, n, st));
                return transfer(ops, dev, buf.xb, hs->b.xb, nd, STRATA_COPY_H2D, st);
            };
            if (hs != nullptr && hs->experts_on_host != nullptr && hs->experts_on_host[l] != 0)
                STRATA_TRY(run_layer(m, a, ops, dev, l, m.layers[ul], b, attend_here, routed_on_host, st));
            else
                STRATA_TRY(run_layer(m, a, ops, dev, l, m.layers[ul], b, attend_here, routed_here, st));
            continue;
        }
        auto attend_on_device = [&](const activations &h) -> int32_t {
            STRATA_TRY(transfer(ops, dev, b.q, h.q, nq, STRATA_COPY_H2D, st));
            STRATA_TRY(transfer(ops, dev, b.k, h.k, nkv, STRATA_COPY_H2D, st));
            STRATA_TRY(transfer(ops, dev, b.v, h.v, nkv, STRATA_COPY_H2D, st));
            STRATA_TRY(attend(l, b));
            return transfer(ops, dev, h.attn, b.attn, nq, STRATA_COPY_D2H, st);
        };
        auto routed_on_host = [&](const activations &h) {
            return routed_experts(m, hs->ops, hs->dev, m.host_layers[ul], h, n, st);
        };
        STRATA_TRY(run_layer(m, a, hs->ops, hs->dev, l, m.host_layers[ul], hs->b, attend_on_device, routed_on_host, st));
    }
    if (x_on_host) STRATA_TRY(transfer(ops, dev, b.x, hs->b.x, nd, STRATA_COPY_H2D, st));
    // A pipeline stage before the last: the residual stream goes to the next stage.
    if (stage.end < hp.n_layer) STRATA_TRY(copy_on_device(ops, dev, stage.hidden_out, b.x, nd, st));
    return STRATA_OK;
}

// The window of layer l (0: none).
int32_t window_of(const model &m, int32_t l) { return m.windowed[static_cast<size_t>(l)] != 0 ? m.window : 0; }

// The classifier's logits of n rows of normed activations x: the output matmul, its bias, Gemma's final soft-cap.
int32_t classify(const model &m, const strata_device_desc *ops, strata_device *dev, const float *x, int32_t n,
                 float *logits, strata_status *st) {
    STRATA_TRY(ops->matmul(dev, &m.output, x, n, logits, st));
    STRATA_TRY(add_bias(ops, dev, m.output_bias, logits, n, st));
    if (m.final_softcap == 0.0f) return STRATA_OK;
    if (!STRATA_HAS_SLOT(ops, softcap))
        return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: %s soft-caps its logits with the softcap op (ABI "
                    "1.14), which device '%s' does not offer", m.fam->arch, ops->header.name);
    return ops->softcap(dev, logits, static_cast<int64_t>(n) * m.vocab_rows, m.final_softcap, logits, st);
}

// One sequence over its contiguous per-layer cache (k_cache[l], v_cache[l], n_ctx rows); logits of the last token.
int32_t forward_contiguous(const model &m, const strata_forward_args *a, const stage_range &stage, strata_status *st) {
    const strata_model_hparams &hp = m.hp;
    if (a->k_cache == nullptr || a->v_cache == nullptr)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: k_cache or v_cache is NULL (and no paged_kv)");
    if (wants_hybrid(a))
        return fail(st, STRATA_ERR_UNSUPPORTED,
                    "decoder forward: hybrid placement (layer_on_host, experts_on_host) needs the paged KV cache "
                    "(paged_kv)");
    const int32_t n = a->n_tokens;
    for (int32_t t = 0; t < n; ++t) {
        if (a->positions[t] < 0 || a->positions[t] >= a->n_ctx) {
            return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: position %d outside the KV cache of %d",
                        a->positions[t], a->n_ctx);
        }
    }
    const strata_device_desc *ops = a->device_ops;
    strata_device *dev = a->device;
    const activations b = carve(m, a->workspace, a->n_tokens);
    const int32_t dkv = hp.n_head_kv * hp.head_dim;
    auto attend = [&](int32_t l, const activations &buf) -> int32_t {
        float *kc = a->k_cache[l];
        float *vc = a->v_cache[l];
        for (int32_t t = 0; t < n; ++t) {
            const size_t row = static_cast<size_t>(a->positions[t]) * static_cast<size_t>(dkv);
            std::memcpy(kc + row, buf.k + static_cast<size_t>(t) * dkv, sizeof(float) * static_cast<size_t>(dkv));
            std::memcpy(vc + row, buf.v + static_cast<size_t>(t) * dkv, sizeof(float) * static_cast<size_t>(dkv));
        }
        strata_attention_args aa{};
        aa.struct_size = sizeof aa;
        aa.n_tokens = n;
        aa.n_heads = hp.n_head;
        aa.n_kv_heads = hp.n_head_kv;
        aa.head_dim = hp.head_dim;
        aa.kv_row_stride = dkv;
        aa.positions = a->positions;
        aa.q = buf.q;
        aa.k_cache = kc;
        aa.v_cache = vc;
        aa.scale = m.attn_scale;
        aa.softcap = m.attn_softcap;
        aa.window = window_of(m, l);
        aa.out = buf.attn;
        return ops->attention(dev, &aa, st);
    };
    STRATA_TRY(run_layers(m, a, stage, b, attend, st));
    // Only the last token's logits are needed for generation.
    const int32_t d = hp.n_embd;
    const float *x_last = b.x + static_cast<size_t>(n - 1) * d;
    const auto *output_norm = static_cast<const float *>(m.output_norm.data);
    STRATA_TRY(ops->rms_norm(dev, x_last, output_norm, 1, d, hp.norm_eps, b.last, st));
    return classify(m, ops, dev, b.last, 1, a->logits, st);
}

// Several sequences in one batch over the paged KV cache (ABI 1.5); logits of the tokens in logits_tokens.
int32_t forward_paged(const model &m, const strata_forward_args *a, const stage_range &stage, strata_status *st) {
    const strata_model_hparams &hp = m.hp;
    const strata_device_desc *ops = a->device_ops;
    strata_device *dev = a->device;
    const int32_t n = a->n_tokens;
    const int32_t dkv = hp.n_head_kv * hp.head_dim;
    const char *device_name = ops->header.name != nullptr ? ops->header.name : "(unnamed)";
    if (!STRATA_HAS_SLOT(ops, kv_store) || !STRATA_HAS_SLOT(ops, paged_attention))
        return fail(st, STRATA_ERR_UNSUPPORTED,
                    "decoder forward: device '%s' has no kv_store/paged_attention ops (ABI 1.5), so it cannot run the "
                    "paged KV cache; use the contiguous cache (paged_kv = NULL) with this device",
                    device_name);
    const strata_paged_kv *kv = a->paged_kv;
    if (kv->struct_size < offsetof(strata_paged_kv, kv_type)) // before 1.20: float32
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: paged_kv.struct_size = %u, expected >= %zu",
                    kv->struct_size, offsetof(strata_paged_kv, kv_type));
    if (!kv_layout::known(kv_layout::type_of(kv)))
        return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: paged_kv.kv_type = %u is not a KV type this model "
                    "lays out (%s)", kv_layout::type_of(kv), kv_layout::type_list);
    if (!kv_layout::holds_heads_of(kv_layout::type_of(kv), hp.head_dim))
        return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: a %s KV cache keeps heads in groups of %lld values; "
                    "this model's heads have %d", kv_layout::type_name(kv_layout::type_of(kv)),
                    static_cast<long long>(kv_layout::group_values(kv_layout::type_of(kv))), hp.head_dim);
    if (kv->block_size <= 0 || kv->kv_dim != dkv)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "decoder forward: paged_kv has block_size %d and kv_dim %d; this model needs block_size > 0 and "
                    "kv_dim = n_head_kv * head_dim = %d",
                    kv->block_size, kv->kv_dim, dkv);
    if (a->token_seq == nullptr || (a->logits_tokens == nullptr && a->n_logits > 0))
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: paged batch without token_seq or logits_tokens");
    // 0 is valid: a step of prefill chunks that all end before their prompts do.
    if (a->n_logits < 0 || a->n_logits > n)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: n_logits = %d; must be in [0, n_tokens = %d]",
                    a->n_logits, n);
    for (int32_t i = 0; i < a->n_logits; ++i) {
        const int32_t t = a->logits_tokens[i];
        if (t < 0 || t >= n || (i > 0 && t <= a->logits_tokens[i - 1]))
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "decoder forward: logits_tokens[%d] = %d; entries must ascend strictly within [0, n_tokens = %d)",
                        i, t, n);
    }
    // Sequences and slots (token_seq, positions against each sequence's blocks) are checked by the device ops,
    // before they write anything.

    const activations b = carve(m, a->workspace, a->n_tokens);
    const uint32_t kv_type = kv_layout::type_of(kv);
    auto attend = [&](int32_t l, const activations &buf) -> int32_t {
        strata_paged_kv layer_kv{};
        std::memcpy(&layer_kv, kv, std::min<size_t>(kv->struct_size, sizeof layer_kv));
        layer_kv.struct_size = sizeof layer_kv;
        layer_kv.kv_type = kv_type;
        layer_kv.layer_offset_bytes = kv_layout::layer_offset(l - stage.kv_first, kv->block_size, dkv, kv_type);
        strata_kv_store_args ks{};
        ks.struct_size = sizeof ks;
        ks.n_tokens = n;
        ks.token_seq = a->token_seq;
        ks.positions = a->positions;
        ks.k = buf.k;
        ks.v = buf.v;
        ks.kv = &layer_kv;
        STRATA_TRY(ops->kv_store(dev, &ks, st));
        strata_paged_attention_args pa{};
        pa.struct_size = sizeof pa;
        pa.n_tokens = n;
        pa.n_heads = hp.n_head;
        pa.n_kv_heads = hp.n_head_kv;
        pa.head_dim = hp.head_dim;
        pa.token_seq = a->token_seq;
        pa.positions = a->positions;
        pa.q = buf.q;
        pa.scale = m.attn_scale;
        pa.softcap = m.attn_softcap;
        pa.window = window_of(m, l);
        pa.out = buf.attn;
        pa.kv = &layer_kv;
        return ops->paged_attention(dev, &pa, st);
    };
    host_side hs;
    if (wants_hybrid(a)) {
        if (m.host_layers.size() != m.layers.size())
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "decoder forward: layer_on_host or experts_on_host is set but the host gave no host copies "
                        "of the weights (strata_model_source.get_host_tensor)");
        if (a->host_workspace == nullptr || a->host_workspace_size < workspace_bytes(m, n))
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "decoder forward: host_workspace of %llu bytes is smaller than %llu",
                        static_cast<unsigned long long>(a->host_workspace_size),
                        static_cast<unsigned long long>(workspace_bytes(m, n)));
        hs.ops = a->host_device_ops;
        hs.dev = a->host_device;
        hs.on_host = a->layer_on_host;
        hs.experts_on_host = experts_on_host(a);
        hs.b = carve(m, a->host_workspace, n);
    }
    STRATA_TRY(run_layers(m, a, stage, b, attend, st, hs.ops != nullptr ? &hs : nullptr));
    // Final norm and classifier only for the requested tokens, gathered in order (n_logits x n_vocab logits); a
    // pipeline stage before the last computes none.
    const int32_t d = hp.n_embd;
    if (a->n_logits == 0 || stage.end < hp.n_layer) return STRATA_OK;
    for (int32_t i = 0; i < a->n_logits; ++i)
        STRATA_TRY(copy_on_device(ops, dev, b.last + static_cast<size_t>(i) * d,
                                  b.x + static_cast<size_t>(a->logits_tokens[i]) * d, d, st));
    STRATA_TRY(ops->rms_norm(dev, b.last, static_cast<const float *>(m.output_norm.data), a->n_logits, d, hp.norm_eps,
                             b.last, st));
    return classify(m, ops, dev, b.last, a->n_logits, a->logits, st);
}

#undef STRATA_TRY

} // namespace

int32_t forward(const model &m, const strata_forward_args *a, strata_status *st) {
    if (a == nullptr || a->device_ops == nullptr || a->tokens == nullptr || a->positions == nullptr ||
        a->n_tokens <= 0) {
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "decoder forward: missing arguments (device_ops, tokens, positions, or n_tokens <= 0)");
    }
    const stage_range stage = stage_of(m, a);
    if (stage.is_stage) {
        if (stage.first < 0 || stage.first >= stage.end || stage.end > m.hp.n_layer)
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "decoder forward: pipeline stage [layer_first %d, layer_end %d) is not a range of the model's "
                        "%d layers (0 <= layer_first < layer_end <= n_layer)",
                        stage.first, stage.end, m.hp.n_layer);
        if (!wants_paged(a))
            return fail(st, STRATA_ERR_UNSUPPORTED, "decoder forward: a pipeline stage needs the paged KV cache (paged_kv)");
        if (stage.first > 0 && stage.hidden_in == nullptr)
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "decoder forward: the stage starts at layer %d but hidden_in is NULL (the previous stage's "
                        "residual stream)", stage.first);
        if (stage.end < m.hp.n_layer && stage.hidden_out == nullptr)
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "decoder forward: the stage ends at layer %d of %d but hidden_out is NULL (where the next "
                        "stage's residual stream goes)", stage.end, m.hp.n_layer);
    }
    if (stage.kv_first < 0 || stage.kv_first > stage.first)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "decoder forward: kv_first_layer %d is outside [0, layer_first %d]: the KV blocks must hold the "
                    "layers the call runs", stage.kv_first, stage.first);
    if (a->logits == nullptr && stage.end == m.hp.n_layer)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: logits is NULL");
    if (m.tp_size > 1 && (a->struct_size < offsetof(strata_forward_args, all_reduce_user) + sizeof(a->all_reduce_user) ||
                          a->all_reduce == nullptr))
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: the model is tensor-parallel rank %d of %d but "
                    "all_reduce is NULL (the ranks' partial sums cannot be joined)", m.tp_rank, m.tp_size);
    const int32_t n = a->n_tokens;
    if (a->workspace == nullptr || a->workspace_size < workspace_bytes(m, n)) {
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "decoder forward: workspace of %llu bytes is smaller than %llu",
                    static_cast<unsigned long long>(a->workspace_size),
                    static_cast<unsigned long long>(workspace_bytes(m, n)));
    }
    return wants_paged(a) ? forward_paged(m, a, stage, st) : forward_contiguous(m, a, stage, st);
}

} // namespace strata::decoder
