// Row-wise and elementwise ops: RMSNorm, RoPE, SwiGLU, add, add_rows, softmax. Where the CPU device follows ggml's rounding
// recipe (RoPE's angles), the kernels follow it too, so the two devices agree to float rounding.
#pragma once

#include "kernel_common.cuh"

namespace strata::cuda {
namespace kernels {

constexpr int row_threads = 256;
constexpr int row_warps = row_threads / warp_size;

// Sum (or max) over the row_threads threads of a block; every thread gets the result. `scratch` holds row_warps
// floats; the function may be called again with the same scratch (it synchronises before returning).
template <bool Max> __device__ __forceinline__ float block_reduce(float v, float *scratch) {
    v = Max ? warp_max(v) : warp_sum(v);
    const int warp = static_cast<int>(threadIdx.x / warp_size), lane = static_cast<int>(threadIdx.x % warp_size);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = scratch[0];
#pragma unroll
    for (int w = 1; w < row_warps; ++w) r = Max ? fmaxf(r, scratch[w]) : r + scratch[w];
    __syncthreads();
    return r;
}

// One block per token. out may equal x: each element is read and then written by the same thread.
__global__ void __launch_bounds__(row_threads)
    rms_norm_kernel(const float *x, const float *__restrict__ weight, int32_t dim, float eps, float *out) {
    __shared__ float scratch[row_warps];
    const float *xt = x + int64_t{blockIdx.x} * dim;
    float *ot = out + int64_t{blockIdx.x} * dim;
    float sum = 0.0f;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < dim; i += row_threads) sum += xt[i] * xt[i];
    sum = block_reduce<false>(sum, scratch);
    const float mean = sum / static_cast<float>(dim);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < dim; i += row_threads) ot[i] = (xt[i] * scale) * weight[i];
}

// One block per token. The angle of pair i is pos * theta_scale^i built by i float multiplications, divided by the
// frequency factor (none: 1) and times freq_scale, mixed with the unscaled angle by YaRN's ramp when ext_factor is
// set, exactly as the CPU device (and ggml) does, so the angles are the same floats; cos and sin are multiplied by
// mscale (computed on the host) and computed once per token.
__global__ void rope_kernel(float *x, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                            const int32_t *__restrict__ positions, float theta_scale, int32_t neox,
                            const float *__restrict__ freq_factors, rope_terms terms) {
    __shared__ float angles[max_rot_dims]; // cos[half], sin[half]
    const int32_t half = rot_dims / 2;
    float *cos_of = angles, *sin_of = angles + half;
    const int64_t t = blockIdx.x;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < half; i += static_cast<int32_t>(blockDim.x)) {
        float theta = static_cast<float>(positions[t]);
        for (int32_t j = 0; j < i; ++j) theta *= theta_scale;
        const float extrap = theta / (freq_factors != nullptr ? freq_factors[i] : 1.0f);
        float angle = terms.freq_scale * extrap;
        if (terms.ext_factor != 0.0f) {
            const float y = (static_cast<float>(i) - terms.corr_low) / terms.ramp_width;
            const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * terms.ext_factor;
            angle = __fadd_rn(__fmul_rn(angle, 1.0f - ramp_mix), __fmul_rn(extrap, ramp_mix));
        }
        cos_of[i] = __fmul_rn(cosf(angle), terms.mscale);
        sin_of[i] = __fmul_rn(sinf(angle), terms.mscale);
    }
    __syncthreads();
    const int32_t pair_stride = neox ? 1 : 2;
    const int32_t partner = neox ? half : 1;
    float *xt = x + t * int64_t{n_heads} * head_dim;
    for (int32_t p = static_cast<int32_t>(threadIdx.x); p < n_heads * half; p += static_cast<int32_t>(blockDim.x)) {
        const int32_t h = p / half, i = p % half;
        float *v = xt + int64_t{h} * head_dim + int64_t{i} * pair_stride;
        const float x0 = v[0], x1 = v[partner];
        v[0] = x0 * cos_of[i] - x1 * sin_of[i];
        v[partner] = x0 * sin_of[i] + x1 * cos_of[i];
    }
}

__global__ void swiglu_kernel(const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// ABI 1.14's element-wise ops, with explicit round-to-nearest operations so nvcc cannot contract them into fused
// multiply-adds the CPU device does not use (the same floats up to tanhf).
__device__ __forceinline__ float gelu_tanh(float g) {
    const float inner = __fmul_rn(__fmul_rn(0.79788456080286535587989211986876f, g),
                                  __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, g), g)));
    return __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner)));
}

__global__ void scale_kernel(const float *x, int64_t n, float s, float *out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        out[i] = __fmul_rn(x[i], s);
}

__global__ void geglu_kernel(const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        out[i] = __fmul_rn(gelu_tanh(gate[i]), up[i]);
}

__global__ void softcap_kernel(const float *x, int64_t n, float inv_cap, float cap, float *out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        out[i] = __fmul_rn(tanhf(__fmul_rn(x[i], inv_cap)), cap);
}

__global__ void add_kernel(const float *a, const float *b, int64_t n, float *out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        out[i] = a[i] + b[i];
}

