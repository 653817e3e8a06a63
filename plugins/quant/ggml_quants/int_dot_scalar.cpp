// Portable integer dot path: activations quantized to Q8_0 blocks, then one exact int32 sum per block. The fallback
// on CPUs without AVX2, and the baseline the AVX2 kernels are tested against (their per-block integer sums are
// identical; only the float accumulation order across blocks differs).
#include "ggml_quants.hpp"

#include <cstring>
#include <limits>

namespace strata::quants {
namespace {

float block_scale(const half_bits *d) { return fp16_to_fp32(*d); }

} // namespace

// Each block goes through the reference Q8_0 quantizer, so the values are ggml's bit for bit.
void quantize_activations_q8_scalar(const float *x, void *xq, int64_t n) {
    auto *out = static_cast<block_q8_act *>(xq);
    for (int64_t b = 0; b < n / qk8_0; ++b) {
        block_q8_0 ref;
        quantize_row_q8_0(x + b * qk8_0, &ref, qk8_0);
        int32_t sum = 0;
        for (int64_t j = 0; j < qk8_0; ++j) {
            out[b].qs[j] = ref.qs[j];
            sum += ref.qs[j];
        }
        out[b].d = block_scale(&ref.d);
        out[b].sum_x8 = 8 * sum;
        // ggml's quantizer zeroes a NaN; a NaN scale instead carries it into every dot with this block, so damaged
        // weights upstream surface as NaN logits (which the engine reports) rather than as plausible tokens.
        for (int64_t j = 0; j < qk8_0; ++j) {
            if (x[b * qk8_0 + j] != x[b * qk8_0 + j]) out[b].d = std::numeric_limits<float>::quiet_NaN();
        }
    }
}

float dot_act_q8_0_scalar(const void *row, const void *xq, int64_t n) {
    const auto *w = static_cast<const block_q8_0 *>(row);
    const auto *a = static_cast<const block_q8_act *>(xq);
    const int64_t nb = n / qk8_0;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        int32_t sumi = 0;
        for (int64_t j = 0; j < qk8_0; ++j) sumi += int32_t{w[b].qs[j]} * int32_t{a[b].qs[j]};
        sum += static_cast<float>(sumi) * (block_scale(&w[b].d) * a[b].d);
    }
    return sum;
}

float dot_act_q4_0_scalar(const void *row, const void *xq, int64_t n) {
    const auto *w = static_cast<const block_q4_0 *>(row);
    const auto *a = static_cast<const block_q8_act *>(xq);
    const int64_t nb = n / qk4_0;
    constexpr int64_t half = qk4_0 / 2;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        int32_t sumi = 0;
        for (int64_t j = 0; j < half; ++j) {
            const int32_t lo = (w[b].qs[j] & 0x0f) - 8;
            const int32_t hi = (w[b].qs[j] >> 4) - 8;
            sumi += lo * a[b].qs[j] + hi * a[b].qs[half + j];
        }
        sum += static_cast<float>(sumi) * (block_scale(&w[b].d) * a[b].d);
    }
    return sum;
}

namespace {

// Vectors per pass of dot_act_multi: their float sums live on the stack while the row's blocks stream past once.
constexpr int32_t multi_group = 8;

// One weight block widened once to 32 signed values (Q4_0 with its -8 applied) and its scale, then dotted with the
// same block of each vector. Integer sums are exact in any order and each vector's float sum takes the blocks in
// dot_act's order with dot_act's expression, so every output equals the matching dot_act bit for bit.
template <class Block, class Widen>
void dot_multi(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t nb, float *out, Widen widen) {
    const auto *w = static_cast<const Block *>(row);
    const auto *base = static_cast<const unsigned char *>(xq);
    for (int32_t i0 = 0; i0 < n_x; i0 += multi_group) {
        const int32_t m = n_x - i0 < multi_group ? n_x - i0 : multi_group;
        float sum[multi_group] = {};
        for (int64_t b = 0; b < nb; ++b) {
            int8_t values[qk8_0];
            widen(w[b], values);
            const float dw = block_scale(&w[b].d);
            for (int32_t i = 0; i < m; ++i) {
                const auto &a = reinterpret_cast<const block_q8_act *>(base + (i0 + i) * stride)[b];
                int32_t sumi = 0;
                for (int64_t j = 0; j < qk8_0; ++j) sumi += int32_t{values[j]} * int32_t{a.qs[j]};
                sum[i] += static_cast<float>(sumi) * (dw * a.d);
            }
        }
        for (int32_t i = 0; i < m; ++i) out[i0 + i] = sum[i];
    }
}

} // namespace

void dot_act_multi_q8_0_scalar(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                               float *out) {
    dot_multi<block_q8_0>(row, xq, xq_stride_bytes, n_x, n / qk8_0, out, [](const block_q8_0 &w, int8_t *values) {
        std::memcpy(values, w.qs, sizeof w.qs);
    });
}

void dot_act_multi_q4_0_scalar(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                               float *out) {
    dot_multi<block_q4_0>(row, xq, xq_stride_bytes, n_x, n / qk4_0, out, [](const block_q4_0 &w, int8_t *values) {
        constexpr int64_t half = qk4_0 / 2;
        for (int64_t j = 0; j < half; ++j) {
            values[j] = static_cast<int8_t>((w.qs[j] & 0x0f) - 8);
            values[half + j] = static_cast<int8_t>((w.qs[j] >> 4) - 8);
        }
    });
}

} // namespace strata::quants
