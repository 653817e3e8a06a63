#include "model_file/hf_fp8.hpp"

#include "common/error.hpp"
#include "common/half.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <strata/plugin_abi.h>

#include <cmath>
#include <cstring>
#include <set>

namespace strata {

namespace {

using json = nlohmann::json;

// Keys that record how the scheme was observed or which library wrote it, not how to run it.
const std::set<std::string, std::less<>> k_inert_scheme_keys = {"observer", "observer_kwargs"};

std::vector<std::string> string_list(json_keys &k, std::string_view key) {
    std::vector<std::string> out;
    const json *v = k.raw(key);
    if (v == nullptr) return out;
    if (!v->is_array()) k.wrong(key, *v, "a list of module names");
    for (const json &e : *v) {
        if (!e.is_string()) k.wrong(key, e, "a list of module names");
        out.push_back(e.get<std::string>());
    }
    return out;
}

// [rows, cols] of a block scheme (compressed-tensors' block_structure, fp8's weight_block_size).
std::pair<int64_t, int64_t> block_shape(json_keys &k, std::string_view key) {
    const json *v = k.raw(key);
    if (v == nullptr) return {0, 0};
    if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number_unsigned() || !(*v)[1].is_number_unsigned() ||
        (*v)[0].get<uint64_t>() == 0 || (*v)[1].get<uint64_t>() == 0 || (*v)[0].get<uint64_t>() > (1u << 20) ||
        (*v)[1].get<uint64_t>() > (1u << 20))
        k.wrong(key, *v, "[rows, columns], two positive integers");
    return {(*v)[0].get<int64_t>(), (*v)[1].get<int64_t>()};
}

void check_unread(const json_keys &k, const std::string &origin, const std::string &what) {
    if (const std::vector<std::string> left = k.unread(k_inert_scheme_keys); !left.empty())
        fail("{}: {} key(s) {} are not implemented, so Strata cannot run this FP8 checkpoint correctly", origin, what,
             fmt::join(left, ", "));
}

// compressed-tensors' weights scheme: 8-bit float, symmetric, static, per tensor / channel / block.
void read_weight_scheme(const json &w, hf_quantization &q, const std::string &origin, const std::string &at) {
    if (!w.is_object()) fail("{}: '{}' is {}, expected an object", origin, at, brief_json(w));
    json_keys k(w, origin, at + ".");
    const std::string type = k.text("type").value_or("int");
    const int64_t bits = k.integer("num_bits").value_or(0);
    if (type != "float" || bits != 8)
        fail("{}: {} is {} {}-bit; Strata reads compressed-tensors' 8-bit float (FP8) weights (its integer schemes "
             "are not implemented: use the GPTQ or AWQ checkpoint)", origin, at, type, bits);
    if (!k.flag("symmetric").value_or(true)) fail("{}: {}.symmetric is false; FP8 weights are symmetric", origin, at);
    if (k.flag("dynamic").value_or(false))
        fail("{}: {}.dynamic is true: weight scales computed at run time are not implemented", origin, at);
    if (const json *g = k.raw("group_size"))
        fail("{}: {}.group_size {} is not implemented for FP8 weights (tensor, channel and block strategies are)",
             origin, at, brief_json(*g));
    if (const json *a = k.raw("actorder")) fail("{}: {}.actorder {} is not implemented for FP8 weights", origin, at, brief_json(*a));
    if (const json *z = k.raw("zp_dtype")) fail("{}: {}.zp_dtype {}: FP8 weights have no zero points", origin, at, brief_json(*z));
    k.raw("scale_dtype"); // the scale tensors' own dtype is read from the shards
    q.fp8_scales = k.text("strategy").value_or("tensor");
    const auto [br, bc] = block_shape(k, "block_structure");
    if (q.fp8_scales == "block") {
        if (br == 0) fail("{}: {}.strategy is block but block_structure is missing", origin, at);
        q.block_rows = br, q.block_cols = bc;
    } else if (q.fp8_scales != "tensor" && q.fp8_scales != "channel") {
        fail("{}: {}.strategy '{}' is not implemented for FP8 weights (tensor, channel and block are)", origin, at,
             q.fp8_scales);
    } else if (br != 0) {
        fail("{}: {}.block_structure is set but the strategy is {}", origin, at, q.fp8_scales);
    }
    check_unread(k, origin, at);
}

// compressed-tensors' input_activations: 8-bit float, per token / tensor / group, dynamic or static (then each layer
// has an input_scale). Strata keeps the activations f32, so the scheme only says which tensors to expect.
void read_activation_scheme(const json &a, hf_quantization &q, const std::string &origin, const std::string &at) {
    if (!a.is_object()) fail("{}: '{}' is {}, expected an object", origin, at, brief_json(a));
    json_keys k(a, origin, at + ".");
    const std::string type = k.text("type").value_or("int");
    const int64_t bits = k.integer("num_bits").value_or(0);
    if (type != "float" || bits != 8)
        fail("{}: {} is {} {}-bit; Strata reads FP8 checkpoints whose activations are 8-bit float (or unquantized)",
             origin, at, type, bits);
    if (!k.flag("symmetric").value_or(true)) fail("{}: {}.symmetric is false; not implemented", origin, at);
    const std::string strategy = k.text("strategy").value_or("tensor");
    const bool dynamic = k.flag("dynamic").value_or(false);
    if (strategy != "tensor" && strategy != "token" && strategy != "group")
        fail("{}: {}.strategy '{}' is not implemented (tensor, token and group are)", origin, at, strategy);
    if (!dynamic && strategy != "tensor")
        fail("{}: {} is static per {}; Strata reads static activation scales per tensor only", origin, at, strategy);
    k.integer("group_size");
    if (const json *b = k.raw("block_structure")) fail("{}: {}.block_structure {} is not implemented", origin, at, brief_json(*b));
    if (const json *o = k.raw("actorder")) fail("{}: {}.actorder {} is not implemented", origin, at, brief_json(*o));
    k.raw("scale_dtype");
    k.raw("zp_dtype");
    q.static_input_scale = !dynamic;
    check_unread(k, origin, at);
}

void read_compressed_tensors(json_keys &k, hf_quantization &q, const std::string &origin) {
    const std::string format = k.text("format").value_or("");
    if (format != "float-quantized")
        fail("{}: quantization_config.format '{}' is not implemented; Strata reads compressed-tensors' "
             "float-quantized (FP8) checkpoints", origin, format);
    if (auto status = k.text("quantization_status"); status && *status != "compressed")
        fail("{}: quantization_config.quantization_status '{}': Strata reads compressed checkpoints (as saved "
             "for serving)", origin, *status);
    if (const json *kv = k.raw("kv_cache_scheme"))
        fail("{}: quantization_config.kv_cache_scheme {} (an FP8 KV cache with its k_scale / v_scale) is not "
             "implemented; Strata keeps its own KV cache format", origin, brief_json(*kv));
    for (const char *key : {"sparsity_config", "transform_config"})
        if (const json *v = k.raw(key); v != nullptr && !v->empty())
            fail("{}: quantization_config.{} is set; sparse or transformed compressed-tensors checkpoints are not "
                 "implemented", origin, key);
    k.raw("global_compression_ratio");
    k.raw("version");
    q.ignore = string_list(k, "ignore");
    const json *groups = k.raw("config_groups");
    if (groups == nullptr || !groups->is_object() || groups->size() != 1)
        fail("{}: quantization_config.config_groups must hold exactly one scheme (Strata does not mix schemes "
             "across layers); it holds {}", origin, groups == nullptr ? "none" : brief_json(*groups));
    const std::string at = "quantization_config.config_groups." + groups->begin().key();
    const json &g = groups->begin().value();
    if (!g.is_object()) fail("{}: '{}' is {}, expected an object", origin, at, brief_json(g));
    json_keys gk(g, origin, at + ".");
    const json *targets = gk.raw("targets");
    if (targets == nullptr || *targets != json::array({"Linear"}))
        fail("{}: {}.targets is {}; Strata reads schemes that target [\"Linear\"] (every linear layer)", origin, at,
             targets == nullptr ? "missing" : targets->dump());
    if (auto f = gk.text("format"); f && *f != "float-quantized")
        fail("{}: {}.format '{}' is not implemented (float-quantized only)", origin, at, *f);
    const json *weights = gk.raw("weights");
    if (weights == nullptr) fail("{}: {} has no weights scheme", origin, at);
    read_weight_scheme(*weights, q, origin, at + ".weights");
    if (const json *a = gk.raw("input_activations")) read_activation_scheme(*a, q, origin, at + ".input_activations");
    if (const json *o = gk.raw("output_activations"))
        fail("{}: {}.output_activations {} is not implemented", origin, at, brief_json(*o));
    check_unread(gk, origin, at);
    q.quantized_lm_head = !q.ignores("lm_head");
}

void read_fp8(json_keys &k, hf_quantization &q, const std::string &origin) {
    const std::string scheme = k.text("activation_scheme").value_or("dynamic");
    if (scheme != "dynamic" && scheme != "static")
        fail("{}: quantization_config.activation_scheme '{}' is not implemented (dynamic or static)", origin, scheme);
    q.static_input_scale = scheme == "static";
    if (auto f = k.text("fmt"); f && *f != "e4m3")
        fail("{}: quantization_config.fmt '{}' is not implemented; Strata reads e4m3 FP8 weights", origin, *f);
    const auto [br, bc] = block_shape(k, "weight_block_size");
    q.fp8_scales = br != 0 ? "block" : "tensor";
    q.block_rows = br, q.block_cols = bc;
    if (br != 0 && q.static_input_scale)
        fail("{}: a block-quantized fp8 checkpoint with static activation scales is not implemented", origin);
    for (const char *key : {"ignored_layers", "modules_to_not_convert"}) {
        std::vector<std::string> more = string_list(k, key);
        q.ignore.insert(q.ignore.end(), more.begin(), more.end());
    }
    q.quantized_lm_head = false; // vLLM runs an fp8 checkpoint's lm_head unquantized
}

// The scale tensor's element i as f32 (F32, BF16 and F16 widen exactly).
float scale_at(const safetensors_tensor &s, int64_t i) {
    if (s.dtype == "F32") {
        float v;
        std::memcpy(&v, s.data + 4 * i, 4);
        return v;
    }
    uint16_t h;
    std::memcpy(&h, s.data + 2 * i, 2);
    return s.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
}

bool is_scale_dtype(const std::string &d) { return d == "F32" || d == "BF16" || d == "F16"; }

int64_t elements(const safetensors_tensor &t) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    return n;
}

} // namespace