// out[t * n_cols + j] = x[t * n_cols + order[j]]: activations gathered into a weight's input order (GPTQ act-order,
// ABI 1.19). An order entry outside [0, n_cols) (the host never makes one) gives NaN, not a stray read.
__global__ void gather_columns_kernel(const float *__restrict__ x, const int32_t *__restrict__ order, int64_t n,
                                      int64_t n_cols, float *__restrict__ out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t row = i / n_cols;
        const int32_t c = order[i - row * n_cols];
        out[i] = c >= 0 && c < n_cols ? x[row * n_cols + c] : NAN;
    }
}

__global__ void add_rows_kernel(const float *x, const float *row, int64_t n, int32_t n_cols, float *out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        out[i] = x[i] + row[i % n_cols];
}

// One block per row: max, exponentials (kept in place) and their sum, then one multiply by the reciprocal.
__global__ void __launch_bounds__(row_threads) softmax_kernel(float *x, int32_t n_cols) {
    __shared__ float scratch[row_warps];
    float *row = x + int64_t{blockIdx.x} * n_cols;
    float m = -INFINITY;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_cols; i += row_threads) m = fmaxf(m, row[i]);
    m = block_reduce<true>(m, scratch);
    float sum = 0.0f;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_cols; i += row_threads) {
        const float e = expf(row[i] - m);
        row[i] = e;
        sum += e;
    }
    sum = block_reduce<false>(sum, scratch);
    const float inv = 1.0f / sum;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_cols; i += row_threads) row[i] *= inv;
}

// Grid for a grid-stride loop over n elements: enough blocks to fill any GPU, no more than the work needs.
inline unsigned elementwise_blocks(int64_t n) {
    constexpr int64_t max_blocks = 4096;
    const int64_t blocks = (n + row_threads - 1) / row_threads;
    return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

} // namespace kernels

cudaError_t launch_rms_norm(const float *x, const float *weight, int32_t n_tokens, int32_t dim, float eps, float *out,
                            cudaStream_t stream) {
    return launch_kernel(kernels::rms_norm_kernel, dim3(static_cast<unsigned>(n_tokens)), dim3(kernels::row_threads),
                         stream, x, weight, dim, eps, out);
}

cudaError_t launch_rope(float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                        const int32_t *positions, float theta_scale, int32_t mode, cudaStream_t stream,
                        const float *freq_factors, const rope_terms &terms) {
    return launch_kernel(kernels::rope_kernel, dim3(static_cast<unsigned>(n_tokens)), dim3(128), stream, x, n_heads,
                         head_dim, rot_dims, positions, theta_scale, mode != 0 ? 1 : 0, freq_factors, terms);
}

cudaError_t launch_swiglu(const float *gate, const float *up, int64_t n, float *out, cudaStream_t stream) {
    return launch_kernel(kernels::swiglu_kernel, dim3(kernels::elementwise_blocks(n)), dim3(kernels::row_threads),
                         stream, gate, up, n, out);
}

cudaError_t launch_scale(const float *x, int64_t n, float s, float *out, cudaStream_t stream) {
    return launch_kernel(kernels::scale_kernel, dim3(kernels::elementwise_blocks(n)), dim3(kernels::row_threads), stream,
                         x, n, s, out);
}

cudaError_t launch_geglu(const float *gate, const float *up, int64_t n, float *out, cudaStream_t stream) {
    return launch_kernel(kernels::geglu_kernel, dim3(kernels::elementwise_blocks(n)), dim3(kernels::row_threads),
                         stream, gate, up, n, out);
}

cudaError_t launch_softcap(const float *x, int64_t n, float cap, float *out, cudaStream_t stream) {
    return launch_kernel(kernels::softcap_kernel, dim3(kernels::elementwise_blocks(n)), dim3(kernels::row_threads),
                         stream, x, n, 1.0f / cap, cap, out);
}

cudaError_t launch_add(const float *a, const float *b, int64_t n, float *out, cudaStream_t stream) {
    return launch_kernel(kernels::add_kernel, dim3(kernels::elementwise_blocks(n)), dim3(kernels::row_threads), stream,
                         a, b, n, out);
}

cudaError_t launch_add_rows(const float *x, const float *row, int32_t n_rows, int32_t n_cols, float *out,
                            cudaStream_t stream) {
    const int64_t n = int64_t{n_rows} * n_cols;
    return launch_kernel(kernels::add_rows_kernel, dim3(kernels::elementwise_blocks(n)), dim3(kernels::row_threads),
                         stream, x, row, n, n_cols, out);
}

cudaError_t launch_gather_columns(const float *x, const int32_t *order, int32_t n_rows, int64_t n_cols, float *out,
                                  cudaStream_t stream) {
    const int64_t n = int64_t{n_rows} * n_cols;
    return launch_kernel(kernels::gather_columns_kernel, dim3(kernels::elementwise_blocks(n)),
                         dim3(kernels::row_threads), stream, x, order, n, n_cols, out);
}

cudaError_t launch_softmax(float *x, int32_t n_rows, int32_t n_cols, cudaStream_t stream) {
    return launch_kernel(kernels::softmax_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(kernels::row_threads),
                         stream, x, n_cols);
}

} // namespace strata::cuda
