// Block helpers and the multi-vector kernel (dot_act_multi) shared by int_dot_avx2.cpp and int_dot_avxvnni.cpp.
// Include only from files compiled with -mavx2 -mfma -mf16c (plus -mavxvnni for the VNNI policy). Everything here has
// internal linkage (an unnamed namespace), so each file keeps its own copy compiled for its own instruction set: the
// linker can never hand the VNNI build of a helper to the AVX2 path (see the note at the top of dot_avx2.cpp).
#pragma once

#include "ggml_quants.hpp"

#include <immintrin.h>

#include "avx2_block_helpers.hpp"

#include <cstring>
#include <utility>

namespace strata::quants {
namespace {


STRATA_KERNEL_INLINE __m256i load_act(const block_q8_act &a) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a.qs));
}

// How 32 unsigned x signed byte products become 8 int32 lanes, each the sum of 4 neighbouring products. The lanes are the same integers either way (the AVX2 pair sums never saturate for the quantizer's range;
// see int_dot_avx2.cpp), so both policies give dot_act's results bit for bit.
struct maddubs_i8 {
    static STRATA_KERNEL_INLINE __m256i dot(__m256i u, __m256i s) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    }
    // dot(u, s) - offset, in that order, as int_dot_avx2.cpp's block_dot computes it.
    static STRATA_KERNEL_INLINE __m256i dot_minus(__m256i offset, __m256i u, __m256i s) {
        return _mm256_sub_epi32(dot(u, s), offset);
    }
};

#if defined(__AVXVNNI__)
// AVX-VNNI: one vpdpbusd does maddubs + madd + the add (no saturation at all).
struct vnni_i8 {
    static STRATA_KERNEL_INLINE __m256i dot(__m256i u, __m256i s) {
        return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
    }
    static STRATA_KERNEL_INLINE __m256i dot_minus(__m256i offset, __m256i u, __m256i s) {
        return _mm256_dpbusd_avx_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), offset), u, s);
    }
};
#endif

// ---- several activation vectors per weight row (dot_act_multi) ----
// Each weight block is loaded, unpacked and its scale widened once, then dotted with the same block of every
// activation vector. Per vector, the integer lanes, the scale product, the fmadd into the even/odd accumulator and
// the final horizontal sum are exactly dot_act's operations (int_dot_avx2.cpp's dot_blocks), so every output equals
// dot_act's bit for bit.

// d_w * d_a in every lane: the same single rounding as dot_act's scalar product, but the activation scale is
// broadcast straight from memory (a load, no ALU work) and the product is one vector multiply.
STRATA_KERNEL_INLINE __m256 scale_product(__m256 weight_scale, const block_q8_act &a) {
    return _mm256_mul_ps(weight_scale, _mm256_broadcast_ss(&a.d));
}

// A Q8_0 weight block ready for the unsigned x signed products: |w| (the unsigned operand) and w (the sign source
// for the activations).
struct prepared_q8_0 {
    __m256i abs_w, w;
    __m256 d; // the weight scale in every lane
};
STRATA_KERNEL_INLINE prepared_q8_0 prepare(const block_q8_0 &w) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w.qs));
    return {_mm256_sign_epi8(q, q), q, _mm256_set1_ps(block_scale(&w.d))};
}
template <class I8>
STRATA_KERNEL_INLINE __m256 prepared_dot(const prepared_q8_0 &p, const block_q8_act &a, __m256 acc) {
    const __m256i sums = I8::dot(p.abs_w, _mm256_sign_epi8(load_act(a), p.w));
    return _mm256_fmadd_ps(scale_product(p.d, a), _mm256_cvtepi32_ps(sums), acc);
}

// A Q4_0 weight block as 32 unsigned nibbles (elements 0..15 in the low lane, 16..31 in the high lane).
struct prepared_q4_0 {
    __m256i nibbles;
    __m256 d; // the weight scale in every lane
};
STRATA_KERNEL_INLINE prepared_q4_0 prepare(const block_q4_0 &w) {
    const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w.qs)));
    const __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi32(bytes, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                             _mm256_set1_epi8(0x0f));
    return {nibbles, _mm256_set1_ps(block_scale(&w.d))};
}
template <class I8>
STRATA_KERNEL_INLINE __m256 prepared_dot(const prepared_q4_0 &p, const block_q8_act &a, __m256 acc) {
    // The -8 offset of every nibble: 8 * sum(a), taken off lane 0 only (all lanes are summed in the end).
    // (setr rather than a zero-extended cvtsi32: GCC 12 adds a register move for the latter.)
    const __m256i offset = _mm256_setr_epi32(a.sum_x8, 0, 0, 0, 0, 0, 0, 0);
    const __m256i sums = I8::dot_minus(offset, p.nibbles, load_act(a));
    return _mm256_fmadd_ps(scale_product(p.d, a), _mm256_cvtepi32_ps(sums), acc);
}

// N = sizeof...(I) vectors; N <= 4 keeps the 2N accumulators, the prepared block and the temporaries in the 16 ymm
// registers. The per-vector steps are fold expressions over I... rather than loops: at -O2 GCC does not unroll a
// loop over an accumulator array and would keep the accumulators in memory.
template <class I8, class Block, size_t... I>
STRATA_KERNEL_INLINE void dot_blocks_n(const Block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                       float *out, std::index_sequence<I...>) {
    const block_q8_act *const a[] = {reinterpret_cast<const block_q8_act *>(xq + I * stride)...};
    __m256 acc0[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    __m256 acc1[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const auto even = prepare(w[b]);
        ((acc0[I] = prepared_dot<I8>(even, a[I][b], acc0[I])), ...);
        const auto odd = prepare(w[b + 1]);
        ((acc1[I] = prepared_dot<I8>(odd, a[I][b + 1], acc1[I])), ...);
    }
    if (b < nb) {
        const auto last = prepare(w[b]);
        ((acc0[I] = prepared_dot<I8>(last, a[I][b], acc0[I])), ...);
    }
    ((out[I] = horizontal_sum(_mm256_add_ps(acc0[I], acc1[I]))), ...);
}

template <class I8, class Block>
void dot_blocks_multi(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    const auto *w = static_cast<const Block *>(row);
    const auto *x = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / 32;
    in_passes<4>(n_x, [&](int32_t i, auto seq) { dot_blocks_n<I8>(w, x + i * stride, stride, nb, out + i, seq); });
}

} // namespace
} // namespace strata::quants
