// AVX2 kernels of the formats added after Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS). Compiled with
// -mavx2 -mfma -mf16c and, like dot_avx2.cpp, calling only intrinsics, functions with internal linkage and the
// plugin's scalar (non-inline) functions.
//
// Integer dot: each 32-element chunk of a weight block is decoded into one register of byte values; products with
// the activation bytes go through _mm256_maddubs_epi16 (unsigned x signed; signed formats feed |w| and a * sign(w)),
// then _mm256_madd_epi16 against the chunk's two 16-element scales into int32 lanes. No pair saturates: |value| <=
// 127 only for IQ4's grid (2 * 127 * 127 < 32768), every other format stays below 64. The integer sums are exact, so
// each block's contribution is k_block_ints.hpp's float expression on the same integers as the scalar kernels.
#include "ggml_quants.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "int_dot_added_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif
#include <immintrin.h>

#include "avx2_block_helpers.hpp"
#include "k_block_ints.hpp"

#include <utility>

namespace strata::quants {
namespace {

float half_f16c(uint16_t h) { return _cvtsh_ss(h); }

STRATA_KERNEL_INLINE int32_t horizontal_sum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

STRATA_KERNEL_INLINE __m256i load32(const void *p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

STRATA_KERNEL_INLINE __m256i shift_right_16(__m256i v, int count) {
    return _mm256_srl_epi16(v, _mm_cvtsi32_si128(count));
}

// Bits `shift` (and `width` bits above it) of every byte.
STRATA_KERNEL_INLINE __m256i byte_field(__m256i v, int shift, int mask) {
    return _mm256_and_si256(shift_right_16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// 16 bytes of nibbles -> 32 bytes: elements 0..15 (low nibbles) then 16..31 (high nibbles).
STRATA_KERNEL_INLINE __m256i nibbles_32(const uint8_t *qs) {
    const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(qs)));
    return _mm256_and_si256(_mm256_srlv_epi32(bytes, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(0x0f));
}

// 32 bits -> 32 bytes, 0x10 where bit j is set (the fifth bit of Q5_0/Q5_1 element j).
STRATA_KERNEL_INLINE __m256i fifth_bits_32(const uint8_t *qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

STRATA_KERNEL_INLINE __m256i iq4_grid(__m256i nibbles) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kvalues_iq4nl));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), nibbles);
}

// ---- chunk c (elements 32c..32c+31) of each 256-element format, as k_block_ints.hpp's values() ----
STRATA_KERNEL_INLINE __m256i chunk(const block_q2_k &b, int c) { return byte_field(load32(b.qs + 32 * (c / 4)), 2 * (c % 4), 3); }
STRATA_KERNEL_INLINE __m256i chunk(const block_q3_k &b, int c) {
    const __m256i low = byte_field(load32(b.qs + 32 * (c / 4)), 2 * (c % 4), 3);
    const __m256i high = byte_field(load32(b.hmask), c, 1);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
}
STRATA_KERNEL_INLINE __m256i chunk(const block_q4_k &b, int c) { return byte_field(load32(b.qs + 32 * (c / 2)), 4 * (c % 2), 0xF); }
STRATA_KERNEL_INLINE __m256i chunk(const block_q5_k &b, int c) {
    const __m256i low = byte_field(load32(b.qs + 32 * (c / 2)), 4 * (c % 2), 0xF);
    const __m256i high = byte_field(load32(b.qh), c, 1);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
}
STRATA_KERNEL_INLINE __m256i chunk(const block_q6_k &b, int c) {
    const int k = c % 4;
    const __m256i low = byte_field(load32(b.ql + 64 * (c / 4) + 32 * (c % 2)), 4 * (k / 2), 0xF);
    const __m256i high = byte_field(load32(b.qh + 32 * (c / 4)), 2 * k, 3);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
}
STRATA_KERNEL_INLINE __m256i chunk(const block_iq4_xs &b, int c) { return iq4_grid(nibbles_32(b.qs + 16 * c)); }

// The 32-element formats' values.
STRATA_KERNEL_INLINE __m256i values32(const block_q4_1 &b) { return nibbles_32(b.qs); }
STRATA_KERNEL_INLINE __m256i values32(const block_q5_0 &b) { return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh)); }
STRATA_KERNEL_INLINE __m256i values32(const block_q5_1 &b) { return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh)); }
STRATA_KERNEL_INLINE __m256i values32(const block_iq4_nl &b) { return iq4_grid(nibbles_32(b.qs)); }

