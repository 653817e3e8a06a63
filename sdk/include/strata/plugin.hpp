// Header-only C++ helpers for plugin authors. Everything here compiles into the plugin; nothing C++ crosses the ABI.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <utility>

namespace strata::plugin {

// Writes code and a printf-style message into a caller-owned status; returns code so `return fail(...)` reads well.
inline int32_t fail(strata_status *st, int32_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
inline int32_t fail(strata_status *st, int32_t code, const char *fmt, ...) {
    if (st != nullptr) {
        st->code = code;
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(st->message, sizeof st->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

inline void ok(strata_status *st) {
    if (st != nullptr) {
        st->code = STRATA_OK;
        st->message[0] = '\0';
    }
}

// Runs f() and turns any exception into a status, so none crosses the C boundary. f returns int32_t (a strata_code).
template <class F> int32_t guarded(strata_status *st, F &&f) noexcept {
    try {
        return std::forward<F>(f)();
    } catch (const std::bad_alloc &) {
        return fail(st, STRATA_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception &e) {
        return fail(st, STRATA_ERR_INTERNAL, "%s", e.what());
    } catch (...) {
        return fail(st, STRATA_ERR_INTERNAL, "unknown exception");
    }
}

// Same for functions returning a pointer (create): nullptr plus a status on failure.
template <class T, class F> T *guarded_create(strata_status *st, F &&f) noexcept {
    try {
        return std::forward<F>(f)();
    } catch (const std::bad_alloc &) {
        fail(st, STRATA_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception &e) {
        fail(st, STRATA_ERR_INTERNAL, "%s", e.what());
    } catch (...) {
        fail(st, STRATA_ERR_INTERNAL, "unknown exception");
    }
    return nullptr;
}

// Typed access to the plugin's validated config table.
class config {
  public:
    explicit config(const strata_config_view *v) : v_(v) {}
    std::optional<bool> get_bool(const char *key) const {
        int32_t out = 0;
        if (v_ && v_->get_bool && v_->get_bool(v_->ctx, key, &out)) return out != 0;
        return std::nullopt;
    }
    std::optional<int64_t> get_int(const char *key) const {
        int64_t out = 0;
        if (v_ && v_->get_int && v_->get_int(v_->ctx, key, &out)) return out;
        return std::nullopt;
    }
    std::optional<double> get_float(const char *key) const {
        double out = 0;
        if (v_ && v_->get_float && v_->get_float(v_->ctx, key, &out)) return out;
        return std::nullopt;
    }
    std::optional<std::string> get_string(const char *key) const {
        const char *out = nullptr;
        if (v_ && v_->get_string && v_->get_string(v_->ctx, key, &out) && out) return std::string(out);
        return std::nullopt;
    }

  private:
    const strata_config_view *v_;
};

// Logs through the host (stderr, with the plugin's name).
inline void log(const strata_host_services *host, int32_t level, const char *plugin, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline void log(const strata_host_services *host, int32_t level, const char *plugin, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (host != nullptr && host->log != nullptr) {
        host->log(host->ctx, level, plugin, buf);
    } else {
        std::fprintf(stderr, "[%s] %s\n", plugin, buf);
    }
}

// The view's input order (ABI 1.19: strata_tensor_view.input_order, a GPTQ act-order weight), or NULL when it has
// none or the view predates the field.
inline const int32_t *input_order_of(const strata_tensor_view *w) {
    return w != nullptr && w->struct_size >= offsetof(strata_tensor_view, input_order) + sizeof(w->input_order)
               ? w->input_order
               : nullptr;
}

// Whether the view is a 3-D tensor of several experts (ABI 1.17's n_dims / ne: [cols, rows per expert, experts]),
// which only matmul_id reads; false when it has one expert or the view predates the fields.
inline bool holds_experts(const strata_tensor_view *w) {
    return w != nullptr && w->struct_size >= offsetof(strata_tensor_view, ne) + sizeof(w->ne) && w->n_dims >= 3 &&
           w->ne[2] > 1;
}

// Fills a descriptor header: required_size is the offset of the first optional slot.
template <class Desc> constexpr strata_descriptor_header make_header(strata_kind kind, const char *name, size_t required_size) {
    return strata_descriptor_header{static_cast<uint32_t>(sizeof(Desc)), static_cast<uint32_t>(required_size),
                                    static_cast<uint32_t>(kind), 0u, name};
}

// The conversions and float dot of one block format, for make_quant_desc.
struct quant_format_fns {
    void (*dequantize_row)(const void *src, float *dst, int64_t n);
    void (*quantize_row)(const float *src, void *dst, int64_t n);
    float (*dot_f32)(const void *row, const float *x, int64_t n);
    const char *(*kernel_name)(void);
    int64_t (*find_nonfinite)(const void *row, int64_t n); // NULL: no damage check
};

// A quant descriptor for a block format with the float dot path; a format with the integer path sets
// act_block_bytes, quantize_activations, dot_act (and dot_act_multi) on the result.
inline strata_quant_desc make_quant_desc(const char *name, uint32_t type, uint32_t block_elems, uint32_t block_bytes,
                                         const quant_format_fns &f) {
    strata_quant_desc d{};
    d.header = make_header<strata_quant_desc>(STRATA_KIND_QUANT, name, offsetof(strata_quant_desc, kernel_name));
    d.ggml_type = type;
    d.block_elems = block_elems;
    d.block_bytes = block_bytes;
    d.dequantize_row = f.dequantize_row;
    d.quantize_row = f.quantize_row;
    d.dot_f32 = f.dot_f32;
    d.kernel_name = f.kernel_name;
    d.find_nonfinite = f.find_nonfinite;
    return d;
}

// The plugin's info from its descriptor and config-key arrays, with the ABI version it is built against and the
// counts taken from the arrays themselves (so they cannot disagree).
template <size_t ND, size_t NK>
constexpr strata_plugin_info make_info(const char *name, const char *version, const char *license,
                                       const char *description, const strata_descriptor_header *const (&descriptors)[ND],
                                       const strata_config_key (&config_keys)[NK]) {
    return strata_plugin_info{static_cast<uint32_t>(sizeof(strata_plugin_info)), STRATA_ABI_MAJOR, STRATA_ABI_MINOR,
                              static_cast<uint32_t>(ND), name, version, license, description, descriptors,
                              config_keys, static_cast<uint32_t>(NK)};
}

// The same for a plugin without config keys.
template <size_t ND>
constexpr strata_plugin_info make_info(const char *name, const char *version, const char *license,
                                       const char *description, const strata_descriptor_header *const (&descriptors)[ND]) {
    return strata_plugin_info{static_cast<uint32_t>(sizeof(strata_plugin_info)), STRATA_ABI_MAJOR, STRATA_ABI_MINOR,
                              static_cast<uint32_t>(ND), name, version, license, description, descriptors, nullptr, 0};
}

} // namespace strata::plugin

// Defines the exported entry point returning `info` (a static strata_plugin_info). Checks the host's major.
#define STRATA_PLUGIN_DEFINE(info_expr)                                                                              \
    extern "C" STRATA_EXPORT const strata_plugin_info *strata_plugin_entry(const strata_host_services *host,         \
                                                                            strata_status *st) {                     \
        (void)host;                                                                                                  \
        (void)st;                                                                                                    \
        return &(info_expr);                                                                                         \
    }
