// Run-time choice between the scalar and AVX2+FMA kernel sets.
#include "cpu_kernels.hpp"

#include <cstdlib>
#include <cstring>

namespace strata::cpu {

#if !defined(STRATA_CPU_HAVE_AVX2_KERNELS)
const kernels *avx2_kernels() { return nullptr; }
#endif

namespace {

bool scalar_forced() {
    const char *v = std::getenv("STRATA_FORCE_SCALAR");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

} // namespace

const kernels &select_kernels() {
    const kernels *fast = avx2_kernels();
    if (fast != nullptr && !scalar_forced() && cpu_has_avx2_fma()) return *fast;
    return scalar_kernels();
}

} // namespace strata::cpu
