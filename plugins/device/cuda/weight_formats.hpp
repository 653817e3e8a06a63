// The GGUF weight formats the CUDA kernels read (byte layouts as in plugins/quant/ggml_quants/block_formats.hpp,
// which are ggml's): one element of a row decoded to float. The same code compiles for the GPU (nvcc) and for the
// host (plain C++), so tests/device_cuda checks every decode against the quant plugin's dequantize_row on machines
// without a GPU.
//
// Every decode is exact: F16/BF16 widen exactly, and a Q8_0/Q4_0 element is a binary16 scale times a small integer,
// whose product fits a float's 24-bit mantissa. So a kernel that decodes and then multiplies in float sees exactly
// the weights the CPU's reference dequantize_row produces.
#pragma once

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
    weight_q8_0 = 8,
    weight_bf16 = 30,
};

inline constexpr int64_t quant_block_elems = 32; // Q8_0 and Q4_0
inline constexpr int64_t q8_0_block_bytes = 34;  // binary16 scale + 32 int8
inline constexpr int64_t q4_0_block_bytes = 18;  // binary16 scale + 16 bytes of nibbles

STRATA_CUDA_HD float bits_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// binary16 -> float32, exact for every input (subnormals, inf, NaN payloads), by integer manipulation so host and
// device run the same arithmetic.
STRATA_CUDA_HD float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) return bits_as_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent != 0) return bits_as_float(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
    if (mantissa == 0) return bits_as_float(sign);
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f; // mantissa * 2^-24, exact
    return sign != 0 ? -magnitude : magnitude;
}

STRATA_CUDA_HD float bf16_to_float(uint16_t h) { return bits_as_float(static_cast<uint32_t>(h) << 16); }

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

} // namespace strata::cuda
