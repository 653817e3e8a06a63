// Reference quantize/dequantize of the 32-element formats with a minimum or a fifth bit: Q4_1, Q5_0, Q5_1. Step for
// step ggml's quantize_row_q4_1_ref / q5_0_ref / q5_1_ref and dequantize_row_*, so the bytes and floats match.
#include "ggml_quants.hpp"
#include "quant_rounding.hpp"

#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace strata::quants {
namespace {

constexpr int64_t half = qk32 / 2;

// Lowest and highest value of a block (the Q4_1/Q5_1 range), with ggml's comparisons.
void block_range(const float *x, float &min, float &max) {
    min = FLT_MAX;
    max = -FLT_MAX;
    for (int64_t j = 0; j < qk32; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
}

// The fifth bits of a Q5 block as ggml packs them: bit j for element j, bit j + 16 for element j + 16.
uint32_t load_qh(const uint8_t *qh) {
    uint32_t v;
    std::memcpy(&v, qh, sizeof v);
    return v;
}

} // namespace

void quantize_row_q4_1(const float *src, void *dst, int64_t n) {
    assert(n % qk32 == 0);
    auto *y = static_cast<block_q4_1 *>(dst);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float *x = src + i * qk32;
        float min, max;
        block_range(x, min, max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[half + j] - min) * id;
            const uint8_t lo = truncate_to_level(x0 + 0.5f, 15);
            const uint8_t hi = truncate_to_level(x1 + 0.5f, 15);
            y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

void dequantize_row_q4_1(const void *src, float *dst, int64_t n) {
    assert(n % qk32 == 0);
    const auto *x = static_cast<const block_q4_1 *>(src);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int64_t j = 0; j < half; ++j) {
            dst[i * qk32 + j] = static_cast<float>(x[i].qs[j] & 0x0f) * d + m;
            dst[i * qk32 + half + j] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void quantize_row_q5_0(const float *src, void *dst, int64_t n) {
    assert(n % qk32 == 0);
    auto *y = static_cast<block_q5_0 *>(dst);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float *x = src + i * qk32;
        float amax = 0.0f, max = 0.0f;
        for (int64_t j = 0; j < qk32; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[half + j] * id;
            const uint8_t q0 = truncate_to_level(x0 + 16.5f, 31);
            const uint8_t q1 = truncate_to_level(x1 + 16.5f, 31);
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + half);
        }
        std::memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void dequantize_row_q5_0(const void *src, float *dst, int64_t n) {
    assert(n % qk32 == 0);
    const auto *x = static_cast<const block_q5_0 *>(src);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int64_t j = 0; j < half; ++j) {
            const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            const int q0 = ((x[i].qs[j] & 0x0f) | h0) - 16;
            const int q1 = ((x[i].qs[j] >> 4) | h1) - 16;
            dst[i * qk32 + j] = static_cast<float>(q0) * d;
            dst[i * qk32 + half + j] = static_cast<float>(q1) * d;
        }
    }
}

void quantize_row_q5_1(const float *src, void *dst, int64_t n) {
    assert(n % qk32 == 0);
    auto *y = static_cast<block_q5_1 *>(dst);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float *x = src + i * qk32;
        float min, max;
        block_range(x, min, max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[half + j] - min) * id;
            const uint8_t q0 = truncate_to_level(x0 + 0.5f, 31);
            const uint8_t q1 = truncate_to_level(x1 + 0.5f, 31);
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + half);
        }
        std::memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void dequantize_row_q5_1(const void *src, float *dst, int64_t n) {
    assert(n % qk32 == 0);
    const auto *x = static_cast<const block_q5_1 *>(src);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int64_t j = 0; j < half; ++j) {
            const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            const int q0 = (x[i].qs[j] & 0x0f) | h0;
            const int q1 = (x[i].qs[j] >> 4) | h1;
            dst[i * qk32 + j] = static_cast<float>(q0) * d + m;
            dst[i * qk32 + half + j] = static_cast<float>(q1) * d + m;
        }
    }
}

} // namespace strata::quants
