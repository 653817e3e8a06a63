// AVX-512 build of the Q8_0 / Q4_0 / Q5_0 / Q4_K GEMM (ABI 1.22 gemm_act): gemm_act_tile.hpp's tile at twice the
// width, 16 weight rows per tile with a row per 32-bit lane of a 512-bit register, the same steps per lane — the rows'
// 16-byte quant runs transposed in registers (four rows per 128-bit lane, the same unpacks), each activation dword
// broadcast, one vpdpbusd for the sixteen rows, and per block acc = fma(d_w * d_a, float(exact sum), acc) — so every
// output has gemm_one_q8_0 / gemm_one_q4_0 / gemm_one_q5_0's bits, as the AVX2 and AVX-VNNI tiles do (GemmAct.*);
// Q4_K's tile (below) is gemm_act_q4_k_tile.hpp's per lane, with gemm_one_q4_k's bits. Rows past the last whole 16 go
// through the AVX2/AVX-VNNI tiles. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (and the AVX2 flags);
// called only after cpu_has_avx512_vnni() said yes.
#include "ggml_quants.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "gemm_act_avx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif
#include <immintrin.h>

#include "avx2_block_helpers.hpp"
#include "gemm_walk.hpp"

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

// GCC 12's AVX-512 intrinsics pass a self-initialized "undefined" register as the unused merge source of their
// unmasked forms, which -Wmaybe-uninitialized reports at every inlined use; nothing here reads such a value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace strata::quants {
namespace {

constexpr int tile_rows = avx512_gemm_row_tile; // what the descriptors of these tiles say
// Activation vectors per pass: the rows' transposes and scales are made once per block for all of them, so more
// vectors spread that work (measured on a Zen 5, BENCHMARKS.md "Wider AVX-512 integer tiles": 12 against 4, 8 and 16
// for Q8_0 / Q4_0, and Q5_0 with them; 8 for Q4_K, whose tile holds two int16 chains per vector). The bits are the
// same in any width.
constexpr int tile_vectors = 12;
constexpr int q4_k_tile_vectors = 8;

// The 16-byte runs at a, b, c and d in 128-bit lanes 0..3 (masked broadcasts: no undefined merge source).
STRATA_KERNEL_INLINE __m512i load_four(const unsigned char *a, const unsigned char *b, const unsigned char *c,
                                       const unsigned char *d) {
    const auto q = [](const unsigned char *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); };
    __m512i v = _mm512_maskz_broadcast_i32x4(0x000f, q(a));
    v = _mm512_mask_broadcast_i32x4(v, 0x00f0, q(b));
    v = _mm512_mask_broadcast_i32x4(v, 0x0f00, q(c));
    return _mm512_mask_broadcast_i32x4(v, 0xf000, q(d));
}

// Lane r of d[k] holds bytes 4k..4k+3 of the 16 at p[r] + offset, for the sixteen rows of a tile.
struct row_dwords {
    __m512i d0, d1, d2, d3;
};
STRATA_KERNEL_INLINE row_dwords transpose_rows(const unsigned char *const *p, int64_t offset) {
    const __m512i z0 = load_four(p[0] + offset, p[4] + offset, p[8] + offset, p[12] + offset);
    const __m512i z1 = load_four(p[1] + offset, p[5] + offset, p[9] + offset, p[13] + offset);
    const __m512i z2 = load_four(p[2] + offset, p[6] + offset, p[10] + offset, p[14] + offset);
    const __m512i z3 = load_four(p[3] + offset, p[7] + offset, p[11] + offset, p[15] + offset);
    const __m512i t0 = _mm512_unpacklo_epi32(z0, z1), t1 = _mm512_unpackhi_epi32(z0, z1);
    const __m512i t2 = _mm512_unpacklo_epi32(z2, z3), t3 = _mm512_unpackhi_epi32(z2, z3);
    return {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
            _mm512_unpackhi_epi64(t1, t3)};
}

