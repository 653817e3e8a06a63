// The AVX2+FMA+F16C dot kernels of the FP8 formats: eight e4m3 bytes at a time moved into IEEE half fields (the
// value / 256, exact: e4m3's exponent and mantissa fit half's), widened with F16C and FMA'd with x; each block's sum
// times its scale * 256. Compiled with -mavx2 -mfma -mf16c and called only after the CPU check; elsewhere they are
// the portable kernels. A NaN byte (0x7f) reads as 480 here, not NaN: --check-tensors finds such damage.
#include "fp8_formats.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <strata/avx2_sum.hpp>

namespace strata::fp8 {

namespace {

// The eight e4m3 bytes in the low half of `q8` as floats / 256 (e4m3_as_half_over_256, then F16C).
inline __m256 widen8(__m128i q8) {
    const __m128i w = _mm_cvtepu8_epi16(q8);
    const __m128i magnitude = _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7f)), 7);
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8);
    return _mm256_cvtph_ps(_mm_or_si128(magnitude, sign));
}

struct kernels {
    template <int B> static float dot(const void *row, const float *x, int64_t n);
};

template <int B> float kernels::dot(const void *row, const float *x, int64_t n) {
    constexpr format f{0, B};
    const auto *b = static_cast<const uint8_t *>(row);
    __m256 total = _mm256_setzero_ps();
    for (int64_t g = 0; g < n / B; ++g, b += f.block_bytes(), x += B) {
        const uint8_t *qs = b + 4;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (int i = 0; i < B; i += 16) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs + i));
            acc0 = _mm256_fmadd_ps(widen8(v), _mm256_loadu_ps(x + i), acc0);
            acc1 = _mm256_fmadd_ps(widen8(_mm_srli_si128(v, 8)), _mm256_loadu_ps(x + i + 8), acc1);
        }
        total = _mm256_fmadd_ps(_mm256_add_ps(acc0, acc1), _mm256_set1_ps(block_scale(b) * 256.0f), total);
    }
    return strata::plugin::avx2_sum(total);
}

} // namespace

dot_fn dot_avx2_for(uint32_t type) { return dot_for<kernels>(type); }

} // namespace strata::fp8

#else

namespace strata::fp8 {
dot_fn dot_avx2_for(uint32_t type) { return dot_scalar_for(type); }
} // namespace strata::fp8

#endif
