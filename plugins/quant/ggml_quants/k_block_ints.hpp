// The integer form of one weight block that both integer-dot kernel sets (int_dot_added_scalar.cpp and
// int_dot_added_avx2.cpp) compute with, and the float arithmetic that turns a block's exact integer sums into the
// row's result. Because every integer sum is exact and the float steps are the same single-rounding operations in
// the same order, the scalar and the AVX2 kernels give the same bits; the formats differ only in how their bits
// decode.
//
// 256-element formats against block_q8_k activations (a.d, a.qs, a.bsums per 16), in eight lanes l = 0..7 (the
// int32 lanes of one AVX2 register, so the vector kernel needs no horizontal sum per block):
//   isum[l] = sum over 32-element chunks c of scale[2c + l / 4] * sum_{j<4} value[32c + 4l + j] * a.qs[32c + 4l + j]
//   msum[l] = min[2l] * a.bsums[2l] + min[2l + 1] * a.bsums[2l + 1]
// and float lanes acc[l], from 0, per block with D = a.d * d and Dmin = a.d * dmin (fma: one rounding):
//   none:     acc[l] = fma(D, isum[l], acc[l])                                  (IQ4_XS: signed grid values)
//   offset:   acc[l] = fma(D, isum[l] - msum[l], acc[l])       (Q6_K: value = q, min = 32 * scale; Q3_K: value =
//                                                               q + 4 h, min = 4 * scale: the offsets cancel exactly)
//   separate: acc[l] = fma(-Dmin, msum[l], fma(D, isum[l], acc[l]))             (Q2_K, Q4_K, Q5_K: their own min)
// The row's result: ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)), the AVX2 horizontal sum.
// 32-element formats against block_q8_act activations (a.d, a.qs, a.sum_x8 = 8 * sum_j a.qs[j]; block_q8_act_sum's
// a.s = a.d * sum_j a.qs[j] for the formats with a min), in the same eight lanes and two float accumulators, acc_0
// for even blocks and acc_1 for odd ones (two FMA chains in flight):
//   isum[l] = sum_{j<4} value[4l + j] * a.qs[4l + j], less offset * sum_x8 / 8 in lane 0 only (Q5_0's 16)
//   acc_{b%2}[l] = fma(d * a.d, isum[l], acc_{b%2}[l]);  with a min (Q4_1, Q5_1) also msum_{b%2} = fma(m, a.s, msum_{b%2})
// The row's result: the horizontal sum above of acc_0[l] + acc_1[l], plus (msum_0 + msum_1) for the formats with a min.
//
// Everything here has internal linkage (an unnamed namespace) and takes the binary16 conversion as a parameter
// (`half`): the AVX2 file passes F16C's and the scalar file float_formats.hpp's, so no inline function is ever
// shared between code built for different instruction sets (see the note at the top of dot_avx2.cpp).
#pragma once

#include "ggml_quants.hpp"

#include <cstdint>
#include <cstring>

