#include "model_file/hf_config.hpp"

#include "common/error.hpp"

#include "model_file/json_input.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

namespace strata {

namespace {

using json = nlohmann::json;

// Keys that do not change what a forward pass computes: training settings and bookkeeping (vLLM ignores them too).
// Token ids come from tokenizer.json / tokenizer_config.json / generation_config.json.
const std::set<std::string, std::less<>> k_inert = {
    "architectures", "model_type", "transformers_version", "_name_or_path", "use_cache",
    "initializer_range", "attention_dropout", "pretraining_tp", "bos_token_id", "eos_token_id", "pad_token_id",
    "_attn_implementation", "output_attentions", "output_hidden_states", "return_dict", "tie_encoder_decoder",
    "torchscript", "use_bfloat16", "pruned_heads", "chunk_size_feed_forward", "is_encoder_decoder", "id2label",
    "label2id", "problem_type", "tokenizer_class", "max_length", "residual_dropout", "embedding_dropout",
    "resid_pdrop", "embd_pdrop", "attention_bias_dropout", "auto_map",
    // mixtures of experts: the training loss on routing, and its logits as an output
    "router_aux_loss_coef", "output_router_logits", "router_jitter_noise"};

// config.json's keys (json_keys), with what only config.json has: required sizes and the model type.
class config_keys : public json_keys {
  public:
    config_keys(const json &j, const std::string &origin) : json_keys(j, origin), j_(j) {}

    uint64_t required_count(std::string_view key) {
        const auto v = count(key);
        if (!v || *v == 0) fail("{}: '{}' is missing or 0; every {} checkpoint sets it", origin(), key, model_type());
        return *v;
    }
    // Every key nobody read and not known to be inert: refused by name.
    void refuse_unread() const {
        const std::vector<std::string> left = unread(k_inert);
        if (left.empty()) return;
        fail("{}: Strata does not implement config.json key(s) {} of this {} checkpoint, so it cannot run it "
             "correctly. If a key does not change inference, report it; otherwise use a checkpoint without it",
             origin(), fmt::join(left, ", "), model_type());
    }
    std::string model_type() const {
        const auto it = j_.find("model_type");
        return it != j_.end() && it->is_string() ? it->get<std::string>() : "HF";
    }

