// Q4_K's GEMM tile (ABI 1.22 gemm_act), for gemm_act_avx2.cpp: gemm_act_tile.hpp's layout (8 weight rows x up to 4
// Q8_K activation vectors, a vector lane per row, the rows' quant bytes transposed in registers from the file's
// layout) on 256-element super-blocks. Include only from files compiled with -mavx2 -mfma -mf16c; internal linkage.
//
// Per super-block, with S_c the exact sum of chunk c's 32 nibble x activation products (chunk c: the low nibbles of
// qs[32 (c / 2)..] for even c, the high nibbles for odd c), sc_c / m_c its 6-bit scale and min, and bsum the
// activation's per-16 sums:
//     isum = sum_c sc_c * S_c,  msum = sum_c m_c * (bsum[2c] + bsum[2c + 1])   (exact int32)
//     acc = fma(-(dmin_w * d_a), float(msum), fma(d_w * d_a, float(isum), acc))  from +0
// — gemm_one_q4_k (gemm_act_scalar.cpp) for one output. The tile adds eight maddubs results per chunk in int16
// (|each| <= 2 * 15 * 128, eight fit), widens them with the chunk's scale in one madd, and runs the two float steps
// per super-block for eight rows at once, so every output has gemm_one_q4_k's bits in any call.
#pragma once

#include "gemm_act_tile.hpp"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace strata::quants {
namespace {

// The eight rows' scales and mins (ggml's scale_min_k4, unpacked with its 32-bit masks as k4_block_vectors does),
// lane r from row r: the bytes of u[0] are scales 0..3, u[1] scales 4..7, u[2] mins 0..3, u[3] mins 4..7.
struct k4_row_scales {
    __m256i u[4];
};
STRATA_KERNEL_INLINE k4_row_scales k4_scales_of_rows(const unsigned char *const *p, int64_t offset) {
    const __m256i w0 = eight_row_words(p, offset), w1 = eight_row_words(p, offset + 4),
                  w2 = eight_row_words(p, offset + 8);
    const __m256i low6 = _mm256_set1_epi32(0x3f3f3f3f), low4 = _mm256_set1_epi32(0x0f0f0f0f),
                  low2 = _mm256_set1_epi32(0x03030303);
    k4_row_scales s;
    s.u[0] = _mm256_and_si256(w0, low6);
    s.u[1] = _mm256_or_si256(_mm256_and_si256(w2, low4),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w0, 6), low2), 4));
    s.u[2] = _mm256_and_si256(w1, low6);
    s.u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), low4),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w1, 6), low2), 4));
    return s;
}

// Byte Byte of each lane, zero-extended into both of the lane's int16 halves (a madd operand).
template <int Byte> STRATA_KERNEL_INLINE __m256i lane_byte_pairs(__m256i v) {
    constexpr char z = static_cast<char>(0x80);
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(Byte, z, Byte, z, 4 + Byte, z, 4 + Byte, z, 8 + Byte, z, 8 + Byte, z,
                                                   12 + Byte, z, 12 + Byte, z, Byte, z, Byte, z, 4 + Byte, z, 4 + Byte,
                                                   z, 8 + Byte, z, 8 + Byte, z, 12 + Byte, z, 12 + Byte, z));
}

// Chunks 2J and 2J + 1 (the 32 bytes at qs + 32 J) of a super-block: isum[t] += sc_2J * S_2J + sc_2J+1 * S_2J+1.
template <int J, size_t... T>
STRATA_KERNEL_INLINE void add_chunk_pair_q4_k(const unsigned char *const *p, int64_t qs, const k4_row_scales &s,
                                              const block_q8_k *const *a, __m256i *isum, std::index_sequence<T...>) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i even[sizeof...(T)], odd[sizeof...(T)];
    ((even[T] = _mm256_setzero_si256()), ...);
    ((odd[T] = _mm256_setzero_si256()), ...);
    for (int h = 0; h < 2; ++h) {
        const row_dwords q = transpose_rows(p, qs + 32 * J + 16 * h);
        auto step = [&](__m256i d, int k) __attribute__((always_inline)) {
            const __m256i lo = _mm256_and_si256(d, low4), hi = _mm256_and_si256(_mm256_srli_epi16(d, 4), low4);
            const int e = 64 * J + 16 * h + 4 * k; // the activation index of the dword's first low-nibble element
            ((even[T] = _mm256_add_epi16(even[T], _mm256_maddubs_epi16(lo, broadcast_dword(a[T]->qs + e)))), ...);
            ((odd[T] = _mm256_add_epi16(odd[T], _mm256_maddubs_epi16(hi, broadcast_dword(a[T]->qs + e + 32)))), ...);
            (keep_in_register(even[T]), ...);
            (keep_in_register(odd[T]), ...);
        };
        step(q.d0, 0);
        step(q.d1, 1);
        step(q.d2, 2);
        step(q.d3, 3);
    }
    const __m256i sc_even = lane_byte_pairs<(2 * J) % 4>(s.u[2 * J / 4]);
    const __m256i sc_odd = lane_byte_pairs<(2 * J + 1) % 4>(s.u[(2 * J + 1) / 4]);
    ((isum[T] = _mm256_add_epi32(isum[T], _mm256_add_epi32(_mm256_madd_epi16(even[T], sc_even),
                                                           _mm256_madd_epi16(odd[T], sc_odd)))),
     ...);
}