// The sixteen rows' 32-bit words at p[r] + offset, lane r from row r: four rows per 128-bit lane, built in registers
// (an array stored and loaded as one vector stalls on store forwarding).
STRATA_KERNEL_INLINE __m512i sixteen_row_words(const unsigned char *const *p, int64_t offset) {
    const auto four = [&](int r) __attribute__((always_inline)) {
        return _mm_setr_epi32(load_word(p[r] + offset), load_word(p[r + 1] + offset), load_word(p[r + 2] + offset),
                              load_word(p[r + 3] + offset));
    };
    __m512i v = _mm512_maskz_broadcast_i32x4(0x000f, four(0));
    v = _mm512_mask_broadcast_i32x4(v, 0x00f0, four(4));
    v = _mm512_mask_broadcast_i32x4(v, 0x0f00, four(8));
    return _mm512_mask_broadcast_i32x4(v, 0xf000, four(12));
}

// The sixteen rows' scales, widened (exact).
STRATA_KERNEL_INLINE __m512 row_scales(const unsigned char *const *p, int64_t offset) {
    return _mm512_cvtph_ps(_mm256_setr_m128i(eight_row_scales(p, offset), eight_row_scales(p + 8, offset)));
}

STRATA_KERNEL_INLINE __m512i act_dword(const block_q8_act &a, int k) {
    int32_t v;
    std::memcpy(&v, a.qs + 4 * k, sizeof v);
    return _mm512_set1_epi32(v);
}

// Independent int32 chains per vector when a tile has one or two (decode): vpdpbusd accumulates in place. Integer
// sums are exact, so the split changes no bit.
template <size_t NT> constexpr int chains_for = NT == 1 ? 4 : NT == 2 ? 2 : 1;

// Q4_0: sum u * a - 8 * sum a (sum_x8), u the nibbles; lane r of d[k]: row r's bytes 4k..4k+3 (elements 4k.. in the
// low nibbles, 16 + 4k.. in the high).
template <size_t... T>
STRATA_KERNEL_INLINE void block_sums_q4_0(const row_dwords &q, const block_q8_act *const *a, __m512i *isum,
                                          std::index_sequence<T...>) {
    constexpr int chains = chains_for<sizeof...(T)>;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i s[chains][sizeof...(T)];
    for (int c = 0; c < chains; ++c)
        ((s[c][T] = c == 0 ? _mm512_set1_epi32(-a[T]->sum_x8) : _mm512_setzero_si512()), ...);
    auto step = [&](__m512i d, int k) __attribute__((always_inline)) {
        const __m512i lo = _mm512_and_si512(d, low4), hi = _mm512_and_si512(_mm512_srli_epi16(d, 4), low4);
        const int c_lo = (2 * k) % chains, c_hi = (2 * k + 1) % chains;
        ((s[c_lo][T] = _mm512_dpbusd_epi32(s[c_lo][T], lo, act_dword(*a[T], k))), ...);
        ((s[c_hi][T] = _mm512_dpbusd_epi32(s[c_hi][T], hi, act_dword(*a[T], 4 + k))), ...);
    };
    step(q.d0, 0);
    step(q.d1, 1);
    step(q.d2, 2);
    step(q.d3, 3);
    for (int c = 1; c < chains; ++c) ((s[0][T] = _mm512_add_epi32(s[0][T], s[c][T])), ...);
    ((isum[T] = s[0][T]), ...);
}

// 0x10 in byte j of lane r where bit 4 + j of byte Byte of the lane's word `source` is set (gemm_act_tile.hpp's
// fifth_bits_of in each 128-bit lane).
template <int Byte> STRATA_KERNEL_INLINE __m512i fifth_bits_of(__m512i source) {
    const __m512i spread = _mm512_shuffle_epi8(
        source, _mm512_broadcast_i32x4(_mm_setr_epi8(Byte, Byte, Byte, Byte, 4 + Byte, 4 + Byte, 4 + Byte, 4 + Byte,
                                                     8 + Byte, 8 + Byte, 8 + Byte, 8 + Byte, 12 + Byte, 12 + Byte,
                                                     12 + Byte, 12 + Byte)));
    return _mm512_min_epu8(_mm512_and_si512(spread, _mm512_set1_epi32(static_cast<int>(0x80402010u))),
                           _mm512_set1_epi8(0x10));
}

