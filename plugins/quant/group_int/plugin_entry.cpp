// The group_int_quants plugin: exports Strata's group-integer formats (the repacked GPTQ / AWQ weights) as quant
// descriptors (kernel_select.cpp).
#include "group_int_formats.hpp"

#include <strata/plugin.hpp>

namespace {

const strata_plugin_info &group_int_plugin_info() {
    static const strata_descriptor_header *const *const headers = [] {
        static const strata_descriptor_header *list[strata::group_int::format_count];
        for (int i = 0; i < strata::group_int::format_count; ++i) list[i] = &strata::group_int::descriptors()[i].header;
        return list;
    }();
    static const strata_plugin_info info{
        sizeof(strata_plugin_info),
        STRATA_ABI_MAJOR,
        STRATA_ABI_MINOR,
        static_cast<uint32_t>(strata::group_int::format_count),
        "group_int_quants",
        "0.1.0",
        "MIT",
        "group-integer weights (GPTQ and AWQ checkpoints repacked at load): 4 and 8 bits in groups of 32, 64 or 128 "
        "with a scale and zero point each; AVX2 and scalar dot kernels",
        headers,
        nullptr,
        0,
    };
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(group_int_plugin_info())
