// The GEMM path's definition (ABI 1.22 gemm_act) for Q8_0, Q4_0 and Q5_0, one output at a time: per block the exact
// int32 sum of the quant products, then acc = fma(d_w * d_a, float(sum), acc) from +0, block after block. The AVX2
// and AVX-VNNI tiles (gemm_act_tile.hpp) compute exactly this for eight rows at once, so all three agree bit for bit
// and an output never depends on the call it was computed in. (dot_act sums in another order; the two paths are
// never mixed on one format.)
#include "ggml_quants.hpp"

#include <cmath>
#include <cstring>

namespace strata::quants {

float gemm_one_q8_0(const void *row, const void *xq, int64_t n) {
    const auto *w = static_cast<const block_q8_0 *>(row);
    const auto *a = static_cast<const block_q8_act *>(xq);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / qk8_0; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < qk8_0; ++j) sum += int32_t{w[b].qs[j]} * int32_t{a[b].qs[j]};
        acc = std::fma(fp16_to_fp32(w[b].d) * a[b].d, static_cast<float>(sum), acc);
    }
    return acc;
}

float gemm_one_q4_0(const void *row, const void *xq, int64_t n) {
    const auto *w = static_cast<const block_q4_0 *>(row);
    const auto *a = static_cast<const block_q8_act *>(xq);
    constexpr int half = qk4_0 / 2;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / qk4_0; ++b) {
        // sum u * a less 8 * sum a (the activation block's sum_x8), as the SIMD tiles compute it.
        int32_t sum = -a[b].sum_x8;
        for (int j = 0; j < half; ++j)
            sum += int32_t{w[b].qs[j] & 0x0f} * a[b].qs[j] + int32_t{w[b].qs[j] >> 4} * a[b].qs[j + half];
        acc = std::fma(fp16_to_fp32(w[b].d) * a[b].d, static_cast<float>(sum), acc);
    }
    return acc;
}

float gemm_one_q5_0(const void *row, const void *xq, int64_t n) {
    const auto *w = static_cast<const block_q5_0 *>(row);
    const auto *a = static_cast<const block_q8_act *>(xq);
    constexpr int half = qk32 / 2;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / qk32; ++b) {
        // sum u * a less 16 * sum a (twice the activation block's sum_x8), u = the nibble with element j's fifth bit
        // (bit j of qh) as 16.
        uint32_t qh;
        std::memcpy(&qh, w[b].qh, sizeof qh);
        int32_t sum = -2 * a[b].sum_x8;
        for (int j = 0; j < half; ++j) {
            const int32_t lo = (w[b].qs[j] & 0x0f) | static_cast<int32_t>(((qh >> j) & 1u) << 4);
            const int32_t hi = (w[b].qs[j] >> 4) | static_cast<int32_t>(((qh >> (j + half)) & 1u) << 4);
            sum += lo * a[b].qs[j] + hi * a[b].qs[j + half];
        }
        acc = std::fma(fp16_to_fp32(w[b].d) * a[b].d, static_cast<float>(sum), acc);
    }
    return acc;
}

namespace {
template <float (*One)(const void *, const void *, int64_t)>
void gemm_each(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride, int32_t n_x,
               int64_t n, float *out, int64_t out_stride) {
    const auto *rows = static_cast<const unsigned char *>(w);
    const auto *x = static_cast<const unsigned char *>(xq);
    for (int32_t t = 0; t < n_x; ++t)
        for (int64_t r = 0; r < n_rows; ++r) out[t * out_stride + r] = One(rows + r * row_bytes, x + t * xq_stride, n);
}
} // namespace

void gemm_act_q8_0_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_q8_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

void gemm_act_q4_0_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_q4_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

void gemm_act_q5_0_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_q5_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

} // namespace strata::quants