// Q5_0: sum u * a - 16 * sum a (twice sum_x8), u the nibble with its fifth bit from the row's word qh, as
// gemm_act_tile.hpp's block_sums_q5_0 finds it (lane r of q.d[k]: row r's bytes 4k..4k+3).
template <size_t... T>
STRATA_KERNEL_INLINE void block_sums_q5_0(const row_dwords &q, __m512i qh, const block_q8_act *const *a,
                                          __m512i *isum, std::index_sequence<T...>) {
    constexpr int chains = chains_for<sizeof...(T)>;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i qh4 = _mm512_slli_epi32(qh, 4);
    __m512i s[chains][sizeof...(T)];
    for (int c = 0; c < chains; ++c)
        ((s[c][T] = c == 0 ? _mm512_set1_epi32(-2 * a[T]->sum_x8) : _mm512_setzero_si512()), ...);
    auto step = [&](__m512i d, __m512i fifth_lo, __m512i fifth_hi, int k) __attribute__((always_inline)) {
        const __m512i lo = _mm512_or_si512(_mm512_and_si512(d, low4), fifth_lo);
        const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(d, 4), low4), fifth_hi);
        const int c_lo = (2 * k) % chains, c_hi = (2 * k + 1) % chains;
        ((s[c_lo][T] = _mm512_dpbusd_epi32(s[c_lo][T], lo, act_dword(*a[T], k))), ...);
        ((s[c_hi][T] = _mm512_dpbusd_epi32(s[c_hi][T], hi, act_dword(*a[T], 4 + k))), ...);
    };
    step(q.d0, fifth_bits_of<0>(qh4), fifth_bits_of<2>(qh4), 0);
    step(q.d1, fifth_bits_of<0>(qh), fifth_bits_of<2>(qh), 1);
    step(q.d2, fifth_bits_of<1>(qh4), fifth_bits_of<3>(qh4), 2);
    step(q.d3, fifth_bits_of<1>(qh), fifth_bits_of<3>(qh), 3);
    for (int c = 1; c < chains; ++c) ((s[0][T] = _mm512_add_epi32(s[0][T], s[c][T])), ...);
    ((isum[T] = s[0][T]), ...);
}

// Q8_0: (w + 128) . a less 128 * sum a = 16 * sum_x8, the unsigned operand made once per dword.
template <size_t... T>
STRATA_KERNEL_INLINE void block_sums_q8_0(const unsigned char *const *p, int64_t qs, const block_q8_act *const *a,
                                          __m512i *isum, std::index_sequence<T...>) {
    constexpr int chains = chains_for<sizeof...(T)>;
    __m512i s[chains][sizeof...(T)];
    for (int c = 0; c < chains; ++c)
        ((s[c][T] = c == 0 ? _mm512_set1_epi32(-16 * a[T]->sum_x8) : _mm512_setzero_si512()), ...);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    auto step = [&](__m512i d, int k) __attribute__((always_inline)) {
        const int c = k % chains;
        const __m512i u = _mm512_xor_si512(d, flip);
        ((s[c][T] = _mm512_dpbusd_epi32(s[c][T], u, act_dword(*a[T], k))), ...);
    };
    const row_dwords first = transpose_rows(p, qs), second = transpose_rows(p, qs + 16);
    step(first.d0, 0);
    step(first.d1, 1);
    step(first.d2, 2);
    step(first.d3, 3);
    step(second.d0, 4);
    step(second.d1, 5);
    step(second.d2, 6);
    step(second.d3, 7);
    for (int c = 1; c < chains; ++c) ((s[0][T] = _mm512_add_epi32(s[0][T], s[c][T])), ...);
    ((isum[T] = s[0][T]), ...);
}

