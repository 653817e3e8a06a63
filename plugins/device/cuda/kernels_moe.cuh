// The mixture-of-experts steps of the CUDA device (ABI 1.16) with the CPU device's float steps
// (plugins/device/cpu/cpu_moe_ops.cpp): routing (softmax, top-k, optional normalisation), the weighted sum of the
// selected experts' outputs and Qwen2-MoE's sigmoid-gated shared expert. matmul_id is the matmul kernels run over each
// slot's expert (kernels_matmul.cuh, expert_pick). tests/device_cuda runs these under host emulation.
#pragma once

#include "kernel_common.cuh"

namespace strata::cuda {
namespace kernels {

// One block of one thread per token: the token's softmax over at most max_route_experts router logits, then its k
// largest probabilities, largest first, equal ones by lower id (small next to the matmuls around it).
__global__ void moe_route_kernel(const float *__restrict__ logits, int32_t n_expert, int32_t k, int32_t normalize,
                                 int32_t *__restrict__ ids, float *__restrict__ weights) {
    __shared__ float probs[max_route_experts];
    __shared__ unsigned char taken[max_route_experts];
    const int64_t t = blockIdx.x;
    const float *row = logits + t * n_expert;
    float m = row[0];
    for (int32_t e = 1; e < n_expert; ++e) m = fmaxf(m, row[e]);
    double sum = 0.0; // ggml_soft_max: exponentials summed in double, one multiply by the float reciprocal
    for (int32_t e = 0; e < n_expert; ++e) {
        probs[e] = expf(row[e] - m);
        sum += static_cast<double>(probs[e]);
        taken[e] = 0;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int32_t e = 0; e < n_expert; ++e) probs[e] = __fmul_rn(probs[e], inv);
    int32_t *id = ids + t * k;
    float *w = weights + t * k;
    for (int32_t s = 0; s < k; ++s) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; ++e)
            if (!taken[e] && (best < 0 || probs[e] > probs[best])) best = e;
        taken[best] = 1;
        id[s] = best;
        w[s] = probs[best];
    }
    if (normalize == 0) return;
    double total = 0.0; // ggml_sum_rows: summed in double, narrowed to float
    for (int32_t s = 0; s < k; ++s) total += static_cast<double>(w[s]);
    const float clamped = fmaxf(static_cast<float>(total), 6.103515625e-5f);
    for (int32_t s = 0; s < k; ++s) w[s] = w[s] / clamped;
}

// out[t][i] = sum over s of y[t * k + s][i] * weights[t * k + s], each product rounded, then added in slot order.
__global__ void moe_combine_kernel(const float *__restrict__ y, const float *__restrict__ weights, int64_t n,
                                   int32_t k, int32_t dim, float *__restrict__ out) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t t = i / dim, c = i % dim;
        const float *w = weights + t * k;
        const float *ys = y + t * k * dim + c;
        float acc = __fmul_rn(ys[0], w[0]);
        for (int32_t s = 1; s < k; ++s) acc = __fadd_rn(acc, __fmul_rn(ys[int64_t{s} * dim], w[s]));
        out[i] = acc;
    }
}

// acc[r][i] += y[r][i] * (silu(gate[r]) / gate[r]): the sigmoid of the row's gate as llama.cpp computes it.
__global__ void sigmoid_gate_add_kernel(const float *__restrict__ y, const float *__restrict__ gate, int64_t n,
                                        int32_t n_cols, float *__restrict__ acc) {
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const float g = gate[i / n_cols];
        const float silu = g / (1.0f + expf(-g)); // ggml_silu_f32
        acc[i] = __fadd_rn(acc[i], __fmul_rn(y[i], silu / g));
    }
}

// Grid for a grid-stride loop over n elements (as kernels_elementwise.cuh sizes its own).
inline unsigned moe_blocks(int64_t n, int threads) {
    constexpr int64_t max_blocks = 4096;
    const int64_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

} // namespace kernels

cudaError_t launch_moe_route(const float *logits, int32_t n_tokens, int32_t n_expert, int32_t k, int32_t normalize,
                             int32_t *ids, float *weights, cudaStream_t stream) {
    return launch_kernel(kernels::moe_route_kernel, dim3(static_cast<unsigned>(n_tokens)), dim3(1), stream, logits,
                         n_expert, k, normalize, ids, weights);
}

cudaError_t launch_moe_combine(const float *y, const float *weights, int32_t n_tokens, int32_t k, int32_t dim,
                               float *out, cudaStream_t stream) {
    const int64_t n = int64_t{n_tokens} * dim;
    return launch_kernel(kernels::moe_combine_kernel, dim3(kernels::moe_blocks(n, 256)), dim3(256), stream, y, weights,
                         n, k, dim, out);
}

cudaError_t launch_sigmoid_gate_add(const float *y, const float *gate, int32_t n_rows, int32_t n_cols, float *acc,
                                    cudaStream_t stream) {
    const int64_t n = int64_t{n_rows} * n_cols;
    return launch_kernel(kernels::sigmoid_gate_add_kernel, dim3(kernels::moe_blocks(n, 256)), dim3(256), stream, y,
                         gate, n, n_cols, acc);
}

} // namespace strata::cuda
