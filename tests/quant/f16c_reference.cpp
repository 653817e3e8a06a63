#include "f16c_reference.hpp"

#if defined(__x86_64__) && defined(__F16C__)
#include <cpuid.h>
#include <immintrin.h>

bool strata_test_cpu_has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

uint16_t strata_test_f16c_fp32_to_fp16(float f) {
    return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
#else
bool strata_test_cpu_has_f16c() { return false; }
uint16_t strata_test_f16c_fp32_to_fp16(float) { return 0; }
#endif
