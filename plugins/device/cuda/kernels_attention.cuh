// Causal attention of one query token and one head per block, over a contiguous or a paged KV cache (float32, or
// float16 / bfloat16 / fp8 e4m3 / e5m2 widened exactly on read: ABI 1.20; q8_0 groups, each value d * q exactly:
// ABI 1.23), and the paged cache's K/V writes.
//
// A block's warps take keys round-robin (warp w: keys w, w + warps, ...). Each warp keeps an online softmax (running
// max, running sum, running weighted sum of V rows, the head's dims spread over its lanes) so any context length
// works without a score buffer; the warps' partial results are combined at the end. The contiguous and the paged
// kernels are one template that differs only in how a key's row is found, so for the same rows they compute the same
// floats in the same order: paged_attention equals attention bit for bit, as the ABI asks. The arithmetic is spelled
// with explicit fmaf / __fmul_rn so the compiler's contraction choices cannot differ between the two instantiations.
#pragma once

#include "kernel_common.cuh"

#include <strata/float16.hpp>
#include <strata/float8.hpp>
#include <strata/kv_q8_0.hpp>

namespace strata::cuda {
namespace kernels {

constexpr int attention_warps = 8;
constexpr int dims_per_lane = max_head_dim / warp_size;

struct contiguous_rows {
    const float *k;
    const float *v;
    int64_t stride;
    __device__ const float *key(int32_t, int64_t j) const { return k + j * stride; }
    __device__ const float *value(int32_t, int64_t j) const { return v + j * stride; }
};

// Elements of the 16-bit KV caches (ABI 1.20), widened exactly on read and rounded to nearest even on store (the
// SDK's conversions, so the CPU and CUDA devices hold the same bits).
struct kv_f16 {
    uint16_t bits;
};
struct kv_bf16 {
    uint16_t bits;
};
__device__ __forceinline__ float kv_value(float x) { return x; }
__device__ __forceinline__ float kv_value(kv_f16 x) { return strata::float16::fp16_to_fp32(x.bits); }
__device__ __forceinline__ float kv_value(kv_bf16 x) { return strata::float16::bf16_to_fp32(x.bits); }
__device__ __forceinline__ void kv_put(float *out, float x) { *out = x; }
__device__ __forceinline__ void kv_put(kv_f16 *out, float x) { out->bits = strata::float16::fp32_to_fp16(x); }
__device__ __forceinline__ void kv_put(kv_bf16 *out, float x) { out->bits = strata::float16::fp32_to_bf16(x); }
// Elements of the FP8 KV caches: one OCP e4m3 or e5m2 byte (strata/float8.hpp: saturating round to nearest even,
// as CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE).
struct kv_e4m3 {
    uint8_t bits;
};
struct kv_e5m2 {
    uint8_t bits;
};
__device__ __forceinline__ float kv_value(kv_e4m3 x) { return strata::float8::e4m3_to_fp32(x.bits); }
__device__ __forceinline__ float kv_value(kv_e5m2 x) { return strata::float8::e5m2_to_fp32(x.bits); }
__device__ __forceinline__ void kv_put(kv_e4m3 *out, float x) { out->bits = strata::float8::fp32_to_e4m3(x); }
__device__ __forceinline__ void kv_put(kv_e5m2 *out, float x) { out->bits = strata::float8::fp32_to_e5m2(x); }

// Value i of a row: one element per value, or (q8_0) one group of 32 per element.
template <class E> __device__ __forceinline__ float kv_value_at(const E *row, int64_t i) { return kv_value(row[i]); }
__device__ __forceinline__ float kv_value_at(const strata::kv_q8_0::group *row, int64_t i) {
    return strata::kv_q8_0::value(row[i / strata::kv_q8_0::group_values], static_cast<int>(i % strata::kv_q8_0::group_values));
}
using strata::kv_q8_0::values_per_element;

// Writes one token's K and V rows of n values, thread `lane` of `lanes`: element by element, or (q8_0) a group of 32
// values per thread.
template <class E>
__device__ __forceinline__ void kv_put_rows(E *k_row, E *v_row, const float *k, const float *v, int64_t n, int64_t lane,
                                            int64_t lanes) {
    for (int64_t i = lane; i < n; i += lanes) {
        kv_put(k_row + i, k[i]);
        kv_put(v_row + i, v[i]);
    }
}
__device__ __forceinline__ void kv_put_rows(strata::kv_q8_0::group *k_row, strata::kv_q8_0::group *v_row,
                                            const float *k, const float *v, int64_t n, int64_t lane, int64_t lanes) {
    constexpr int64_t g = strata::kv_q8_0::group_values;
    for (int64_t i = lane; i < n / g; i += lanes) {
        strata::kv_q8_0::quantize(k + i * g, k_row + i);
        strata::kv_q8_0::quantize(v + i * g, v_row + i);
    }
}

// Slot j of sequence s: row j % block_size of block block_base[seq_block_start[s] + j / block_size]; in a block,
// this layer's block_size K rows start at layer_offset_bytes, its V rows block_size rows later (a row: kv_dim values,
// kv_dim / values_per_element<E> elements of E).
template <class E> struct paged_rows {
    paged_layout kv;
    __device__ int64_t row_elements() const { return int64_t{kv.kv_dim} / values_per_element<E>; }
    __device__ const E *row(int32_t seq, int64_t j) const {
        const int64_t block = int64_t{kv.seq_block_start[seq]} + j / kv.block_size;
        const auto *base = reinterpret_cast<const unsigned char *>(kv.block_base[block]) + kv.layer_offset_bytes;
        return reinterpret_cast<const E *>(base) + (j % kv.block_size) * row_elements();
    }
    __device__ const E *key(int32_t seq, int64_t j) const { return row(seq, j); }
    __device__ const E *value(int32_t seq, int64_t j) const { return row(seq, j) + int64_t{kv.block_size} * row_elements(); }
};

template <class Rows>
__global__ void __launch_bounds__(attention_warps *warp_size)
    attention_kernel(attention_shape shape, const int32_t *__restrict__ token_seq,
                     const int32_t *__restrict__ positions, const float *q, Rows rows, float *out) {
    __shared__ float warp_max[attention_warps];
    __shared__ float warp_sum[attention_warps];
    __shared__ float warp_acc[attention_warps][max_head_dim];

    const int64_t t = blockIdx.x;
    const int32_t h = static_cast<int32_t>(blockIdx.y);
    const int warp = static_cast<int>(threadIdx.x / warp_size);
    const int lane = static_cast<int>(threadIdx.x % warp_size);
    const int32_t head_dim = shape.head_dim;
    const int32_t kv_head = h / (shape.n_heads / shape.n_kv_heads);
    const int32_t seq = token_seq != nullptr ? token_seq[t] : 0;
    const int64_t n_kv = int64_t{positions[t]} + 1;
    const int64_t item = t * shape.n_heads + h;

    float q_reg[dims_per_lane], acc[dims_per_lane];
#pragma unroll
    for (int i = 0; i < dims_per_lane; ++i) {
        const int d = lane + warp_size * i;
        q_reg[i] = d < head_dim ? q[item * head_dim + d] : 0.0f;
        acc[i] = 0.0f;
    }
    float running_max = -INFINITY, running_sum = 0.0f;
    // ABI 1.14: a sliding window starts the keys later; soft-capping bends each score (as the CPU device does).
    const int64_t first = shape.window > 0 && n_kv > shape.window ? n_kv - shape.window : 0;
    const float inv_softcap = shape.softcap > 0.0f ? 1.0f / shape.softcap : 0.0f;

    const int64_t head = int64_t{kv_head} * head_dim; // the head's first value in a row
    for (int64_t j = first + warp; j < n_kv; j += attention_warps) {
        const auto *key = rows.key(seq, j);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < dims_per_lane; ++i) {
            const int d = lane + warp_size * i;
            if (d < head_dim) s = fmaf(q_reg[i], kv_value_at(key, head + d), s);
        }
#pragma unroll
        for (int offset = warp_size / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        s = __fmul_rn(s, shape.scale);
        if (shape.softcap > 0.0f) s = __fmul_rn(tanhf(__fmul_rn(s, inv_softcap)), shape.softcap);
        const float new_max = fmaxf(running_max, s);
        const float correction = expf(running_max - new_max); // 0 for the first key (running_max = -inf)
        const float p = expf(s - new_max);
        running_sum = fmaf(running_sum, correction, p);
        const auto *value = rows.value(seq, j);
#pragma unroll
        for (int i = 0; i < dims_per_lane; ++i) {
            const int d = lane + warp_size * i;
            if (d < head_dim) acc[i] = fmaf(p, kv_value_at(value, head + d), __fmul_rn(acc[i], correction));
        }
        running_max = new_max;
    }

    if (lane == 0) {
        warp_max[warp] = running_max;
        warp_sum[warp] = running_sum;
    }
#pragma unroll
    for (int i = 0; i < dims_per_lane; ++i) {
        const int d = lane + warp_size * i;
        if (d < head_dim) warp_acc[warp][d] = acc[i];
    }
    // Every warp has read q before this barrier, so writing out (which may alias q) after it is safe.
    __syncthreads();

    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < attention_warps; ++w) m = fmaxf(m, warp_max[w]);
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < attention_warps; ++w) total = fmaf(warp_sum[w], expf(warp_max[w] - m), total); // idle: 0 * 0
    const float inv_total = 1.0f / total;
    for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += attention_warps * warp_size) {
        float o = 0.0f;
#pragma unroll
        for (int w = 0; w < attention_warps; ++w) o = fmaf(warp_acc[w][d], expf(warp_max[w] - m), o);
        out[item * head_dim + d] = __fmul_rn(o, inv_total);
    }
}

