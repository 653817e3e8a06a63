// The 256-element formats' pieces every x86 integer-dot kernel of this plugin shares (int_dot_added_avx2.cpp and
// int_dot_added_avx512.cpp): chunk c of a block decoded into one register of byte values, the block's scales and
// mins in registers, a chunk's two 16-element scales, pair products, the FMAs that add a block's eight int32 lanes
// to eight float lanes (k_block_ints.hpp's expression), and gemm_act over a kernel set's dots. Include only from
// files compiled with -mavx2 -mfma -mf16c (or more); internal linkage, so each file keeps a copy built for its own
// instruction set.
#pragma once

#include "avx2_block_helpers.hpp"
#include "k_block_ints.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace strata::quants {
namespace {

float half_f16c(uint16_t h) { return _cvtsh_ss(h); }

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
// IQ4_XS: eight 6-bit scales (a nibble in scales_l, two bits in scales_h), less 32, one per 32-element chunk, in
// int16 lanes c = 0..7 without a loop: byte c / 2 of scales_l in lane c, times 16 in the even lanes so that a shift
// by 4 brings either nibble down; scales_h in every lane, times 2^(14 - 2c) so that its bits 2c, 2c + 1 reach the top.
template <> STRATA_KERNEL_INLINE void block_vectors<k_formats::iq4_xs>(const block_iq4_xs &b, k_block_vectors &v) {
    uint16_t high;
    std::memcpy(&high, b.scales_h, sizeof high);
    uint32_t low;
    std::memcpy(&low, b.scales_l, sizeof low);
    const __m128i low_bytes = _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(low)),
                                               _mm_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1));
    const __m128i nibbles = _mm_and_si128(
        _mm_srli_epi16(_mm_mullo_epi16(low_bytes, _mm_setr_epi16(16, 1, 16, 1, 16, 1, 16, 1)), 4), _mm_set1_epi16(0xf));
    const __m128i high_bits = _mm_srli_epi16(
        _mm_mullo_epi16(_mm_set1_epi16(static_cast<short>(high)),
                        _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
        14);
    const __m128i scales =
        _mm_sub_epi16(_mm_or_si128(nibbles, _mm_slli_epi16(high_bits, 4)), _mm_set1_epi16(32));
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

// A block's eight int32 lane sums (isum) against one activation block, added to the eight float lanes: one FMA for
// the scales (and one for the mins where the format subtracts them), in k_block_ints.hpp's order.
template <class F>
STRATA_KERNEL_INLINE __m256 block_fma(__m256 lanes, __m256i isum, const k_block_vectors &s, const block_q8_k &a) {
    if constexpr (F::mode == min_mode::none) {
        return _mm256_fmadd_ps(_mm256_set1_ps(a.d * s.d), _mm256_cvtepi32_ps(isum), lanes);
    } else {
        const __m256i msum = _mm256_madd_epi16(load32(a.bsums), s.mins);
        if constexpr (F::mode == min_mode::offset) {
            return _mm256_fmadd_ps(_mm256_set1_ps(a.d * s.d), _mm256_cvtepi32_ps(_mm256_sub_epi32(isum, msum)), lanes);
        } else {
            return _mm256_fnmadd_ps(_mm256_set1_ps(a.d * s.dmin), _mm256_cvtepi32_ps(msum),
                                    _mm256_fmadd_ps(_mm256_set1_ps(a.d * s.d), _mm256_cvtepi32_ps(isum), lanes));
        }
    }
}

// gemm_act (ABI 1.22) for the K-quants from a kernel set's dots: out[t * out_stride + r] is dot_act(row r, vector t)
// bit for bit in any call shape, so the K-quants take the device's GEMM path as Q8_0 and Q4_0 do. One vector (a
// decode step): the tile's rows one after another, the dot inlined; several: 16 vectors at a time (their
// activations stay in L1 across the tile's rows), each row's multi dot, written out by token. (Four rows
// interleaved against one vector were slower: the hardware prefetchers do not follow that order, see
// gemm_act_tile.hpp, and their scales and sums spill.)
template <void (*Multi)(const void *, const void *, int64_t, int32_t, int64_t, float *),
          float (*Single)(const void *, const void *, int64_t)>
void k_gemm_act(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    const auto *rows = static_cast<const unsigned char *>(w);
    if (n_x == 1) {
        for (int64_t r = 0; r < n_rows; ++r) out[r] = Single(rows + r * row_bytes, xq, n);
        return;
    }
    constexpr int32_t chunk_vectors = 16;
    float results[chunk_vectors];
    for (int32_t t0 = 0; t0 < n_x; t0 += chunk_vectors) {
        const int32_t count = n_x - t0 < chunk_vectors ? n_x - t0 : chunk_vectors;
        for (int64_t r = 0; r < n_rows; ++r) {
            Multi(rows + r * row_bytes, static_cast<const unsigned char *>(xq) + t0 * xq_stride_bytes, xq_stride_bytes,
                  count, n, results);
            for (int32_t i = 0; i < count; ++i) out[(t0 + i) * out_stride + r] = results[i];
        }
    }
}

} // namespace
} // namespace strata::quants
