// The mixture-of-experts op slots of the CUDA device (ABI 1.16): the CPU device's argument rules and messages
// (plugins/device/cpu/cpu_moe_ops.cpp), then one launch each (kernels_moe.cuh, kernels_matmul.cuh). Ids are device
// memory written by moe_route on this device: matmul_id cannot read them without waiting for the GPU, so a slot whose
// id is out of range is left unwritten by the kernel rather than refused here.
#include "cuda_ops.hpp"

#include "cuda_op_support.hpp"

#include <climits>

namespace strata::cuda {

int32_t moe_route(strata_device *dev, const strata_moe_route_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr || a == nullptr) return fail(st, invalid, "cuda moe_route: device or args is NULL");
        if (a->struct_size < sizeof(strata_moe_route_args))
            return fail(st, invalid, "cuda moe_route: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_moe_route_args));
        if (a->logits == nullptr || a->ids == nullptr || a->weights == nullptr)
            return fail(st, invalid, "cuda moe_route: logits, ids or weights is NULL");
        if (a->n_tokens <= 0 || a->n_expert <= 0 || a->n_expert > max_route_experts || a->k <= 0 || a->k > a->n_expert)
            return fail(st, invalid,
                        "cuda moe_route: n_tokens = %d, n_expert = %d, k = %d; need n_tokens > 0, 0 < n_expert <= %d "
                        "and 0 < k <= n_expert",
                        a->n_tokens, a->n_expert, a->k, max_route_experts);
        if (a->normalize != 0 && a->normalize != 1)
            return fail(st, invalid, "cuda moe_route: normalize = %d; must be 0 or 1", a->normalize);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda moe_route: cudaSetDevice", st);
        return finish(launch_moe_route(a->logits, a->n_tokens, a->n_expert, a->k, a->normalize, a->ids, a->weights,
                                       dev->compute),
                      "cuda moe_route: launch", st);
    });
}

int32_t matmul_id(strata_device *dev, const strata_matmul_id_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr || a == nullptr) return fail(st, invalid, "cuda matmul_id: device or args is NULL");
        if (a->struct_size < sizeof(strata_matmul_id_args))
            return fail(st, invalid, "cuda matmul_id: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_matmul_id_args));
        if (int32_t rc = check_tensor(a->w, "matmul_id", st); rc != STRATA_OK) return rc;
        const strata_tensor_view &w = *a->w;
        if (a->n_expert <= 0 || a->n_expert > max_route_experts || w.rows % a->n_expert != 0)
            return fail(st, invalid, "cuda matmul_id: tensor '%s' has %lld rows, not n_expert = %d (at most %d) equal "
                        "matrices", name_of(a->w), static_cast<long long>(w.rows), a->n_expert, max_route_experts);
        if (a->n_tokens <= 0 || a->k <= 0 || a->k > a->n_expert)
            return fail(st, invalid, "cuda matmul_id: n_tokens = %d, k = %d; need n_tokens > 0 and 0 < k <= n_expert = %d",
                        a->n_tokens, a->k, a->n_expert);
        if (a->ids == nullptr || a->x == nullptr || a->y == nullptr)
            return fail(st, invalid, "cuda matmul_id: ids, x or y is NULL");
        if (a->x_per_slot != 0 && a->x_per_slot != 1)
            return fail(st, invalid, "cuda matmul_id: x_per_slot = %d; must be 0 or 1", a->x_per_slot);
        const int64_t rpe = w.rows / a->n_expert;
        const int64_t n_slots = static_cast<int64_t>(a->n_tokens) * a->k;
        if (n_slots > INT32_MAX)
            return fail(st, invalid, "cuda matmul_id: n_tokens x k = %lld slots is too many",
                        static_cast<long long>(n_slots));
        const int64_t n_x = a->x_per_slot != 0 ? n_slots : a->n_tokens;
        const auto *y0 = reinterpret_cast<const char *>(a->y);
        const auto *y1 = y0 + sizeof(float) * static_cast<uint64_t>(n_slots * rpe);
        const auto overlaps = [&](const void *p, uint64_t bytes) {
            const auto *b0 = static_cast<const char *>(p);
            return b0 < y1 && y0 < b0 + bytes;
        };
        if (overlaps(a->x, sizeof(float) * static_cast<uint64_t>(n_x * w.cols)) ||
            overlaps(a->ids, sizeof(int32_t) * static_cast<uint64_t>(n_slots)))
            return fail(st, invalid, "cuda matmul_id: y overlaps x or ids; the output needs its own memory");
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda matmul_id: cudaSetDevice", st);
        return finish(launch_matmul_id(ref_of(a->w), a->n_expert, a->ids, a->n_tokens, a->k, a->x, a->x_per_slot, a->y,
                                       dev->compute),
                      "cuda matmul_id: launch", st);
    });
}

int32_t moe_combine(strata_device *dev, const float *y, const float *weights, int32_t n_tokens, int32_t k, int32_t dim,
                    float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda moe_combine: device is NULL");
        if (y == nullptr || weights == nullptr || out == nullptr)
            return fail(st, invalid, "cuda moe_combine: y, weights or out is NULL");
        if (n_tokens <= 0 || k <= 0 || dim <= 0)
            return fail(st, invalid, "cuda moe_combine: n_tokens = %d, k = %d, dim = %d; all must be > 0", n_tokens, k,
                        dim);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda moe_combine: cudaSetDevice", st);
        return finish(launch_moe_combine(y, weights, n_tokens, k, dim, out, dev->compute), "cuda moe_combine: launch",
                      st);
    });
}

int32_t sigmoid_gate_add(strata_device *dev, const float *y, const float *gate, int32_t n_rows, int32_t n_cols,
                         float *acc, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda sigmoid_gate_add: device is NULL");
        if (y == nullptr || gate == nullptr || acc == nullptr)
            return fail(st, invalid, "cuda sigmoid_gate_add: y, gate or acc is NULL");
        if (n_rows <= 0 || n_cols <= 0)
            return fail(st, invalid, "cuda sigmoid_gate_add: n_rows = %d, n_cols = %d; both must be > 0", n_rows,
                        n_cols);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda sigmoid_gate_add: cudaSetDevice", st);
        return finish(launch_sigmoid_gate_add(y, gate, n_rows, n_cols, acc, dev->compute),
                      "cuda sigmoid_gate_add: launch", st);
    });
}

} // namespace strata::cuda