// 16 int16 pair sums of value * activation.
template <bool Signed> STRATA_KERNEL_INLINE __m256i pair_products(__m256i values, __m256i act) {
    if constexpr (Signed) return _mm256_maddubs_epi16(_mm256_sign_epi8(values, values), _mm256_sign_epi8(act, values));
    else return _mm256_maddubs_epi16(values, act);
}

// A block's scales in registers: halves[0] holds the int16 scales of 16-element halves 0..7 in both 128-bit lanes,
// halves[1] those of 8..15; mins the 16 int16 mins (k_block_scales' values, decoded without a trip through memory
// where the format allows).
struct k_block_vectors {
    __m256i halves[2];
    __m256i mins;
    float d, dmin;
};

template <class F> STRATA_KERNEL_INLINE void block_vectors(const typename F::block &b, k_block_vectors &v) {
    k_block_scales s;
    F::scales(b, s, half_f16c);
    v.halves[0] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s.scale)));
    v.halves[1] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s.scale + 8)));
    v.mins = load32(s.min);
    v.d = s.d;
    v.dmin = s.dmin;
}

// Q4_K/Q5_K: eight 6-bit scales and mins packed in 12 bytes (scale_min_k4), unpacked with 32-bit masks as ggml does.
STRATA_KERNEL_INLINE void k4_block_vectors(const uint8_t *packed, uint16_t d, uint16_t dmin, k_block_vectors &v) {
    uint32_t u[4];
    std::memcpy(u, packed, 12);
    constexpr uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
    const uint32_t mins_low = u[1] & low6;
    u[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
    u[2] = mins_low;
    u[0] &= low6;
    const __m128i bytes = _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]), static_cast<int>(u[2]),
                                         static_cast<int>(u[3]));
    const __m128i scales = _mm_cvtepu8_epi16(bytes), mins = _mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8));
    v.halves[0] = _mm256_broadcastsi128_si256(_mm_unpacklo_epi16(scales, scales));
    v.halves[1] = _mm256_broadcastsi128_si256(_mm_unpackhi_epi16(scales, scales));
    v.mins = _mm256_setr_m128i(_mm_unpacklo_epi16(mins, mins), _mm_unpackhi_epi16(mins, mins));
    v.d = half_f16c(d);
    v.dmin = half_f16c(dmin);
}
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::q4_k>(const block_q4_k &b, k_block_vectors &v) {
    k4_block_vectors(b.scales, b.d, b.dmin, v);
}
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::q5_k>(const block_q5_k &b, k_block_vectors &v) {
    k4_block_vectors(b.scales, b.d, b.dmin, v);
}
// Sixteen int8 scales, one per 16-element half, whose min is the scale shifted left by `min_shift` (Q6_K, Q3_K).
STRATA_KERNEL_INLINE void signed_block_vectors(__m128i scales, int min_shift, uint16_t d, k_block_vectors &v) {
    v.halves[0] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(scales));
    v.halves[1] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(scales, 8)));
    v.mins = _mm256_sll_epi16(_mm256_cvtepi8_epi16(scales), _mm_cvtsi32_si128(min_shift));
    v.d = half_f16c(d);
    v.dmin = 0.0f;
}
// Q6_K: sixteen int8 scales; the min of a half is 32 times its scale.
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::q6_k>(const block_q6_k &b, k_block_vectors &v) {
    signed_block_vectors(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b.scales)), 5, b.d, v);
}
// Q2_K: sixteen bytes, the scale in the low nibble and the min in the high.
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::q2_k>(const block_q2_k &b, k_block_vectors &v) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.scales));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i scales = _mm_and_si128(packed, low4);
    v.halves[0] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales));
    v.halves[1] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(scales, 8)));
    v.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
    v.d = half_f16c(b.d);
    v.dmin = half_f16c(b.dmin);
}

