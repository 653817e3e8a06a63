// The GEMM path's definition (ABI 1.22 gemm_act) for Q8_0, Q4_0, Q5_0 and Q4_K, one output at a time: per block the
// exact int32 sum of the quant products, then acc = fma(d_w * d_a, float(sum), acc) from +0, block after block (Q4_K:
// two exact sums and two FMAs per super-block, see gemm_one_q4_k). The AVX2 and AVX-VNNI tiles (gemm_act_tile.hpp;
// Q4_K's AVX2 tile in gemm_act_q4_k_tile.hpp) compute exactly this for eight rows at once, so all agree bit for bit
// and an output never depends on the call it was computed in. (dot_act sums in another order; the two paths are
// never mixed on one format.)
#include "ggml_quants.hpp"
#include "k_block_ints.hpp"

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

float gemm_one_q4_k(const void *row, const void *xq, int64_t n) {
    const auto *w = static_cast<const block_q4_k *>(row);
    const auto *a = static_cast<const block_q8_k *>(xq);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / qk_k; ++b) {
        // The exact sums of gemm_act_q4_k_tile.hpp: each chunk's nibble products times its scale, and its min times
        // the activation's two per-16 sums (k_block_scales holds each chunk's scale and min twice, once per half).
        k_block_scales s;
        k_formats::scales_k4(w[b], s, fp16_to_fp32);
        int32_t isum = 0, msum = 0;
        for (int c = 0; c < 8; ++c) {
            const uint8_t *q = w[b].qs + 32 * (c / 2);
            const int shift = 4 * (c % 2);
            int32_t chunk = 0;
            for (int l = 0; l < 32; ++l) chunk += ((q[l] >> shift) & 0xF) * int32_t{a[b].qs[32 * c + l]};
            isum += s.scale[2 * c] * chunk;
            msum += s.min[2 * c] * (int32_t{a[b].bsums[2 * c]} + a[b].bsums[2 * c + 1]);
        }
        acc = std::fma(s.d * a[b].d, static_cast<float>(isum), acc);
        acc = std::fma(-(s.dmin * a[b].d), static_cast<float>(msum), acc);
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

void gemm_act_q4_k_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_each<gemm_one_q4_k>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

} // namespace strata::quants