// One tile: rows p[0..15] (the sixteen after them start at `next`, prefetched in order as in gemm_act_tile.hpp) x
// the vectors at xq + t * xq_stride, t < sizeof...(T); writes out[t * out_stride + r].
template <class Block, size_t... T>
STRATA_KERNEL_INLINE void gemm_tile(const unsigned char *const *p, const unsigned char *next, const unsigned char *xq,
                                    int64_t xq_stride, int64_t nb, float *out, int64_t out_stride,
                                    std::index_sequence<T...> seq) {
    const block_q8_act *a[] = {reinterpret_cast<const block_q8_act *>(xq + T * xq_stride)...};
    __m512 acc[] = {(static_cast<void>(T), _mm512_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = b * static_cast<int64_t>(sizeof(Block));
        for (int64_t line = 0; line < tile_rows * static_cast<int64_t>(sizeof(Block)); line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + tile_rows * at + line), _MM_HINT_T0);
        const __m512 dw = row_scales(p, at + offsetof(Block, d));
        __m512i isum[sizeof...(T)];
        if constexpr (std::is_same_v<Block, block_q4_0>)
            block_sums_q4_0(transpose_rows(p, at + offsetof(Block, qs)), a, isum, seq);
        else if constexpr (std::is_same_v<Block, block_q5_0>)
            block_sums_q5_0(transpose_rows(p, at + offsetof(Block, qs)), sixteen_row_words(p, at + offsetof(Block, qh)),
                            a, isum, seq);
        else
            block_sums_q8_0(p, at + offsetof(Block, qs), a, isum, seq);
        ((acc[T] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a[T]->d)), _mm512_cvtepi32_ps(isum[T]), acc[T])),
         ...);
        ((++a[T]), ...);
    }
    ((_mm512_storeu_ps(out + T * out_stride, acc[T])), ...);
}

// ---- Q4_K: gemm_act_q4_k_tile.hpp's steps per 32-bit lane, sixteen rows at a time ----
// Per super-block and lane: each chunk pair's eight maddubs results added in int16, widened with the chunks' 6-bit
// scales in one madd into isum; the mins against the activation's pair sums into msum (exact int32); then the two
// float steps acc = fma(-(dmin_w * d_a), float(msum), fma(d_w * d_a, float(isum), acc)) — gemm_one_q4_k's bits.

// An empty asm that takes and gives back v in a vector register (any of the 32): as keep_in_register in
// avx2_block_helpers.hpp, it keeps a chain of integer adds in order instead of reassociated and spilled.
STRATA_KERNEL_INLINE void keep_in_register(__m512i &v) { __asm__("" : "+v"(v)); }

// The rows' scales and mins (ggml's scale_min_k4, as k4_scales_of_rows): the bytes of u[0] are scales 0..3, u[1]
// scales 4..7, u[2] mins 0..3, u[3] mins 4..7.
struct k4_row_scales_512 {
    __m512i u[4];
};
STRATA_KERNEL_INLINE k4_row_scales_512 k4_scales_of_rows(const unsigned char *const *p, int64_t offset) {
    const __m512i w0 = sixteen_row_words(p, offset), w1 = sixteen_row_words(p, offset + 4),
                  w2 = sixteen_row_words(p, offset + 8);
    const __m512i low6 = _mm512_set1_epi32(0x3f3f3f3f), low4 = _mm512_set1_epi32(0x0f0f0f0f),
                  low2 = _mm512_set1_epi32(0x03030303);
    k4_row_scales_512 s;
    s.u[0] = _mm512_and_si512(w0, low6);
    s.u[1] = _mm512_or_si512(_mm512_and_si512(w2, low4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), low2), 4));
    s.u[2] = _mm512_and_si512(w1, low6);
    s.u[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), low4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), low2), 4));
    return s;
}

