// The AVX2+FMA+F16C dot kernels of the group-integer formats: eight elements at a time widened from bytes (or
// nibbles) to floats, minus the zero point, FMA'd with x; each block's sum times its scale. Compiled with -mavx2
// -mfma -mf16c and called only after cpu_has_avx2_fma_f16c(); elsewhere they are the portable kernels.
#include "group_int_formats.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <strata/avx2_sum.hpp>

namespace strata::group_int {

namespace {

// (q - z) * x for eight q bytes in the low half of `q8`, added to acc.
inline __m256 fma8(__m128i q8, __m256 z, const float *x, __m256 acc) {
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8));
    return _mm256_fmadd_ps(_mm256_sub_ps(q, z), _mm256_loadu_ps(x), acc);
}

struct kernels {
    template <int Bits, int G> static float dot(const void *row, const float *x, int64_t n);
};

template <int Bits, int G> float kernels::dot(const void *row, const float *x, int64_t n) {
    constexpr format f{0, Bits, G};
    const auto *b = static_cast<const uint8_t *>(row);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    __m256 total = _mm256_setzero_ps();
    for (int64_t g = 0; g < n / G; ++g, b += f.block_bytes(), x += G) {
        const __m256 z = _mm256_set1_ps(static_cast<float>(block_zero(b)));
        uint16_t h;
        std::memcpy(&h, b, 2);
        const __m256 s = _mm256_set1_ps(_cvtsh_ss(h));
        const uint8_t *qs = b + 4;
        __m256 acc = _mm256_setzero_ps();
        if constexpr (Bits == 4) {
            for (int c = 0; c < G / 32; ++c) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs + 16 * c));
                const __m128i lo = _mm_and_si128(v, low4);
                const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
                const float *xc = x + 32 * c;
                acc = fma8(lo, z, xc, acc);
                acc = fma8(_mm_srli_si128(lo, 8), z, xc + 8, acc);
                acc = fma8(hi, z, xc + 16, acc);
                acc = fma8(_mm_srli_si128(hi, 8), z, xc + 24, acc);
            }
        } else {
            for (int i = 0; i < G; i += 16) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs + i));
                acc = fma8(v, z, x + i, acc);
                acc = fma8(_mm_srli_si128(v, 8), z, x + i + 8, acc);
            }
        }
        total = _mm256_fmadd_ps(acc, s, total);
    }
    return strata::plugin::avx2_sum(total);
}

} // namespace

dot_fn dot_avx2_for(uint32_t type) { return dot_for<kernels>(type); }

} // namespace strata::group_int

#else

namespace strata::group_int {
dot_fn dot_avx2_for(uint32_t type) { return dot_scalar_for(type); }
} // namespace strata::group_int

#endif
