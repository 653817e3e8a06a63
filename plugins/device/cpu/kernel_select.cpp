// Run-time choice between the scalar, AVX2+FMA+F16C and AVX-512 kernel sets.
#include "cpu_kernels.hpp"

#include <strata/cpu_features.hpp>

namespace strata::cpu {

#if !defined(STRATA_CPU_HAVE_AVX2_KERNELS)
const kernels *avx2_kernels() { return nullptr; }
const kernels *avx512_kernels() { return nullptr; }
#endif

const kernels &select_kernels() {
    const kernels *fast = avx2_kernels();
    if (fast == nullptr || strata::plugin::scalar_forced_by_environment() || !strata::plugin::cpu_has_avx2_fma_f16c())
        return scalar_kernels();
    // The CPU is asked first: avx512_kernels() itself runs AVX-512 instructions.
    if (strata::plugin::avx512_disabled_by_environment() || !strata::plugin::cpu_has_avx512_f_vl()) return *fast;
    const kernels *wide = avx512_kernels();
    return wide != nullptr ? *wide : *fast;
}

} // namespace strata::cpu
