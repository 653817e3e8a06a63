// The mixture-of-experts op slots of the CUDA device (ABI 1.16): the argument rules every device shares
// (strata/device_args.hpp), then one launch each (kernels_moe.cuh, kernels_matmul.cuh). Ids are device
// memory written by moe_route on this device: matmul_id cannot read them without waiting for the GPU, so a slot whose
// id is out of range is left unwritten by the kernel rather than refused here.
#include "cuda_ops.hpp"

#include "cuda_op_support.hpp"

#include <strata/device_args.hpp>

namespace strata::cuda {

static_assert(max_route_experts == strata::plugin::moe_max_experts, "the routing kernel's buffers hold what moe_route takes");

int32_t moe_route(strata_device *dev, const strata_moe_route_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr || a == nullptr) return fail(st, invalid, "cuda moe_route: device or args is NULL");
        if (int32_t rc = strata::plugin::check_moe_route_args(a, "cuda", st); rc != STRATA_OK) return rc;
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
        int64_t rpe = 0, n_slots = 0;
        if (int32_t rc = strata::plugin::check_matmul_id_args(a, "cuda", &rpe, &n_slots, st); rc != STRATA_OK)
            return rc;
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
        if (int32_t rc = strata::plugin::check_moe_combine_args(y, weights, n_tokens, k, dim, out, "cuda", st);
            rc != STRATA_OK)
            return rc;
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
        if (int32_t rc = strata::plugin::check_sigmoid_gate_add_args(y, gate, n_rows, n_cols, acc, "cuda", st);
            rc != STRATA_OK)
            return rc;
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda sigmoid_gate_add: cudaSetDevice", st);
        return finish(launch_sigmoid_gate_add(y, gate, n_rows, n_cols, acc, dev->compute),
                      "cuda sigmoid_gate_add: launch", st);
    });
}

} // namespace strata::cuda
