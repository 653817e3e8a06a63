// Launchers of the CUDA device's kernels (defined in kernels_*.cuh, compiled in kernels_*.cu). They only enqueue work
// on `stream` and return the launch error, if any; arguments are checked by the op entry points (cuda_ops.cpp)
// before they get here. Every pointer is device memory; index arrays have been uploaded by the caller
// (index_staging).
#pragma once

#include "kernel_types.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

// True for the types the kernels decode (weight_formats.hpp); `alignment` receives the row alignment they need.
bool weight_type_supported(uint32_t type, uint32_t *alignment);

// y[t][r] = dot(W row r, x[t]); x is n_tokens x cols, y is n_tokens x rows (both float, device).
cudaError_t launch_matmul(const weight_ref &w, const float *x, int32_t n_tokens, float *y, cudaStream_t stream);

// matmul_id (ABI 1.16): w is the whole [cols, rows, n_expert] tensor; slot s = t * k + j multiplies expert ids[s]
// with x row s (x_per_slot) or t into y row s, by the kernel a 1-token matmul over that expert takes, so each slot's
// row equals launch_matmul's bit for bit. ids device memory, in range (moe_route's).
cudaError_t launch_matmul_id(const weight_ref &w, int32_t n_expert, const int32_t *ids, int32_t n_tokens, int32_t k,
                             const float *x, int32_t x_per_slot, float *y, cudaStream_t stream);
// The CPU device's moe_route, moe_combine and sigmoid_gate_add (plugin_abi.h, cpu_moe_ops.cpp).
cudaError_t launch_moe_route(const float *logits, int32_t n_tokens, int32_t n_expert, int32_t k, int32_t normalize,
                             int32_t *ids, float *weights, cudaStream_t stream);
cudaError_t launch_moe_combine(const float *y, const float *weights, int32_t n_tokens, int32_t k, int32_t dim,
                               float *out, cudaStream_t stream);
cudaError_t launch_sigmoid_gate_add(const float *y, const float *gate, int32_t n_rows, int32_t n_cols, float *acc,
                                    cudaStream_t stream);

// out[t] = decoded row tokens[t] of the table (tokens in device memory, already range-checked).
cudaError_t launch_embedding(const weight_ref &table, const int32_t *tokens, int32_t n_tokens, float *out,
                             cudaStream_t stream);

cudaError_t launch_rms_norm(const float *x, const float *weight, int32_t n_tokens, int32_t dim, float eps, float *out,
                            cudaStream_t stream);

// theta_scale = theta_base^(-2 / rot_dims), computed by the caller on the host with the CPU device's expression so
// both devices rotate by the same angles. rot_dims <= max_rot_dims. freq_factors (device memory, rot_dims / 2
// floats, or NULL) and terms as rope_scaled (ABI 1.13); NULL and {1, 0, 0, 1, 1} for the plain rotation.
cudaError_t launch_rope(float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                        const int32_t *positions, float theta_scale, int32_t mode, cudaStream_t stream,
                        const float *freq_factors, const rope_terms &terms);

cudaError_t launch_swiglu(const float *gate, const float *up, int64_t n, float *out, cudaStream_t stream);
cudaError_t launch_add(const float *a, const float *b, int64_t n, float *out, cudaStream_t stream);
// ABI 1.14: out = x * s; out = gelu_tanh(gate) * up; out = tanh(x * (1 / cap)) * cap (plugin_abi.h).
cudaError_t launch_scale(const float *x, int64_t n, float s, float *out, cudaStream_t stream);
cudaError_t launch_geglu(const float *gate, const float *up, int64_t n, float *out, cudaStream_t stream);
cudaError_t launch_softcap(const float *x, int64_t n, float cap, float *out, cudaStream_t stream);
// out[r * n_cols + i] = x[r * n_cols + i] + row[i] (add_rows, ABI 1.12).
cudaError_t launch_add_rows(const float *x, const float *row, int32_t n_rows, int32_t n_cols, float *out,
                            cudaStream_t stream);
cudaError_t launch_softmax(float *x, int32_t n_rows, int32_t n_cols, cudaStream_t stream);
// out[r * n_cols + j] = x[r * n_cols + order[j]] (a GPTQ act-order weight's input order, ABI 1.19); device memory.
cudaError_t launch_gather_columns(const float *x, const int32_t *order, int32_t n_rows, int64_t n_cols, float *out,
                                  cudaStream_t stream);

// Contiguous KV: rows kv_row_stride floats apart, token t attends rows 0..positions[t].
cudaError_t launch_attention(const attention_shape &shape, const int32_t *positions, const float *q,
                             const float *k_cache, const float *v_cache, int64_t kv_row_stride, float *out,
                             cudaStream_t stream);

// Same arithmetic as launch_attention, key for key, so results match it bit for bit.
cudaError_t launch_paged_attention(const attention_shape &shape, const int32_t *token_seq, const int32_t *positions,
                                   const paged_layout &kv, const float *q, float *out, cudaStream_t stream);

// Writes k[t] and v[t] (kv_dim floats each) into the slot of token t.
cudaError_t launch_kv_store(int32_t n_tokens, const int32_t *token_seq, const int32_t *positions,
                            const paged_layout &kv, const float *k, const float *v, cudaStream_t stream);

// cudaSuccess when this build's kernels can run on the current device (an image for its architecture exists).
cudaError_t kernels_loadable();

} // namespace strata::cuda
