// The GGUF weight formats the CUDA kernels read (byte layouts as in plugins/quant/ggml_quants/block_formats.hpp,
// which are ggml's): one element of a row decoded to float. The same code compiles for the GPU (nvcc) and for the
// host (plain C++), so tests/device_cuda checks every decode against the quant plugin's dequantize_row on machines
// without a GPU.
//
// Every decode is exact: F16/BF16 widen exactly, and a Q8_0/Q4_0 element is a binary16 scale times a small integer,
// whose product fits a float's 24-bit mantissa. The other block formats (Q4_1, Q5_x, IQ4_NL, the K-quants, IQ4_XS)
// repeat the reference dequantizer's float operations in its order, each rounded on its own (mul_rn/add_rn/sub_rn:
// no fused multiply-add on the GPU). So a kernel that decodes and then multiplies in float sees exactly the weights
// the CPU's reference dequantize_row produces.
#pragma once

#include <strata/float16.hpp>
#include <strata/float8.hpp>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STRATA_CUDA_HD __host__ __device__ __forceinline__
#else
#define STRATA_CUDA_HD inline
#endif

namespace strata::cuda {

// GGUF tensor type ids this device computes on.
enum weight_type : uint32_t {
    weight_f32 = 0,
    weight_f16 = 1,
    weight_q4_0 = 2,
    weight_q4_1 = 3,
    weight_q5_0 = 6,
    weight_q5_1 = 7,
    weight_q8_0 = 8,
    weight_q2_k = 10,
    weight_q3_k = 11,
    weight_q4_k = 12,
    weight_q5_k = 13,
    weight_q6_k = 14,
    weight_iq4_nl = 20,
    weight_iq4_xs = 23,
    weight_bf16 = 30,
    // Strata's group-integer formats (plugin_abi.h STRATA_TYPE_Q*_G*: GPTQ / AWQ checkpoints repacked at load).
    weight_q4_g32 = 1024,
    weight_q4_g64 = 1025,
    weight_q4_g128 = 1026,
    weight_q8_g32 = 1027,
    weight_q8_g64 = 1028,
    weight_q8_g128 = 1029,
    // Strata's FP8 formats (plugin_abi.h STRATA_TYPE_F8_E4M3_B*: compressed-tensors / fp8 checkpoints repacked).
    weight_f8_e4m3_b32 = 1030,
    weight_f8_e4m3_b128 = 1031,
};

// Every type above, for the dispatch switches (kernels_matmul.cuh) and the block-shape table: say the list once.
#define STRATA_CUDA_WEIGHT_TYPES(X)                                                                                    \
    X(weight_f32) X(weight_f16) X(weight_bf16) X(weight_q8_0) X(weight_q4_0) X(weight_q4_1) X(weight_q5_0)            \
        X(weight_q5_1) X(weight_iq4_nl) X(weight_q2_k) X(weight_q3_k) X(weight_q4_k) X(weight_q5_k) X(weight_q6_k)    \
            X(weight_iq4_xs) X(weight_q4_g32) X(weight_q4_g64) X(weight_q4_g128) X(weight_q8_g32)              \
                X(weight_q8_g64) X(weight_q8_g128) X(weight_f8_e4m3_b32) X(weight_f8_e4m3_b128)

inline constexpr int64_t quant_block_elems = 32; // Q8_0 and Q4_0
inline constexpr int64_t q8_0_block_bytes = 34;  // binary16 scale + 32 int8
inline constexpr int64_t q4_0_block_bytes = 18;  // binary16 scale + 16 bytes of nibbles

STRATA_CUDA_HD float bits_as_float(uint32_t u) { return strata::float16::bits_to_float(u); }

// binary16 / bfloat16 -> float32, exact for every input (subnormals, inf, NaN payloads): the SDK's integer
// conversions, so host and device run the same arithmetic.
STRATA_CUDA_HD float half_to_float(uint16_t h) { return strata::float16::fp16_to_fp32(h); }

STRATA_CUDA_HD float bf16_to_float(uint16_t h) { return strata::float16::bf16_to_fp32(h); }

// Single-rounded float operations (the GPU would otherwise fuse a * b + c into one FMA, which rounds once).
STRATA_CUDA_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
STRATA_CUDA_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
STRATA_CUDA_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// Little-endian fields read byte by byte (the new block formats' fields sit at any even or odd offset).
STRATA_CUDA_HD uint32_t u16_at(const unsigned char *p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8; }
STRATA_CUDA_HD uint32_t u32_at(const unsigned char *p) { return u16_at(p) | u16_at(p + 2) << 16; }
STRATA_CUDA_HD float half_at(const unsigned char *p) { return half_to_float(static_cast<uint16_t>(u16_at(p))); }

// IQ4_NL / IQ4_XS's non-linear grid.
STRATA_CUDA_HD int iq4_grid_value(unsigned nibble) {
    constexpr int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    return values[nibble & 15u];
}

// Element j (0..31) of a 32-element block's nibbles at qs: low nibble of byte j for j < 16, else high nibble of j-16.
STRATA_CUDA_HD unsigned nibble_at(const unsigned char *qs, int64_t j) {
    const unsigned byte = qs[j & 15];
    return j < 16 ? (byte & 15u) : (byte >> 4);
}

// n 32-bit little-endian words from p. The GPU reads them with 2-byte loads (p only needs 2-byte alignment, which
// Q8_0/Q4_0 quants inside 34- and 18-byte blocks have) or 16-byte loads (p 16-byte aligned); the host copies.
template <int N> STRATA_CUDA_HD void load_words_align2(const unsigned char *p, uint32_t (&words)[N]) {
#if defined(__CUDA_ARCH__)
    const auto *h = reinterpret_cast<const uint16_t *>(p);
#pragma unroll
    for (int i = 0; i < N; ++i) words[i] = static_cast<uint32_t>(h[2 * i]) | static_cast<uint32_t>(h[2 * i + 1]) << 16;
#else
    std::memcpy(words, p, sizeof words);
#endif
}

template <int N> STRATA_CUDA_HD void load_words_align16(const unsigned char *p, uint32_t (&words)[N]) {
    static_assert(N % 4 == 0, "whole 16-byte loads");
#if defined(__CUDA_ARCH__)
    const auto *v = reinterpret_cast<const uint4 *>(p);
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
        const uint4 u = v[i];
        words[4 * i] = u.x;
        words[4 * i + 1] = u.y;
        words[4 * i + 2] = u.z;
        words[4 * i + 3] = u.w;
    }
#else
    std::memcpy(words, p, sizeof words);
#endif
}

