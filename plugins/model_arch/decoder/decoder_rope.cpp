#include "decoder_rope.hpp"

#include "decoder_source.hpp"

#include <strata/device_args.hpp>
#include <strata/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace strata::decoder {

namespace {

// rot_dims / 2 positive finite F32 factors from tensor `name`; empty when the file lacks it.
std::vector<float> factor_tensor(const strata_model_source *src, const family &fam, const std::string &name,
                                 int32_t rot_dims) {
    bool found = false;
    const strata_tensor_view t = tensor(src, fam, name, rot_dims / 2, 1, false, &found);
    if (!found) return {};
    if (t.ggml_type != 0) throw std::runtime_error("tensor '" + name + "' must be F32");
    const auto *f = static_cast<const float *>(t.data);
    std::vector<float> v(f, f + rot_dims / 2);
    for (const float x : v)
        if (!(x > 0.0f) || !std::isfinite(x))
            throw std::runtime_error("tensor '" + name + "' holds " + std::to_string(x) +
                                     "; frequency factors must be finite and > 0");
    return v;
}

// The context each sequence may reach: what the user set (strata_model_source.n_ctx_seq, ABI 1.13), else the
// model's trained context, as llama.cpp's n_ctx_seq defaults to n_ctx_train.
int64_t context_per_sequence(const strata_model_source *src, const strata_model_hparams &hp) {
    const bool has = src->struct_size >= offsetof(strata_model_source, n_ctx_seq) + sizeof(src->n_ctx_seq);
    return has && src->n_ctx_seq > 0 ? src->n_ctx_seq : hp.n_ctx_train;
}

// ggml_rope_yarn_corr_dims, in its float steps: the pair indices where YaRN's ramp starts and ends.
void yarn_corr_dims(int32_t n_dims, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                    float *low, float *high) {
    const auto corr_dim = [&](float n_rot) {
        return static_cast<float>(n_dims) *
               std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
               (2.0f * std::log(freq_base));
    };
    *low = std::max(0.0f, std::floor(corr_dim(beta_fast)));
    *high = std::min(static_cast<float>(n_dims - 1), std::ceil(corr_dim(beta_slow)));
}

// YaRN keys llama.cpp's llama/qwen/phi3 do not read (it runs them with beta_fast 32, beta_slow 1, ext_factor 1 and
// its own magnitude): accepted at those values, refused otherwise, so no key is silently ignored.
void check_yarn_key(const strata_model_source *src, const std::string &key, double expected) {
    const double v = meta_f64(src, key, expected);
    if (v != expected)
        throw std::runtime_error("'" + key + "' is " + std::to_string(v) + "; this plugin runs YaRN as llama.cpp does (" +
                                 std::to_string(expected) + ") and does not implement other values yet");
}

// The least device op that expresses r: plain rope, rope_ext (factors, a scale) or rope_scaled (YaRN, a magnitude).
void pick_op(rope_config &r, const std::string &scaled_why, const std::string &ext_why) {
    if (r.attn_factor != 1.0f || r.ext_factor != 0.0f) {
        r.op = STRATA_DEVICE_OP_ROPE_SCALED;
        r.op_reason = scaled_why;
    } else if (!r.freqs.empty() || r.freq_scale != 1.0f) {
        r.op = STRATA_DEVICE_OP_ROPE_EXT;
        r.op_reason = ext_why;
    } else {
        r.op = 0;
        r.op_reason.clear();
    }
}

} // namespace