// msum[t] = sum_c m_c * (bsum[2c] + bsum[2c + 1]): the lane's min in both int16 halves against the pair of sums.
template <int... C, size_t... T>
STRATA_KERNEL_INLINE void min_sums_q4_k(const k4_row_scales &s, const block_q8_k *const *a, __m256i *msum,
                                        std::integer_sequence<int, C...>, std::index_sequence<T...>) {
    ((msum[T] = _mm256_setzero_si256()), ...);
    auto add = [&](auto c) __attribute__((always_inline)) {
        constexpr int chunk = decltype(c)::value;
        const __m256i m = lane_byte_pairs<chunk % 4>(s.u[2 + chunk / 4]);
        ((msum[T] = _mm256_add_epi32(msum[T], _mm256_madd_epi16(m, broadcast_dword(a[T]->bsums + 2 * chunk)))), ...);
    };
    (add(std::integral_constant<int, C>{}), ...);
}

template <size_t... T>
STRATA_KERNEL_INLINE void gemm_tile_q4_k(const unsigned char *const *p, const unsigned char *next,
                                         const unsigned char *xq, int64_t xq_stride, int64_t nb, float *out,
                                         int64_t out_stride, std::index_sequence<T...> seq) {
    const block_q8_k *a[] = {reinterpret_cast<const block_q8_k *>(xq + T * xq_stride)...};
    __m256 acc[] = {(static_cast<void>(T), _mm256_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = b * static_cast<int64_t>(sizeof(block_q4_k));
        // The next eight rows' share of this super-block, fetched ahead in order (see gemm_tile).
        for (int64_t line = 0; line < 8 * static_cast<int64_t>(sizeof(block_q4_k)); line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + 8 * at + line), _MM_HINT_T0);
        const k4_row_scales s = k4_scales_of_rows(p, at + offsetof(block_q4_k, scales));
        const int64_t qs = at + offsetof(block_q4_k, qs);
        __m256i isum[] = {(static_cast<void>(T), _mm256_setzero_si256())...};
        add_chunk_pair_q4_k<0>(p, qs, s, a, isum, seq);
        add_chunk_pair_q4_k<1>(p, qs, s, a, isum, seq);
        add_chunk_pair_q4_k<2>(p, qs, s, a, isum, seq);
        add_chunk_pair_q4_k<3>(p, qs, s, a, isum, seq);
        __m256i msum[sizeof...(T)];
        min_sums_q4_k(s, a, msum, std::make_integer_sequence<int, 8>{}, seq);
        const __m256 dw = row_scales(p, at + offsetof(block_q4_k, d));
        const __m256 dmin = row_scales(p, at + offsetof(block_q4_k, dmin));
        ((acc[T] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, _mm256_broadcast_ss(&a[T]->d)), _mm256_cvtepi32_ps(msum[T]),
                                    _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&a[T]->d)),
                                                    _mm256_cvtepi32_ps(isum[T]), acc[T]))),
         ...);
        ((++a[T]), ...);
    }
    ((_mm256_storeu_ps(out + T * out_stride, acc[T])), ...);
}

// gemm_act for Q4_K: whole 8-row groups through the tiles, the rows past them through gemm_one_q4_k (the same bits).
inline void gemm_rows_q4_k(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride,
                           int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    const auto *rows = static_cast<const unsigned char *>(w);
    const auto *x = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / qk_k;
    gemm_walk<8, gemm_tile_vectors>(
        rows, row_bytes, n_rows, x, xq_stride, n_x, out, out_stride,
        [&](const unsigned char *const *p, const unsigned char *next, const unsigned char *xt, float *o, auto seq) {
            gemm_tile_q4_k(p, next, xt, xq_stride, nb, o, out_stride, seq);
        },
        [&](int64_t first) {
            for (int64_t r = first; r < n_rows; ++r)
                for (int32_t t = 0; t < n_x; ++t)
                    out[t * out_stride + r] = gemm_one_q4_k(rows + r * row_bytes, x + t * xq_stride, n);
        });
}

} // namespace
} // namespace strata::quants
