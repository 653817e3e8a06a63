// The 32-element formats' integer dot (Q4_1, Q5_0, Q5_1, IQ4_NL against block_q8_act) in k_block_ints.hpp's eight
// lanes, for the AVX2 file (maddubs + madd) and the AVX-512 one (vpdpbusd on 256 bits): both reach the same int32
// lanes (no pair saturates: values are below 32, or IQ4_NL's |grid| <= 127 with 2 * 127 * 127 < 32768) and run the
// same float steps, so their results equal the scalar kernel's bit for bit. Include only from files compiled with
// -mavx2 -mfma -mf16c -ffp-contract=off; everything has internal linkage (see the note at the top of dot_avx2.cpp).
#pragma once

#include "k_chunks_avx2.hpp"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <utility>

namespace strata::quants {
namespace {

// 32 unsigned x signed byte products -> 8 int32 lanes, each the sum of 4 neighbouring products.
struct maddubs_lanes {
    static STRATA_KERNEL_INLINE __m256i dot(__m256i u, __m256i s) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    }
};

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

// The 32-element formats' values.
STRATA_KERNEL_INLINE __m256i values32(const block_q4_1 &b) { return nibbles_32(b.qs); }
STRATA_KERNEL_INLINE __m256i values32(const block_q5_0 &b) { return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh)); }
STRATA_KERNEL_INLINE __m256i values32(const block_q5_1 &b) { return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh)); }
STRATA_KERNEL_INLINE __m256i values32(const block_iq4_nl &b) { return iq4_grid(nibbles_32(b.qs)); }

// ---- 32-element formats: k_block_ints.hpp's lanes, even and odd blocks in two accumulators ----
// A weight block decoded once for every activation vector: the unsigned operand (|value| for IQ4_NL), the values
// themselves as the activations' sign source (IQ4_NL), d in every lane and m.
template <class F> struct prepared_32 {
    __m256i u, v;
    __m256 d;
    float m;
};

template <class F> STRATA_KERNEL_INLINE prepared_32<F> prepare_32(const typename F::block &w) {
    prepared_32<F> p;
    p.v = values32(w);
    p.u = F::signed_values ? _mm256_sign_epi8(p.v, p.v) : p.v;
    p.d = _mm256_set1_ps(F::d(w, half_f16c));
    p.m = 0.0f;
    if constexpr (F::has_min) p.m = F::m(w, half_f16c);
    return p;
}

template <class F, class Lanes>
STRATA_KERNEL_INLINE __m256 block_dot_32(const prepared_32<F> &p, const typename F::act_block &a, __m256 acc,
                                          float &msum) {
    __m256i act = load32(a.qs);
    if constexpr (F::signed_values) act = _mm256_sign_epi8(act, p.v);
    __m256i sums = Lanes::dot(p.u, act);
    if constexpr (F::offset != 0)
        sums = _mm256_sub_epi32(sums, _mm256_setr_epi32(F::offset / 8 * a.sum_x8, 0, 0, 0, 0, 0, 0, 0));
    // __builtin_fmaf, not std::fma: an inline library function could be emitted here with the FMA instruction and
    // picked by the linker for the scalar kernels (see the note at the top of dot_avx2.cpp).
    if constexpr (F::has_min) msum = __builtin_fmaf(p.m, a.s, msum);
    return _mm256_fmadd_ps(_mm256_mul_ps(p.d, _mm256_broadcast_ss(&a.d)), _mm256_cvtepi32_ps(sums), acc);
}

template <class F, class Lanes, size_t... I>
STRATA_KERNEL_INLINE void dot_32_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                   float *out, std::index_sequence<I...>) {
    using act = typename F::act_block;
    const act *const a[] = {reinterpret_cast<const act *>(xq + I * stride)...};
    __m256 acc0[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    __m256 acc1[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    float msum0[] = {(static_cast<void>(I), 0.0f)...};
    float msum1[] = {(static_cast<void>(I), 0.0f)...};
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const auto even = prepare_32<F>(w[b]);
        ((acc0[I] = block_dot_32<F, Lanes>(even, a[I][b], acc0[I], msum0[I])), ...);
        const auto odd = prepare_32<F>(w[b + 1]);
        ((acc1[I] = block_dot_32<F, Lanes>(odd, a[I][b + 1], acc1[I], msum1[I])), ...);
    }
    if (b < nb) {
        const auto last = prepare_32<F>(w[b]);
        ((acc0[I] = block_dot_32<F, Lanes>(last, a[I][b], acc0[I], msum0[I])), ...);
    }
    ((out[I] = horizontal_sum(_mm256_add_ps(acc0[I], acc1[I]))), ...);
    if constexpr (F::has_min) ((out[I] += msum0[I] + msum1[I]), ...);
}

} // namespace
} // namespace strata::quants
