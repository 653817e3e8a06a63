// The GEMM kernel of the Q8_0, Q4_0 and Q5_0 integer paths (ABI 1.22 gemm_act), shared by gemm_act_avx2.cpp (maddubs)
// and gemm_act_avxvnni.cpp (vpdpbusd). Include only from files compiled with -mavx2 -mfma -mf16c (plus -mavxvnni
// for the VNNI build); everything here has internal linkage, so each file keeps its own copy compiled for its own
// instruction set (see the note at the top of dot_avx2.cpp).
//
// A tile is 8 weight rows x up to 4 activation vectors, and a vector lane is a row: the rows' 16-byte quant runs
// are transposed in registers so that lane r of one vector holds four quants of row r, each activation dword is
// broadcast, and one multiply-add instruction gives the eight rows' partial sums at once. A block's eight exact
// int32 sums then meet the eight rows' scales in one float multiply-add per vector:
//     acc[r][t] = fma(d_w[r] * d_a[t], float(isum[r][t]), acc[r][t]), block after block, from +0
// — gemm_one_q8_0 / gemm_one_q4_0 / gemm_one_q5_0 (gemm_act_scalar.cpp) written for one output. Nothing depends on the tile, so
// every output has those bits in any call (the ABI's promise), and the scalar, AVX2 and VNNI kernels agree.
// Weights stay in the file's layout, in whatever tier holds them: the transpose costs a few shuffles per block and
// row group, spread over the vectors of the tile.
#pragma once

#include "ggml_quants.hpp"

#include <immintrin.h>

#include "avx2_block_helpers.hpp"
#include "gemm_walk.hpp"

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace strata::quants {
namespace {

constexpr int gemm_tile_vectors = 4; // 4 float + 4 int accumulators, the weight vectors and temporaries: 16 ymm

STRATA_KERNEL_INLINE __m256i load_two_halves(const unsigned char *low, const unsigned char *high) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(low))),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i *>(high)), 1);
}

// Lane r of d[k] holds bytes 4k..4k+3 of the 16 at p[r] + offset, for the eight rows of a tile.
struct row_dwords {
    __m256i d0, d1, d2, d3;
};
STRATA_KERNEL_INLINE row_dwords transpose_rows(const unsigned char *const *p, int64_t offset) {
    const __m256i y0 = load_two_halves(p[0] + offset, p[4] + offset);
    const __m256i y1 = load_two_halves(p[1] + offset, p[5] + offset);
    const __m256i y2 = load_two_halves(p[2] + offset, p[6] + offset);
    const __m256i y3 = load_two_halves(p[3] + offset, p[7] + offset);
    const __m256i t0 = _mm256_unpacklo_epi32(y0, y1), t1 = _mm256_unpackhi_epi32(y0, y1);
    const __m256i t2 = _mm256_unpacklo_epi32(y2, y3), t3 = _mm256_unpackhi_epi32(y2, y3);
    return {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
            _mm256_unpackhi_epi64(t1, t3)};
}

// The eight rows' binary16 block scales at p[r] + offset, widened (exact).
STRATA_KERNEL_INLINE __m256 row_scales(const unsigned char *const *p, int64_t offset) {
    return _mm256_cvtph_ps(eight_row_scales(p, offset));
}

// The same 4 bytes in every lane.
STRATA_KERNEL_INLINE __m256i broadcast_dword(const void *p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

// Activation dword k (quants 4k..4k+3) of a block in every lane.
STRATA_KERNEL_INLINE __m256i act_dword(const block_q8_act &a, int k) { return broadcast_dword(a.qs + 4 * k); }

// acc + (unsigned u) . (signed s), four products per int32 lane, exact (no pair of products saturates: see
// int_dot_avx2.cpp for the ranges).
// Vnni needs -mavxvnni: its Q8_0 operands (w + 128 up to 255) would saturate maddubs.
template <bool Vnni> STRATA_KERNEL_INLINE __m256i add_products(__m256i acc, __m256i u, __m256i s) {
    if constexpr (Vnni) {
#if defined(__AVXVNNI__)
        return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
        static_assert(!Vnni, "the VNNI tile is built only with -mavxvnni");
#endif
    }
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

// One block's float step for every vector of the tile.
template <size_t... T>
STRATA_KERNEL_INLINE void scale_and_accumulate(__m256 dw, const block_q8_act *const *a, const __m256i *isum,
                                               __m256 *acc, std::index_sequence<T...>) {
    ((acc[T] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&a[T]->d)), _mm256_cvtepi32_ps(isum[T]),
                               acc[T])),
     ...);
}