template <class E>
__global__ void kv_store_kernel(const int32_t *__restrict__ token_seq, const int32_t *__restrict__ positions,
                                paged_layout kv, const float *__restrict__ k, const float *__restrict__ v) {
    const int64_t t = blockIdx.x;
    const int64_t pos = positions[t];
    const int64_t block = int64_t{kv.seq_block_start[token_seq[t]]} + pos / kv.block_size;
    auto *base = reinterpret_cast<E *>(reinterpret_cast<unsigned char *>(kv.block_base[block]) + kv.layer_offset_bytes);
    const int64_t row = int64_t{kv.kv_dim} / values_per_element<E>;
    E *k_row = base + (pos % kv.block_size) * row;
    E *v_row = k_row + int64_t{kv.block_size} * row;
    kv_put_rows(k_row, v_row, k + t * kv.kv_dim, v + t * kv.kv_dim, kv.kv_dim, threadIdx.x, blockDim.x);
}

template <class Rows>
cudaError_t launch(const attention_shape &shape, const int32_t *token_seq, const int32_t *positions, const float *q,
                   const Rows &rows, float *out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(shape.n_tokens), static_cast<unsigned>(shape.n_heads));
    return launch_kernel(attention_kernel<Rows>, grid, dim3(attention_warps * warp_size), stream, shape, token_seq,
                         positions, q, rows, out);
}

} // namespace kernels