  private:
    const json &j_;
};

// Llama 3's frequency-dependent RoPE scaling as the per-dimension factors llama.cpp's converter writes into
// rope_freqs.weight (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors).
std::vector<float> llama3_rope_factors(const json &rs, double base, int64_t head_dim, const std::string &origin) {
    auto num = [&](const char *k, double fallback) {
        const auto it = rs.find(k);
        if (it == rs.end() || it->is_null()) return fallback;
        if (!it->is_number()) fail("{}: rope_scaling.{} is {}, expected a number", origin, k, brief_json(*it));
        return it->get<double>();
    };
    const double factor = num("factor", 8.0), low = num("low_freq_factor", 1.0), high = num("high_freq_factor", 4.0);
    const double old_ctx = num("original_max_position_embeddings", 8192.0);
    if (!(factor > 0) || !(high > low) || !(old_ctx > 0))
        fail("{}: rope_scaling (llama3) needs factor > 0, high_freq_factor > low_freq_factor and "
             "original_max_position_embeddings > 0", origin);
    // In float32, as the converter's torch tensors compute it.
    const float f_factor = static_cast<float>(factor), f_low = static_cast<float>(low), f_high = static_cast<float>(high);
    const float f_ctx = static_cast<float>(old_ctx);
    const float low_wavelen = f_ctx / f_low, high_wavelen = f_ctx / f_high;
    std::vector<float> out;
    for (int64_t i = 0; i < head_dim; i += 2) {
        const float freq = 1.0f / std::pow(static_cast<float>(base), static_cast<float>(i) / static_cast<float>(head_dim));
        const float wavelen = static_cast<float>(2 * M_PI) / freq;
        if (wavelen < high_wavelen) out.push_back(1.0f);
        else if (wavelen > low_wavelen) out.push_back(f_factor);
        else {
            const float smooth = (f_ctx / wavelen - f_low) / (f_high - f_low);
            out.push_back(1.0f / ((1.0f - smooth) / f_factor + smooth));
        }
    }
    return out;
}

// rope_scaling (or transformers 5's rope_parameters) -> rope.scaling.* keys or rope_freqs.weight.
void map_rope_scaling(const json &rs, const std::string &p, double theta, int64_t head_dim, hf_config &cfg,
                      metadata_table &out, const std::string &origin) {
    if (!rs.is_object()) fail("{}: rope_scaling is {}, expected an object or null", origin, brief_json(rs));
    std::string type;
    for (const char *k : {"rope_type", "type"})
        if (auto it = rs.find(k); it != rs.end() && it->is_string()) type = it->get<std::string>();
    auto number = [&](const char *k) -> std::optional<double> {
        const auto it = rs.find(k);
        if (it == rs.end() || it->is_null()) return std::nullopt;
        if (!it->is_number()) fail("{}: rope_scaling.{} is {}, expected a number", origin, k, brief_json(*it));
        return it->get<double>();
    };
    std::set<std::string> known = {"rope_type", "type", "rope_theta"};
    if (auto v = number("rope_theta"); v && *v != theta)
        fail("{}: rope_scaling.rope_theta {} differs from rope_theta {}; one model has one RoPE base", origin, *v, theta);
    if (type.empty() || type == "default") {
        // nothing to scale
    } else if (type == "linear") {
        const auto f = number("factor");
        if (!f || *f <= 0) fail("{}: rope_scaling (linear) needs a factor > 0", origin);
        out.set_string(p + "rope.scaling.type", "linear", "rope_scaling.rope_type");
        out.set_f32(p + "rope.scaling.factor", *f, "rope_scaling.factor");
        known.insert("factor");
    } else if (type == "llama3") {
        if (std::string_view(cfg.architecture->arch) != "llama")
            fail("{}: rope_scaling type llama3 is implemented for Llama checkpoints only", origin);
        cfg.computed.push_back({"rope_freqs.weight", llama3_rope_factors(rs, theta, head_dim, origin)});
        known.insert({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
    } else if (type == "longrope" || type == "su") {
        // Phi-3's LongRoPE as llama.cpp's converter writes it: the two factor lists as rope_factors_long/short
        // tensors and the attention factor sqrt(1 + ln(scale) / ln(original context)).
        auto factors = [&](const char *k) {
            const auto it = rs.find(k);
            if (it == rs.end() || !it->is_array()) fail("{}: rope_scaling (longrope) needs the list {}", origin, k);
            std::vector<float> v;
            for (const json &x : *it) {
                if (!x.is_number()) fail("{}: rope_scaling.{} holds {}, not a number", origin, k, brief_json(x));
                v.push_back(x.get<float>());
            }
            return v;
        };
        std::vector<float> long_f = factors("long_factor"), short_f = factors("short_factor");
        if (long_f.size() != short_f.size() || static_cast<int64_t>(long_f.size()) * 2 != cfg.rope_dims)
            fail("{}: rope_scaling long_factor and short_factor must each hold {} numbers (half the rotated "
                 "dimensions); they hold {} and {}", origin, cfg.rope_dims / 2, long_f.size(), short_f.size());
        if (cfg.n_ctx_orig <= 0 || cfg.n_ctx <= 0)
            fail("{}: rope_scaling (longrope) needs original_max_position_embeddings and max_position_embeddings",
                 origin);
        const double scale = static_cast<double>(cfg.n_ctx) / static_cast<double>(cfg.n_ctx_orig);
        const double attn = scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(cfg.n_ctx_orig)))
                                        : 1.0;
        out.set_f32(p + "rope.scaling.attn_factor", attn, "rope_scaling (longrope)");
        // The long factors are picked by context against the original one, wherever config.json keeps it.
        out.set_u32(p + "rope.scaling.original_context_length", static_cast<uint64_t>(cfg.n_ctx_orig),
                    "original_max_position_embeddings");
        cfg.computed.push_back({"rope_factors_long.weight", std::move(long_f)});
        cfg.computed.push_back({"rope_factors_short.weight", std::move(short_f)});
        known.insert({"long_factor", "short_factor", "original_max_position_embeddings", "long_mscale",
                      "short_mscale"});
        for (const char *k : {"long_mscale", "short_mscale"})
            if (rs.contains(k) && !rs[k].is_null())
                fail("{}: rope_scaling.{} is set; llama.cpp and Strata derive the attention factor from the "
                     "context lengths and do not implement it", origin, k);
    } else if (type == "yarn") {
        const auto f = number("factor");
        if (!f || *f <= 0) fail("{}: rope_scaling (yarn) needs a factor > 0", origin);
        out.set_string(p + "rope.scaling.type", "yarn", "rope_scaling.rope_type");
        out.set_f32(p + "rope.scaling.factor", *f, "rope_scaling.factor");
        if (auto o = number("original_max_position_embeddings")) {
            if (!(*o >= 1 && *o < 4294967296.0))
                fail("{}: rope_scaling.original_max_position_embeddings {} is not a context length", origin, *o);
            out.set_u32(p + "rope.scaling.original_context_length", static_cast<uint64_t>(*o),
                        "rope_scaling.original_max_position_embeddings");
        }
        if (auto v = number("beta_fast")) out.set_f32(p + "rope.scaling.yarn_beta_fast", *v, "rope_scaling.beta_fast");
        if (auto v = number("beta_slow")) out.set_f32(p + "rope.scaling.yarn_beta_slow", *v, "rope_scaling.beta_slow");
        // transformers' attention_factor replaces YaRN's 0.1 ln(factor) + 1, which llama.cpp and Strata apply; only
        // that value is implemented.
        if (auto v = number("attention_factor"); v && std::fabs(*v - (0.1 * std::log(*f) + 1.0)) > 1e-6)
            fail("{}: rope_scaling.attention_factor {} differs from YaRN's 0.1 ln(factor) + 1 = {}, which is the one "
                 "Strata implements", origin, *v, 0.1 * std::log(*f) + 1.0);
        known.insert({"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor"});
    } else {
        fail("{}: rope_scaling type '{}' is not implemented (Strata runs default, linear, llama3 and yarn)", origin,
             type);
    }
    for (auto it = rs.begin(); it != rs.end(); ++it)
        if (!known.count(it.key()) && !it->is_null())
            fail("{}: rope_scaling.{} is not implemented for rope type '{}'", origin, it.key(),
                 type.empty() ? "default" : type);
}

// Gemma 2 / Gemma 3's keys as llama.cpp's Gemma2Model / Gemma3Model converters write them: the soft-caps, the
// window, its layer pattern (sliding_window_pattern, or transformers' layer_types list), the windowed layers' RoPE
// base; query_pre_attn_scalar must give the query scale llama.cpp applies (head_dim, or n_embd / n_head at the 27B
// block counts 46 and 62).
void map_gemma_keys(config_keys &c, const hf_architecture &a, int64_t embd_per_head, int64_t head_dim,
                    metadata_table &out) {
    const std::string p = std::string(a.arch) + ".";
    const std::string &origin = c.origin();
    const bool g2 = std::string_view(a.arch) == "gemma2";
    const json *attn_cap = c.raw("attn_logit_softcapping");
    if (g2) {
        if (attn_cap == nullptr && c.present("attn_logit_softcapping"))
            fail("{}: attn_logit_softcapping is null; Gemma 2 without its attention soft-cap is not implemented", origin);
        out.set_f32(p + "attn_logit_softcapping", c.number("attn_logit_softcapping").value_or(50.0),
                    "attn_logit_softcapping");
    } else if (attn_cap != nullptr) {
        fail("{}: attn_logit_softcapping is set; Gemma 3 has none (llama.cpp's converter asserts it)", origin);
    }
    const auto final_cap = c.number("final_logit_softcapping");
    if (g2 && !final_cap && c.present("final_logit_softcapping"))
        fail("{}: final_logit_softcapping is null; Gemma 2 without its final soft-cap is not implemented", origin);
    if (final_cap || g2) out.set_f32(p + "final_logit_softcapping", final_cap.value_or(30.0), "final_logit_softcapping");
    // The window: transformers' defaults are 4096 for both; Gemma 3's layers alternate 5 windowed : 1 global.
    const uint64_t window = c.count("sliding_window").value_or(4096);
    if (auto v = c.count("sliding_window_size"); v && *v != window) // Gemma 2 9B / 27B carry both
        fail("{}: sliding_window_size {} differs from sliding_window {}", origin, *v, window);
    out.set_u32(p + "attention.sliding_window", window, "sliding_window");
    // transformers >= 4.53 saves Gemma 3's pattern as _sliding_window_pattern beside layer_types (which wins).
    uint64_t period = c.count("sliding_window_pattern").value_or(g2 ? 2 : 6);
    if (auto v = c.count("_sliding_window_pattern")) period = *v;
    if (auto v = c.flag("use_bidirectional_attention"); v && *v)
        fail("{}: use_bidirectional_attention is true (attention that is not causal); Strata runs Gemma causally",
             origin);
    if (const json *types = c.raw("layer_types")) {
        if (!types->is_array() || types->empty()) fail("{}: 'layer_types' is {}, expected a list", origin, brief_json(*types));
        uint64_t first_full = types->size();
        for (size_t l = 0; l < types->size(); ++l)
            if ((*types)[l] == "full_attention") {
                first_full = l;
                break;
            }
        period = first_full + 1;
        for (size_t l = 0; l < types->size(); ++l) {
            const bool windowed = l % period < period - 1;
            const json &t = (*types)[l];
            if (t != (windowed ? "sliding_attention" : "full_attention"))
                fail("{}: layer_types[{}] is {}; Strata windows Gemma's layers in a repeating pattern of {} windowed "
                     "to 1 global only", origin, l, brief_json(t), period - 1);
        }
    }
    if (g2 && period != 2) fail("{}: Gemma 2 windows every other layer; a pattern of {} is not implemented", origin, period);
    if (!g2) out.set_u32(p + "attention.sliding_window_pattern", period, "sliding_window_pattern");
    if (auto base = c.number("rope_local_base_freq")) {
        if (g2) fail("{}: rope_local_base_freq is not a Gemma 2 setting", origin);
        if (auto set = out.get_float(p + "rope.freq_base_swa"); set && *set != static_cast<float>(*base))
            fail("{}: rope_local_base_freq {} and rope_parameters.sliding_attention.rope_theta {} disagree", origin,
                 *base, *set);
        out.set_f32(p + "rope.freq_base_swa", *base, "rope_local_base_freq");
    }
    c.raw("cache_implementation"); // how transformers caches, not what the model computes
    const int64_t n_layer = static_cast<int64_t>(*out.get_uint(p + "block_count"));
    const int64_t wide_layers = g2 ? 46 : 62;
    const int64_t want = n_layer == wide_layers ? embd_per_head : head_dim;
    if (auto q = std::optional<double>(c.number("query_pre_attn_scalar").value_or(256.0)); *q != static_cast<double>(want))
        fail("{}: query_pre_attn_scalar {} would scale queries by 1/sqrt({}); llama.cpp and Strata scale this model's "
             "by 1/sqrt({})", origin, *q, *q, want);
}

// A mixture of experts: the expert count, how many each token takes, their inner sizes, and the routing.
void map_experts(config_keys &c, const hf_architecture &a, const std::string &p, metadata_table &out,
                 const std::string &origin) {
    const uint64_t n_expert = c.required_count(a.expert_count_key);
    const uint64_t n_used = c.required_count("num_experts_per_tok");
    if (n_expert > 1024 || n_used > n_expert)
        fail("{}: {} {} with num_experts_per_tok {}: implausible (at most 1024 experts, each token taking at most all "
             "of them)", origin, a.expert_count_key, n_expert, n_used);
    out.set_u32(p + "expert_count", n_expert, a.expert_count_key);
    out.set_u32(p + "expert_used_count", n_used, "num_experts_per_tok");
    auto size = [&](const char *key) {
        const uint64_t v = c.required_count(key);
        if (v > (1u << 22)) fail("{}: '{}' is {}; no model Strata runs has more than {}", origin, key, v, 1u << 22);
        return v;
    };
    if (a.expert_ff_key) out.set_u32(p + "expert_feed_forward_length", size("moe_intermediate_size"), "moe_intermediate_size");
    if (a.shared_expert)
        out.set_u32(p + "expert_shared_feed_forward_length", size("shared_expert_intermediate_size"),
                    "shared_expert_intermediate_size");
    if (const bool norm = c.flag("norm_topk_prob").value_or(a.norm_topk_prob_default); norm != a.norm_topk_prob_computed)
        fail("{}: norm_topk_prob is {}{}; the {} architecture {} the selected experts' weights, as llama.cpp computes "
             "it", origin, norm, c.present("norm_topk_prob") ? "" : " (the config class's default)", a.arch,
             a.norm_topk_prob_computed ? "renormalises" : "does not renormalise");
    if (auto step = c.count("decoder_sparse_step"); step && *step != 1)
        fail("{}: decoder_sparse_step {} puts experts in some layers only; Strata runs them in every layer", origin, *step);
    if (const json *dense = c.raw("mlp_only_layers"); dense != nullptr && !(dense->is_array() && dense->empty()))
        fail("{}: mlp_only_layers {} gives some layers a dense MLP; Strata runs experts in every layer", origin,
             brief_json(*dense));
}

// Gemma 3's multimodal config (Gemma3ForConditionalGeneration: the 4B, 12B and 27B checkpoints) as the config of its
// language model: text_config, which transformers saves without the keys at Gemma3TextConfig's defaults, completed
// with those defaults, as a Gemma3ForCausalLM config. The vision tower's settings are read only to be set aside (its
// tensors are not run; the frontends refuse image parts); any other top-level key is refused.
json gemma3_text_config(const json &j, const std::string &origin) {
    static const std::set<std::string, std::less<>> k_multimodal_keys = {
        "architectures", "model_type", "text_config", "vision_config", "boi_token_index", "eoi_token_index",
        "image_token_index", "mm_tokens_per_image", "initializer_range", "torch_dtype", "dtype",
        "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id", "_name_or_path", "use_cache"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!k_multimodal_keys.count(it.key()))
            fail("{}: Strata does not implement the Gemma3ForConditionalGeneration key {}; use a checkpoint without it",
                 origin, it.key());
    if (auto mt = j.find("model_type"); mt != j.end() && *mt != "gemma3")
        fail("{}: model_type {} does not match Gemma3ForConditionalGeneration (expected 'gemma3')", origin, brief_json(*mt));
    const auto tc = j.find("text_config");
    if (tc == j.end() || !tc->is_object()) fail("{}: Gemma3ForConditionalGeneration needs a text_config object", origin);
    json text = *tc;
    if (auto mt = text.find("model_type"); mt != text.end() && *mt != "gemma3_text")
        fail("{}: text_config.model_type {} is not gemma3_text", origin, brief_json(*mt));
    text["architectures"] = json::array({"Gemma3ForCausalLM"});
    text["model_type"] = "gemma3_text";
    // Gemma3TextConfig's defaults for the keys the mapping needs (the rest are the architecture row's).
    const json defaults = {{"vocab_size", 262208u}, {"hidden_size", 2304u}, {"intermediate_size", 9216u},
                           {"num_hidden_layers", 26u}, {"num_attention_heads", 8u}, {"max_position_embeddings", 131072u},
                           {"sliding_window", 4096u}, {"query_pre_attn_scalar", 256u}};
    for (auto it = defaults.begin(); it != defaults.end(); ++it)
        if (!text.contains(it.key())) text[it.key()] = *it;
    if (!text.contains("rope_local_base_freq") && !text.contains("rope_parameters")) text["rope_local_base_freq"] = 10000.0;
    for (const char *k : {"torch_dtype", "dtype"})
        if (auto v = j.find(k); v != j.end() && !text.contains(k)) text[k] = *v;
    return text;
}

} // namespace

hf_config map_hf_config(std::string_view text, const std::string &origin, metadata_table &out) {
    json j = parse_json_input(text, origin);
    if (!j.is_object()) fail("{}: not a JSON object", origin);
    hf_config cfg;
    if (const auto archs = j.find("architectures");
        archs != j.end() && *archs == json::array({"Gemma3ForConditionalGeneration"})) {
        j = gemma3_text_config(j, origin);
        cfg.multimodal = true;
    }
    config_keys c(j, origin);

    const json *archs = c.raw("architectures");
    if (archs == nullptr || !archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string())
        fail("{}: 'architectures' must list exactly one class name (such as [\"LlamaForCausalLM\"])", origin);
    const std::string hf_name = (*archs)[0].get<std::string>();
    cfg.architecture = find_hf_architecture(hf_name);
    if (cfg.architecture == nullptr)
        fail("{}: architecture '{}' is not one Strata reads from a safetensors folder (it reads {}); convert the "
             "model to GGUF with llama.cpp's convert_hf_to_gguf.py if llama.cpp runs it",
             origin, hf_name, hf_architecture_names());
    const hf_architecture &a = *cfg.architecture;
    if (auto mt = c.text("model_type"); mt && *mt != a.model_type)
        fail("{}: model_type '{}' does not match architecture {} (expected '{}')", origin, *mt, hf_name, a.model_type);
    if (const json *qc = c.raw("quantization_config")) cfg.quant = read_quantization_config(*qc, origin);
    const std::string p = std::string(a.arch) + ".";
    out.set_string("general.architecture", a.arch, "architectures");

    // Every count a plugin narrows to int32, bounded here so no value wraps on its way there.
    const auto bounded = [&](const char *key, uint64_t v, uint64_t max) {
        if (v > max) fail("{}: '{}' is {}; no model Strata runs has more than {}", origin, key, v, max);
        return v;
    };
    const uint64_t n_embd = c.required_count("hidden_size");
    const uint64_t n_head = c.required_count("num_attention_heads");
    const uint64_t n_head_kv = c.count("num_key_value_heads").value_or(a.kv_heads > 0 ? a.kv_heads : n_head);
    if (n_embd > (1u << 20) || n_head > (1u << 14) || n_head_kv == 0 || n_head_kv > n_head)
        fail("{}: implausible sizes (hidden_size {}, num_attention_heads {}, num_key_value_heads {})", origin, n_embd,
             n_head, n_head_kv);
    out.set_u32(p + "embedding_length", n_embd, "hidden_size");
    out.set_u32(p + "feed_forward_length", bounded("intermediate_size", c.required_count("intermediate_size"), 1u << 22),
                "intermediate_size");
    out.set_u32(p + "block_count", bounded("num_hidden_layers", c.required_count("num_hidden_layers"), 4096),
                "num_hidden_layers");
    if (a.expert_count_key != nullptr) map_experts(c, a, p, out, origin);
    out.set_u32(p + "attention.head_count", n_head, "num_attention_heads");
    out.set_u32(p + "attention.head_count_kv", n_head_kv, "num_key_value_heads");
    if (auto v = c.count("vocab_size")) out.set_u32(p + "vocab_size", bounded("vocab_size", *v, INT32_MAX), "vocab_size");
    if (auto v = c.count("max_position_embeddings"))
        out.set_u32(p + "context_length", bounded("max_position_embeddings", *v, INT32_MAX), "max_position_embeddings");
    out.set_f32(p + "attention.layer_norm_rms_epsilon", c.number("rms_norm_eps").value_or(a.rms_norm_eps),
                "rms_norm_eps");
    uint64_t head_dim = n_embd % n_head == 0 ? n_embd / n_head : 0;
    const bool gemma = a.norm_minus_one;
    // Gemma's config classes default head_dim to 256 whatever hidden_size / heads is.
    auto head_dim_key = c.count("head_dim");
    if (!head_dim_key && a.head_dim > 0) head_dim_key = a.head_dim; // the config class's default
    if (auto v = head_dim_key) {
        if (*v == 0 || *v > (1u << 14)) fail("{}: head_dim {} is not a plausible head size", origin, *v);
        head_dim = *v;
        out.set_u32(p + "attention.key_length", *v, "head_dim");
        out.set_u32(p + "attention.value_length", *v, "head_dim");
    }
    if (auto v = c.number("partial_rotary_factor"); v && *v != 1.0) {
        if (!(*v > 0 && *v < 1)) fail("{}: partial_rotary_factor {} must be in (0, 1]", origin, *v);
        out.set_u32(p + "rope.dimension_count", static_cast<uint64_t>(static_cast<double>(head_dim) * *v),
                    "partial_rotary_factor");
    }
    for (const char *k : {"hidden_act", "hidden_activation"})
        if (auto act = c.text(k); act && *act != a.activation)
            fail("{}: {} '{}' is not implemented for {} (its MLP is gated by {})", origin, k, *act, hf_name,
                 a.activation);
    // The bias tensors are mapped; a plugin that does not read them refuses the model.
    cfg.attention_bias = c.flag("attention_bias").value_or(false);
    cfg.mlp_bias = c.flag("mlp_bias").value_or(false);
    for (const char *k : {"torch_dtype", "dtype"})
        if (auto v = c.text(k)) cfg.torch_dtype = *v;

    // RoPE: rope_theta (or transformers 5's rope_parameters), then its scaling.
    double theta = c.number("rope_theta").value_or(a.rope_theta);
    const json *params = c.raw("rope_parameters");
    // transformers 5 keys rope_parameters by layer type where some layers are windowed (Gemma 3): the global
    // layers' parameters are the model's RoPE, the windowed layers' a plain RoPE with a base of their own.
    std::optional<double> sliding_theta;
    if (params != nullptr && params->is_object() &&
        (params->contains("full_attention") || params->contains("sliding_attention"))) {
        for (auto it = params->begin(); it != params->end(); ++it)
            if (it.key() != "full_attention" && it.key() != "sliding_attention")
                fail("{}: rope_parameters.{}: Strata reads RoPE parameters per layer type for full_attention and "
                     "sliding_attention only", origin, it.key());
        const auto full = params->find("full_attention");
        if (full == params->end() || !full->is_object())
            fail("{}: rope_parameters is keyed by layer type but has no full_attention object", origin);
        if (const auto sliding = params->find("sliding_attention"); sliding != params->end()) {
            if (!sliding->is_object()) fail("{}: rope_parameters.sliding_attention is {}, expected an object", origin, brief_json(*sliding));
            for (auto it = sliding->begin(); it != sliding->end(); ++it) {
                const bool plain = it.key() == "rope_type" && it->is_string() && it->get<std::string>() == "default";
                if (it.key() == "rope_theta" && it->is_number()) sliding_theta = it->get<double>();
                else if (!plain)
                    fail("{}: rope_parameters.sliding_attention.{} = {} is not implemented; the windowed layers' RoPE "
                         "is plain (rope_type default) with its rope_theta", origin, it.key(), brief_json(*it));
            }
        }
        params = &*full;
    }
    if (params != nullptr && params->is_object()) {
        if (auto it = params->find("rope_theta"); it != params->end() && it->is_number()) theta = it->get<double>();
    }
    if (!(theta > 0 && theta < 1e12)) fail("{}: rope_theta {} is not a positive RoPE base", origin, theta);
    out.set_f32(p + "rope.freq_base", theta, "rope_theta");
    if (sliding_theta && *sliding_theta != theta) {
        if (std::string_view(a.arch) != "gemma3")
            fail("{}: rope_parameters gives the windowed layers the RoPE base {} and the others {}; one base per "
                 "model for {}", origin, *sliding_theta, theta, a.hf_name);
        if (!(*sliding_theta > 0 && *sliding_theta < 1e12))
            fail("{}: rope_parameters.sliding_attention.rope_theta {} is not a positive RoPE base", origin, *sliding_theta);
        if (auto local = out.get_float(p + "rope.freq_base_swa"); local && *local != static_cast<float>(*sliding_theta))
            fail("{}: rope_local_base_freq {} and rope_parameters.sliding_attention.rope_theta {} disagree", origin,
                 *local, *sliding_theta);
        out.set_f32(p + "rope.freq_base_swa", *sliding_theta, "rope_parameters.sliding_attention.rope_theta");
    }
    cfg.n_ctx = static_cast<int64_t>(out.get_uint(p + "context_length").value_or(0));
    cfg.rope_dims = static_cast<int64_t>(out.get_uint(p + "rope.dimension_count").value_or(head_dim));
    if (auto v = c.count("original_max_position_embeddings")) { // Phi-3 keeps it beside rope_scaling
        cfg.n_ctx_orig = static_cast<int64_t>(*v);
        out.set_u32(p + "rope.scaling.original_context_length", *v, "original_max_position_embeddings");
    }
    for (const json *rs : {c.raw("rope_scaling"), params})
        if (rs != nullptr && rs->is_object())
            if (auto it = rs->find("original_max_position_embeddings"); it != rs->end() && it->is_number_unsigned())
                cfg.n_ctx_orig = static_cast<int64_t>(it->get<uint64_t>());
    if (const json *rs = c.raw("rope_scaling")) map_rope_scaling(*rs, p, theta, static_cast<int64_t>(head_dim), cfg, out, origin);
    else if (params != nullptr) map_rope_scaling(*params, p, theta, static_cast<int64_t>(head_dim), cfg, out, origin);

    // Sliding windows: Mistral's sliding_window is the model's own; Qwen's is off unless use_sliding_window.
    const bool use_window = c.flag("use_sliding_window").value_or(a.sliding_window_key) && !gemma;
    // 0: no window (a window of 0 tokens is no window either).
    uint64_t window = gemma ? 0 : c.count("sliding_window").value_or(0);
    if (window == 0 && !c.present("sliding_window") && a.sliding_window > 0) window = a.sliding_window;
    c.count("max_window_layers");
    if (use_window && window > 0) {
        if (!a.sliding_window_key)
            fail("{}: use_sliding_window is true; sliding-window attention is not implemented for {}", origin, hf_name);
        out.set_u32(p + "attention.sliding_window", window, "sliding_window");
    }
    if (gemma) map_gemma_keys(c, a, static_cast<int64_t>(n_embd / n_head), static_cast<int64_t>(head_dim), out);
    if (const json *types = c.raw("layer_types"); types != nullptr && !gemma) {
        if (!types->is_array()) fail("{}: 'layer_types' is {}, expected a list", origin, brief_json(*types));
        for (const json &t : *types)
            if (t != "full_attention")
                fail("{}: layer_types holds {}; Strata runs {} with full attention in every layer only", origin,
                     brief_json(t), hf_name);
    }
    if (auto v = c.flag("use_mrope"); v && *v) fail("{}: use_mrope (multimodal RoPE) is not implemented", origin);
    // Phi-4-mini's keys, which transformers' Phi3 ignores at these values; any other value is refused.
    if (auto v = c.number("full_attn_mod"); v && *v != 1) fail("{}: full_attn_mod {} is not implemented", origin, *v);
    if (auto v = c.number("interpolate_factor"); v && *v != 1)
        fail("{}: interpolate_factor {} is not implemented", origin, *v);
    if (auto v = c.flag("lm_head_bias"); v && *v) fail("{}: lm_head_bias is true; a classifier bias is not mapped", origin);

    cfg.tie_word_embeddings = c.flag("tie_word_embeddings").value_or(a.tie_word_embeddings);
    cfg.n_layer = static_cast<int64_t>(*out.get_uint(p + "block_count"));
    cfg.n_head = static_cast<int64_t>(n_head);
    cfg.n_embd = static_cast<int64_t>(n_embd);
    cfg.n_ff = static_cast<int64_t>(*out.get_uint(p + "feed_forward_length"));
    cfg.n_expert = static_cast<int64_t>(out.get_uint(p + "expert_count").value_or(0));
    cfg.n_ff_exp = static_cast<int64_t>(out.get_uint(p + "expert_feed_forward_length").value_or(static_cast<uint64_t>(cfg.n_ff)));
    cfg.n_ff_shexp = static_cast<int64_t>(out.get_uint(p + "expert_shared_feed_forward_length").value_or(0));
    cfg.n_vocab = static_cast<int64_t>(out.get_uint(p + "vocab_size").value_or(0));
    cfg.n_head_kv = static_cast<int64_t>(n_head_kv);
    cfg.head_dim = static_cast<int64_t>(head_dim);
    // HF keeps every family's Q/K rows in the rotate-half layout (GGUF's llama files are permuted for pairs).
    out.set_string("strata.rope.layout", "neox");
    c.refuse_unread();
    return cfg;
}

} // namespace strata