// Independent int32 accumulator chains per vector in the VNNI build: vpdpbusd accumulates in place, so one chain
// per vector would wait on its latency at every step when a tile has one or two vectors (decode). Integer sums are
// exact, so how they are split changes no bit.
template <size_t NT> constexpr int vnni_chains = NT == 1 ? 4 : NT == 2 ? 2 : 1;

// Q4_0: quants u in [0, 15] with value u - 8; isum = sum u * a - 8 * sum a, the last term from the activation
// block. Lane r of d[k]: row r's bytes 4k..4k+3, whose low nibbles are elements 4k.. and high nibbles 16 + 4k...
// The AVX2 build adds the eight maddubs results of a block in int16 (|each| <= 2 * 15 * 127, eight of them fit)
// and widens once.
template <bool Vnni, size_t... T>
STRATA_KERNEL_INLINE void block_sums_q4_0(const row_dwords &q, const block_q8_act *const *a, __m256i *isum,
                                          std::index_sequence<T...>) {
    constexpr int chains = Vnni ? vnni_chains<sizeof...(T)> : 1;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i s[chains][sizeof...(T)];
    for (int c = 0; c < chains; ++c)
        ((s[c][T] = Vnni && c == 0 ? _mm256_set1_epi32(-a[T]->sum_x8) : _mm256_setzero_si256()), ...);
    auto step = [&](__m256i d, int k) __attribute__((always_inline)) {
        const __m256i lo = _mm256_and_si256(d, low4), hi = _mm256_and_si256(_mm256_srli_epi16(d, 4), low4);
        if constexpr (Vnni) {
            const int c_lo = (2 * k) % chains, c_hi = (2 * k + 1) % chains;
            ((s[c_lo][T] = add_products<true>(s[c_lo][T], lo, act_dword(*a[T], k))), ...);
            ((s[c_hi][T] = add_products<true>(s[c_hi][T], hi, act_dword(*a[T], 4 + k))), ...);
        } else {
            ((s[0][T] = _mm256_add_epi16(s[0][T], _mm256_maddubs_epi16(lo, act_dword(*a[T], k)))), ...);
            ((s[0][T] = _mm256_add_epi16(s[0][T], _mm256_maddubs_epi16(hi, act_dword(*a[T], 4 + k)))), ...);
            (keep_in_register(s[0][T]), ...);
        }
    };
    step(q.d0, 0);
    step(q.d1, 1);
    step(q.d2, 2);
    step(q.d3, 3);
    if constexpr (Vnni) {
        for (int c = 1; c < chains; ++c) ((s[0][T] = _mm256_add_epi32(s[0][T], s[c][T])), ...);
        ((isum[T] = s[0][T]), ...);
    } else {
        ((isum[T] = _mm256_sub_epi32(_mm256_madd_epi16(s[0][T], _mm256_set1_epi16(1)),
                                     _mm256_set1_epi32(a[T]->sum_x8))),
         ...);
    }
}

// The eight rows' 32-bit words at p[r] + offset (Q5_0's fifth bits, Q4_K's scales), lane r from row r: inserted into
// the register one by one (an array of eight stored and loaded as one vector stalls every block on store forwarding).
STRATA_KERNEL_INLINE __m256i eight_row_words(const unsigned char *const *p, int64_t offset) {
    const auto w = [&](int r) __attribute__((always_inline)) { return load_word(p[r] + offset); };
    return _mm256_setr_epi32(w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7));
}

// 0x10 in byte j of lane r where bit 4 + j of byte Byte of the lane's word `source` is set: byte Byte copied to
// the lane's four bytes, bit 4 + j of byte j kept (mask 0x10, 0x20, 0x40, 0x80), and any kept bit made 0x10.
template <int Byte> STRATA_KERNEL_INLINE __m256i fifth_bits_of(__m256i source) {
    const __m256i spread = _mm256_shuffle_epi8(
        source, _mm256_setr_epi8(Byte, Byte, Byte, Byte, 4 + Byte, 4 + Byte, 4 + Byte, 4 + Byte, 8 + Byte, 8 + Byte,
                                 8 + Byte, 8 + Byte, 12 + Byte, 12 + Byte, 12 + Byte, 12 + Byte, Byte, Byte, Byte, Byte,
                                 4 + Byte, 4 + Byte, 4 + Byte, 4 + Byte, 8 + Byte, 8 + Byte, 8 + Byte, 8 + Byte,
                                 12 + Byte, 12 + Byte, 12 + Byte, 12 + Byte));
    return _mm256_min_epu8(_mm256_and_si256(spread, _mm256_set1_epi32(static_cast<int>(0x80402010u))),
                           _mm256_set1_epi8(0x10));
}

