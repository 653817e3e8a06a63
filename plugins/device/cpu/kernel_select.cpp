// Run-time choice between the scalar and AVX2+FMA+F16C kernel sets.
#include "cpu_kernels.hpp"

#include <strata/cpu_features.hpp>

namespace strata::cpu {

#if !defined(STRATA_CPU_HAVE_AVX2_KERNELS)
const kernels *avx2_kernels() { return nullptr; }
#endif

const kernels &select_kernels() {
    const kernels *fast = avx2_kernels();
    if (fast != nullptr && !strata::plugin::scalar_forced_by_environment() && strata::plugin::cpu_has_avx2_fma_f16c()) return *fast;
    return scalar_kernels();
}

} // namespace strata::cpu
