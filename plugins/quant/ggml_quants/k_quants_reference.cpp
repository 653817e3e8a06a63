// Reference quantize/dequantize of the K-quant super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and of Q8_K. The scale
// searches (make_qx_quants, make_q3_quants, make_qkx2_quants in ggml) and every packing step follow ggml's
// quantize_row_*_ref in the same float operations and order, so the bytes equal llama.cpp's (tests/peer compares
// them with libggml-base.so on 10^5 blocks per type).
#include "ggml_quants.hpp"
#include "quant_rounding.hpp"

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

namespace strata::quants {
namespace {

constexpr float group_max_eps = 1e-15f; // ggml's GROUP_MAX_EPS: a group below it is all zero

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Symmetric levels [-nmax, nmax - 1] for a group of n, with a weighted least-squares scale refined over 19 trial
// scales (ggml's make_qx_quants with rmse_type 1, the one Q6_K uses). L receives level + nmax.
float search_symmetric_scale(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < group_max_eps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's group search (ggml's make_q3_quants with do_rmse): levels [-nmax, nmax - 1], then up to five passes that
// move single elements to the level that most improves the weighted fit. L receives level + nmax.
float search_q3_scale(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < group_max_eps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Levels [0, nmax] with a scale and a (non-positive) offset fitted by weighted least squares over nstep + 1 trial
// scales (ggml's make_qkx2_quants). Returns the scale; *the_min receives -offset.
float search_scale_and_min(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(clamp_int(l, 0, nmax));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, static_cast<size_t>(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// The 6-bit scale and min of group j of a Q4_K/Q5_K block (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t *q, uint8_t &d, uint8_t &m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// Packs eight 6-bit scales and mins into Q4_K/Q5_K's 12 bytes (the inverse of scale_min_k4).
void pack_scales_mins_k4(const float *scales, const float *mins, float max_scale, float max_min, uint8_t *packed) {
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < qk_k / 32; ++j) {
        uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
        uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            packed[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
    }
}

// The 32-element group search Q4_K and Q5_K share: weights av_x + |x| (av_x the group's RMS).
void search_groups_k4(const float *x, int nmax, float rmin, int nstep, uint8_t *L, float *scales, float *mins,
                      float &max_scale, float &max_min) {
    uint8_t Laux[32];
    float weights[32];
    max_scale = 0;
    max_min = 0;
    for (int j = 0; j < qk_k / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = search_scale_and_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                         nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
}

// Requantizes each 32-element group with its stored (rounded) scale and min, as ggml does after packing them.
void requantize_groups_k4(const float *x, const uint8_t *packed, float d_all, float dmin_all, int nmax, uint8_t *L) {
    for (int j = 0; j < qk_k / 32; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, packed, sc, m);
        const float d = d_all * sc;
        if (d == 0.0f) continue;
        const float dm = dmin_all * m;
        for (int ii = 0; ii < 32; ++ii) {
            L[32 * j + ii] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
        }
    }
}

// Q4_K/Q5_K's common part: the group search, the packed 6-bit scales and mins, d and dmin, then the levels L
// requantized with the stored (rounded) scales.
template <class Block>
void quantize_levels_k4(const float *x, int nmax, float rmin, int nstep, Block &y, uint8_t *L) {
    float mins[qk_k / 32], scales[qk_k / 32], max_scale, max_min;
    search_groups_k4(x, nmax, rmin, nstep, L, scales, mins, max_scale, max_min);
    pack_scales_mins_k4(scales, mins, max_scale, max_min, y.scales);
    y.d = fp32_to_fp16(max_scale / 63.f);
    y.dmin = fp32_to_fp16(max_min / 63.f);
    requantize_groups_k4(x, y.scales, fp16_to_fp32(y.d), fp16_to_fp32(y.dmin), nmax, L);
}

// Q2_K/Q3_K's 2-bit packing: byte l of each 32-byte run holds elements l, l+32, l+64, l+96 of its 128.
template <class Level> void pack_2bit(const Level *L, uint8_t *qs) {
    for (int j = 0; j < qk_k; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                                 (L[j + l + 96] << 6));
        }
    }
}

} // namespace

void quantize_row_q2_k(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_q2_k *>(dst);
    const float *x = src;
    constexpr float q4scale = 15.f;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k], Laux[16];
        float weights[16], mins[qk_k / 16], scales[qk_k / 16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < qk_k / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] =
                search_scale_and_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < qk_k / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < qk_k / 16; ++j) y[i].scales[j] = 0;
            y[i].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < qk_k / 16; ++j) {
                y[i].scales[j] = static_cast<uint8_t>(y[i].scales[j] | (nearest_int(iscale * mins[j]) << 4));
            }
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                L[16 * j + ii] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void dequantize_row_q2_k(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_q2_k *>(src);
    float *y = dst;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * part] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void quantize_row_q3_k(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_q3_k *>(dst);
    const float *x = src;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        int8_t L[qk_k];
        float scales[qk_k / 16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < qk_k / 16; ++j) {
            scales[j] = search_q3_scale(16, 4, x + 16 * j, L + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, 12);
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < qk_k / 16; ++j) {
                int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = static_cast<int8_t>(clamp_int(l, -32, 31) + 32);
                if (j < 8) y[i].scales[j] = l & 0xF;
                else y[i].scales[j - 8] = static_cast<uint8_t>(y[i].scales[j - 8] | ((l & 0xF) << 4));
                l = static_cast<int8_t>(l >> 4);
                y[i].scales[j % 4 + 8] = static_cast<uint8_t>(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            int8_t sc = static_cast<int8_t>(j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4);
            sc = static_cast<int8_t>((sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
            const float d = fp16_to_fp32(y[i].d) * sc;
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                L[16 * j + ii] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
            }
        }
        std::memset(y[i].hmask, 0, qk_k / 8);
        // The high bit of element j goes to bit j / 32 of hmask[j % 32].
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < qk_k; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] = static_cast<int8_t>(L[j] - 4);
            }
            if (++m == qk_k / 8) {
                m = 0;
                hm = static_cast<uint8_t>(hm << 1);
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

// Q3_K's sixteen 6-bit scales (biased by 32) unpacked from their 12 bytes, as ggml's kmask shuffle does.
void unpack_q3_k_scales(const uint8_t *packed, int8_t *scales) {
    constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[4];
    std::memcpy(aux, packed, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    std::memcpy(scales, aux, 16);
}

void dequantize_row_q3_k(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_q3_k *>(src);
    float *y = dst;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d_all = fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        int8_t scales[16];
        unpack_q3_k_scales(x[i].scales, scales);
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * part; l < 16 * part + 16; ++l) {
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

void quantize_row_q4_k(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_q4_k *>(dst);
    const float *x = src;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        quantize_levels_k4(x, 15, -1.f, 20, y[i], L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < qk_k; j += 64, q += 32) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

void dequantize_row_q4_k(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_q4_k *>(src);
    float *y = dst;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is + 0, x[i].scales, sc, m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, x[i].scales, sc, m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void quantize_row_q5_k(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_q5_k *>(dst);
    const float *x = src;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        quantize_levels_k4(x, 31, -0.5f, 15, y[i], L);
        uint8_t *qh = y[i].qh;
        uint8_t *ql = y[i].qs;
        std::memset(qh, 0, qk_k / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n0 = 0; n0 < qk_k; n0 += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n0 + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n0 + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
            m1 = static_cast<uint8_t>(m1 << 2);
            m2 = static_cast<uint8_t>(m2 << 2);
        }
    }
}

void dequantize_row_q5_k(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_q5_k *>(src);
    float *y = dst;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32) {
            uint8_t sc, m;
            scale_min_k4(is + 0, x[i].scales, sc, m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, x[i].scales, sc, m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = static_cast<uint8_t>(u1 << 2);
            u2 = static_cast<uint8_t>(u2 << 2);
        }
    }
}

void quantize_row_q6_k(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_q6_k *>(dst);
    const float *x = src;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        int8_t L[qk_k];
        float scales[qk_k / 16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            const float scale = search_symmetric_scale(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < group_max_eps) {
            std::memset(&y[i], 0, sizeof(block_q6_k));
            y[i].d = fp32_to_fp16(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            const int s = nearest_int(iscale * scales[ib]);
            y[i].scales[ib] = static_cast<int8_t>(s < 127 ? s : 127);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                L[16 * j + ii] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
            }
        }
        uint8_t *ql = y[i].ql;
        uint8_t *qh = y[i].qh;
        for (int j = 0; j < qk_k; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                             ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void dequantize_row_q6_k(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_q6_k *>(src);
    float *y = dst;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n0 = 0; n0 < qk_k; n0 += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void quantize_row_q8_k(const float *src, void *dst, int64_t n) {
    assert(n % qk_k == 0);
    auto *y = static_cast<block_q8_k *>(dst);
    const float *x = src;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        float max = 0, amax = 0;
        for (int j = 0; j < qk_k; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            y[i].d = 0;
            std::memset(y[i].qs, 0, qk_k);
            std::memset(y[i].bsums, 0, sizeof y[i].bsums); // ggml leaves them as they were; zero is their value
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < qk_k; ++j) {
            const int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = static_cast<int16_t>(sum);
        }
        y[i].d = 1 / iscale;
    }
}

void quantize_activations_q8k(const float *x, void *xq, int64_t n) {
    quantize_row_q8_k(x, xq, n);
    auto *y = static_cast<block_q8_k *>(xq);
    for (int64_t i = 0; i < n; ++i) {
        if (x[i] != x[i]) y[i / qk_k].d = std::numeric_limits<float>::quiet_NaN();
    }
}

void dequantize_row_q8_k(const void *src, float *dst, int64_t n) {
    assert(n % qk_k == 0);
    const auto *x = static_cast<const block_q8_k *>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        for (int j = 0; j < qk_k; ++j) dst[i * qk_k + j] = x[i].d * x[i].qs[j];
    }
}

} // namespace strata::quants
