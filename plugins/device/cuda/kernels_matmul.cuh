// Matmul and embedding over F32/F16/BF16/Q8_0/Q4_0 weights in device memory. Weights are decoded element by element
// (weight_formats.hpp, exact) and multiplied with float activations in float: no activation quantization, so the
// result is the float64 product of the dequantized weights up to float rounding.
//
// Kernels:
//  - row_block (n_tokens <= matvec_max_tokens, i.e. decode, when columns are a multiple of 8 and the data aligned for
//    wide loads): one 128-thread block per weight row, each thread decoding 8 consecutive elements per step with
//    wide loads (format<T>::load8), so many bytes are in flight per thread; the row is read once for every token of
//    the batch; warp shuffles then shared memory reduce the partial sums.
//  - matvec (the same batches otherwise): one warp per weight row, lane l reading elements l, l + 32, ...
//  - tiled (larger batches, prefill): 64 rows x 64 tokens per block, 32 columns per step staged (decoded) in shared
//    memory, each thread accumulating 4 x 4 outputs. Simple and correct rather than peak-FLOP; see docs/CUDA.md.
#pragma once

#include "kernel_common.cuh"
#include "weight_formats.hpp"

namespace strata::cuda {
namespace kernels {

constexpr int matvec_warps = 4; // rows per block

// matmul_id (pick.ids set): where the block's slot's expert starts (in rows of the whole tensor), its x row and its y
// row; false when the slot's id is out of range (nothing is written for it). A plain matmul: all 0.
struct picked {
    int64_t w_rows = 0, x_offset = 0, y_offset = 0;
};
__device__ __forceinline__ bool pick_slot(const expert_pick &pick, int64_t rows, int64_t cols, picked &p) {
    if (pick.ids == nullptr) return true;
    const int64_t s = pick.slot0 + blockIdx.y;
    const int32_t e = pick.ids[s];
    if (e < 0 || e >= pick.n_expert) return false;
    p.w_rows = int64_t{e} * rows;
    p.x_offset = (pick.x_per_slot != 0 ? s : s / pick.k) * cols;
    p.y_offset = s * rows;
    return true;
}

template <uint32_t T, int MaxTokens>
__global__ void __launch_bounds__(matvec_warps *warp_size)
    matvec_kernel(const unsigned char *__restrict__ w, int64_t rows, int64_t cols, int64_t row_bytes,
                  const float *__restrict__ x, int32_t n_tokens, float *__restrict__ y, expert_pick pick) {
    const int64_t r = int64_t{blockIdx.x} * matvec_warps + threadIdx.x / warp_size;
    const int lane = static_cast<int>(threadIdx.x % warp_size);
    picked p;
    if (r >= rows || !pick_slot(pick, rows, cols, p)) return;
    x += p.x_offset;
    y += p.y_offset;
    const unsigned char *row = w + (p.w_rows + r) * row_bytes;
    float acc[MaxTokens];
#pragma unroll
    for (int t = 0; t < MaxTokens; ++t) acc[t] = 0.0f;
#pragma unroll 4
    for (int64_t k = lane; k < cols; k += warp_size) {
        const float wk = format<T>::element(row, k);
#pragma unroll
        for (int t = 0; t < MaxTokens; ++t)
            if (t < n_tokens) acc[t] += wk * x[int64_t{t} * cols + k];
    }
#pragma unroll
    for (int t = 0; t < MaxTokens; ++t) {
        float v = acc[t];
#pragma unroll
        for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
        if (lane == 0 && t < n_tokens) y[int64_t{t} * rows + r] = v;
    }
}

constexpr int row_block_threads = 128;
constexpr int row_block_warps = row_block_threads / warp_size;

template <uint32_t T, int MaxTokens>
__global__ void __launch_bounds__(row_block_threads)
    row_block_kernel(const unsigned char *__restrict__ w, int64_t rows, int64_t cols, int64_t row_bytes,
                     const float *__restrict__ x, int32_t n_tokens, float *__restrict__ y, expert_pick pick) {
    __shared__ float partial[MaxTokens][row_block_warps];
    const int64_t r = blockIdx.x;
    picked p;
    if (!pick_slot(pick, rows, cols, p)) return; // the whole block: no barrier is left waiting
    x += p.x_offset;
    y += p.y_offset;
    const unsigned char *row = w + (p.w_rows + r) * row_bytes;
    float acc[MaxTokens];
#pragma unroll
    for (int t = 0; t < MaxTokens; ++t) acc[t] = 0.0f;
#pragma unroll 2
    for (int64_t k = int64_t{threadIdx.x} * 8; k < cols; k += row_block_threads * 8) {
        float wk[8];
        format<T>::load8(row, k, wk);
#pragma unroll
        for (int t = 0; t < MaxTokens; ++t) {
            if (t < n_tokens) {
                float xk[8];
                load_floats8(x + int64_t{t} * cols + k, xk);
#pragma unroll
                for (int i = 0; i < 8; ++i) acc[t] = fmaf(wk[i], xk[i], acc[t]);
            }
        }
    }
    const int warp = static_cast<int>(threadIdx.x / warp_size), lane = static_cast<int>(threadIdx.x % warp_size);
#pragma unroll
    for (int t = 0; t < MaxTokens; ++t) {
        if (t < n_tokens) { // the same for every thread of the grid, so the shuffles stay convergent
            const float v = warp_sum(acc[t]);
            if (lane == 0) partial[t][warp] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x < static_cast<unsigned>(MaxTokens) && static_cast<int32_t>(threadIdx.x) < n_tokens) {
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < row_block_warps; ++i) sum += partial[threadIdx.x][i];
        y[int64_t{threadIdx.x} * rows + r] = sum;
    }
}

constexpr int tile_rows = 64;   // weight rows per block
constexpr int tile_tokens = 64; // tokens per block
constexpr int tile_k = 32;      // columns per step (one Q8_0/Q4_0 block)
constexpr int tile_threads = 256;
constexpr int tile_step = 16; // a thread owns rows ty + 16 i and tokens tx + 16 j, i, j < 4

template <uint32_t T>
__global__ void __launch_bounds__(tile_threads)
    tiled_kernel(const unsigned char *__restrict__ w, int64_t rows, int64_t cols, int64_t row_bytes,
                 const float *__restrict__ x, int32_t n_tokens, float *__restrict__ y) {
    // [k][row]: +1 column of padding so the column-wise stores below hit distinct banks.
    __shared__ float w_tile[tile_k][tile_rows + 1];
    __shared__ float x_tile[tile_k][tile_tokens + 1];
    const int64_t row0 = int64_t{blockIdx.x} * tile_rows;
    const int64_t tok0 = int64_t{blockIdx.y} * tile_tokens;
    const int tid = static_cast<int>(threadIdx.x);
    const int tx = tid % tile_step, ty = tid / tile_step;
    float acc[4][4] = {};

    for (int64_t k0 = 0; k0 < cols; k0 += tile_k) {
        // Consecutive threads load consecutive columns of one row (coalesced for every format).
        for (int e = tid; e < tile_rows * tile_k; e += tile_threads) {
            const int rr = e / tile_k, kk = e % tile_k;
            const int64_t r = row0 + rr, k = k0 + kk;
            w_tile[kk][rr] = (r < rows && k < cols) ? format<T>::element(w + r * row_bytes, k) : 0.0f;
        }
        for (int e = tid; e < tile_tokens * tile_k; e += tile_threads) {
            const int tt = e / tile_k, kk = e % tile_k;
            const int64_t t = tok0 + tt, k = k0 + kk;
            x_tile[kk][tt] = (t < n_tokens && k < cols) ? x[t * cols + k] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < tile_k; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = w_tile[kk][ty + tile_step * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = x_tile[kk][tx + tile_step * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int64_t r = row0 + ty + tile_step * i, t = tok0 + tx + tile_step * j;
            if (r < rows && t < n_tokens) y[t * rows + r] = acc[i][j];
        }
}

template <uint32_t T>
__global__ void embedding_kernel(const unsigned char *__restrict__ table, int64_t cols, int64_t row_bytes,
                                 const int32_t *__restrict__ tokens, float *__restrict__ out) {
    const int64_t t = blockIdx.x;
    const unsigned char *row = table + int64_t{tokens[t]} * row_bytes;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) out[t * cols + k] = format<T>::element(row, k);
}

} // namespace kernels

namespace launchers {

// Whether row_block_kernel's wide loads are legal: whole 8-element steps, activations 16-byte aligned (rows of x
// too), and for F32/F16/BF16 weight rows 16-byte aligned.
template <uint32_t T> bool row_block_fits(const weight_ref &w, const float *x) {
    const auto aligned16 = [](uint64_t v) { return v % 16 == 0; };
    if (w.cols % 8 != 0 || !aligned16(reinterpret_cast<uintptr_t>(x))) return false;
    if (format<T>::load8_needs_16_byte_rows)
        return aligned16(reinterpret_cast<uintptr_t>(w.data)) && aligned16(static_cast<uint64_t>(w.row_bytes));
    return true;
}

// The decode kernels over `slots` slots of a matmul_id pick (1 and no pick for a plain matmul): grid.y = slots.
template <uint32_t T>
cudaError_t matvec_as(const weight_ref &w, const float *x, int32_t n_tokens, float *y, cudaStream_t stream,
                      const expert_pick &pick, unsigned slots) {
    const auto *data = static_cast<const unsigned char *>(w.data);
    if (row_block_fits<T>(w, x)) {
        const dim3 grid(static_cast<unsigned>(w.rows), slots);
        if (n_tokens == 1)
            return launch_kernel(kernels::row_block_kernel<T, 1>, grid, dim3(kernels::row_block_threads), stream, data,
                                 w.rows, w.cols, w.row_bytes, x, n_tokens, y, pick);
        return launch_kernel(kernels::row_block_kernel<T, matvec_max_tokens>, grid, dim3(kernels::row_block_threads),
                             stream, data, w.rows, w.cols, w.row_bytes, x, n_tokens, y, pick);
    }
    const dim3 grid(static_cast<unsigned>((w.rows + kernels::matvec_warps - 1) / kernels::matvec_warps), slots);
    if (n_tokens <= 1)
        return launch_kernel(kernels::matvec_kernel<T, 1>, grid, dim3(kernels::matvec_warps * warp_size), stream, data,
                             w.rows, w.cols, w.row_bytes, x, n_tokens, y, pick);
    return launch_kernel(kernels::matvec_kernel<T, matvec_max_tokens>, grid, dim3(kernels::matvec_warps * warp_size),
                         stream, data, w.rows, w.cols, w.row_bytes, x, n_tokens, y, pick);
}

// matmul_id: the 1-token decode kernel a matmul over one expert takes, over every slot, in launches of at most 65535
// slots (grid.y), each starting at a token boundary.
template <uint32_t T>
cudaError_t matmul_id_as(const weight_ref &w, int32_t n_expert, const int32_t *ids, int32_t n_tokens, int32_t k,
                         const float *x, int32_t x_per_slot, float *y, cudaStream_t stream) {
    const weight_ref expert{w.data, w.rows / n_expert, w.cols, w.row_bytes, w.type};
    const int64_t n_slots = int64_t{n_tokens} * k;
    const int64_t per_launch = int64_t{65535} / k * k;
    for (int64_t s0 = 0; s0 < n_slots; s0 += per_launch) {
        const expert_pick pick{ids, n_expert, k, x_per_slot, s0};
        const auto slots = static_cast<unsigned>(n_slots - s0 < per_launch ? n_slots - s0 : per_launch);
        if (const cudaError_t err = matvec_as<T>(expert, x, 1, y, stream, pick, slots); err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

template <uint32_t T>
cudaError_t matmul_as(const weight_ref &w, const float *x, int32_t n_tokens, float *y, cudaStream_t stream) {
    const auto *data = static_cast<const unsigned char *>(w.data);
    if (n_tokens <= matvec_max_tokens) {
        return matvec_as<T>(w, x, n_tokens, y, stream, expert_pick{}, 1);
    } else {
        const dim3 grid(static_cast<unsigned>((w.rows + kernels::tile_rows - 1) / kernels::tile_rows),
                        static_cast<unsigned>((n_tokens + kernels::tile_tokens - 1) / kernels::tile_tokens));
        return launch_kernel(kernels::tiled_kernel<T>, grid, dim3(kernels::tile_threads), stream, data, w.rows, w.cols,
                             w.row_bytes, x, n_tokens, y);
    }
}

template <uint32_t T>
cudaError_t embedding_as(const weight_ref &table, const int32_t *tokens, int32_t n_tokens, float *out,
                         cudaStream_t stream) {
    return launch_kernel(kernels::embedding_kernel<T>, dim3(static_cast<unsigned>(n_tokens)), dim3(256), stream,
                         static_cast<const unsigned char *>(table.data), table.cols, table.row_bytes, tokens, out);
}

} // namespace launchers

bool weight_type_supported(uint32_t type, uint32_t *alignment) {
    uint32_t a = 0;
    switch (type) {
#define STRATA_CUDA_ALIGNMENT(t)                                                                                       \
    case t: a = format<t>::alignment; break;
        STRATA_CUDA_WEIGHT_TYPES(STRATA_CUDA_ALIGNMENT)
#undef STRATA_CUDA_ALIGNMENT
    default: return false;
    }
    if (alignment != nullptr) *alignment = a;
    return true;
}

cudaError_t launch_matmul(const weight_ref &w, const float *x, int32_t n_tokens, float *y, cudaStream_t stream) {
    switch (w.type) {
#define STRATA_CUDA_MATMUL(t)                                                                                          \
    case t: return launchers::matmul_as<t>(w, x, n_tokens, y, stream);
        STRATA_CUDA_WEIGHT_TYPES(STRATA_CUDA_MATMUL)
#undef STRATA_CUDA_MATMUL
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t launch_matmul_id(const weight_ref &w, int32_t n_expert, const int32_t *ids, int32_t n_tokens, int32_t k,
                             const float *x, int32_t x_per_slot, float *y, cudaStream_t stream) {
    switch (w.type) {
#define STRATA_CUDA_MATMUL_ID(t)                                                                                       \
    case t: return launchers::matmul_id_as<t>(w, n_expert, ids, n_tokens, k, x, x_per_slot, y, stream);
        STRATA_CUDA_WEIGHT_TYPES(STRATA_CUDA_MATMUL_ID)
#undef STRATA_CUDA_MATMUL_ID
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t launch_embedding(const weight_ref &table, const int32_t *tokens, int32_t n_tokens, float *out,
                             cudaStream_t stream) {
    switch (table.type) {
#define STRATA_CUDA_EMBEDDING(t)                                                                                       \
    case t: return launchers::embedding_as<t>(table, tokens, n_tokens, out, stream);
        STRATA_CUDA_WEIGHT_TYPES(STRATA_CUDA_EMBEDDING)
#undef STRATA_CUDA_EMBEDDING
    default: return cudaErrorInvalidValue;
    }
}

} // namespace strata::cuda