// Element k of a row in format T, and load8: elements k..k+7 for k a multiple of 8, read with wide loads. Rows are
// aligned to `alignment` bytes (checked by the device before launching); load8 of F32/F16/BF16 also needs the row
// 16-byte aligned (the launcher falls back to element() otherwise).
template <uint32_t T> struct format;

template <> struct format<weight_f32> {
    static constexpr int64_t block_elems = 1, block_bytes = 4;
    static constexpr uint32_t alignment = 4;
    static constexpr bool load8_needs_16_byte_rows = true;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        return reinterpret_cast<const float *>(row)[k];
    }
    STRATA_CUDA_HD static void load8(const unsigned char *row, int64_t k, float (&out)[8]) {
        uint32_t w[8];
        load_words_align16(row + 4 * k, w);
        for (int i = 0; i < 8; ++i) out[i] = bits_as_float(w[i]);
    }
};

template <> struct format<weight_f16> {
    static constexpr int64_t block_elems = 1, block_bytes = 2;
    static constexpr uint32_t alignment = 2;
    static constexpr bool load8_needs_16_byte_rows = true;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        return half_to_float(reinterpret_cast<const uint16_t *>(row)[k]);
    }
    STRATA_CUDA_HD static void load8(const unsigned char *row, int64_t k, float (&out)[8]) {
        uint32_t w[4];
        load_words_align16(row + 2 * k, w);
        for (int i = 0; i < 8; ++i) out[i] = half_to_float(static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2))));
    }
};

template <> struct format<weight_bf16> {
    static constexpr int64_t block_elems = 1, block_bytes = 2;
    static constexpr uint32_t alignment = 2;
    static constexpr bool load8_needs_16_byte_rows = true;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        return bf16_to_float(reinterpret_cast<const uint16_t *>(row)[k]);
    }
    STRATA_CUDA_HD static void load8(const unsigned char *row, int64_t k, float (&out)[8]) {
        uint32_t w[4];
        load_words_align16(row + 2 * k, w);
        for (int i = 0; i < 8; ++i) out[i] = bf16_to_float(static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2))));
    }
};