// Byte Byte of each lane, zero-extended into both of the lane's int16 halves (a madd operand).
template <int Byte> STRATA_KERNEL_INLINE __m512i lane_byte_pairs(__m512i v) {
    constexpr char z = static_cast<char>(0x80);
    const __m128i pattern = _mm_setr_epi8(Byte, z, Byte, z, 4 + Byte, z, 4 + Byte, z, 8 + Byte, z, 8 + Byte, z,
                                          12 + Byte, z, 12 + Byte, z);
    return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(pattern));
}

STRATA_KERNEL_INLINE __m512i broadcast_dword(const void *p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

// Chunks 2J and 2J + 1 (the 32 bytes at qs + 32 J) of a super-block: isum[t] += sc_2J * S_2J + sc_2J+1 * S_2J+1.
template <int J, size_t... T>
STRATA_KERNEL_INLINE void add_chunk_pair_q4_k(const unsigned char *const *p, int64_t qs, const k4_row_scales_512 &s,
                                              const block_q8_k *const *a, __m512i *isum, std::index_sequence<T...>) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i even[sizeof...(T)], odd[sizeof...(T)];
    ((even[T] = _mm512_setzero_si512()), ...);
    ((odd[T] = _mm512_setzero_si512()), ...);
    for (int h = 0; h < 2; ++h) {
        const row_dwords q = transpose_rows(p, qs + 32 * J + 16 * h);
        auto step = [&](__m512i d, int k) __attribute__((always_inline)) {
            const __m512i lo = _mm512_and_si512(d, low4), hi = _mm512_and_si512(_mm512_srli_epi16(d, 4), low4);
            const int e = 64 * J + 16 * h + 4 * k; // the activation index of the dword's first low-nibble element
            ((even[T] = _mm512_add_epi16(even[T], _mm512_maddubs_epi16(lo, broadcast_dword(a[T]->qs + e)))), ...);
            ((odd[T] = _mm512_add_epi16(odd[T], _mm512_maddubs_epi16(hi, broadcast_dword(a[T]->qs + e + 32)))), ...);
            (keep_in_register(even[T]), ...);
            (keep_in_register(odd[T]), ...);
        };
        step(q.d0, 0);
        step(q.d1, 1);
        step(q.d2, 2);
        step(q.d3, 3);
    }
    const __m512i sc_even = lane_byte_pairs<(2 * J) % 4>(s.u[2 * J / 4]);
    const __m512i sc_odd = lane_byte_pairs<(2 * J + 1) % 4>(s.u[(2 * J + 1) / 4]);
    ((isum[T] = _mm512_add_epi32(isum[T], _mm512_add_epi32(_mm512_madd_epi16(even[T], sc_even),
                                                           _mm512_madd_epi16(odd[T], sc_odd)))),
     ...);
}

// msum[t] = sum_c m_c * (bsum[2c] + bsum[2c + 1]).
template <int... C, size_t... T>
STRATA_KERNEL_INLINE void min_sums_q4_k(const k4_row_scales_512 &s, const block_q8_k *const *a, __m512i *msum,
                                        std::integer_sequence<int, C...>, std::index_sequence<T...>) {
    ((msum[T] = _mm512_setzero_si512()), ...);
    auto add = [&](auto c) __attribute__((always_inline)) {
        constexpr int chunk = decltype(c)::value;
        const __m512i m = lane_byte_pairs<chunk % 4>(s.u[2 + chunk / 4]);
        ((msum[T] = _mm512_add_epi32(msum[T], _mm512_madd_epi16(m, broadcast_dword(a[T]->bsums + 2 * chunk)))), ...);
    };
    (add(std::integral_constant<int, C>{}), ...);
}

