// AVX-512 tiles of the float formats' GEMM (ABI 1.22 gemm_f32: F32, F16, BF16). Compiled with -mavx512f -mavx512bw
// -mavx512vl (and the AVX2 flags); called only after cpu_has_avx512_vnni() said yes; calls only intrinsics and
// functions with internal linkage (see the note at the top of dot_avx2.cpp).
//
// The definition (gemm_float_scalar.cpp) keeps eight lane sums per output, so a 512-bit register holds two rows:
// eight elements of row 2k in its low half, the same eight of row 2k + 1 in its high half, and the activation's
// eight broadcast to both halves. A tile is 4 rows x up to 8 activation vectors: per 8 elements, two widened
// weight registers (one conversion for two rows) and one activation broadcast per vector feed sixteen 512-bit FMAs
// into sixteen accumulators (F16 and BF16 on AMD CPUs: 12 rows x 4 vectors, below) — twice the AVX2 tile's (gemm_float_avx2.cpp) products per instruction, and four times
// its products per weight conversion. Each half's lanes take exactly the scalar definition's steps, then the same
// finish (float_elements_avx2.hpp), so every output has gemm_one_*'s bits in any call and either shape; the rows past
// the last whole tall tile go to the 4 x 8 tiles, those past the last whole 4 to the AVX2 kernel (its one-output tail).
#include "ggml_quants.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "gemm_float_avx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl"
#endif
#include <immintrin.h>

#include "float_elements_avx2.hpp"
#include "gemm_walk.hpp"

#include <cstring>
#include <utility>

// GCC 12's AVX-512 intrinsics pass a self-initialized "undefined" register as the unused merge source of their
// unmasked forms, which -Wmaybe-uninitialized reports at every inlined use; nothing here reads such a value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace strata::quants {
namespace {

// Two tile shapes, the same steps per output (so the same bits):
// - 4 rows x 8 vectors: 2 x 8 accumulators, 2 weight registers and a broadcast, 19 of 32 zmm. Of the shapes tried on
//   a Xeon with AVX-512 (one thread, 2048 x 768 F16 against 64 vectors in cache; BENCHMARKS.md "The float formats'
//   AVX-512 tile") the fastest: 108 GFLOP/s; 8 x 4 91, 6 x 8 97, 2 x 8 62, the AVX2 tile 59. Its port 5, which
//   runs 512-bit FMAs, also takes the half of each conversion and insert there.
// - 12 rows x 4 vectors ("tall"): 6 x 4 accumulators, 6 weight registers and a broadcast, 31 zmm: fewer broadcasts
//   per FMA, more conversions. On an AMD Zen 5 (full 512-bit FMAs; BENCHMARKS.md "AVX-512 on an AMD Zen 5") F16 and
//   BF16 ran at 75-79 % and 72-76 % of the FMA bound at 4-64 vectors, against 59-71 % and 60-68 % for 4 x 8 (8 x 4:
//   74-75 %, 16 x 4: 59-62 %); F32, which loads twice the weight bytes, stays fastest at 4 x 8 there too (58 %
//   against 51 % for 8 x 4 and 12 x 4). Not timed on a Zen 4 (512-bit operations in two halves).
template <int Rows, int Vectors> struct tile_shape {
    static constexpr int rows = Rows, vectors = Vectors;
};
using wide_tile = tile_shape<4, 8>;
using tall_tile = tile_shape<tall_float_gemm_row_tile, 4>;

// Eight elements at a (row 2k) in the low half, eight at b (row 2k + 1) in the high half, widened (exactly).
template <class E> STRATA_KERNEL_INLINE __m512 load_pair(const unsigned char *a, const unsigned char *b);
template <> STRATA_KERNEL_INLINE __m512 load_pair<f32_elements>(const unsigned char *a, const unsigned char *b) {
    const __m512d low = _mm512_zextpd256_pd512(_mm256_loadu_pd(reinterpret_cast<const double *>(a)));
    return _mm512_castpd_ps(_mm512_insertf64x4(low, _mm256_loadu_pd(reinterpret_cast<const double *>(b)), 1));
}
STRATA_KERNEL_INLINE __m256i load_halves16(const unsigned char *a, const unsigned char *b) {
    return _mm256_inserti128_si256(_mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(a))),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i *>(b)), 1);
}
template <> STRATA_KERNEL_INLINE __m512 load_pair<f16_elements>(const unsigned char *a, const unsigned char *b) {
    return _mm512_cvtph_ps(load_halves16(a, b));
}
template <> STRATA_KERNEL_INLINE __m512 load_pair<bf16_elements>(const unsigned char *a, const unsigned char *b) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load_halves16(a, b)), 16));
}