// Q3_K: sixteen 6-bit scales in 12 bytes (low nibbles in bytes 0..7, the two high bits in 8..11), less 32; the
// min of a half is 4 times its scale (ggml's 32-bit unpacking).
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::q3_k>(const block_q3_k &b, k_block_vectors &v) {
    uint32_t aux[3];
    std::memcpy(aux, b.scales, 12);
    constexpr uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
    const __m128i packed = _mm_setr_epi32(static_cast<int>((aux[0] & low4) | (((aux[2] >> 0) & low2) << 4)),
                                          static_cast<int>((aux[1] & low4) | (((aux[2] >> 2) & low2) << 4)),
                                          static_cast<int>(((aux[0] >> 4) & low4) | (((aux[2] >> 4) & low2) << 4)),
                                          static_cast<int>(((aux[1] >> 4) & low4) | (((aux[2] >> 6) & low2) << 4)));
    signed_block_vectors(_mm_sub_epi8(packed, _mm_set1_epi8(32)), 2, b.d, v);
}
// IQ4_XS: eight 6-bit scales (a nibble in scales_l, two bits in scales_h), less 32, one per 32-element chunk.
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::iq4_xs>(const block_iq4_xs &b, k_block_vectors &v) {
    uint16_t high;
    std::memcpy(&high, b.scales_h, sizeof high);
    uint32_t low;
    std::memcpy(&low, b.scales_l, sizeof low);
    uint64_t packed = 0;
    for (int c = 0; c < 8; ++c) {
        const uint64_t ls = ((low >> 4 * c) & 0xf) | (((high >> 2 * c) & 3) << 4);
        packed |= ls << 8 * c;
    }
    const __m128i scales = _mm_sub_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(packed))),
                                         _mm_set1_epi16(32));
    v.halves[0] = _mm256_broadcastsi128_si256(_mm_unpacklo_epi16(scales, scales));
    v.halves[1] = _mm256_broadcastsi128_si256(_mm_unpackhi_epi16(scales, scales));
    v.mins = _mm256_setzero_si256();
    v.d = half_f16c(b.d);
    v.dmin = 0.0f;
}

// The int16 scales of chunk C's two 16-element halves, scale[2C] in the low 128 bits and scale[2C + 1] in the
// high, from the register holding halves 8 * (C / 4) .. + 7.
template <int C> STRATA_KERNEL_INLINE __m256i chunk_scales(const k_block_vectors &v) {
    constexpr char lo0 = 4 * (C % 4), lo1 = lo0 + 1, hi0 = lo0 + 2, hi1 = lo0 + 3;
    return _mm256_shuffle_epi8(v.halves[C / 4],
                               _mm256_setr_epi8(lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1,
                                                lo0, lo1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1,
                                                hi0, hi1, hi0, hi1));
}

// Chunk C of a block against N activation vectors: isum[i] += the chunk's scaled pair sums, in k_block_ints.hpp's
// lanes.
template <class F, int C, size_t... I>
STRATA_KERNEL_INLINE void chunk_step(const typename F::block &w, const k_block_vectors &s, const block_q8_k *const *a,
                                     int64_t b, __m256i *isum, std::index_sequence<I...>) {
    const __m256i v = chunk(w, C);
    const __m256i sc = chunk_scales<C>(s);
    ((isum[I] = _mm256_add_epi32(
          isum[I], _mm256_madd_epi16(pair_products<F::signed_values>(v, load32(a[I][b].qs + 32 * C)), sc))),
     ...);
}

// The eight chunks unrolled, so every shift, mask and shuffle control is a constant.
template <class F, size_t... I, int... C>
STRATA_KERNEL_INLINE void block_chunks(const typename F::block &w, const k_block_vectors &s, const block_q8_k *const *a,
                                       int64_t b, __m256i *isum, std::index_sequence<I...> vectors,
                                       std::integer_sequence<int, C...>) {
    (chunk_step<F, C>(w, s, a, b, isum, vectors), ...);
}

// ---- 256-element formats: N = sizeof...(I) activation vectors per pass over the row, k_block_ints.hpp's lanes ----
template <class F, size_t... I>
STRATA_KERNEL_INLINE void dot_k_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                  float *out, std::index_sequence<I...>) {
    const block_q8_k *const a[] = {reinterpret_cast<const block_q8_k *>(xq + I * stride)...};
    __m256 lanes[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        k_block_vectors s;
        block_vectors<F>(w[b], s);
        __m256i isum[] = {(static_cast<void>(I), _mm256_setzero_si256())...};
        block_chunks<F>(w[b], s, a, b, isum, std::index_sequence<I...>{}, std::make_integer_sequence<int, 8>{});
        if constexpr (F::mode == min_mode::none) {
            ((lanes[I] = _mm256_fmadd_ps(_mm256_set1_ps(a[I][b].d * s.d), _mm256_cvtepi32_ps(isum[I]), lanes[I])),
             ...);
        } else {
            const __m256i mins = s.mins;
            const auto msum = [&](const block_q8_k &act) { return _mm256_madd_epi16(load32(act.bsums), mins); };
            if constexpr (F::mode == min_mode::offset) {
                ((lanes[I] = _mm256_fmadd_ps(_mm256_set1_ps(a[I][b].d * s.d),
                                             _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[I], msum(a[I][b]))), lanes[I])),
                 ...);
            } else {
                ((lanes[I] = _mm256_fnmadd_ps(
                      _mm256_set1_ps(a[I][b].d * s.dmin), _mm256_cvtepi32_ps(msum(a[I][b])),
                      _mm256_fmadd_ps(_mm256_set1_ps(a[I][b].d * s.d), _mm256_cvtepi32_ps(isum[I]), lanes[I]))),
                 ...);
            }
        }
    }
    ((out[I] = horizontal_sum(lanes[I])), ...);
}

