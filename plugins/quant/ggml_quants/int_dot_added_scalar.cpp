// Portable kernels of the formats added after Q8_0/Q4_0: the float dot (one block dequantized by the reference
// dequantizer, then dotted) and the integer dot path on k_block_ints.hpp's integer form. The fallback on CPUs
// without AVX2 and the baseline the AVX2 kernels are tested against (same integers, same float expression).
#include "ggml_quants.hpp"
#include "k_block_ints.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace strata::quants {
namespace {

float half_scalar(uint16_t h) { return fp16_to_fp32(h); }

// ---- float dot: dequantize a block, dot it (float accumulation in element order) ----
template <void (*Dequantize)(const void *, float *, int64_t), int64_t Elems, size_t Bytes>
float dot_by_block(const void *row, const float *x, int64_t n) {
    const auto *bytes = static_cast<const unsigned char *>(row);
    float values[Elems];
    float sum = 0.0f;
    for (int64_t b = 0; b < n / Elems; ++b) {
        Dequantize(bytes + b * Bytes, values, Elems);
        for (int64_t j = 0; j < Elems; ++j) sum += values[j] * x[b * Elems + j];
    }
    return sum;
}

// ---- integer dot, 256-element formats against block_q8_k ----
constexpr int32_t multi_group = 8;

template <class F>
void dot_multi_k(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    const auto *w = static_cast<const typename F::block *>(row);
    const auto *base = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / qk_k;
    for (int32_t i0 = 0; i0 < n_x; i0 += multi_group) {
        const int32_t m = n_x - i0 < multi_group ? n_x - i0 : multi_group;
        float acc[multi_group][k_lanes] = {};
        for (int64_t b = 0; b < nb; ++b) {
            k_block_scales s;
            F::scales(w[b], s, half_scalar);
            int8_t values[qk_k];
            for (int c = 0; c < 8; ++c) F::values(w[b], c, values + 32 * c);
            for (int32_t i = 0; i < m; ++i) {
                const auto &a = reinterpret_cast<const block_q8_k *>(base + (i0 + i) * stride)[b];
                const float d = a.d * s.d, dmin = a.d * s.dmin;
                for (int l = 0; l < k_lanes; ++l) {
                    int32_t isum = 0;
                    for (int c = 0; c < 8; ++c) {
                        int32_t part = 0;
                        for (int j = 32 * c + 4 * l; j < 32 * c + 4 * l + 4; ++j)
                            part += int32_t{values[j]} * int32_t{a.qs[j]};
                        isum += part * s.scale[2 * c + l / 4];
                    }
                    const int32_t msum = int32_t{s.min[2 * l]} * a.bsums[2 * l] + int32_t{s.min[2 * l + 1]} * a.bsums[2 * l + 1];
                    float &lane = acc[i][l];
                    if constexpr (F::mode == min_mode::none) {
                        lane = std::fma(d, static_cast<float>(isum), lane);
                    } else if constexpr (F::mode == min_mode::offset) {
                        lane = std::fma(d, static_cast<float>(isum - msum), lane);
                    } else {
                        lane = std::fma(-dmin, static_cast<float>(msum), std::fma(d, static_cast<float>(isum), lane));
                    }
                }
            }
        }
        for (int32_t i = 0; i < m; ++i) out[i0 + i] = k_lanes_sum(acc[i]);
    }
}

// ---- integer dot, 32-element formats against block_q8_act: k_block_ints.hpp's lanes and two accumulators ----
template <class F>
void dot_multi_32(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    const auto *w = static_cast<const typename F::block *>(row);
    const auto *base = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / qk32;
    for (int32_t i0 = 0; i0 < n_x; i0 += multi_group) {
        const int32_t m = n_x - i0 < multi_group ? n_x - i0 : multi_group;
        float acc[multi_group][2][k_lanes] = {};
        float msum[multi_group][2] = {};
        for (int64_t b = 0; b < nb; ++b) {
            int8_t values[qk32];
            F::values(w[b], values);
            const float d = F::d(w[b], half_scalar);
            for (int32_t i = 0; i < m; ++i) {
                const auto &a = reinterpret_cast<const typename F::act_block *>(base + (i0 + i) * stride)[b];
                const float scale = d * a.d;
                for (int l = 0; l < k_lanes; ++l) {
                    int32_t isum = 0;
                    for (int j = 4 * l; j < 4 * l + 4; ++j) isum += int32_t{values[j]} * int32_t{a.qs[j]};
                    if constexpr (F::offset != 0)
                        if (l == 0) isum -= F::offset / 8 * a.sum_x8;
                    float &lane = acc[i][b % 2][l];
                    lane = std::fma(scale, static_cast<float>(isum), lane);
                }
                if constexpr (F::has_min) msum[i][b % 2] = std::fma(F::m(w[b], half_scalar), a.s, msum[i][b % 2]);
            }
        }
        for (int32_t i = 0; i < m; ++i) {
            float lanes[k_lanes];
            for (int l = 0; l < k_lanes; ++l) lanes[l] = acc[i][0][l] + acc[i][1][l];
            out[i0 + i] = k_lanes_sum(lanes);
            if constexpr (F::has_min) out[i0 + i] += msum[i][0] + msum[i][1];
        }
    }
}

template <void (*Multi)(const void *, const void *, int64_t, int32_t, int64_t, float *)>
float dot_single(const void *row, const void *xq, int64_t n) {
    float out;
    Multi(row, xq, 0, 1, n, &out);
    return out;
}

template <class F, void (*Dequantize)(const void *, float *, int64_t)> format_kernels kernels_k() {
    // Q4_K's GEMM has a definition of its own (gemm_one_q4_k, with the x86 tile's bits); the other K-quants take
    // the device's dot_act_multi path here.
    const gemm_act_fn gemm = std::is_same_v<F, k_formats::q4_k> ? gemm_act_q4_k_scalar : nullptr;
    return {dot_by_block<Dequantize, qk_k, sizeof(typename F::block)>, sizeof(block_q8_k), quantize_activations_q8k,
            dot_single<dot_multi_k<F>>, dot_multi_k<F>, gemm};
}

void quantize_activations_q8_sum_scalar(const float *x, void *xq, int64_t n) {
    quantize_activations_q8_scalar(x, xq, n);
    scale_activation_sums(xq, n);
}

template <class F, void (*Dequantize)(const void *, float *, int64_t)> format_kernels kernels_32() {
    return {dot_by_block<Dequantize, qk32, sizeof(typename F::block)>, sizeof(typename F::act_block),
            F::has_min ? quantize_activations_q8_sum_scalar : quantize_activations_q8_scalar,
            dot_single<dot_multi_32<F>>, dot_multi_32<F>,
            std::is_same_v<F, small_formats::q5_0> ? gemm_act_q5_0_scalar : nullptr}; // Q4_0's kind of GEMM
}

} // namespace

void scale_activation_sums(void *xq, int64_t n) {
    auto *bytes = static_cast<unsigned char *>(xq);
    for (int64_t b = 0; b < n / qk8_0; ++b) {
        unsigned char *block = bytes + b * static_cast<int64_t>(sizeof(block_q8_act));
        float d;
        int32_t sum_x8;
        std::memcpy(&d, block + offsetof(block_q8_act, d), sizeof d);
        std::memcpy(&sum_x8, block + offsetof(block_q8_act, sum_x8), sizeof sum_x8);
        const float s = d * static_cast<float>(sum_x8 / 8);
        std::memcpy(block + offsetof(block_q8_act_sum, s), &s, sizeof s);
    }
}

format_kernels added_format_kernels_scalar(uint32_t type) {
    return with_added_format(
        type,
        []<class F, void (*Dequantize)(const void *, float *, int64_t), bool K>() {
            if constexpr (K) return kernels_k<F, Dequantize>();
            else return kernels_32<F, Dequantize>();
        },
        [] { return format_kernels{}; });
}

} // namespace strata::quants