// Eight floats at p in both halves.
STRATA_KERNEL_INLINE __m512 broadcast8(const float *p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double *>(p))));
}

STRATA_KERNEL_INLINE __m256 low_half(__m512 v) { return _mm512_castps512_ps256(v); }
STRATA_KERNEL_INLINE __m256 high_half(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Rows p[0..tile_rows) (the tile_rows rows after them start at `next`) x the vectors x + t * x_stride for
// t < sizeof...(T); writes out[t * out_stride + r]. acc[k][t]: rows 2k (low half) and 2k + 1 (high half) x vector t.
template <class E, int tile_rows, size_t... T>
STRATA_KERNEL_INLINE void float_tile(const unsigned char *const *p, const unsigned char *next, const float *x,
                                     int64_t x_stride, int64_t n, float *out, int64_t out_stride,
                                     std::index_sequence<T...>) {
    constexpr int pairs = tile_rows / 2;
    const float *xs[] = {x + T * x_stride...};
    __m512 acc[pairs][sizeof...(T)];
#pragma GCC unroll 8
    for (int k = 0; k < pairs; ++k) ((acc[k][T] = _mm512_setzero_ps()), ...);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        // The next rows, in order, a chunk's share at a time (the tile's own streams are not enough for the
        // hardware prefetchers when weights come from memory).
        for (int line = 0; line < tile_rows * 8 * E::bytes; line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + tile_rows * i * E::bytes + line), _MM_HINT_T0);
        const int64_t at = i * E::bytes;
        __m512 w[pairs];
#pragma GCC unroll 8
        for (int k = 0; k < pairs; ++k) w[k] = load_pair<E>(p[2 * k] + at, p[2 * k + 1] + at);
        (
            [&](int t) __attribute__((always_inline)) {
                const __m512 v = broadcast8(xs[t] + i);
#pragma GCC unroll 8
                for (int k = 0; k < pairs; ++k) acc[k][t] = _mm512_fmadd_ps(w[k], v, acc[k][t]);
            }(T),
            ...);
    }
    (
        [&](int t) __attribute__((always_inline)) {
            float *o = out + t * out_stride;
#pragma GCC unroll 8
            for (int k = 0; k < pairs; ++k) {
                o[2 * k] = finish<E>(low_half(acc[k][t]), p[2 * k], xs[t], i, n);
                o[2 * k + 1] = finish<E>(high_half(acc[k][t]), p[2 * k + 1], xs[t], i, n);
            }
        }(T),
        ...);
}

template <class E, class Shape>
void float_rows(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                int64_t n, float *out, int64_t out_stride, gemm_f32_fn rest) {
    const auto *rows = static_cast<const unsigned char *>(w);
    const auto *xb = reinterpret_cast<const unsigned char *>(x);
    const int64_t x_stride_bytes = x_stride * static_cast<int64_t>(sizeof(float));
    gemm_walk<Shape::rows, Shape::vectors>(
        rows, row_bytes, n_rows, xb, x_stride_bytes, n_x, out, out_stride,
        [&](const unsigned char *const *p, const unsigned char *next, const unsigned char *xt, float *o, auto seq) {
            float_tile<E, Shape::rows>(p, next, reinterpret_cast<const float *>(xt), x_stride, n, o, out_stride, seq);
        },
        [&](int64_t first) {
            rest(rows + first * row_bytes, row_bytes, n_rows - first, x, x_stride, n_x, n, out + first, out_stride);
        });
}

} // namespace

void gemm_f32_f32_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    float_rows<f32_elements, wide_tile>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride, gemm_f32_f32_avx2);
}
void gemm_f32_f16_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    float_rows<f16_elements, wide_tile>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride, gemm_f32_f16_avx2);
}
void gemm_f32_bf16_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    float_rows<bf16_elements, wide_tile>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride,
                                         gemm_f32_bf16_avx2);
}
void gemm_f32_f16_avx512_tall(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                              int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    // The rows past the last whole tall tile through the 4 x 8 tiles (and theirs through the AVX2 kernel).
    float_rows<f16_elements, tall_tile>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride,
                                        gemm_f32_f16_avx512);
}
void gemm_f32_bf16_avx512_tall(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                               int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    float_rows<bf16_elements, tall_tile>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride,
                                         gemm_f32_bf16_avx512);
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx512_vnni() is false; these exist only so the API links everywhere.

namespace strata::quants {
void gemm_f32_f32_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_f32_f32_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_f16_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_f32_f16_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_bf16_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_f32_bf16_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_f16_avx512_tall(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                              int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_f32_f16_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_bf16_avx512_tall(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                               int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_f32_bf16_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
} // namespace strata::quants

#endif