// ---- 32-element formats ----
template <class F, size_t... I>
STRATA_KERNEL_INLINE void dot_32_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                   float *out, std::index_sequence<I...>) {
    const block_q8_act *const a[] = {reinterpret_cast<const block_q8_act *>(xq + I * stride)...};
    float sum[] = {(static_cast<void>(I), 0.0f)...};
    constexpr bool is_signed = std::is_same_v<F, small_formats::iq4_nl>;
    for (int64_t b = 0; b < nb; ++b) {
        const __m256i v = values32(w[b]);
        const float d = F::d(w[b], half_f16c), m = F::m(w[b], half_f16c);
        ((sum[I] += block_result_32(
              d, m, a[I][b],
              horizontal_sum_i32(_mm256_madd_epi16(pair_products<is_signed>(v, load32(a[I][b].qs)),
                                                   _mm256_set1_epi16(1))) -
                  F::offset * (a[I][b].sum_x8 / 8))),
         ...);
    }
    ((out[I] = sum[I]), ...);
}

template <class F, bool K>
void dot_multi(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    const auto *w = static_cast<const typename F::block *>(row);
    const auto *x = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / (K ? qk_k : qk32);
    const auto pass = [&](int32_t i, auto seq) {
        if constexpr (K) dot_k_n<F>(w, x + i * stride, stride, nb, out + i, seq);
        else dot_32_n<F>(w, x + i * stride, stride, nb, out + i, seq);
    };
    int32_t i = 0;
    for (; i + 4 <= n_x; i += 4) pass(i, std::make_index_sequence<4>{});
    switch (n_x - i) {
    case 3: pass(i, std::make_index_sequence<3>{}); break;
    case 2: pass(i, std::make_index_sequence<2>{}); break;
    case 1: pass(i, std::make_index_sequence<1>{}); break;
    default: break;
    }
}

template <void (*Multi)(const void *, const void *, int64_t, int32_t, int64_t, float *)>
float dot_single(const void *row, const void *xq, int64_t n) {
    float out;
    Multi(row, xq, 0, 1, n, &out);
    return out;
}

// ---- float dot: one block dequantized by the reference dequantizer, then an FMA dot ----
template <void (*Dequantize)(const void *, float *, int64_t), int64_t Elems, size_t Bytes>
float dot_by_block(const void *row, const float *x, int64_t n) {
    const auto *bytes = static_cast<const unsigned char *>(row);
    alignas(32) float values[Elems];
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / Elems; ++b) {
        Dequantize(bytes + b * Bytes, values, Elems);
        const float *xb = x + b * Elems;
        for (int64_t j = 0; j < Elems; j += 16) {
            acc0 = _mm256_fmadd_ps(_mm256_load_ps(values + j), _mm256_loadu_ps(xb + j), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_load_ps(values + j + 8), _mm256_loadu_ps(xb + j + 8), acc1);
        }
    }
    return horizontal_sum(_mm256_add_ps(acc0, acc1));
}

template <class F, void (*Dequantize)(const void *, float *, int64_t)> format_kernels kernels_k() {
    return {dot_by_block<Dequantize, qk_k, sizeof(typename F::block)>, sizeof(block_q8_k), quantize_activations_q8k,
            dot_single<dot_multi<F, true>>, dot_multi<F, true>};
}

template <class F, void (*Dequantize)(const void *, float *, int64_t)> format_kernels kernels_32() {
    return {dot_by_block<Dequantize, qk32, sizeof(typename F::block)>, sizeof(block_q8_act),
            quantize_activations_q8_avx2, dot_single<dot_multi<F, false>>, dot_multi<F, false>};
}

} // namespace

format_kernels added_format_kernels_avx2(uint32_t type) {
    return with_added_format(
        type,
        []<class F, void (*Dequantize)(const void *, float *, int64_t), bool K>() {
            if constexpr (K) return kernels_k<F, Dequantize>();
            else return kernels_32<F, Dequantize>();
        },
        [] { return format_kernels{}; });
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx2_fma() is false; this exists only so the API links everywhere.

namespace strata::quants {
format_kernels added_format_kernels_avx2(uint32_t type) { return added_format_kernels_scalar(type); }
} // namespace strata::quants

#endif
