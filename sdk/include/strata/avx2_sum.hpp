// The horizontal sum of eight float lanes for plugins' AVX2 kernels, in one fixed order (lane i + lane i + 4, then
// the pairs, then the last two), so kernels that share it reduce alike. Include it only from translation units
// compiled with -mavx2: it has internal linkage, so a unit built without AVX2 never links to this copy.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

namespace strata::plugin {

static inline __attribute__((always_inline)) float avx2_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

} // namespace strata::plugin

#endif