// Q8_0: x[j] = d * qs[j].
template <> struct format<weight_q8_0> {
    static constexpr int64_t block_elems = quant_block_elems, block_bytes = q8_0_block_bytes;
    static constexpr uint32_t alignment = 2;
    static constexpr bool load8_needs_16_byte_rows = false;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *block = row + (k / quant_block_elems) * q8_0_block_bytes;
        const float d = half_to_float(*reinterpret_cast<const uint16_t *>(block));
        return d * static_cast<float>(static_cast<int8_t>(block[2 + k % quant_block_elems]));
    }
    STRATA_CUDA_HD static void load8(const unsigned char *row, int64_t k, float (&out)[8]) {
        const unsigned char *block = row + (k / quant_block_elems) * q8_0_block_bytes;
        const float d = half_to_float(*reinterpret_cast<const uint16_t *>(block));
        uint32_t w[2];
        load_words_align2(block + 2 + k % quant_block_elems, w);
        for (int i = 0; i < 8; ++i)
            out[i] = d * static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)))));
    }
};

// Q4_0: byte j holds element j (low nibble) and element j + 16 (high nibble); x = d * (nibble - 8).
template <> struct format<weight_q4_0> {
    static constexpr int64_t block_elems = quant_block_elems, block_bytes = q4_0_block_bytes;
    static constexpr uint32_t alignment = 2;
    static constexpr bool load8_needs_16_byte_rows = false;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *block = row + (k / quant_block_elems) * q4_0_block_bytes;
        const float d = half_to_float(*reinterpret_cast<const uint16_t *>(block));
        const int64_t j = k % quant_block_elems;
        const unsigned byte = block[2 + (j & 15)];
        const int nibble = static_cast<int>(j < 16 ? (byte & 15u) : (byte >> 4));
        return d * static_cast<float>(nibble - 8);
    }
    // Elements j..j+7 of a block (j in 0, 8, 16, 24) are the low (j < 16) or high nibbles of bytes j % 16 .. +7.
    STRATA_CUDA_HD static void load8(const unsigned char *row, int64_t k, float (&out)[8]) {
        const unsigned char *block = row + (k / quant_block_elems) * q4_0_block_bytes;
        const float d = half_to_float(*reinterpret_cast<const uint16_t *>(block));
        const int64_t j = k % quant_block_elems;
        uint32_t w[2];
        load_words_align2(block + 2 + (j & 15), w);
        const int shift = j < 16 ? 0 : 4;
        for (int i = 0; i < 8; ++i) {
            const int nibble = static_cast<int>((w[i / 4] >> (8 * (i % 4) + shift)) & 15u);
            out[i] = d * static_cast<float>(nibble - 8);
        }
    }
};

// ---- the formats decoded one element at a time (load8 calls element eight times) ----
// Each element() repeats its reference dequantizer's float expression (plugins/quant/ggml_quants/*_reference.cpp).
template <class Format> struct element_wise_load8 {
    static constexpr uint32_t alignment = 1;
    static constexpr bool load8_needs_16_byte_rows = false;
    STRATA_CUDA_HD static void load8(const unsigned char *row, int64_t k, float (&out)[8]) {
        for (int i = 0; i < 8; ++i) out[i] = Format::element(row, k + i);
    }
};

// Q4_1: d, m, 16 bytes of nibbles; x = q * d + m.
template <> struct format<weight_q4_1> : element_wise_load8<format<weight_q4_1>> {
    static constexpr int64_t block_elems = 32, block_bytes = 20;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 32) * block_bytes;
        return add_rn(mul_rn(static_cast<float>(nibble_at(b + 4, k % 32)), half_at(b)), half_at(b + 2));
    }
};

// Q5_0: d, 32 fifth bits, nibbles; x = (q - 16) * d.
template <> struct format<weight_q5_0> : element_wise_load8<format<weight_q5_0>> {
    static constexpr int64_t block_elems = 32, block_bytes = 22;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 32) * block_bytes;
        const int64_t j = k % 32;
        const int q = static_cast<int>(nibble_at(b + 6, j) | ((u32_at(b + 2) >> j) & 1u) << 4);
        return mul_rn(static_cast<float>(q - 16), half_at(b));
    }
};

// Q5_1: d, m, 32 fifth bits, nibbles; x = q * d + m.
template <> struct format<weight_q5_1> : element_wise_load8<format<weight_q5_1>> {
    static constexpr int64_t block_elems = 32, block_bytes = 24;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 32) * block_bytes;
        const int64_t j = k % 32;
        const unsigned q = nibble_at(b + 8, j) | ((u32_at(b + 4) >> j) & 1u) << 4;
        return add_rn(mul_rn(static_cast<float>(q), half_at(b)), half_at(b + 2));
    }
};

// IQ4_NL: d, nibbles indexing the grid; x = d * grid[q].
template <> struct format<weight_iq4_nl> : element_wise_load8<format<weight_iq4_nl>> {
    static constexpr int64_t block_elems = 32, block_bytes = 18;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 32) * block_bytes;
        return mul_rn(half_at(b), static_cast<float>(iq4_grid_value(nibble_at(b + 2, k % 32))));
    }
};

