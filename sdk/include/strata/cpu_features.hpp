// Run-time CPU feature checks for plugins that carry SIMD kernels (header-only; x86-64, false elsewhere): a plugin
// compiles its AVX2 file with -mavx2 -mfma -mf16c and calls it only when these say the CPU (and OS) support it.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>

namespace strata::plugin {

// AVX2, FMA and F16C. __builtin_cpu_supports also checks that the OS saves YMM state; clang 14 does not know "f16c",
// so that bit comes from CPUID leaf 1 directly (F16C needs the same YMM state as AVX2, already checked).
inline bool cpu_has_avx2_fma_f16c() {
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
    return false;
#endif
}

// AVX-512 F and VL; __builtin_cpu_supports also checks that the OS saves ZMM state.
inline bool cpu_has_avx512_f_vl() {
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

// STRATA_FORCE_SCALAR set to anything but "" or "0": plugins use their portable kernels (debugging, and tests that
// compare both paths).
inline bool scalar_forced_by_environment() {
    const char *v = std::getenv("STRATA_FORCE_SCALAR");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

// STRATA_NO_AVX512 set to anything but "" or "0": plugins keep to their AVX2 kernels on a CPU with AVX-512 (to
// measure what a CPU without it gets, and for debugging); results are the same bits either way.
inline bool avx512_disabled_by_environment() {
    const char *v = std::getenv("STRATA_NO_AVX512");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

} // namespace strata::plugin
