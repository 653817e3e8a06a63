// The op entry points of the CPU device, with the exact signatures of strata_device_desc's slots. Each validates its
// arguments (STRATA_ERR_INVALID_ARGUMENT on bad input, outputs untouched), never throws, and never crashes on bad
// sizes or null pointers.
#pragma once

#include <strata/plugin_abi.h>

namespace strata::cpu {

int32_t matmul(strata_device *dev, const strata_tensor_view *w, const float *x, int32_t n_tokens, float *y,
               strata_status *st);
int32_t embedding(strata_device *dev, const strata_tensor_view *table, const int32_t *tokens, int32_t n_tokens,
                  float *out, strata_status *st);
int32_t rms_norm(strata_device *dev, const float *x, const float *weight, int32_t n_tokens, int32_t dim, float eps,
                 float *out, strata_status *st);
int32_t rope(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
             const int32_t *positions, float theta_base, int32_t mode, strata_status *st);
int32_t rope_ext(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                 const int32_t *positions, float theta_base, int32_t mode, float freq_scale, const float *freq_factors,
                 strata_status *st);
// rope_ext with YaRN's ramp and a magnitude scale (ABI 1.13); rope_ext is this with attn_factor 1, ext_factor 0.
int32_t rope_scaled(strata_device *dev, float *x, const strata_rope_args *args, strata_status *st);
int32_t attention(strata_device *dev, const strata_attention_args *args, strata_status *st);
int32_t swiglu(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st);
int32_t add(strata_device *dev, const float *a, const float *b, int64_t n, float *out, strata_status *st);
int32_t add_rows(strata_device *dev, const float *x, const float *row, int32_t n_rows, int32_t n_cols, float *out,
                 strata_status *st);
int32_t softmax(strata_device *dev, float *x, int32_t n_rows, int32_t n_cols, strata_status *st);
// ABI 1.14: Gemma-style element-wise ops (plugin_abi.h says each one's float expression).
int32_t scale(strata_device *dev, const float *x, int64_t n, float s, float *out, strata_status *st);
int32_t geglu(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st);
int32_t softcap(strata_device *dev, const float *x, int64_t n, float cap, float *out, strata_status *st);


// ABI 1.16: the mixture-of-experts steps, in cpu_moe_ops.cpp.
int32_t moe_route(strata_device *dev, const strata_moe_route_args *args, strata_status *st);
int32_t matmul_id(strata_device *dev, const strata_matmul_id_args *args, strata_status *st);
int32_t moe_combine(strata_device *dev, const float *y, const float *weights, int32_t n_tokens, int32_t k, int32_t dim,
                    float *out, strata_status *st);
int32_t sigmoid_gate_add(strata_device *dev, const float *y, const float *gate, int32_t n_rows, int32_t n_cols,
                         float *acc, strata_status *st);

// Checks a weight view for matmul-like ops (need_dot) or embedding; `what` names the op in messages.
// An input order (ABI 1.19, GPTQ act-order) is taken only by matmul (input_order_ok).
int32_t check_tensor(const strata_tensor_view *w, const char *what, bool need_dot, strata_status *st,
                     bool input_order_ok = false);
// ABI 1.17: whether the device computes what q describes (check_tensor for weights; any attention or RoPE shape).
int32_t supports(strata_device *dev, const strata_support_query *q, char *why, uint32_t why_cap);
// True when the weight's format offers the integer dot path (ABI 1.1): quantize x once, then integer block dots.
bool has_integer_path(const strata_quant_desc *q);

// The checks attention and paged_attention share: head counts, q/out, scale. `op` names the op in the message.
int32_t check_attention_heads(const char *op, int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                              const float *q, const float *out, float scale, strata_status *st);

// The paged KV cache (ABI 1.5), in cpu_paged_ops.cpp.
int32_t kv_store(strata_device *dev, const strata_kv_store_args *args, strata_status *st);
int32_t paged_attention(strata_device *dev, const strata_paged_attention_args *args, strata_status *st);
// Device memory is host memory: every kind is a memmove.
int32_t copy(strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t kind, strata_status *st);
int32_t host_addressable(strata_device *dev);
// Fences (ABI 1.7): increasing ids; copy_after is `copy` once the fence is known (ops complete on return).
int32_t fence_record(strata_device *dev, uint64_t *fence, strata_status *st);
int32_t copy_after(strata_device *dev, uint64_t fence, void *dst, const void *src, uint64_t bytes, int32_t kind,
                   strata_status *st);

} // namespace strata::cpu