// Q2_K: scales[16] (4-bit scale | 4-bit min << 4), qs[64], d, dmin. Element l of 32-element chunk c: bits 2 (c % 4)
// of qs[32 (c / 4) + l]; its 16-element group is 2c + l / 16. x = (d * scale) * q - dmin * min.
template <> struct format<weight_q2_k> : element_wise_load8<format<weight_q2_k>> {
    static constexpr int64_t block_elems = 256, block_bytes = 84;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 256) * block_bytes;
        const int64_t e = k % 256, c = e / 32, l = e % 32;
        const unsigned q = (b[16 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3u;
        const unsigned sc = b[2 * c + l / 16];
        const float dl = mul_rn(half_at(b + 80), static_cast<float>(sc & 15u));
        const float ml = mul_rn(half_at(b + 82), static_cast<float>(sc >> 4));
        return sub_rn(mul_rn(dl, static_cast<float>(q)), ml);
    }
};

// Q3_K: hmask[32], qs[64], 12 bytes of 6-bit scales (biased by 32), d. x = (d * (scale - 32)) * (q2 - (h ? 0 : 4)).
template <> struct format<weight_q3_k> : element_wise_load8<format<weight_q3_k>> {
    static constexpr int64_t block_elems = 256, block_bytes = 110;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 256) * block_bytes;
        const int64_t e = k % 256, c = e / 32, l = e % 32, g = 2 * c + l / 16;
        const int q2 = static_cast<int>((b[32 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3u);
        const int v = q2 - (((b[l] >> c) & 1u) != 0 ? 0 : 4);
        const unsigned char *scales = b + 96;
        const int low = g < 8 ? (scales[g] & 15) : (scales[g - 8] >> 4);
        const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
        const float dl = mul_rn(half_at(b + 108), static_cast<float>((low | high << 4) - 32));
        return mul_rn(dl, static_cast<float>(v));
    }
};

// The 6-bit scale and min of 32-element group j of a Q4_K/Q5_K block (12 packed bytes).
STRATA_CUDA_HD void scale_min_k4(int64_t j, const unsigned char *q, int &d, int &m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Element value q of chunk c of a Q4_K/Q5_K block b (d at 0, dmin at 2, scales at 4): (d * scale) * q - dmin * min.
STRATA_CUDA_HD float k4_value(const unsigned char *b, int64_t c, unsigned q) {
    int sc, m;
    scale_min_k4(c, b + 4, sc, m);
    const float d1 = mul_rn(half_at(b), static_cast<float>(sc));
    const float m1 = mul_rn(half_at(b + 2), static_cast<float>(m));
    return sub_rn(mul_rn(d1, static_cast<float>(q)), m1);
}

// Q4_K: d, dmin, scales[12], qs[128]; chunk c is the low (even c) or high nibbles of qs[32 (c / 2)..].
// x = (d * scale) * q - dmin * min.
template <> struct format<weight_q4_k> : element_wise_load8<format<weight_q4_k>> {
    static constexpr int64_t block_elems = 256, block_bytes = 144;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 256) * block_bytes;
        const int64_t e = k % 256, c = e / 32, l = e % 32;
        const unsigned q = (b[16 + 32 * (c / 2) + l] >> (4 * (c % 2))) & 15u;
        return k4_value(b, c, q);
    }
};

// Q5_K: Q4_K plus qh[32] (bit c of qh[l]: the fifth bit of element l of chunk c).
template <> struct format<weight_q5_k> : element_wise_load8<format<weight_q5_k>> {
    static constexpr int64_t block_elems = 256, block_bytes = 176;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 256) * block_bytes;
        const int64_t e = k % 256, c = e / 32, l = e % 32;
        const unsigned q = ((b[48 + 32 * (c / 2) + l] >> (4 * (c % 2))) & 15u) + (((b[16 + l] >> c) & 1u) != 0 ? 16u : 0u);
        return k4_value(b, c, q);
    }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d. Chunk c: half c / 4, quarter kq = c % 4 (low nibbles of ql[0..31],
// of ql[32..63], then the high nibbles) with qh's bits 2 kq. x = (d * scale) * (q - 32).
template <> struct format<weight_q6_k> : element_wise_load8<format<weight_q6_k>> {
    static constexpr int64_t block_elems = 256, block_bytes = 210;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 256) * block_bytes;
        const int64_t e = k % 256, c = e / 32, l = e % 32, half = c / 4, kq = c % 4;
        const unsigned low = (b[64 * half + 32 * (kq % 2) + l] >> (4 * (kq / 2))) & 15u;
        const unsigned high = (b[128 + 32 * half + l] >> (2 * kq)) & 3u;
        const int q = static_cast<int>(low | high << 4) - 32;
        const auto sc = static_cast<int8_t>(b[192 + 2 * c + l / 16]);
        return mul_rn(mul_rn(half_at(b + 208), static_cast<float>(sc)), static_cast<float>(q));
    }
};

