// AVX2 integer dot path: the activation quantizer (bit-exact with the reference Q8_0 quantizer) and the
// Q8_0 x Q8 / Q4_0 x Q8 block dots. Compiled with -mavx2 -mfma -mf16c like dot_avx2.cpp and, for the same reason,
// calls only intrinsics and functions with internal linkage (see the note at the top of dot_avx2.cpp).
//
// _mm256_maddubs_epi16 multiplies unsigned by signed bytes and adds adjacent pairs into int16;
// _mm256_madd_epi16 against ones widens to 8 int32 partial sums per block. The pairs never saturate:
//  - Q8_0: the weights are signed, so the kernel feeds |w| and a * sign(w) (_mm256_sign_epi8), whose products equal
//    w * a; |pair| <= 2 * 128 * 127 < 32768 for activations in [-127, 127], which is all the quantizer writes.
//  - Q4_0: the raw nibbles u in [0, 15] are already unsigned; sum (u - 8) * a = sum u * a - 8 * sum a, and the
//    activation block carries 8 * sum a, so the offset costs one subtraction per block. |pair| <= 2 * 15 * 127.
#include "ggml_quants.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "int_dot_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif
#include <immintrin.h>

#include "int_dot_avx2_blocks.hpp"

namespace strata::quants {
namespace {

STRATA_KERNEL_INLINE float horizontal_max(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// roundf(v) (halves away from zero) clamped to [-127, 127], NaN -> 0: the reference quantizer's round_to_q8.
// Truncation plus a +-1 step when the dropped fraction is >= 0.5; v - trunc(v) is exact for every float.
STRATA_KERNEL_INLINE __m256i round_to_q8(__m256 v) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(v, t));
    const __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign_bit), _mm256_set1_ps(1.0f)); // copysign(1, v)
    __m256 r = _mm256_add_ps(t, _mm256_and_ps(step, _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ)));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    r = _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); // NaN lanes (also inf * 0) become +0
    return _mm256_cvtps_epi32(r);
}

void quantize_block(const float *x, block_q8_act &out) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256 v0 = _mm256_loadu_ps(x + 0), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    // max(a, b) = a > b ? a : b per lane, the reference's comparison; order does not matter for non-NaN input.
    const __m256 m01 = _mm256_max_ps(_mm256_andnot_ps(sign_bit, v0), _mm256_andnot_ps(sign_bit, v1));
    const __m256 m23 = _mm256_max_ps(_mm256_andnot_ps(sign_bit, v2), _mm256_andnot_ps(sign_bit, v3));
    const float amax = horizontal_max(_mm256_max_ps(m01, m23));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    // The reference stores d as binary16 (round-to-nearest-even); keep exactly that value, widened.
    out.d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT)));

    const __m256 vid = _mm256_set1_ps(id);
    const __m256i i0 = round_to_q8(_mm256_mul_ps(v0, vid)), i1 = round_to_q8(_mm256_mul_ps(v1, vid));
    const __m256i i2 = round_to_q8(_mm256_mul_ps(v2, vid)), i3 = round_to_q8(_mm256_mul_ps(v3, vid));
    // The packs work per 128-bit lane, leaving 4-element groups in the order 0 2 4 6 1 3 5 7; the permute undoes it.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out.qs), ordered);

    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    out.sum_x8 = 8 * _mm_cvtsi128_si32(s4);
    // A NaN input makes the scale NaN (see quantize_activations_q8_scalar).
    const __m256 unordered = _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q));
    if (_mm256_movemask_ps(unordered) != 0) out.d = __builtin_nanf("");
}

// One block: d_w * d_a * (8 int32 partial sums of the integer dot), added to acc.
STRATA_KERNEL_INLINE __m256 scale_and_add(__m256i sums, const half_bits *w_scale, const block_q8_act &a, __m256 acc) {
    const __m256 d = _mm256_set1_ps(block_scale(w_scale) * a.d);
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
}

STRATA_KERNEL_INLINE __m256 block_dot(const block_q8_0 &w, const block_q8_act &a, __m256 acc) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w.qs));
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(load_act(a), q));
    return scale_and_add(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), &w.d, a, acc);
}

STRATA_KERNEL_INLINE __m256 block_dot(const block_q4_0 &w, const block_q8_act &a, __m256 acc) {
    // Both 128-bit lanes get the 16 bytes; the high lane shifts right by 4 so, after the mask, the low lane holds
    // elements 0..15 (low nibbles) and the high lane elements 16..31 (high nibbles).
    const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w.qs)));
    const __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi32(bytes, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                             _mm256_set1_epi8(0x0f));
    const __m256i pairs = _mm256_maddubs_epi16(nibbles, load_act(a));
    const __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    // The -8 offset of every nibble: subtract 8 * sum(a) once, in lane 0 (all lanes are summed in the end).
    const __m256i offset = _mm256_zextsi128_si256(_mm_cvtsi32_si128(a.sum_x8));
    return scale_and_add(_mm256_sub_epi32(sums, offset), &w.d, a, acc);
}

// Two blocks per iteration into two accumulators, so the FMA latency chain never limits a memory-bound loop.
template <class Block> STRATA_KERNEL_INLINE float dot_blocks(const Block *w, const block_q8_act *a, int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        acc0 = block_dot(w[b], a[b], acc0);
        acc1 = block_dot(w[b + 1], a[b + 1], acc1);
    }
    if (b < nb) acc0 = block_dot(w[b], a[b], acc0);
    return horizontal_sum(_mm256_add_ps(acc0, acc1));
}

} // namespace

void quantize_activations_q8_avx2(const float *x, void *xq, int64_t n) {
    auto *blocks = static_cast<block_q8_act *>(xq);
    for (int64_t b = 0; b < n / qk8_0; ++b) quantize_block(x + b * qk8_0, blocks[b]);
}

float dot_act_q8_0_avx2(const void *row, const void *xq, int64_t n) {
    return dot_blocks(static_cast<const block_q8_0 *>(row), static_cast<const block_q8_act *>(xq), n / qk8_0);
}

float dot_act_q4_0_avx2(const void *row, const void *xq, int64_t n) {
    return dot_blocks(static_cast<const block_q4_0 *>(row), static_cast<const block_q8_act *>(xq), n / qk4_0);
}

void dot_act_multi_q8_0_avx2(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                             float *out) {
    dot_blocks_multi<maddubs_i8, block_q8_0>(row, xq, xq_stride_bytes, n_x, n, out);
}

void dot_act_multi_q4_0_avx2(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                             float *out) {
    dot_blocks_multi<maddubs_i8, block_q4_0>(row, xq, xq_stride_bytes, n_x, n, out);
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx2_fma() is false; these exist only so the API links everywhere.

namespace strata::quants {
void quantize_activations_q8_avx2(const float *x, void *xq, int64_t n) { quantize_activations_q8_scalar(x, xq, n); }
float dot_act_q8_0_avx2(const void *row, const void *xq, int64_t n) { return dot_act_q8_0_scalar(row, xq, n); }
float dot_act_q4_0_avx2(const void *row, const void *xq, int64_t n) { return dot_act_q4_0_scalar(row, xq, n); }
void dot_act_multi_q8_0_avx2(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                             float *out) {
    dot_act_multi_q8_0_scalar(row, xq, xq_stride_bytes, n_x, n, out);
}
void dot_act_multi_q4_0_avx2(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                             float *out) {
    dot_act_multi_q4_0_scalar(row, xq, xq_stride_bytes, n_x, n, out);
}
} // namespace strata::quants

#endif
