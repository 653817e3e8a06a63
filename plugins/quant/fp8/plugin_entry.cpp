// The fp8_quants plugin: exports Strata's FP8 formats (the repacked compressed-tensors / fp8 weights) as quant
// descriptors (kernel_select.cpp).
#include "fp8_formats.hpp"

#include <strata/plugin.hpp>

namespace {

const strata_plugin_info &fp8_plugin_info() {
    static const strata_descriptor_header *const *const headers = [] {
        static const strata_descriptor_header *list[strata::fp8::format_count];
        for (int i = 0; i < strata::fp8::format_count; ++i) list[i] = &strata::fp8::descriptors()[i].header;
        return list;
    }();
    static const strata_plugin_info info{
        sizeof(strata_plugin_info),
        STRATA_ABI_MAJOR,
        STRATA_ABI_MINOR,
        static_cast<uint32_t>(strata::fp8::format_count),
        "fp8_quants",
        "0.1.0",
        "MIT",
        "FP8 weights (compressed-tensors and fp8 checkpoints repacked at load): e4m3 in blocks of 32 or 128 with an "
        "f32 scale each; AVX2+F16C and scalar dot kernels",
        headers,
        nullptr,
        0,
    };
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(fp8_plugin_info())
