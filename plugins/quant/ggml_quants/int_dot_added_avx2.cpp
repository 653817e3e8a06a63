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

// ---- 256-element formats: N = sizeof...(I) activation vectors per pass over the row ----
template <class F, size_t... I>
STRATA_KERNEL_INLINE void dot_k_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                  float *out, std::index_sequence<I...>) {
    const block_q8_k *const a[] = {reinterpret_cast<const block_q8_k *>(xq + I * stride)...};
    float sum[] = {(static_cast<void>(I), 0.0f)...};
    for (int64_t b = 0; b < nb; ++b) {
        k_block_scales s;
        F::scales(w[b], s, half_f16c);
        __m256i acc[] = {(static_cast<void>(I), _mm256_setzero_si256())...};
        for (int c = 0; c < 8; ++c) {
            const __m256i v = chunk(w[b], c);
            const __m256i sc = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(s.scale[2 * c])),
                                                       _mm_set1_epi16(s.scale[2 * c + 1]), 1);
            ((acc[I] = _mm256_add_epi32(
                  acc[I], _mm256_madd_epi16(pair_products<F::signed_values>(v, load32(a[I][b].qs + 32 * c)), sc))),
             ...);
        }
        if constexpr (F::mode == min_mode::none) {
            ((sum[I] += k_block_result(F::mode, a[I][b].d, s, horizontal_sum_i32(acc[I]), 0)), ...);
        } else {
            const __m256i mins = load32(s.min);
            ((sum[I] += k_block_result(F::mode, a[I][b].d, s, horizontal_sum_i32(acc[I]),
                                       horizontal_sum_i32(_mm256_madd_epi16(load32(a[I][b].bsums), mins)))),
             ...);
        }
    }
    ((out[I] = sum[I]), ...);
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