rope_config read_rope(const strata_model_source *src, const family &fam, const strata_model_hparams &hp) {
    const std::string p = std::string(fam.arch) + ".";
    rope_config r;
    // The scaling type (default linear) and factor (rope.scaling.factor, or the older rope.scale_linear), as
    // llama_model::load_hparams reads them: freq_scale = 1 / factor in float, 0 meaning none; "none" never scales.
    const std::string type_key = p + "rope.scaling.type";
    const std::string type = meta_str(src, type_key, "linear");
    double factor = meta_f64(src, p + "rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = meta_f64(src, p + "rope.scale_linear", 0.0);
    const int64_t n_ctx_orig =
        static_cast<int64_t>(meta_u64(src, p + "rope.scaling.original_context_length", false,
                                      static_cast<uint64_t>(hp.n_ctx_train)));
    meta_u64(src, p + "rope.scaling.finetuned", false, 0); // informational
    const double attn_factor = meta_f64(src, p + "rope.scaling.attn_factor", 1.0);
    if (type != "none" && type != "linear" && type != "yarn" && type != "longrope")
        throw std::runtime_error("RoPE scaling '" + type + "' ('" + type_key + "') is not implemented by this plugin; " +
                                 "none, linear, yarn and longrope are");
    if (!std::isfinite(factor) || factor < 0.0)
        throw std::runtime_error("'" + p + "rope.scaling.factor' is " + std::to_string(factor) +
                                 "; it must be a finite factor >= 1 (0: none)");
    if (!(attn_factor > 0.0) || !std::isfinite(attn_factor))
        throw std::runtime_error("'" + p + "rope.scaling.attn_factor' is " + std::to_string(attn_factor) +
                                 "; it must be finite and > 0");
    if (n_ctx_orig <= 0)
        throw std::runtime_error("'" + p + "rope.scaling.original_context_length' is 0; it must be a token count");
    r.theta_base = hp.rope_theta;
    r.n_ctx_orig = n_ctx_orig;
    r.freq_scale = type == "none" || factor == 0.0 ? 1.0f : 1.0f / static_cast<float>(factor);
    r.attn_factor = static_cast<float>(attn_factor);
    std::string why = type != "none" && factor != 0.0 ? type + " RoPE scaling ('" + p + "rope.scaling.factor')" : "";
    if (type == "yarn") {
        // llama_context: ext_factor 1; attn_factor get_mscale(factor) / (1 + 0.1 ln factor) times the file's
        // attn_factor (ggml multiplies by 1 + 0.1 ln factor again); the ramp between ggml_rope_yarn_corr_dims of
        // beta_fast 32 and beta_slow 1 over the original context.
        for (const char *k : {"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor",
                              "rope.scaling.yarn_log_multiplier"})
            if (meta_f64(src, p + k, -1.0) != -1.0)
                throw std::runtime_error("'" + p + k + "' is set; this plugin runs YaRN as llama.cpp runs " +
                                         fam.arch + " and does not implement that key");
        check_yarn_key(src, p + "rope.scaling.yarn_beta_fast", 32.0);
        check_yarn_key(src, p + "rope.scaling.yarn_beta_slow", 1.0);
        const float f = 1.0f / r.freq_scale;
        float yarn_attn = f <= 1.0f ? 1.0f : 0.1f * 1.0f * std::log(f) + 1.0f;
        yarn_attn *= 1.0f / (1.0f + 0.1f * std::log(f));
        r.attn_factor = yarn_attn * r.attn_factor;
        r.ext_factor = 1.0f;
        yarn_corr_dims(hp.rope_dims, n_ctx_orig, hp.rope_theta, 32.0f, 1.0f, &r.corr_low, &r.corr_high);
    }
    if (fam.factors == freq_factors::rope_freqs) {
        r.freqs = factor_tensor(src, fam, "rope_freqs.weight", hp.rope_dims);
        if (!r.freqs.empty()) why = "tensor 'rope_freqs.weight' (RoPE frequency factors)";
    } else if (fam.factors == freq_factors::long_short) {
        std::vector<float> long_f = factor_tensor(src, fam, "rope_factors_long.weight", hp.rope_dims);
        std::vector<float> short_f = factor_tensor(src, fam, "rope_factors_short.weight", hp.rope_dims);
        if (long_f.empty() != short_f.empty())
            throw std::runtime_error(std::string("the file has 'rope_factors_") + (long_f.empty() ? "short" : "long") +
                                     ".weight' without 'rope_factors_" + (long_f.empty() ? "long" : "short") +
                                     ".weight'; LongRoPE needs both");
        if (!long_f.empty()) {
            // llama_model::get_rope_factors: the long factors when the context per sequence exceeds the original.
            const int64_t n_ctx = context_per_sequence(src, hp);
            const bool use_long = n_ctx > n_ctx_orig;
            r.freqs = use_long ? std::move(long_f) : std::move(short_f);
            why = std::string("tensor 'rope_factors_") + (use_long ? "long" : "short") + ".weight' (LongRoPE)";
            r.note = "LongRoPE: " + std::string(use_long ? "long" : "short") + " frequency factors, as the context " +
                     std::to_string(n_ctx) + (use_long ? " exceeds" : " is within") + " the original " +
                     std::to_string(n_ctx_orig) + " tokens ('" + p + "rope.scaling.original_context_length')";
        }
    }
    pick_op(r,
            r.ext_factor != 0.0f ? "YaRN RoPE scaling ('" + type_key + "')"
                                 : "the RoPE attention factor ('" + p + "rope.scaling.attn_factor')",
            why);
    return r;
}

rope_config windowed_rope(const rope_config &global, float theta_base, float freq_scale,
                          const strata_model_hparams &hp) {
    rope_config r = global;
    r.theta_base = theta_base;
    r.freq_scale = freq_scale;
    r.note.clear();
    if (r.ext_factor != 0.0f)
        yarn_corr_dims(hp.rope_dims, r.n_ctx_orig, theta_base, 32.0f, 1.0f, &r.corr_low, &r.corr_high);
    const std::string why = global.op_reason.empty() ? "RoPE scaling of the windowed layers" : global.op_reason;
    pick_op(r, why, why);
    return r;
}

int32_t rotate(const rope_config &r, const strata_model_hparams &hp, const strata_device_desc *ops,
               strata_device *dev, float *x, int32_t n, int32_t heads, const int32_t *positions, strata_status *st) {
    const char *device_name = ops->header.name != nullptr ? ops->header.name : "(unnamed)";
    const float *factors = r.freqs.empty() ? nullptr : r.freqs.data();
    switch (r.op) {
    case 0: return ops->rope(dev, x, n, heads, hp.head_dim, hp.rope_dims, positions, r.theta_base, hp.rope_mode, st);
    case STRATA_DEVICE_OP_ROPE_EXT:
        if (!STRATA_HAS_SLOT(ops, rope_ext))
            return plugin::fail(st, STRATA_ERR_UNSUPPORTED,
                                "decoder forward: this model's RoPE needs frequency factors or scaling (rope_ext, ABI "
                                "1.11), which device '%s' does not offer",
                                device_name);
        return ops->rope_ext(dev, x, n, heads, hp.head_dim, hp.rope_dims, positions, r.theta_base, hp.rope_mode,
                             r.freq_scale, factors, st);
    default: {
        if (!STRATA_HAS_SLOT(ops, rope_scaled))
            return plugin::fail(st, STRATA_ERR_UNSUPPORTED,
                                "decoder forward: this model's RoPE needs YaRN or an attention factor (rope_scaled, ABI "
                                "1.13), which device '%s' does not offer",
                                device_name);
        strata_rope_args a = plugin::rope_ext_args(n, heads, hp.head_dim, hp.rope_dims, positions, r.theta_base,
                                                   hp.rope_mode, r.freq_scale, factors);
        a.attn_factor = r.attn_factor;
        a.ext_factor = r.ext_factor;
        a.corr_low = r.corr_low;
        a.corr_high = r.corr_high;
        return ops->rope_scaled(dev, x, &a, st);
    }
    }
}

} // namespace strata::decoder