// Q5_0: quants u in [0, 31] with value u - 16; isum = sum u * a - 16 * sum a (twice sum_x8). Lane r of q.d[k] holds
// row r's bytes 4k..4k+3: low nibbles are elements 4k.., high nibbles 16 + 4k..; their fifth bits are bits 4k..
// and 16 + 4k.. of the row's word qh: byte k / 2 (or 2 + k / 2), its low half for even k (found at bits 4..7 of
// that byte of qh << 4) and its high half for odd k. The AVX2 build adds four maddubs results in int16 (|each| <=
// 2 * 31 * 128, four fit) before widening.
template <bool Vnni, size_t... T>
STRATA_KERNEL_INLINE void block_sums_q5_0(const row_dwords &q, __m256i qh, const block_q8_act *const *a, __m256i *isum,
                                          std::index_sequence<T...>) {
    constexpr int chains = Vnni ? vnni_chains<sizeof...(T)> : 1;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i qh4 = _mm256_slli_epi32(qh, 4);
    __m256i s[chains][sizeof...(T)];
    for (int c = 0; c < chains; ++c)
        ((s[c][T] = Vnni && c == 0 ? _mm256_set1_epi32(-2 * a[T]->sum_x8) : _mm256_setzero_si256()), ...);
    __m256i s16[sizeof...(T)];
    auto step = [&](__m256i d, __m256i fifth_lo, __m256i fifth_hi, int k) __attribute__((always_inline)) {
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(d, low4), fifth_lo);
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(d, 4), low4), fifth_hi);
        if constexpr (Vnni) {
            const int c_lo = (2 * k) % chains, c_hi = (2 * k + 1) % chains;
            ((s[c_lo][T] = add_products<true>(s[c_lo][T], lo, act_dword(*a[T], k))), ...);
            ((s[c_hi][T] = add_products<true>(s[c_hi][T], hi, act_dword(*a[T], 4 + k))), ...);
        } else {
            if (k % 2 == 0) {
                ((s16[T] = _mm256_add_epi16(_mm256_maddubs_epi16(lo, act_dword(*a[T], k)),
                                            _mm256_maddubs_epi16(hi, act_dword(*a[T], 4 + k)))),
                 ...);
            } else {
                ((s16[T] = _mm256_add_epi16(s16[T], _mm256_maddubs_epi16(lo, act_dword(*a[T], k)))), ...);
                ((s16[T] = _mm256_add_epi16(s16[T], _mm256_maddubs_epi16(hi, act_dword(*a[T], 4 + k)))), ...);
                ((s[0][T] = _mm256_add_epi32(s[0][T], _mm256_madd_epi16(s16[T], _mm256_set1_epi16(1)))), ...);
            }
        }
    };
    step(q.d0, fifth_bits_of<0>(qh4), fifth_bits_of<2>(qh4), 0);
    step(q.d1, fifth_bits_of<0>(qh), fifth_bits_of<2>(qh), 1);
    step(q.d2, fifth_bits_of<1>(qh4), fifth_bits_of<3>(qh4), 2);
    step(q.d3, fifth_bits_of<1>(qh), fifth_bits_of<3>(qh), 3);
    if constexpr (Vnni) {
        for (int c = 1; c < chains; ++c) ((s[0][T] = _mm256_add_epi32(s[0][T], s[c][T])), ...);
        ((isum[T] = s[0][T]), ...);
    } else {
        ((isum[T] = _mm256_sub_epi32(s[0][T], _mm256_set1_epi32(2 * a[T]->sum_x8))), ...);
    }
}

// Q8_0: signed quants w. AVX2: |w| times a * sign(w) (maddubs needs an unsigned operand); VNNI: (w + 128) . a less
// 128 * sum a = 16 * sum_x8, the unsigned operand made once per block. k0: the first of the four dwords.
template <bool Vnni, int Chains, size_t... T>
STRATA_KERNEL_INLINE void add_sums_q8_0(const row_dwords &q, int k0, const block_q8_act *const *a,
                                        __m256i (*s)[sizeof...(T)], std::index_sequence<T...>) {
    auto step = [&](__m256i d, int k) __attribute__((always_inline)) {
        const int c = k % Chains;
        if constexpr (Vnni) {
            const __m256i u = _mm256_xor_si256(d, _mm256_set1_epi8(static_cast<char>(0x80)));
            ((s[c][T] = add_products<true>(s[c][T], u, act_dword(*a[T], k))), ...);
        } else {
            const __m256i abs_w = _mm256_sign_epi8(d, d);
            ((s[c][T] = add_products<false>(s[c][T], abs_w, _mm256_sign_epi8(act_dword(*a[T], k), d))), ...);
            (keep_in_register(s[c][T]), ...);
        }
    };
    step(q.d0, k0);
    step(q.d1, k0 + 1);
    step(q.d2, k0 + 2);
    step(q.d3, k0 + 3);
}

