// Reference quantize/dequantize for every format. The Q8_0/Q4_0 arithmetic follows ggml's quantize_row_q8_0_ref and
// quantize_row_q4_0_ref step for step (float scale inverse, roundf / +8.5f truncation) so the bytes match exactly.
#include "ggml_quants.hpp"

#include <cassert>
#include <cmath>
#include <cstring>

namespace strata::quants {
namespace {

// ggml stores a float that is in range for every finite input; the clamps only turn NaN/inf (undefined behaviour in
// a float->int cast) into a defined value and never change an in-range result.
int8_t round_to_q8(float v) {
    const float r = std::roundf(v);
    if (!(r == r)) return 0;
    if (r >= 127.0f) return 127;
    if (r <= -127.0f) return -127;
    return static_cast<int8_t>(r);
}

uint8_t truncate_to_q4(float v) { // v = x * id + 8.5f, in [0.5, 16.5] for finite input
    if (!(v >= 0.0f)) return 0;
    if (v >= 15.0f) return 15;
    return static_cast<uint8_t>(v);
}

uint16_t load_u16(const void *p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

} // namespace

void quantize_row_f32(const float *src, void *dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

void dequantize_row_f32(const void *src, float *dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

void quantize_row_f16(const float *src, void *dst, int64_t n) {
    auto *out = static_cast<unsigned char *>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

void dequantize_row_f16(const void *src, float *dst, int64_t n) {
    const auto *in = static_cast<const unsigned char *>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(in + 2 * i));
}

void quantize_row_bf16(const float *src, void *dst, int64_t n) {
    auto *out = static_cast<unsigned char *>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

void dequantize_row_bf16(const void *src, float *dst, int64_t n) {
    const auto *in = static_cast<const unsigned char *>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(in + 2 * i));
}

void quantize_row_q8_0(const float *src, void *dst, int64_t n) {
    assert(n % qk8_0 == 0);
    auto *blocks = static_cast<block_q8_0 *>(dst);
    const int64_t nb = n / qk8_0;
    for (int64_t i = 0; i < nb; ++i) {
        const float *x = src + i * qk8_0;
        float amax = 0.0f;
        for (int64_t j = 0; j < qk8_0; ++j) {
            const float a = std::fabs(x[j]);
            amax = amax > a ? amax : a; // ggml's MAX(amax, fabsf(v)), NaN behaviour included
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < qk8_0; ++j) blocks[i].qs[j] = round_to_q8(x[j] * id);
    }
}

void dequantize_row_q8_0(const void *src, float *dst, int64_t n) {
    assert(n % qk8_0 == 0);
    const auto *blocks = static_cast<const block_q8_0 *>(src);
    const int64_t nb = n / qk8_0;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(load_u16(&blocks[i].d));
        for (int64_t j = 0; j < qk8_0; ++j) dst[i * qk8_0 + j] = static_cast<float>(blocks[i].qs[j]) * d;
    }
}

void quantize_row_q4_0(const float *src, void *dst, int64_t n) {
    assert(n % qk4_0 == 0);
    auto *blocks = static_cast<block_q4_0 *>(dst);
    const int64_t nb = n / qk4_0;
    constexpr int64_t half = qk4_0 / 2;
    for (int64_t i = 0; i < nb; ++i) {
        const float *x = src + i * qk4_0;
        // The scale keeps the sign of the largest-magnitude element so that element maps exactly to -8.
        float amax = 0.0f;
        float max = 0.0f;
        for (int64_t j = 0; j < qk4_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < half; ++j) {
            // Separate statements keep a compiler from fusing the multiply and add into an FMA (clang's
            // -ffp-contract=on), which would round differently from ggml.
            const float x0 = x[j] * id;
            const float x1 = x[half + j] * id;
            const uint8_t lo = truncate_to_q4(x0 + 8.5f);
            const uint8_t hi = truncate_to_q4(x1 + 8.5f);
            blocks[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

void dequantize_row_q4_0(const void *src, float *dst, int64_t n) {
    assert(n % qk4_0 == 0);
    const auto *blocks = static_cast<const block_q4_0 *>(src);
    const int64_t nb = n / qk4_0;
    constexpr int64_t half = qk4_0 / 2;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(load_u16(&blocks[i].d));
        for (int64_t j = 0; j < half; ++j) {
            const int lo = (blocks[i].qs[j] & 0x0f) - 8;
            const int hi = (blocks[i].qs[j] >> 4) - 8;
            dst[i * qk4_0 + j] = static_cast<float>(lo) * d;
            dst[i * qk4_0 + half + j] = static_cast<float>(hi) * d;
        }
    }
}

} // namespace strata::quants
