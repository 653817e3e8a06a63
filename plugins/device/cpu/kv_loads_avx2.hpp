// Eight values of an FP8 or q8_0 KV row widened to float exactly, for the AVX2 and AVX-512 kernel sets (both compile
// with the AVX2+FMA+F16C flags). Internal linkage: each kernel translation unit gets its own copies, so the linker
// never picks one compiled under another unit's target flags.
#pragma once

#include <strata/kv_q8_0.hpp>

#include <immintrin.h>

#include <cstdint>

namespace strata::cpu {
namespace {

// Through F16C: an e5m2 byte is the top byte of a half (NaN and inf included); an e4m3 byte's exponent and mantissa fit
// a half's fields as its value / 256 (subnormals included), times 256 after widening (exact), and its NaN codes
// (S.1111.111) are set to NaN. The same values as fp8_tables().
inline __m256 load_e5m2(const uint8_t *p) {
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
    return _mm256_cvtph_ps(_mm_slli_epi16(w, 8));
}
inline __m256 load_e4m3(const uint8_t *p) {
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
    const __m128i magnitude = _mm_and_si128(w, _mm_set1_epi16(0x7f));
    const __m128i half =
        _mm_or_si128(_mm_slli_epi16(magnitude, 7), _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8));
    const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(half), _mm256_set1_ps(256.0f));
    const __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(magnitude, _mm_set1_epi16(0x7f))));
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), nan); // the quiet NaN
}

// A q8_0 group's scale as a float (exact).
inline float q8_scale(const kv_q8_0::group &g) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(g.d))); }

// 8 of a q8_0 group's values (q[i0 .. i0 + 8) times its scale d), exactly: an int8 and a half's value are exact
// floats and their product has at most 19 significant bits.
inline __m256 load_q8(const int8_t *q, __m256 d) {
    const __m256i wide = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(q)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(wide), d);
}

} // namespace
} // namespace strata::cpu
