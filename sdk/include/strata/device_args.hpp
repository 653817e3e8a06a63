// Header-only helpers for device plugins reading the op argument structs: the forms every device shares, so two
// devices cannot read the same ABI differently.
#pragma once

#include <strata/plugin.hpp>
#include <strata/plugin_abi.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace strata::plugin {

// rope_ext's arguments (ABI 1.11) as the rope_scaled struct (ABI 1.13) with neutral magnitude and no YaRN, so a device
// implements rope_ext by calling its rope_scaled.
inline strata_rope_args rope_ext_args(int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                                      const int32_t *positions, float theta_base, int32_t mode, float freq_scale,
                                      const float *freq_factors) {
    strata_rope_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = n_tokens;
    a.n_heads = n_heads;
    a.head_dim = head_dim;
    a.rot_dims = rot_dims;
    a.mode = mode;
    a.positions = positions;
    a.theta_base = theta_base;
    a.freq_scale = freq_scale;
    a.freq_factors = freq_factors;
    a.attn_factor = 1.0f;
    return a;
}

// The ABI 1.14 tail of strata_attention_args / strata_paged_attention_args: softcap and window, 0 (off) when the
// caller's struct ends before them; checked (softcap finite and >= 0, window >= 0). `op` names the op in messages
// ("cpu paged_attention").
template <class Args>
int32_t attention_score_terms(const Args *a, const char *op, float *softcap, int32_t *window, strata_status *st) {
    *softcap = 0.0f;
    *window = 0;
    if (a->struct_size < offsetof(Args, window) + sizeof(a->window)) return STRATA_OK;
    if (!(a->softcap >= 0.0f) || !std::isfinite(a->softcap))
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: softcap = %g; must be finite and >= 0 (0: off)", op,
                    static_cast<double>(a->softcap));
    if (a->window < 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: window = %d; must be >= 0 (0: off)", op, a->window);
    *softcap = a->softcap;
    *window = a->window;
    return STRATA_OK;
}

// The ABI 1.27 tail of strata_device_create_args: which of the process's data-parallel instances this device is
// (0 of 1 when the host's struct ends before it, or says 0 instances), checked (0 <= instance < n_instances).
// `dev` names the device in messages ("cpu").
inline int32_t device_instance(const strata_device_create_args *a, const char *dev, int32_t *instance,
                               int32_t *n_instances, strata_status *st) {
    *instance = 0;
    *n_instances = 1;
    if (a == nullptr || a->struct_size < offsetof(strata_device_create_args, n_instances) + sizeof(a->n_instances))
        return STRATA_OK;
    const int32_t n = a->n_instances > 0 ? a->n_instances : 1;
    if (a->instance < 0 || a->instance >= n)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s create: instance %d of %d is out of range", dev, a->instance, n);
    *instance = a->instance;
    *n_instances = n;
    return STRATA_OK;
}

// The ABI 1.28 tail of strata_device_create_args: which pipeline stage of its replica this device serves (0 of 1 when
// the host's struct ends before it, or says 0 stages), checked (0 <= rank < n_ranks). `dev` names the device.
inline int32_t device_pipeline_rank(const strata_device_create_args *a, const char *dev, int32_t *rank,
                                    int32_t *n_ranks, strata_status *st) {
    *rank = 0;
    *n_ranks = 1;
    if (a == nullptr ||
        a->struct_size < offsetof(strata_device_create_args, n_pipeline_ranks) + sizeof(a->n_pipeline_ranks))
        return STRATA_OK;
    const int32_t n = a->n_pipeline_ranks > 0 ? a->n_pipeline_ranks : 1;
    if (a->pipeline_rank < 0 || a->pipeline_rank >= n)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s create: pipeline rank %d of %d is out of range", dev,
                    a->pipeline_rank, n);
    *rank = a->pipeline_rank;
    *n_ranks = n;
    return STRATA_OK;
}

// Router widths the mixture-of-experts ops take (every released mixture of experts has at most 256).
inline constexpr int32_t moe_max_experts = 1024;

// moe_route's arguments (ABI 1.16) checked as every device checks them; `dev` names the device in messages ("cpu").
inline int32_t check_moe_route_args(const strata_moe_route_args *a, const char *dev, strata_status *st) {
    constexpr int32_t invalid = STRATA_ERR_INVALID_ARGUMENT;
    if (a->struct_size < sizeof(strata_moe_route_args))
        return fail(st, invalid, "%s moe_route: args.struct_size = %u, expected >= %zu", dev, a->struct_size,
                    sizeof(strata_moe_route_args));
    if (a->logits == nullptr || a->ids == nullptr || a->weights == nullptr)
        return fail(st, invalid, "%s moe_route: logits, ids or weights is NULL", dev);
    if (a->n_tokens <= 0 || a->n_expert <= 0 || a->n_expert > moe_max_experts || a->k <= 0 || a->k > a->n_expert)
        return fail(st, invalid,
                    "%s moe_route: n_tokens = %d, n_expert = %d, k = %d; need n_tokens > 0, 0 < n_expert <= %d and "
                    "0 < k <= n_expert",
                    dev, a->n_tokens, a->n_expert, a->k, moe_max_experts);
    if (a->normalize != 0 && a->normalize != 1)
        return fail(st, invalid, "%s moe_route: normalize = %d; must be 0 or 1", dev, a->normalize);
    return STRATA_OK;
}

