// Plain data the op entry points hand to the kernels, and the limits the kernels are built for. No CUDA headers, so
// the kernel headers also compile on the host under tests/device_cuda's execution-model emulation.
#pragma once

#include <cstdint>

namespace strata::cuda {

// A weight matrix in device memory: rows x cols elements of GGUF type `type`, rows `row_bytes` apart.
struct weight_ref {
    const void *data;
    int64_t rows;
    int64_t cols;
    int64_t row_bytes;
    uint32_t type; // weight_type (weight_formats.hpp)
};

// Largest token batch the one-warp-per-row matmul kernel handles; bigger batches use the tiled kernel.
inline constexpr int32_t matvec_max_tokens = 8;

// Router widths the routing kernel handles (every released mixture of experts has at most 256), as the CPU device.
inline constexpr int32_t max_route_experts = 1024;

// matmul_id (ABI 1.16) as a matmul launch over slots: slot s (= slot0 + blockIdx.y) multiplies expert ids[s] (rows
// e * rows .. of the whole tensor, `rows` being one expert's) with x row s (x_per_slot) or s / k into y row s. ids ==
// nullptr: a plain matmul. A slot whose id is outside [0, n_expert) is left unwritten (ids come from moe_route).
struct expert_pick {
    const int32_t *ids = nullptr; // device memory, one per slot
    int32_t n_expert = 0;
    int32_t k = 1;
    int32_t x_per_slot = 0;
    int64_t slot0 = 0;
};

struct attention_shape {
    int32_t n_tokens;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim; // <= max_head_dim
    float scale;
    float softcap = 0.0f; // > 0: a score becomes tanh(score * (1 / softcap)) * softcap (ABI 1.14)
    int32_t window = 0;   // > 0: a query at position p attends only to positions > p - window (ABI 1.14)
};

// Attention keeps a head's dims in registers, head_dim / 32 per lane.
inline constexpr int32_t max_head_dim = 256;
// RoPE keeps a token's cos/sin table (rot_dims floats) in shared memory.
inline constexpr int32_t max_rot_dims = 1024;

// RoPE's terms beyond the plain rotation (rope_ext, rope_scaled): 1 / the scaling factor, YaRN's mix and ramp
// (ext_factor 0: none; ramp_width = max(0.001, corr_high - corr_low)), and the magnitude of cos and sin (mscale,
// computed on the host with the CPU device's expression).
struct rope_terms {
    float freq_scale;
    float ext_factor;
    float corr_low;
    float ramp_width;
    float mscale;
};

// The paged KV layout of strata_paged_kv (plugin_abi.h), with its index arrays in device memory.
struct paged_layout {
    const int32_t *seq_block_start; // n_seqs + 1
    const uint64_t *block_base;     // device addresses of the blocks
    int32_t block_size;
    int32_t kv_dim;
    uint64_t layer_offset_bytes;
    uint32_t kv_type = 0; // strata_kv_type (strata/kv_layout.hpp's type_list)
};

} // namespace strata::cuda