template <size_t... T>
STRATA_KERNEL_INLINE void gemm_tile_q4_k(const unsigned char *const *p, const unsigned char *next,
                                         const unsigned char *xq, int64_t xq_stride, int64_t nb, float *out,
                                         int64_t out_stride, std::index_sequence<T...> seq) {
    const block_q8_k *a[] = {reinterpret_cast<const block_q8_k *>(xq + T * xq_stride)...};
    __m512 acc[] = {(static_cast<void>(T), _mm512_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = b * static_cast<int64_t>(sizeof(block_q4_k));
        for (int64_t line = 0; line < tile_rows * static_cast<int64_t>(sizeof(block_q4_k)); line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + tile_rows * at + line), _MM_HINT_T0);
        const k4_row_scales_512 s = k4_scales_of_rows(p, at + offsetof(block_q4_k, scales));
        const int64_t qs = at + offsetof(block_q4_k, qs);
        __m512i isum[] = {(static_cast<void>(T), _mm512_setzero_si512())...};
        add_chunk_pair_q4_k<0>(p, qs, s, a, isum, seq);
        add_chunk_pair_q4_k<1>(p, qs, s, a, isum, seq);
        add_chunk_pair_q4_k<2>(p, qs, s, a, isum, seq);
        add_chunk_pair_q4_k<3>(p, qs, s, a, isum, seq);
        __m512i msum[sizeof...(T)];
        min_sums_q4_k(s, a, msum, std::make_integer_sequence<int, 8>{}, seq);
        const __m512 dw = row_scales(p, at + offsetof(block_q4_k, d));
        const __m512 dmin = row_scales(p, at + offsetof(block_q4_k, dmin));
        ((acc[T] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, _mm512_set1_ps(a[T]->d)), _mm512_cvtepi32_ps(msum[T]),
                                    _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a[T]->d)),
                                                    _mm512_cvtepi32_ps(isum[T]), acc[T]))),
         ...);
        ((++a[T]), ...);
    }
    ((_mm512_storeu_ps(out + T * out_stride, acc[T])), ...);
}

template <class Block>
void gemm_rows(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride, int32_t n_x,
               int64_t n, float *out, int64_t out_stride, gemm_act_fn narrower) {
    const auto *rows = static_cast<const unsigned char *>(w);
    const int64_t nb = n / 32;
    gemm_walk<tile_rows, tile_vectors>(
        rows, row_bytes, n_rows, static_cast<const unsigned char *>(xq), xq_stride, n_x, out, out_stride,
        [&](const unsigned char *const *p, const unsigned char *next, const unsigned char *xt, float *o, auto seq) {
            gemm_tile<Block>(p, next, xt, xq_stride, nb, o, out_stride, seq);
        },
        [&](int64_t first) {
            narrower(rows + first * row_bytes, row_bytes, n_rows - first, xq, xq_stride, n_x, n, out + first, out_stride);
        });
}

} // namespace

void gemm_act_q8_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows<block_q8_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride, gemm_act_q8_0_avx2_or_vnni);
}

void gemm_act_q4_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows<block_q4_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride, gemm_act_q4_0_avx2_or_vnni);
}

void gemm_act_q5_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows<block_q5_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride, gemm_act_q5_0_avx2_or_vnni);
}

void gemm_act_q4_k_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    const auto *rows = static_cast<const unsigned char *>(w);
    const int64_t nb = n / qk_k;
    gemm_walk<tile_rows, q4_k_tile_vectors>(
        rows, row_bytes, n_rows, static_cast<const unsigned char *>(xq), xq_stride_bytes, n_x, out, out_stride,
        [&](const unsigned char *const *p, const unsigned char *next, const unsigned char *xt, float *o, auto seq) {
            gemm_tile_q4_k(p, next, xt, xq_stride_bytes, nb, o, out_stride, seq);
        },
        [&](int64_t first) {
            gemm_act_q4_k_avx2(rows + first * row_bytes, row_bytes, n_rows - first, xq, xq_stride_bytes, n_x, n,
                               out + first, out_stride);
        });
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx512_vnni() is false; these exist only so the API links everywhere.

namespace strata::quants {
void gemm_act_q8_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q8_0_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
void gemm_act_q4_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q4_0_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
void gemm_act_q5_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q5_0_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
void gemm_act_q4_k_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q4_k_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
} // namespace strata::quants

#endif