// matmul_id's arguments (ABI 1.16) past the weight's own checks (the device's): the expert count, the slots, x_per_slot
// and y apart from x and ids. Writes each expert's rows and the slot count.
inline int32_t check_matmul_id_args(const strata_matmul_id_args *a, const char *dev, int64_t *rows_per_expert,
                                    int64_t *n_slots, strata_status *st) {
    constexpr int32_t invalid = STRATA_ERR_INVALID_ARGUMENT;
    const strata_tensor_view &w = *a->w;
    if (a->n_expert <= 0 || a->n_expert > moe_max_experts || w.rows % a->n_expert != 0)
        return fail(st, invalid, "%s matmul_id: tensor '%s' has %lld rows, not n_expert = %d (at most %d) equal matrices",
                    dev, w.name != nullptr ? w.name : "(unnamed)", static_cast<long long>(w.rows), a->n_expert,
                    moe_max_experts);
    if (a->n_tokens <= 0 || a->k <= 0 || a->k > a->n_expert)
        return fail(st, invalid, "%s matmul_id: n_tokens = %d, k = %d; need n_tokens > 0 and 0 < k <= n_expert = %d",
                    dev, a->n_tokens, a->k, a->n_expert);
    if (a->ids == nullptr || a->x == nullptr || a->y == nullptr)
        return fail(st, invalid, "%s matmul_id: ids, x or y is NULL", dev);
    if (a->x_per_slot != 0 && a->x_per_slot != 1)
        return fail(st, invalid, "%s matmul_id: x_per_slot = %d; must be 0 or 1", dev, a->x_per_slot);
    const int64_t rpe = w.rows / a->n_expert;
    const int64_t slots = static_cast<int64_t>(a->n_tokens) * a->k; // < 2^31 * 1024: no overflow
    if (slots > INT32_MAX)
        return fail(st, invalid, "%s matmul_id: n_tokens x k = %lld slots is too many", dev,
                    static_cast<long long>(slots));
    const int64_t n_x = a->x_per_slot != 0 ? slots : a->n_tokens;
    const auto *y0 = reinterpret_cast<const char *>(a->y);
    const auto *y1 = y0 + sizeof(float) * static_cast<uint64_t>(slots * rpe);
    const auto overlaps = [&](const void *p, uint64_t bytes) {
        const auto *b0 = static_cast<const char *>(p);
        return b0 < y1 && y0 < b0 + bytes;
    };
    if (overlaps(a->x, sizeof(float) * static_cast<uint64_t>(n_x * w.cols)) ||
        overlaps(a->ids, sizeof(int32_t) * static_cast<uint64_t>(slots)))
        return fail(st, invalid, "%s matmul_id: y overlaps x or ids; the output needs its own memory", dev);
    *rows_per_expert = rpe;
    *n_slots = slots;
    return STRATA_OK;
}

// moe_combine's and sigmoid_gate_add's sizes and pointers (ABI 1.16).
inline int32_t check_moe_combine_args(const float *y, const float *weights, int32_t n_tokens, int32_t k, int32_t dim,
                                      const float *out, const char *dev, strata_status *st) {
    if (y == nullptr || weights == nullptr || out == nullptr)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s moe_combine: y, weights or out is NULL", dev);
    if (n_tokens <= 0 || k <= 0 || dim <= 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s moe_combine: n_tokens = %d, k = %d, dim = %d; all must be > 0",
                    dev, n_tokens, k, dim);
    return STRATA_OK;
}

inline int32_t check_sigmoid_gate_add_args(const float *y, const float *gate, int32_t n_rows, int32_t n_cols,
                                           const float *acc, const char *dev, strata_status *st) {
    if (y == nullptr || gate == nullptr || acc == nullptr)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s sigmoid_gate_add: y, gate or acc is NULL", dev);
    if (n_rows <= 0 || n_cols <= 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s sigmoid_gate_add: n_rows = %d, n_cols = %d; both must be > 0",
                    dev, n_rows, n_cols);
    return STRATA_OK;
}

} // namespace strata::plugin