template <bool Vnni, size_t... T>
STRATA_KERNEL_INLINE void block_sums_q8_0(const unsigned char *const *p, int64_t qs, const block_q8_act *const *a,
                                          __m256i *isum, std::index_sequence<T...> seq) {
    constexpr int chains = Vnni ? vnni_chains<sizeof...(T)> : 1;
    __m256i s[chains][sizeof...(T)];
    for (int c = 0; c < chains; ++c)
        ((s[c][T] = Vnni && c == 0 ? _mm256_set1_epi32(-16 * a[T]->sum_x8) : _mm256_setzero_si256()), ...);
    add_sums_q8_0<Vnni, chains>(transpose_rows(p, qs), 0, a, s, seq);
    add_sums_q8_0<Vnni, chains>(transpose_rows(p, qs + 16), 4, a, s, seq);
    for (int c = 1; c < chains; ++c) ((s[0][T] = _mm256_add_epi32(s[0][T], s[c][T])), ...);
    ((isum[T] = s[0][T]), ...);
}

// One tile: rows p[0..7] (the eight rows after them start at `next`) x the vectors at xq + t * xq_stride for t < sizeof...(T), all nb blocks; writes
// out[t * out_stride + r].
template <bool Vnni, class Block, size_t... T>
STRATA_KERNEL_INLINE void gemm_tile(const unsigned char *const *p, const unsigned char *next,
                                    const unsigned char *xq, int64_t xq_stride,
                                    int64_t nb, float *out, int64_t out_stride, std::index_sequence<T...> seq) {
    const block_q8_act *a[] = {reinterpret_cast<const block_q8_act *>(xq + T * xq_stride)...};
    __m256 acc[] = {(static_cast<void>(T), _mm256_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = b * static_cast<int64_t>(sizeof(Block));
        // The tile reads its eight rows (one contiguous run of memory) in an interleaved order the hardware
        // prefetchers do not follow, so when the weights come from memory (decode) the next eight rows are
        // fetched ahead, in order, a block's share at a time.
        for (int64_t line = 0; line < 8 * static_cast<int64_t>(sizeof(Block)); line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + 8 * at + line), _MM_HINT_T0);
        const __m256 dw = row_scales(p, at + offsetof(Block, d));
        __m256i isum[sizeof...(T)];
        if constexpr (std::is_same_v<Block, block_q4_0>)
            block_sums_q4_0<Vnni>(transpose_rows(p, at + offsetof(Block, qs)), a, isum, seq);
        else if constexpr (std::is_same_v<Block, block_q5_0>)
            block_sums_q5_0<Vnni>(transpose_rows(p, at + offsetof(Block, qs)), eight_row_words(p, at + offsetof(Block, qh)),
                                  a, isum, seq);
        else
            block_sums_q8_0<Vnni>(p, at + offsetof(Block, qs), a, isum, seq);
        scale_and_accumulate(dw, a, isum, acc, seq);
        ((++a[T]), ...);
    }
    ((_mm256_storeu_ps(out + T * out_stride, acc[T])), ...);
}

// gemm_act for Block (block_q8_0, block_q4_0 or block_q5_0): whole 8-row groups through the tiles, the last n_rows % 8 rows
// through the one-output definition (the same bits).
template <bool Vnni, class Block>
void gemm_rows(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride, int32_t n_x,
               int64_t n, float *out, int64_t out_stride, float (*one)(const void *, const void *, int64_t)) {
    const auto *rows = static_cast<const unsigned char *>(w);
    const auto *x = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / 32;
    gemm_walk<8, gemm_tile_vectors>(
        rows, row_bytes, n_rows, x, xq_stride, n_x, out, out_stride,
        [&](const unsigned char *const *p, const unsigned char *next, const unsigned char *xt, float *o, auto seq) {
            gemm_tile<Vnni, Block>(p, next, xt, xq_stride, nb, o, out_stride, seq);
        },
        [&](int64_t first) {
            for (int64_t r = first; r < n_rows; ++r)
                for (int32_t t = 0; t < n_x; ++t) out[t * out_stride + r] = one(rows + r * row_bytes, x + t * xq_stride, n);
        });
}

} // namespace
} // namespace strata::quants
