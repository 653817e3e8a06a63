// AVX2 tiles of the float formats' GEMM (ABI 1.22 gemm_f32: F32, F16, BF16). Compiled with -mavx2 -mfma -mf16c;
// called only after cpu_has_avx2_fma() said yes; calls only intrinsics and functions with internal linkage (see the
// note at the top of dot_avx2.cpp).
//
// A tile is 4 rows x up to 3 activation vectors: per 8 elements, four widened weight vectors feed twelve FMAs into
// twelve accumulators (the activations as memory operands), so each weight vector is widened once for three
// vectors. (4 x 2, the first shape: 83-85 % of the FMA bound for F16, 62 % for BF16, 46 % for F32 at 16-64 vectors
// in `bench-float-gemm` on a Zen 3 EPYC; 4 x 3: 86-90 %, 70-72 %, 68-70 %; 2 x 6 and 2 x 4 were slower.) An accumulator's lanes and steps are gemm_float_scalar.cpp's definition (lane
// j sums elements 8c + j, then the fixed reduction and the tail FMAs), so every output has those bits in any call.
#include "ggml_quants.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "gemm_float_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif
#include <immintrin.h>

#include "float_elements_avx2.hpp"

#include <cstring>
#include <utility>

namespace strata::quants {
namespace {

constexpr int float_tile_rows = 4; // = float_gemm_row_tile

// Rows w, w + row_bytes, ... (four) x the vectors x + t * x_stride; the four rows after them start at `next`.
template <class E, size_t... T>
STRATA_KERNEL_INLINE void float_tile(const unsigned char *w, int64_t row_bytes, const unsigned char *next,
                                     const float *x, int64_t x_stride, int64_t n, float *out, int64_t out_stride,
                                     std::index_sequence<T...>) {
    constexpr int R = float_tile_rows, NT = sizeof...(T);
    const float *xs[] = {x + T * x_stride...};
    __m256 acc[R][NT];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        // The next four rows, in order, a chunk's share at a time (the tile's own four streams are not enough for
        // the hardware prefetchers when weights come from memory).
        for (int line = 0; line < R * 8 * E::bytes; line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + R * i * E::bytes + line), _MM_HINT_T0);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m256 v = E::load8(w + r * row_bytes + i * E::bytes);
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(v, _mm256_loadu_ps(xs[t] + i), acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) out[t * out_stride + r] = finish<E>(acc[r][t], w + r * row_bytes, xs[t], i, n);
}

template <class E>
void float_rows(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                int64_t n, float *out, int64_t out_stride, float (*one)(const void *, const float *, int64_t)) {
    const auto *rows = static_cast<const unsigned char *>(w);
    // Vectors in threes; a remainder of one after at least one three goes as two twos (a one-vector tile widens
    // each weight vector for a single FMA).
    const int32_t in_threes = n_x % 3 == 1 && n_x >= 4 ? n_x - 4 : n_x - n_x % 3;
    int64_t r = 0;
    for (; r + float_tile_rows <= n_rows; r += float_tile_rows) {
        const unsigned char *tile = rows + r * row_bytes, *next = rows + (r + float_tile_rows) * row_bytes;
        auto pass = [&](int32_t t, auto seq) {
            float_tile<E>(tile, row_bytes, next, x + t * x_stride, x_stride, n, out + t * out_stride + r, out_stride,
                          seq);
        };
        int32_t t = 0;
        for (; t < in_threes; t += 3) pass(t, std::make_index_sequence<3>{});
        for (; t + 2 <= n_x; t += 2) pass(t, std::make_index_sequence<2>{});
        if (t < n_x) pass(t, std::make_index_sequence<1>{});
    }
    for (; r < n_rows; ++r)
        for (int32_t t = 0; t < n_x; ++t) out[t * out_stride + r] = one(rows + r * row_bytes, x + t * x_stride, n);
}

} // namespace

void gemm_f32_f32_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride) {
    float_rows<f32_elements>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride, gemm_one_f32);
}
void gemm_f32_f16_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride) {
    float_rows<f16_elements>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride, gemm_one_f16);
}
void gemm_f32_bf16_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    float_rows<bf16_elements>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride, gemm_one_bf16);
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx2_fma() is false; these exist only so the API links everywhere.

namespace strata::quants {
void gemm_f32_f32_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride) {
    gemm_f32_f32_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_f16_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride) {
    gemm_f32_f16_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_bf16_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_f32_bf16_scalar(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
} // namespace strata::quants

#endif
