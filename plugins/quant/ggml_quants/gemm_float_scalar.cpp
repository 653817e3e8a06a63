// The GEMM path's definition for the float formats (ABI 1.22 gemm_f32: F32, F16, BF16), one output at a time:
// eight lane sums, lane j taking elements 8c + j with one FMA each, chunk after chunk from +0; then the lanes
// reduced as (j, j + 4), then (j, j + 2), then (0, 1) — avx2_block_helpers.hpp's horizontal_sum; then the last
// n % 8 elements, one FMA each. The AVX2 and AVX-512 tiles (gemm_float_avx2.cpp, gemm_float_avx512.cpp) compute
// exactly this for several rows and vectors at once, so all three agree bit for bit and an output never depends on
// the call it was computed in.
#include "ggml_quants.hpp"

#include <cmath>
#include <cstring>

namespace strata::quants {
namespace {

template <class Widen> float gemm_one_float(const unsigned char *w, int bytes, const float *x, int64_t n, Widen widen) {
    float lane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) lane[j] = std::fma(widen(w + (i + j) * bytes), x[i + j], lane[j]);
    for (int j = 0; j < 4; ++j) lane[j] += lane[j + 4];
    lane[0] += lane[2];
    lane[1] += lane[3];
    float sum = lane[0] + lane[1];
    for (; i < n; ++i) sum = std::fma(widen(w + i * bytes), x[i], sum);
    return sum;
}

uint16_t load_u16(const unsigned char *p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

} // namespace

float gemm_one_f32(const void *row, const float *x, int64_t n) {
    return gemm_one_float(static_cast<const unsigned char *>(row), 4, x, n, [](const unsigned char *p) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    });
}

float gemm_one_f16(const void *row, const float *x, int64_t n) {
    return gemm_one_float(static_cast<const unsigned char *>(row), 2, x, n,
                          [](const unsigned char *p) { return fp16_to_fp32(load_u16(p)); });
}

float gemm_one_bf16(const void *row, const float *x, int64_t n) {
    return gemm_one_float(static_cast<const unsigned char *>(row), 2, x, n,
                          [](const unsigned char *p) { return bf16_to_fp32(load_u16(p)); });
}

namespace {
template <float (*One)(const void *, const float *, int64_t)>
void gemm_each(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
               int64_t n, float *out, int64_t out_stride) {
    const auto *rows = static_cast<const unsigned char *>(w);
    for (int32_t t = 0; t < n_x; ++t)
        for (int64_t r = 0; r < n_rows; ++r) out[t * out_stride + r] = One(rows + r * row_bytes, x + t * x_stride, n);
}
} // namespace

void gemm_f32_f32_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_f32>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_f16_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_f16>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}
void gemm_f32_bf16_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_bf16>(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}

} // namespace strata::quants