// IQ4_XS: d, scales_h (2 bits per group), scales_l[4] (4 bits per group), qs[128]; x = (d * (ls - 32)) * grid[q].
template <> struct format<weight_iq4_xs> : element_wise_load8<format<weight_iq4_xs>> {
    static constexpr int64_t block_elems = 256, block_bytes = 136;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / 256) * block_bytes;
        const int64_t e = k % 256, ib = e / 32;
        const int ls = static_cast<int>(((b[4 + ib / 2] >> (4 * (ib % 2))) & 15u) | ((u16_at(b + 2) >> (2 * ib)) & 3u) << 4);
        const float dl = mul_rn(half_at(b), static_cast<float>(ls - 32));
        return mul_rn(dl, static_cast<float>(iq4_grid_value(nibble_at(b + 8 + 16 * ib, e % 32))));
    }
};

// Strata's group-integer formats: a block of G elements is f16 scale, u8 zero, 0, then the integers (4 bits: per 32
// elements, byte j holds element j low and j + 16 high; 8 bits: a byte each); x = scale * (q - zero), the quant
// plugin's dequantize_row order.
template <int Bits, int G, class Self> struct group_int_format : element_wise_load8<Self> {
    static constexpr int64_t block_elems = G, block_bytes = 4 + G * Bits / 8;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / G) * block_bytes;
        const int64_t e = k % G;
        const unsigned q = Bits == 8 ? b[4 + e] : nibble_at(b + 4 + 16 * (e / 32), e % 32);
        return mul_rn(half_at(b), sub_rn(static_cast<float>(q), static_cast<float>(b[2])));
    }
};
template <> struct format<weight_q4_g32> : group_int_format<4, 32, format<weight_q4_g32>> {};
template <> struct format<weight_q4_g64> : group_int_format<4, 64, format<weight_q4_g64>> {};
template <> struct format<weight_q4_g128> : group_int_format<4, 128, format<weight_q4_g128>> {};
template <> struct format<weight_q8_g32> : group_int_format<8, 32, format<weight_q8_g32>> {};
template <> struct format<weight_q8_g64> : group_int_format<8, 64, format<weight_q8_g64>> {};
template <> struct format<weight_q8_g128> : group_int_format<8, 128, format<weight_q8_g128>> {};

// The value of an OCP e4m3 byte, exact (strata/float8.hpp, which the FP8 quant plugin uses too).
STRATA_CUDA_HD float e4m3_value(unsigned q) { return strata::float8::e4m3_to_fp32(static_cast<uint8_t>(q)); }

// Strata's FP8 formats: a block of B elements is an f32 scale, then B e4m3 bytes; x = scale * e4m3(q), the quant
// plugin's dequantize_row expression.
template <int B, class Self> struct fp8_format : element_wise_load8<Self> {
    static constexpr int64_t block_elems = B, block_bytes = 4 + B;
    STRATA_CUDA_HD static float element(const unsigned char *row, int64_t k) {
        const unsigned char *b = row + (k / B) * block_bytes;
        return mul_rn(bits_as_float(u32_at(b)), e4m3_value(b[4 + k % B]));
    }
};
template <> struct format<weight_f8_e4m3_b32> : fp8_format<32, format<weight_f8_e4m3_b32>> {};
template <> struct format<weight_f8_e4m3_b128> : fp8_format<128, format<weight_f8_e4m3_b128>> {};

// Elements per block and bytes per block of a type this device computes on; false for any other type.
inline bool weight_block_shape(uint32_t type, int64_t &elems, int64_t &bytes) {
    switch (type) {
#define STRATA_CUDA_BLOCK_SHAPE(t)                                                                                     \
    case t:                                                                                                            \
        elems = format<t>::block_elems;                                                                                \
        bytes = format<t>::block_bytes;                                                                                \
        return true;
        STRATA_CUDA_WEIGHT_TYPES(STRATA_CUDA_BLOCK_SHAPE)
#undef STRATA_CUDA_BLOCK_SHAPE
    default: return false;
    }
}

} // namespace strata::cuda
