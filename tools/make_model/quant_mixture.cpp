#include "quant_mixture.hpp"

#include "common/error.hpp"

#include <map>

namespace strata::tools {
namespace {

enum : uint32_t {
    t_f32 = 0, t_f16 = 1, t_q4_0 = 2, t_q4_1 = 3, t_q5_0 = 6, t_q5_1 = 7, t_q8_0 = 8, t_q2_k = 10, t_q3_k = 11,
    t_q4_k = 12, t_q5_k = 13, t_q6_k = 14, t_iq4_nl = 20, t_iq4_xs = 23, t_bf16 = 30,
};

const std::map<std::string, mixture> &mixtures() {
    static const std::map<std::string, mixture> table = {
        {"f32", {"f32", t_f32, 0}},          {"f16", {"f16", t_f16, 1}},          {"bf16", {"bf16", t_bf16, 32}},
        {"q8_0", {"q8_0", t_q8_0, 7}},       {"q4_0", {"q4_0", t_q4_0, 2}},       {"q4_1", {"q4_1", t_q4_1, 3}},
        {"q5_0", {"q5_0", t_q5_0, 8}},       {"q5_1", {"q5_1", t_q5_1, 9}},       {"q2_k", {"q2_k", t_q2_k, 10}},
        {"q3_k_s", {"q3_k_s", t_q3_k, 11}},  {"q3_k_m", {"q3_k_m", t_q3_k, 12}},  {"q3_k_l", {"q3_k_l", t_q3_k, 13}},
        {"q4_k_s", {"q4_k_s", t_q4_k, 14}},  {"q4_k_m", {"q4_k_m", t_q4_k, 15}},  {"q5_k_s", {"q5_k_s", t_q5_k, 16}},
        {"q5_k_m", {"q5_k_m", t_q5_k, 17}},  {"q6_k", {"q6_k", t_q6_k, 18}},      {"iq4_nl", {"iq4_nl", t_iq4_nl, 25}},
        {"iq4_xs", {"iq4_xs", t_iq4_xs, 30}},
    };
    return table;
}

bool quantized(uint32_t t) { return t != t_f32 && t != t_f16 && t != t_bf16; }

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool ends_with(const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's tensor_type_fallback: a type whose block does not divide the row length gives way to a 32-element
// one, and F16 when even that does not fit.
uint32_t fallback(uint32_t type, int64_t cols, const block_size_fn &block_elems_of) {
    if (cols % block_elems_of(type) == 0) return type;
    uint32_t to = type;
    switch (type) {
    case t_iq4_xs: to = t_iq4_nl; break;
    case t_q2_k:
    case t_q3_k: to = t_q4_0; break;
    case t_q4_k: to = t_q5_0; break;
    case t_q5_k: to = t_q5_1; break;
    case t_q6_k: to = t_q8_0; break;
    default: break;
    }
    return cols % block_elems_of(to) == 0 ? to : t_f16;
}

} // namespace

mixture mixture_named(const std::string &name) {
    const auto it = mixtures().find(name);
    if (it == mixtures().end()) {
        std::string names;
        for (const auto &n : mixture_names()) names += (names.empty() ? "" : ", ") + n;
        fail("unknown --type {} (one of: {})", name, names);
    }
    return it->second;
}

std::vector<std::string> mixture_names() {
    std::vector<std::string> names;
    for (const auto &[n, m] : mixtures()) names.push_back(n);
    return names;
}

uint32_t tensor_type(const mixture &m, const model_shape &shape, const std::string &tensor, int64_t layer,
                     int64_t cols, bool pure, const block_size_fn &block_elems_of) {
    uint32_t type = m.base_type;
    if (!quantized(type)) return type;
    if (pure) return fallback(type, cols, block_elems_of);
    const std::string &f = m.name;
    const bool output = tensor == "output.weight" || (shape.tied && tensor == "token_embd.weight");
    if (output) {
        // The output matrix: Q6_K for every quantized mixture but Q8_0 (Q8_0 when the row length does not fit).
        if (cols % block_elems_of(type) != 0) type = t_q8_0;
        else if (type != t_q8_0) type = t_q6_k;
    } else if (ends_with(tensor, "attn_v.weight") || ends_with(tensor, "attn_qkv.weight")) { // "attn_v-like"
        if (f == "q2_k") type = shape.n_gqa >= 4 ? t_q4_k : t_q3_k;
        else if (f == "q3_k_m") type = layer < 2 ? t_q5_k : t_q4_k;
        else if (f == "q3_k_l") type = t_q5_k;
        else if ((f == "iq4_nl" || f == "iq4_xs") && shape.n_gqa >= 4) type = t_q5_k;
        else if ((f == "q4_k_m" || f == "q5_k_m") && use_more_bits(layer, shape.n_layer)) type = t_q6_k;
        else if (f == "q4_k_s" && layer < 4) type = t_q5_k;
        if (shape.n_expert == 8) type = t_q8_0; // "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
    } else if (ends_with(tensor, "attn_k.weight")) {
        if (shape.n_expert == 8) type = t_q8_0;
    } else if (tensor.find("ffn_down") != std::string::npos) { // ffn_down, ffn_down_exps, ffn_down_shexp
        const int64_t n = shape.n_layer;
        if (f == "q2_k") type = t_q3_k;
        else if (f == "q3_k_m") type = layer < n / 16 ? t_q5_k : t_q4_k;
        else if (f == "q3_k_l") type = t_q5_k;
        else if (f == "q4_k_m") {
            if (use_more_bits(layer, n)) type = t_q6_k;
        } else if (layer < n / 8 && (f == "iq4_nl" || f == "iq4_xs")) type = t_q5_k;
        else if (f == "q5_k_m" && use_more_bits(layer, n)) type = t_q6_k;
        else if (f == "q4_k_s" && layer < n / 8) type = t_q5_k;
    } else if (ends_with(tensor, "attn_output.weight")) {
        if (shape.n_expert == 8) {
            if (f == "q2_k" || f == "q3_k_s" || f == "q3_k_m" || f == "iq4_nl" || f == "q4_k_s" || f == "q4_k_m" ||
                f == "iq4_xs")
                type = t_q5_k;
        } else if (f == "q2_k") type = t_q3_k;
        else if (f == "q3_k_m") type = t_q4_k;
        else if (f == "q3_k_l") type = t_q5_k;
    }
    return fallback(type, cols, block_elems_of);
}

} // namespace strata::tools
