// What the CUDA device's op entry points share (cuda_ops.cpp, cuda_moe_ops.cpp): the CPU device's tensor checks plus
// what the kernels need, the per-call device scope, and the mapping of launch errors to a status.
#pragma once

#include "cuda_device_state.hpp"
#include "cuda_kernels.hpp"
#include "weight_formats.hpp"

#include <strata/plugin.hpp>

#include <cstddef>
#include <mutex>

namespace strata::cuda {

using strata::plugin::fail;
using strata::plugin::guarded;
using strata::plugin::ok;

inline constexpr int32_t invalid = STRATA_ERR_INVALID_ARGUMENT;
// CUDA grid dimensions: x up to 2^31 - 1 (weight rows of the decode kernel), y up to 65535 (heads).
inline constexpr int32_t max_grid_x = 2147483647;
inline constexpr int32_t max_grid_y = 65535;

inline const char *name_of(const strata_tensor_view *w) { return w->name != nullptr ? w->name : "(unnamed)"; }

// The CPU device's tensor checks, plus what the kernels need: a type they decode and aligned rows (with_data: the
// data pointer too; without it, what the `supports` query asks before the weight is on the device). An input order
// (ABI 1.19, GPTQ act-order) is taken only by matmul (input_order_ok).
inline int32_t check_tensor(const strata_tensor_view *w, const char *what, strata_status *st, bool with_data = true,
                            bool input_order_ok = false) {
    if (w == nullptr) return fail(st, invalid, "cuda %s: the tensor view is NULL", what);
    const char *name = name_of(w);
    if (w->struct_size < offsetof(strata_tensor_view, name) + sizeof(w->name))
        return fail(st, invalid, "cuda %s: tensor '%s' view has struct_size %u, smaller than this plugin's %zu; "
                                 "rebuild the host against the current plugin_abi.h",
                    what, name, w->struct_size, sizeof(strata_tensor_view));
    uint32_t alignment = 0;
    if (!weight_type_supported(w->ggml_type, &alignment))
        return fail(st, STRATA_ERR_UNSUPPORTED,
                    "cuda %s: tensor '%s' has ggml type %u; this device computes on F32 (0), F16 (1), BF16 (30), "
                    "Q4_0 (2), Q4_1 (3), Q5_0 (6), Q5_1 (7), Q8_0 (8), Q2_K..Q6_K (10..14), IQ4_NL (20), IQ4_XS (23), "
                    "the group-integer Q4_G*/Q8_G* (1024..1029) and FP8 F8_E4M3_B32/B128 (1030, 1031)",
                    what, name, w->ggml_type);
    if (w->quant != nullptr && w->ggml_type != w->quant->ggml_type)
        return fail(st, invalid, "cuda %s: tensor '%s' has ggml type %u but its quant descriptor is for type %u", what,
                    name, w->ggml_type, w->quant->ggml_type);
    if (with_data && w->data == nullptr) return fail(st, invalid, "cuda %s: tensor '%s' has no data", what, name);
    if (w->rows <= 0 || w->cols <= 0)
        return fail(st, invalid, "cuda %s: tensor '%s' has shape %lld x %lld; both must be > 0", what, name,
                    static_cast<long long>(w->rows), static_cast<long long>(w->cols));
    if (w->rows > max_grid_x)
        return fail(st, STRATA_ERR_UNSUPPORTED, "cuda %s: tensor '%s' has %lld rows; this device supports up to %d",
                    what, name, static_cast<long long>(w->rows), max_grid_x);
    int64_t block_elems = 1, block_bytes = 1;
    weight_block_shape(w->ggml_type, block_elems, block_bytes); // known: weight_type_supported said yes
    if (w->cols % block_elems != 0)
        return fail(st, invalid, "cuda %s: tensor '%s' has %lld columns, not a multiple of its block size %lld", what,
                    name, static_cast<long long>(w->cols), static_cast<long long>(block_elems));
    const int64_t min_row_bytes = w->cols / block_elems * block_bytes;
    if (w->row_bytes < min_row_bytes)
        return fail(st, invalid, "cuda %s: tensor '%s' has row_bytes %lld but %lld columns need %lld", what, name,
                    static_cast<long long>(w->row_bytes), static_cast<long long>(w->cols),
                    static_cast<long long>(min_row_bytes));
    if (w->row_bytes % alignment != 0 || (with_data && reinterpret_cast<uintptr_t>(w->data) % alignment != 0))
        return fail(st, STRATA_ERR_UNSUPPORTED,
                    "cuda %s: tensor '%s' rows are not %u-byte aligned (data %p, row_bytes %lld); the kernels read "
                    "whole elements",
                    what, name, alignment, w->data, static_cast<long long>(w->row_bytes));
    if (strata::plugin::input_order_of(w) != nullptr && !input_order_ok)
        return fail(st, STRATA_ERR_UNSUPPORTED, "cuda %s: tensor '%s' has an input order (GPTQ act-order); only "
                                                "matmul takes one", what, name);
    return STRATA_OK;
}

inline weight_ref ref_of(const strata_tensor_view *w) { return {w->data, w->rows, w->cols, w->row_bytes, w->ggml_type}; }

inline int32_t check_positions(const int32_t *positions, int32_t n_tokens, const char *what, strata_status *st) {
    if (positions == nullptr) return fail(st, invalid, "cuda %s: positions is NULL", what);
    for (int32_t t = 0; t < n_tokens; ++t)
        if (positions[t] < 0)
            return fail(st, invalid, "cuda %s: positions[%d] = %d; positions must be >= 0", what, t, positions[t]);
    return STRATA_OK;
}

// Takes the device's lock and makes its ordinal current for the call.
class op_scope {
  public:
    op_scope(strata_device *dev) : lock_(dev->mutex), err_(make_current(dev)) {}
    cudaError_t error() const { return err_; }

  private:
    std::lock_guard<std::mutex> lock_;
    cudaError_t err_;
};

// Maps a launch (or upload) error to the op's status.
inline int32_t finish(cudaError_t err, const char *what, strata_status *st) {
    if (err != cudaSuccess) {
        const int32_t code = err == cudaErrorMemoryAllocation ? STRATA_ERR_OUT_OF_MEMORY : STRATA_ERR_INTERNAL;
        return fail_cuda(st, code, err, what);
    }
    ok(st);
    return STRATA_OK;
}

} // namespace strata::cuda
