// Reference quantize/dequantize of the non-linear 4-bit formats IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of
// 256 with 6-bit group scales), following ggml's quantize_row_iq4_nl_impl in the configurations its *_ref functions
// use (IQ4_NL: one scale search, no refinement; IQ4_XS: 7 refinement steps each way, then 6-bit group scales), so
// the bytes equal llama.cpp's.
#include "ggml_quants.hpp"
#include "quant_rounding.hpp"

#include <cassert>
#include <cmath>
#include <cstring>

namespace strata::quants {
namespace {

constexpr float group_max_eps = 1e-15f;

// The best scale of one 32-element group for the grid (weighted by x^2), refined over 2 * ntry + 1 trial scales
// when ntry > 0. L receives the grid indices. Returns 0 for an all-zero group (L untouched, as in ggml).
float search_group_scale(const float *xb, uint8_t *Lb, int ntry) {
    const int8_t *values = kvalues_iq4nl;
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        const float ax = std::fabs(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < group_max_eps) return 0.0f;
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const int l = nearest_grid_index(16, values, id * xb[j]);
        Lb[j] = static_cast<uint8_t>(l);
        const float q = values[l];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float q = values[nearest_grid_index(16, values, id * xb[j])];
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// 32 grid indices -> 16 bytes: element j in the low nibble of byte j, element j + 16 in its high nibble.
void pack_nibbles(const uint8_t *L, uint8_t *q4) {
    for (int j = 0; j < 16; ++j) q4[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

} // namespace

void quantize_row_iq4_nl(const float *src, void *dst, int64_t n) {
    assert(n % qk32 == 0);
    auto *y = static_cast<block_iq4_nl *>(dst);
    uint8_t L[32] = {}; // ggml keeps an all-zero block's indices from the block before; here they stay 0 (d is 0)
    for (int64_t ib = 0; ib < n / qk32; ++ib) {
        const float d = search_group_scale(src + ib * qk32, L, -1);
        y[ib].d = fp32_to_fp16(d);
        pack_nibbles(L, y[ib].qs);
    }
}

void dequantize_row_iq4_nl(const void *src, float *dst, int64_t n) {
    assert(n % qk32 == 0);
    const auto *x = static_cast<const block_iq4_nl *>(src);
    for (int64_t i = 0; i < n / qk32; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; ++j) {
            dst[i * qk32 + j] = d * kvalues_iq4nl[x[i].qs[j] & 0xf];
            dst[i * qk32 + 16 + j] = d * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

void quantize_row_iq4_xs(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_iq4_xs *>(dst);
    const float *x = src;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k] = {};
        float scales[qk_k / 32];
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            scales[ib] = search_group_scale(x + ib * 32, L + ib * 32, 7);
            const float abs_d = std::fabs(scales[ib]);
            if (abs_d > amax_scale) {
                amax_scale = abs_d;
                max_scale = scales[ib];
            }
        }
        uint16_t scales_h = 0;
        const float d = -max_scale / 32;
        y[i].d = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.f;
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            int l = nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : (l > 31 ? 31 : l);
            const float dl = d * l;
            const float idl = dl != 0.0f ? 1 / dl : 0.f;
            for (int j = 0; j < 32; ++j) {
                L[ib * 32 + j] = static_cast<uint8_t>(nearest_grid_index(16, kvalues_iq4nl, idl * x[ib * 32 + j]));
            }
            l += 32;
            const auto l_l = static_cast<uint8_t>(l & 0xf);
            const auto l_h = static_cast<uint8_t>(l >> 4);
            if (ib % 2 == 0) y[i].scales_l[ib / 2] = l_l;
            else y[i].scales_l[ib / 2] = static_cast<uint8_t>(y[i].scales_l[ib / 2] | (l_l << 4));
            scales_h = static_cast<uint16_t>(scales_h | (l_h << 2 * (ib % 8)));
        }
        std::memcpy(y[i].scales_h, &scales_h, sizeof scales_h);
        for (int ib = 0; ib < qk_k / 32; ++ib) pack_nibbles(L + ib * 32, y[i].qs + ib * 16);
    }
}

void dequantize_row_iq4_xs(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_iq4_xs *>(src);
    float *y = dst;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        uint16_t scales_h;
        std::memcpy(&scales_h, x[i].scales_h, sizeof scales_h);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < qk_k / 32; ++ib, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

} // namespace strata::quants