cudaError_t launch_attention(const attention_shape &shape, const int32_t *positions, const float *q,
                             const float *k_cache, const float *v_cache, int64_t kv_row_stride, float *out,
                             cudaStream_t stream) {
    return kernels::launch(shape, nullptr, positions, q, kernels::contiguous_rows{k_cache, v_cache, kv_row_stride}, out,
                           stream);
}

cudaError_t launch_paged_attention(const attention_shape &shape, const int32_t *token_seq, const int32_t *positions,
                                   const paged_layout &kv, const float *q, float *out, cudaStream_t stream) {
    switch (kv.kv_type) {
    case 0: return kernels::launch(shape, token_seq, positions, q, kernels::paged_rows<float>{kv}, out, stream);
    case 1: return kernels::launch(shape, token_seq, positions, q, kernels::paged_rows<kernels::kv_f16>{kv}, out, stream);
    case 30:
        return kernels::launch(shape, token_seq, positions, q, kernels::paged_rows<kernels::kv_bf16>{kv}, out, stream);
    case 1040:
        return kernels::launch(shape, token_seq, positions, q, kernels::paged_rows<kernels::kv_e4m3>{kv}, out, stream);
    case 1041:
        return kernels::launch(shape, token_seq, positions, q, kernels::paged_rows<kernels::kv_e5m2>{kv}, out, stream);
    case 8:
        return kernels::launch(shape, token_seq, positions, q, kernels::paged_rows<strata::kv_q8_0::group>{kv}, out,
                               stream);
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t launch_kv_store(int32_t n_tokens, const int32_t *token_seq, const int32_t *positions,
                            const paged_layout &kv, const float *k, const float *v, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(n_tokens)), block(128);
    switch (kv.kv_type) {
    case 0: return launch_kernel(kernels::kv_store_kernel<float>, grid, block, stream, token_seq, positions, kv, k, v);
    case 1:
        return launch_kernel(kernels::kv_store_kernel<kernels::kv_f16>, grid, block, stream, token_seq, positions, kv, k,
                             v);
    case 30:
        return launch_kernel(kernels::kv_store_kernel<kernels::kv_bf16>, grid, block, stream, token_seq, positions, kv,
                             k, v);
    case 1040:
        return launch_kernel(kernels::kv_store_kernel<kernels::kv_e4m3>, grid, block, stream, token_seq, positions, kv,
                             k, v);
    case 1041:
        return launch_kernel(kernels::kv_store_kernel<kernels::kv_e5m2>, grid, block, stream, token_seq, positions, kv,
                             k, v);
    case 8:
        return launch_kernel(kernels::kv_store_kernel<strata::kv_q8_0::group>, grid, block, stream, token_seq,
                             positions, kv, k, v);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace strata::cuda
