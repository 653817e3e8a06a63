// Example quant plugin: plain F32 (GGUF type 0), the simplest "block format" there is — one element per block.
// It shows the shape of a quant descriptor; a real format (Q8_0, Q4_0...) differs only in the three functions.
//
// Note: the runtime refuses two quants for the same ggml_type, so load this instead of, not next to, a plugin
// that already handles F32.
#include <strata/plugin.hpp>

#include <cstddef>
#include <cstring>

namespace {

// Reference conversions. n is a multiple of block_elems (1 here). Thread-safe, no allocation: the ABI requires
// both because the runtime calls them from many worker threads in the hot path.
void dequantize_row(const void *src, float *dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }
void quantize_row(const float *src, void *dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }

float dot_f32(const void *row, const float *x, int64_t n) {
    const float *w = static_cast<const float *>(row);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
    return sum;
}

// Optional slot: tells `runtime plugins -v` and benchmarks which kernel was picked.
const char *kernel_name() { return "scalar"; }

// Descriptors and info live in static storage: the host keeps pointers to them for as long as the library is
// loaded and never frees them.
const strata_quant_desc &descriptor() {
    static const strata_quant_desc desc = [] {
        strata_quant_desc d{};
        // required_size = offset of the first optional slot: everything before it must be set.
        d.header = strata::plugin::make_header<strata_quant_desc>(STRATA_KIND_QUANT, "example_f32",
                                                                  offsetof(strata_quant_desc, kernel_name));
        // --- required ---
        d.ggml_type = 0; // GGUF F32
        d.block_elems = 1;
        d.block_bytes = sizeof(float);
        d.dequantize_row = &dequantize_row;
        d.quantize_row = &quantize_row;
        d.dot_f32 = &dot_f32;
        // --- optional (the host checks STRATA_HAS_SLOT before calling) ---
        d.kernel_name = &kernel_name;
        return d;
    }();
    return desc;
}

const strata_plugin_info &plugin_info() {
    static const strata_descriptor_header *const descriptors[] = {&descriptor().header};
    // make_info takes the counts from the arrays and the ABI version this plugin is compiled against; the name is
    // also the name of the plugin's config table (it declares no keys).
    static const strata_plugin_info info = strata::plugin::make_info(
        "example_quant", "0.1.0", "MIT", "SDK example: F32 as a quant format", descriptors);
    return info;
}

} // namespace

// The one exported symbol. It must be cheap and must not throw.
STRATA_PLUGIN_DEFINE(plugin_info())
