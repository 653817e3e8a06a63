// AVX2 tiles of the float formats' GEMM (ABI 1.22 gemm_f32: F32, F16, BF16). Compiled with -mavx2 -mfma -mf16c;
// called only after cpu_has_avx2_fma() said yes; calls only intrinsics and functions with internal linkage (see the
// note at the top of dot_avx2.cpp).
//
// A tile is 4 rows x up to 2 activation vectors: per 8 elements, four widened weight vectors and one activation
// load per vector feed eight FMAs into eight accumulators, so each weight vector is used twice from a register and
// each activation vector four times. An accumulator's lanes and steps are gemm_float_scalar.cpp's definition (lane
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

constexpr int float_tile_rows = 4;
constexpr int float_tile_vectors = 2; // 4 x 2 accumulators, 4 weight vectors and a temporary: 13 of 16 ymm

// Rows w, w + row_bytes, ... (four) x the vectors x + t * x_stride; the four rows after them start at `next`.
template <class E, size_t... T>
STRATA_KERNEL_INLINE void float_tile(const unsigned char *w, int64_t row_bytes, const unsigned char *next,
                                     const float *x, int64_t x_stride, int64_t n, float *out, int64_t out_stride,
                                     std::index_sequence<T...>) {
    const float *xs[] = {x + T * x_stride...};
    __m256 a0[] = {(static_cast<void>(T), _mm256_setzero_ps())...};
    __m256 a1[] = {(static_cast<void>(T), _mm256_setzero_ps())...};
    __m256 a2[] = {(static_cast<void>(T), _mm256_setzero_ps())...};
    __m256 a3[] = {(static_cast<void>(T), _mm256_setzero_ps())...};
    const unsigned char *w0 = w, *w1 = w + row_bytes, *w2 = w + 2 * row_bytes, *w3 = w + 3 * row_bytes;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        // The next four rows, in order, a chunk's share at a time (the tile's own four streams are not enough for
        // the hardware prefetchers when weights come from memory).
        for (int line = 0; line < float_tile_rows * 8 * E::bytes; line += 64)
            _mm_prefetch(reinterpret_cast<const char *>(next + float_tile_rows * i * E::bytes + line), _MM_HINT_T0);
        const __m256 v0 = E::load8(w0 + i * E::bytes), v1 = E::load8(w1 + i * E::bytes);
        const __m256 v2 = E::load8(w2 + i * E::bytes), v3 = E::load8(w3 + i * E::bytes);
        ((a0[T] = _mm256_fmadd_ps(v0, _mm256_loadu_ps(xs[T] + i), a0[T]),
          a1[T] = _mm256_fmadd_ps(v1, _mm256_loadu_ps(xs[T] + i), a1[T]),
          a2[T] = _mm256_fmadd_ps(v2, _mm256_loadu_ps(xs[T] + i), a2[T]),
          a3[T] = _mm256_fmadd_ps(v3, _mm256_loadu_ps(xs[T] + i), a3[T])),
         ...);
    }
    ((out[T * out_stride + 0] = finish<E>(a0[T], w0, xs[T], i, n),
      out[T * out_stride + 1] = finish<E>(a1[T], w1, xs[T], i, n),
      out[T * out_stride + 2] = finish<E>(a2[T], w2, xs[T], i, n),
      out[T * out_stride + 3] = finish<E>(a3[T], w3, xs[T], i, n)),
     ...);
}

template <class E>
void float_rows(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                int64_t n, float *out, int64_t out_stride, float (*one)(const void *, const float *, int64_t)) {
    const auto *rows = static_cast<const unsigned char *>(w);
    int64_t r = 0;
    for (; r + float_tile_rows <= n_rows; r += float_tile_rows) {
        const unsigned char *tile = rows + r * row_bytes, *next = rows + (r + float_tile_rows) * row_bytes;
        int32_t t = 0;
        for (; t + float_tile_vectors <= n_x; t += float_tile_vectors)
            float_tile<E>(tile, row_bytes, next, x + t * x_stride, x_stride, n, out + t * out_stride + r, out_stride,
                          std::make_index_sequence<float_tile_vectors>{});
        if (t < n_x)
            float_tile<E>(tile, row_bytes, next, x + t * x_stride, x_stride, n, out + t * out_stride + r, out_stride,
                          std::make_index_sequence<1>{});
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
