// The ggml_quants plugin: exports the five ggml block formats as quant descriptors. The kernel set (AVX2 or
// scalar, see kernel_select.cpp and STRATA_FORCE_SCALAR) is chosen once, the first time the host calls the entry.
#include "ggml_quants.hpp"

#include <strata/plugin.hpp>

namespace {

const strata_plugin_info &ggml_quants_plugin_info() {
    static const strata_descriptor_header *const *const headers = [] {
        static const strata_descriptor_header *list[strata::quants::descriptor_count];
        const strata_quant_desc *table = strata::quants::descriptors();
        for (int i = 0; i < strata::quants::descriptor_count; ++i) list[i] = &table[i].header;
        return list;
    }();
    static const strata_plugin_info info{
        sizeof(strata_plugin_info),
        STRATA_ABI_MAJOR,
        STRATA_ABI_MINOR,
        static_cast<uint32_t>(strata::quants::descriptor_count),
        "ggml_quants",
        "0.1.0",
        "MIT",
        "ggml block formats F32, F16, BF16, Q8_0, Q4_0 with AVX2 and scalar float and integer dot kernels",
        headers,
        nullptr,
        0,
    };
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(ggml_quants_plugin_info())
