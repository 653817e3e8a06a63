// Reading a model source (strata_model_source): metadata with defaults, and weights with their shapes checked.
#pragma once

#include "decoder_family.hpp"

#include <strata/plugin_abi.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace strata::decoder {

// Whether a view carries the file's dimensions (ABI 1.17 hosts).
inline bool has_dims(const strata_tensor_view &t) {
    return t.struct_size >= offsetof(strata_tensor_view, ne) + sizeof(t.ne) && t.n_dims > 0 && t.n_dims <= 4;
}

// The file's dimensions where the host gives them, else [cols, rows].
inline std::string fmt_shape(const strata_tensor_view &t) {
    if (!has_dims(t)) return "[" + std::to_string(t.cols) + ", " + std::to_string(t.rows) + "]";
    std::string out = "[";
    for (int32_t i = 0; i < t.n_dims; ++i) out += (i > 0 ? ", " : "") + std::to_string(t.ne[i]);
    return out + "]";
}

inline uint64_t meta_u64(const strata_model_source *src, const std::string &key, bool required, uint64_t fallback) {
    uint64_t v = 0;
    if (src->get_u64(src->ctx, key.c_str(), &v)) return v;
    if (required) throw std::runtime_error("missing required metadata key '" + key + "'");
    return fallback;
}

inline double meta_f64(const strata_model_source *src, const std::string &key, double fallback) {
    double v = 0;
    if (src->get_f64(src->ctx, key.c_str(), &v)) return v;
    return fallback;
}

// Looks up a weight and checks its GGUF shape [cols (ne0), rows (ne1), stack (ne2)]: the view's cols and rows (stack
// matrices of `rows` read as one), and where the host gives the file's dimensions (ABI 1.17) each of them, as
// llama.cpp's create_tensor does (so [n_embd, n_expert, n_ff] is not taken for [n_embd, n_ff, n_expert]).
inline strata_tensor_view tensor(const strata_model_source *src, const family &fam, const std::string &name,
                                 int64_t cols, int64_t rows, bool required = true, bool *found = nullptr,
                                 int64_t stack = 1) {
    strata_tensor_view t{};
    t.struct_size = sizeof t;
    if (!src->get_tensor(src->ctx, name.c_str(), &t)) {
        if (found) *found = false;
        if (!required) return strata_tensor_view{};
        throw std::runtime_error("missing tensor '" + name + "'; the file is not a complete " + fam.arch + " model");
    }
    if (found) *found = true;
    const bool dims_differ = has_dims(t) && (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != stack || t.ne[3] != 1);
    if (t.cols != cols || t.rows != rows * stack || dims_differ) {
        throw std::runtime_error("tensor '" + name + "' has shape " + fmt_shape(t) + ", expected [" +
                                 std::to_string(cols) + ", " + std::to_string(rows) +
                                 (stack != 1 ? ", " + std::to_string(stack) : std::string()) +
                                 "] from the model's hyperparameters");
    }
    if (t.quant == nullptr) throw std::runtime_error("tensor '" + name + "' has a type no quant plugin provides");
    return t;
}

// A string key, or `fallback` when the file lacks it.
inline std::string meta_str(const strata_model_source *src, const std::string &key, const std::string &fallback) {
    const char *v = nullptr;
    return src->get_str(src->ctx, key.c_str(), &v) && v != nullptr ? std::string(v) : fallback;
}

} // namespace strata::decoder
