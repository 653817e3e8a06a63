// Run-time choice between the AVX2 and the scalar kernels of the group-integer formats, and the descriptor table
// that carries them (STRATA_FORCE_SCALAR set to anything but "" or "0" before the plugin loads forces scalar).
#include "group_int_formats.hpp"

#include <strata/cpu_features.hpp>
#include <strata/plugin.hpp>

namespace strata::group_int {

namespace {

const char *kernel_name_scalar() { return "scalar"; }
const char *kernel_name_avx2() { return "avx2+fma"; }

template <uint32_t Type> void dequantize_of(const void *src, float *dst, int64_t n) {
    dequantize_row(*find_format(Type), src, dst, n);
}
template <uint32_t Type> void quantize_of(const float *src, void *dst, int64_t n) {
    quantize_row(*find_format(Type), src, dst, n);
}
template <uint32_t Type> int64_t nonfinite_of(const void *row, int64_t n) {
    return find_nonfinite(*find_format(Type), row, n);
}

template <uint32_t Type> strata_quant_desc describe(const char *name, bool avx2) {
    const format &f = *find_format(Type);
    return plugin::make_quant_desc(name, Type, static_cast<uint32_t>(f.group), f.block_bytes(),
                                   {dequantize_of<Type>, quantize_of<Type>, avx2 ? dot_avx2_for(Type) : dot_scalar_for(Type),
                                    avx2 ? kernel_name_avx2 : kernel_name_scalar, nonfinite_of<Type>});
}

} // namespace

bool cpu_has_avx2_fma_f16c() { return plugin::cpu_has_avx2_fma_f16c(); }

const strata_quant_desc *descriptors() {
    static const strata_quant_desc *table = [] {
        const bool avx2 = !plugin::scalar_forced_by_environment() && cpu_has_avx2_fma_f16c();
        static const strata_quant_desc list[format_count] = {
            describe<STRATA_TYPE_Q4_G32>("q4_g32", avx2),   describe<STRATA_TYPE_Q4_G64>("q4_g64", avx2),
            describe<STRATA_TYPE_Q4_G128>("q4_g128", avx2), describe<STRATA_TYPE_Q8_G32>("q8_g32", avx2),
            describe<STRATA_TYPE_Q8_G64>("q8_g64", avx2),   describe<STRATA_TYPE_Q8_G128>("q8_g128", avx2),
        };
        return list;
    }();
    return table;
}

} // namespace strata::group_int

