// Portable dot kernels: the fallback on CPUs without AVX2/FMA/F16C and the baseline the AVX2 kernels are tested
// against. Four partial sums break the add dependency chain (the compiler may not reorder float adds itself).
#include "ggml_quants.hpp"

#include <cstring>

namespace strata::quants {
namespace {

uint16_t load_u16(const unsigned char *p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Generic over an element loader, so the three plain float formats share one loop shape.
template <class LoadElement> float dot_elementwise(const float *x, int64_t n, LoadElement load) {
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += load(i) * x[i];
        s1 += load(i + 1) * x[i + 1];
        s2 += load(i + 2) * x[i + 2];
        s3 += load(i + 3) * x[i + 3];
    }
    for (; i < n; ++i) s0 += load(i) * x[i];
    return (s0 + s1) + (s2 + s3);
}

} // namespace

float dot_f32_scalar(const void *row, const float *x, int64_t n) {
    const auto *w = static_cast<const unsigned char *>(row); // byte-aligned (ABI): read each float with memcpy
    return dot_elementwise(x, n, [w](int64_t i) {
        float v;
        std::memcpy(&v, w + 4 * i, sizeof v);
        return v;
    });
}

float dot_f16_scalar(const void *row, const float *x, int64_t n) {
    const auto *w = static_cast<const unsigned char *>(row);
    return dot_elementwise(x, n, [w](int64_t i) { return fp16_to_fp32(load_u16(w + 2 * i)); });
}

float dot_bf16_scalar(const void *row, const float *x, int64_t n) {
    const auto *w = static_cast<const unsigned char *>(row);
    return dot_elementwise(x, n, [w](int64_t i) { return bf16_to_fp32(load_u16(w + 2 * i)); });
}

float dot_q8_0_scalar(const void *row, const float *x, int64_t n) {
    const auto *blocks = static_cast<const block_q8_0 *>(row);
    const int64_t nb = n / qk8_0;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b, x += qk8_0) {
        const int8_t *q = blocks[b].qs;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int64_t j = 0; j < qk8_0; j += 4) {
            s0 += static_cast<float>(q[j]) * x[j];
            s1 += static_cast<float>(q[j + 1]) * x[j + 1];
            s2 += static_cast<float>(q[j + 2]) * x[j + 2];
            s3 += static_cast<float>(q[j + 3]) * x[j + 3];
        }
        sum += fp16_to_fp32(static_cast<uint16_t>(blocks[b].d)) * ((s0 + s1) + (s2 + s3));
    }
    return sum;
}

float dot_q4_0_scalar(const void *row, const float *x, int64_t n) {
    const auto *blocks = static_cast<const block_q4_0 *>(row);
    const int64_t nb = n / qk4_0;
    constexpr int64_t half = qk4_0 / 2;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b, x += qk4_0) {
        const uint8_t *q = blocks[b].qs;
        float s0 = 0.0f, s1 = 0.0f;
        for (int64_t j = 0; j < half; ++j) {
            s0 += static_cast<float>((q[j] & 0x0f) - 8) * x[j];
            s1 += static_cast<float>((q[j] >> 4) - 8) * x[half + j];
        }
        sum += fp16_to_fp32(static_cast<uint16_t>(blocks[b].d)) * (s0 + s1);
    }
    return sum;
}

} // namespace strata::quants