void read_fp8_config(json_keys &k, const std::string &method, hf_quantization &q, const std::string &origin) {
    q.method = method;
    q.bits = 8;
    if (method == "compressed-tensors") read_compressed_tensors(k, q, origin);
    else read_fp8(k, q, origin);
    for (const std::string &entry : q.ignore) {
        if (!entry.starts_with("re:")) continue;
        try {
            q.ignore_patterns.emplace_back(entry.substr(3));
        } catch (const std::regex_error &e) {
            fail("{}: quantization_config's ignore entry '{}' is not a regular expression Strata reads: {}", origin,
                 entry, e.what());
        }
    }
    if (q.fp8_scales == "block" && q.block_cols % 32 != 0)
        fail("{}: FP8 scale blocks {} columns wide are not implemented; Strata's FP8 blocks need a multiple of 32",
             origin, q.block_cols);
}

uint32_t fp8_type(int64_t cols, int64_t block_cols) {
    for (const auto &[b, type] : {std::pair<int64_t, uint32_t>{128, STRATA_TYPE_F8_E4M3_B128}, {32, STRATA_TYPE_F8_E4M3_B32}})
        if (cols % b == 0 && (block_cols == 0 || block_cols % b == 0)) return type;
    return 0;
}

repacked_weight repack_fp8_linear(const hf_quantization &q, const quantized_linear &p, const std::string &where) {
    const char *scale_name = q.method == "fp8" && q.fp8_scales == "block" ? "weight_scale_inv" : "weight_scale";
    if (p.weight == nullptr)
        fail("{}: '{}' has a {} but no FP8 .weight", where, p.prefix, p.weight_scale != nullptr ? scale_name : "input_scale");
    const safetensors_tensor &w = *p.weight;
    if (w.dtype == "F8_E5M2")
        fail("{}: '{}' is F8_E5M2; Strata runs e4m3 FP8 weights (F8_E4M3) only", where, w.name);
    if (w.dtype != "F8_E4M3" || w.shape.size() != 2 || w.shape[0] <= 0 || w.shape[1] <= 0)
        fail("{}: '{}' is {} {}; an FP8 layer's weight is a 2-D F8_E4M3 tensor", where, w.name, w.dtype,
             fmt::join(w.shape, "x"));
    const int64_t rows = w.shape[0], cols = w.shape[1];
    if (p.weight_scale == nullptr)
        fail("{}: '{}' has no {}; an FP8 layer needs its weight scales", where, p.prefix, scale_name);
    const safetensors_tensor &s = *p.weight_scale;
    // The scale of element (r, c), by the scheme's layout.
    int64_t scale_rows = 1, scale_cols = 1;
    if (q.fp8_scales == "channel") scale_rows = rows;
    if (q.fp8_scales == "block")
        scale_rows = (rows + q.block_rows - 1) / q.block_rows, scale_cols = (cols + q.block_cols - 1) / q.block_cols;
    const bool shape_ok = q.fp8_scales == "tensor"    ? elements(s) == 1 && s.shape.size() <= 2
                          : q.fp8_scales == "channel" ? s.shape == std::vector<int64_t>{rows, 1} ||
                                                            s.shape == std::vector<int64_t>{rows}
                                                      : s.shape == std::vector<int64_t>{scale_rows, scale_cols};
    if (!is_scale_dtype(s.dtype) || !shape_ok)
        fail("{}: '{}' is {} [{}]; {} FP8 scales for a [{}, {}] weight are F32 (or BF16 / F16) [{}, {}]", where,
             s.name, s.dtype, fmt::join(s.shape, ", "), q.fp8_scales, rows, cols, scale_rows, scale_cols);
    for (int64_t i = 0; i < scale_rows * scale_cols; ++i)
        if (!std::isfinite(scale_at(s, i)))
            fail("{}: '{}' holds the scale {} at {}; the checkpoint is damaged", where, s.name, scale_at(s, i), i);
    if (p.input_scale != nullptr && !q.static_input_scale)
        fail("{}: '{}' is present but quantization_config says the activations are quantized dynamically (or not "
             "at all); the checkpoint and its config.json disagree", where, p.input_scale->name);
    if (q.static_input_scale) {
        if (p.input_scale == nullptr)
            fail("{}: '{}' has no input_scale, but quantization_config says its activations have static scales; the "
                 "checkpoint is incomplete", where, p.prefix);
        const safetensors_tensor &a = *p.input_scale;
        if (!is_scale_dtype(a.dtype) || elements(a) != 1 || a.shape.size() > 1)
            fail("{}: '{}' is {} [{}]; a static activation scale is one F32 value", where, a.name, a.dtype,
                 fmt::join(a.shape, ", "));
        if (const float v = scale_at(a, 0); !std::isfinite(v) || v <= 0.0f)
            fail("{}: '{}' is {}; an activation scale is finite and positive", where, a.name, v);
    }
    repacked_weight r;
    r.type = fp8_type(cols, q.fp8_scales == "block" ? q.block_cols : 0);
    if (r.type == 0) fail("{}: '{}' has {} inputs; Strata's FP8 blocks need a multiple of 32", where, w.name, cols);
    r.rows = rows;
    r.cols = cols;
    const int64_t b = r.type == STRATA_TYPE_F8_E4M3_B128 ? 128 : 32;
    const int64_t block_bytes = 4 + b;
    r.bytes.resize(static_cast<size_t>(rows * (cols / b) * block_bytes));
    uint8_t *out = r.bytes.data();
    for (int64_t row = 0; row < rows; ++row) {
        const uint8_t *src = w.data + row * cols;
        const int64_t srow = q.fp8_scales == "channel" ? row : q.fp8_scales == "block" ? row / q.block_rows : 0;
        for (int64_t c = 0; c < cols; c += b, out += block_bytes) {
            const int64_t scol = q.fp8_scales == "block" ? c / q.block_cols : 0;
            const float scale = scale_at(s, srow * scale_cols + scol);
            std::memcpy(out, &scale, 4);
            std::memcpy(out + 4, src + c, static_cast<size_t>(b));
        }
    }
    return r;
}

} // namespace strata