namespace strata::quants {
namespace {

enum class min_mode { none, offset, separate };

// Per-block scales of a 256-element format, one entry per 16-element half of each 32-element chunk.
struct k_block_scales {
    int16_t scale[16];
    int16_t min[16];
    float d, dmin;
};

constexpr int k_lanes = 8;

// The eight float lanes of a 256-element row, reduced in the AVX2 horizontal sum's order.
inline float k_lanes_sum(const float *acc) {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

namespace k_formats {

inline void scale_min_k4(int j, const uint8_t *q, int &d, int &m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q4_K/Q5_K: eight 6-bit scales and mins, each for a 32-element chunk (both of its 16-element halves).
template <class Block, class Half> void scales_k4(const Block &b, k_block_scales &s, Half half) {
    for (int c = 0; c < 8; ++c) {
        int sc, m;
        scale_min_k4(c, b.scales, sc, m);
        s.scale[2 * c] = s.scale[2 * c + 1] = static_cast<int16_t>(sc);
        s.min[2 * c] = s.min[2 * c + 1] = static_cast<int16_t>(m);
    }
    s.d = half(b.d);
    s.dmin = half(b.dmin);
}

// Every format: its block, value signedness, min mode, scales() and the 32 values of chunk c (elements 32c..32c+31)
// as bytes (values() in scalar code; the AVX2 file decodes the same chunks in registers).
struct q2_k {
    using block = block_q2_k;
    static constexpr bool signed_values = false;
    static constexpr min_mode mode = min_mode::separate;
    template <class Half> static void scales(const block &b, k_block_scales &s, Half half) {
        for (int h = 0; h < 16; ++h) {
            s.scale[h] = static_cast<int16_t>(b.scales[h] & 0xF);
            s.min[h] = static_cast<int16_t>(b.scales[h] >> 4);
        }
        s.d = half(b.d);
        s.dmin = half(b.dmin);
    }
    static void values(const block &b, int c, int8_t *v) {
        const uint8_t *q = b.qs + 32 * (c / 4);
        const int shift = 2 * (c % 4);
        for (int l = 0; l < 32; ++l) v[l] = static_cast<int8_t>((q[l] >> shift) & 3);
    }
};

struct q3_k {
    using block = block_q3_k;
    static constexpr bool signed_values = false;
    static constexpr min_mode mode = min_mode::offset;
    template <class Half> static void scales(const block &b, k_block_scales &s, Half half) {
        int8_t sc[16];
        unpack_q3_k_scales(b.scales, sc);
        for (int h = 0; h < 16; ++h) {
            s.scale[h] = static_cast<int16_t>(sc[h] - 32);
            s.min[h] = static_cast<int16_t>(4 * (sc[h] - 32));
        }
        s.d = half(b.d);
        s.dmin = 0.0f;
    }
    // q2 - (high bit ? 0 : 4) + 4 = q2 + 4 * high bit, in [0, 7].
    static void values(const block &b, int c, int8_t *v) {
        const uint8_t *q = b.qs + 32 * (c / 4);
        const int shift = 2 * (c % 4);
        for (int l = 0; l < 32; ++l) v[l] = static_cast<int8_t>(((q[l] >> shift) & 3) | (((b.hmask[l] >> c) & 1) << 2));
    }
};

struct q4_k {
    using block = block_q4_k;
    static constexpr bool signed_values = false;
    static constexpr min_mode mode = min_mode::separate;
    template <class Half> static void scales(const block &b, k_block_scales &s, Half half) { scales_k4(b, s, half); }
    static void values(const block &b, int c, int8_t *v) {
        const uint8_t *q = b.qs + 32 * (c / 2);
        const int shift = 4 * (c % 2);
        for (int l = 0; l < 32; ++l) v[l] = static_cast<int8_t>((q[l] >> shift) & 0xF);
    }
};

struct q5_k {
    using block = block_q5_k;
    static constexpr bool signed_values = false;
    static constexpr min_mode mode = min_mode::separate;
    template <class Half> static void scales(const block &b, k_block_scales &s, Half half) { scales_k4(b, s, half); }
    static void values(const block &b, int c, int8_t *v) {
        const uint8_t *q = b.qs + 32 * (c / 2);
        const int shift = 4 * (c % 2);
        for (int l = 0; l < 32; ++l) {
            v[l] = static_cast<int8_t>(((q[l] >> shift) & 0xF) | (((b.qh[l] >> c) & 1) << 4));
        }
    }
};

struct q6_k {
    using block = block_q6_k;
    static constexpr bool signed_values = false;
    static constexpr min_mode mode = min_mode::offset;
    template <class Half> static void scales(const block &b, k_block_scales &s, Half half) {
        for (int h = 0; h < 16; ++h) {
            s.scale[h] = b.scales[h];
            s.min[h] = static_cast<int16_t>(32 * b.scales[h]);
        }
        s.d = half(b.d);
        s.dmin = 0.0f;
    }
    // Chunk c: the 128-element half c / 4, quarter k = c % 4 (low nibbles of ql[0..31], of ql[32..63], then the high
    // nibbles), with the two bits of qh at 2k; value in [0, 63].
    static void values(const block &b, int c, int8_t *v) {
        const uint8_t *ql = b.ql + 64 * (c / 4) + 32 * (c % 2);
        const uint8_t *qh = b.qh + 32 * (c / 4);
        const int k = c % 4;
        const int lshift = 4 * (k / 2);
        for (int l = 0; l < 32; ++l) {
            v[l] = static_cast<int8_t>(((ql[l] >> lshift) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4));
        }
    }
};

struct iq4_xs {
    using block = block_iq4_xs;
    static constexpr bool signed_values = true;
    static constexpr min_mode mode = min_mode::none;
    template <class Half> static void scales(const block &b, k_block_scales &s, Half half) {
        uint16_t h;
        std::memcpy(&h, b.scales_h, sizeof h);
        for (int c = 0; c < 8; ++c) {
            const int ls = ((b.scales_l[c / 2] >> 4 * (c % 2)) & 0xf) | (((h >> 2 * c) & 3) << 4);
            s.scale[2 * c] = s.scale[2 * c + 1] = static_cast<int16_t>(ls - 32);
            s.min[2 * c] = s.min[2 * c + 1] = 0;
        }
        s.d = half(b.d);
        s.dmin = 0.0f;
    }
    static void values(const block &b, int c, int8_t *v) {
        const uint8_t *q = b.qs + 16 * c;
        for (int j = 0; j < 16; ++j) {
            v[j] = kvalues_iq4nl[q[j] & 0xf];
            v[j + 16] = kvalues_iq4nl[q[j] >> 4];
        }
    }
};

} // namespace k_formats

// The 32-element formats: values (unsigned but for IQ4_NL's signed grid), the offset taken off lane 0, d and the
// additive min (has_min).
namespace small_formats {

struct q4_1 {
    using block = block_q4_1;
    template <class Half> static float d(const block &b, Half half) { return half(b.d); }
    template <class Half> static float m(const block &b, Half half) { return half(b.m); }
    static constexpr bool has_min = true, signed_values = false;
    using act_block = block_q8_act_sum;
    static constexpr int offset = 0;
    static void values(const block &b, int8_t *v) {
        for (int j = 0; j < 16; ++j) {
            v[j] = static_cast<int8_t>(b.qs[j] & 0xF);
            v[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
        }
    }
};

inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

struct q5_0 {
    using block = block_q5_0;
    template <class Half> static float d(const block &b, Half half) { return half(b.d); }
    static constexpr bool has_min = false, signed_values = false;
    using act_block = block_q8_act;
    static constexpr int offset = 16;
    static void values(const block &b, int8_t *v) {
        const uint32_t qh = load_u32(b.qh);
        for (int j = 0; j < 16; ++j) {
            v[j] = static_cast<int8_t>((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
            v[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
    }
};

struct q5_1 {
    using block = block_q5_1;
    template <class Half> static float d(const block &b, Half half) { return half(b.d); }
    template <class Half> static float m(const block &b, Half half) { return half(b.m); }
    static constexpr bool has_min = true, signed_values = false;
    using act_block = block_q8_act_sum;
    static constexpr int offset = 0;
    static void values(const block &b, int8_t *v) {
        const uint32_t qh = load_u32(b.qh);
        for (int j = 0; j < 16; ++j) {
            v[j] = static_cast<int8_t>((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
            v[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
    }
};

struct iq4_nl {
    using block = block_iq4_nl;
    template <class Half> static float d(const block &b, Half half) { return half(b.d); }
    static constexpr bool has_min = false, signed_values = true;
    using act_block = block_q8_act;
    static constexpr int offset = 0;
    static void values(const block &b, int8_t *v) {
        for (int j = 0; j < 16; ++j) {
            v[j] = kvalues_iq4nl[b.qs[j] & 0xf];
            v[j + 16] = kvalues_iq4nl[b.qs[j] >> 4];
        }
    }
};

} // namespace small_formats

// The added formats by GGUF type, for both kernel sets: visit(format tag, dequantizer) for `type`, or fallback().
template <class Visit, class Fallback> auto with_added_format(uint32_t type, Visit visit, Fallback fallback) {
    switch (type) {
    case ggml_type_q4_1: return visit.template operator()<small_formats::q4_1, dequantize_row_q4_1, false>();
    case ggml_type_q5_0: return visit.template operator()<small_formats::q5_0, dequantize_row_q5_0, false>();
    case ggml_type_q5_1: return visit.template operator()<small_formats::q5_1, dequantize_row_q5_1, false>();
    case ggml_type_iq4_nl: return visit.template operator()<small_formats::iq4_nl, dequantize_row_iq4_nl, false>();
    case ggml_type_q2_k: return visit.template operator()<k_formats::q2_k, dequantize_row_q2_k, true>();
    case ggml_type_q3_k: return visit.template operator()<k_formats::q3_k, dequantize_row_q3_k, true>();
    case ggml_type_q4_k: return visit.template operator()<k_formats::q4_k, dequantize_row_q4_k, true>();
    case ggml_type_q5_k: return visit.template operator()<k_formats::q5_k, dequantize_row_q5_k, true>();
    case ggml_type_q6_k: return visit.template operator()<k_formats::q6_k, dequantize_row_q6_k, true>();
    case ggml_type_iq4_xs: return visit.template operator()<k_formats::iq4_xs, dequantize_row_iq4_xs, true>();
    default: return fallback();
    }
}
} // namespace
} // namespace strata::quants
