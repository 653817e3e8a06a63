// The mixture-of-experts steps of the CPU device (ABI 1.16), as ggml's build_moe_ffn runs them: routing (softmax,
// top-k, optional normalisation), the matmul over each token's selected experts (mul_mat_id), the weighted sum, and
// Qwen2-MoE's sigmoid-gated shared expert.
#include "cpu_device_state.hpp"
#include "cpu_op_support.hpp"
#include "cpu_ops.hpp"

#include <strata/device_args.hpp>
#include <strata/plugin.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <mutex>

namespace strata::cpu {
namespace {

using strata::plugin::fail;
using strata::plugin::guarded;
using strata::plugin::ok;

// Router widths up to this many experts (every released MoE has at most 256).
constexpr int32_t max_experts = strata::plugin::moe_max_experts;

} // namespace

int32_t moe_route(strata_device *dev, const strata_moe_route_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr || a == nullptr) return fail(st, invalid, "cpu moe_route: device or args is NULL");
        if (int32_t rc = strata::plugin::check_moe_route_args(a, "cpu", st); rc != STRATA_OK) return rc;
        const int32_t n = a->n_expert, k = a->k;
        const uint64_t slots = static_cast<uint64_t>(a->n_tokens) * static_cast<uint64_t>(k);
        STRATA_REQUIRE_DEVICE(a->logits, sizeof(float) * static_cast<uint64_t>(a->n_tokens) * static_cast<uint64_t>(n),
                              "moe_route", "logits");
        STRATA_REQUIRE_DEVICE(a->ids, sizeof(int32_t) * slots, "moe_route", "ids");
        STRATA_REQUIRE_DEVICE(a->weights, sizeof(float) * slots, "moe_route", "weights");
        const kernels &kern = dev->kern;
        auto body = [&](int64_t t0, int64_t t1, int) noexcept {
            float probs[max_experts];
            bool taken[max_experts];
            for (int64_t t = t0; t < t1; ++t) {
                const float *row = a->logits + t * n;
                // ggml_soft_max: the max, exponentials summed in double, one multiply by the float reciprocal.
                const float m = kern.max(row, n);
                kern.scale(probs, static_cast<float>(1.0 / kern.exp_sub_sum(row, m, probs, n)), n);
                std::fill(taken, taken + n, false);
                int32_t *ids = a->ids + t * k;
                float *w = a->weights + t * k;
                for (int32_t s = 0; s < k; ++s) { // the k largest, largest first; equal ones by lower id
                    int32_t best = -1;
                    for (int32_t e = 0; e < n; ++e)
                        if (!taken[e] && (best < 0 || probs[e] > probs[best])) best = e;
                    taken[best] = true;
                    ids[s] = best;
                    w[s] = probs[best];
                }
                if (a->normalize == 0) continue;
                double sum = 0.0; // ggml_sum_rows: summed in double, narrowed to float
                for (int32_t s = 0; s < k; ++s) sum += static_cast<double>(w[s]);
                const float total = std::max(static_cast<float>(sum), 6.103515625e-5f);
                for (int32_t s = 0; s < k; ++s) w[s] = w[s] / total;
            }
        };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(a->n_tokens, std::max<int64_t>(1, parallel_min_work / n), body);
        ok(st);
        return STRATA_OK;
    });
}

int32_t matmul_id(strata_device *dev, const strata_matmul_id_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr || a == nullptr) return fail(st, invalid, "cpu matmul_id: device or args is NULL");
        if (a->struct_size < sizeof(strata_matmul_id_args))
            return fail(st, invalid, "cpu matmul_id: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_matmul_id_args));
        if (int32_t rc = check_tensor(a->w, "matmul_id", true, st); rc != STRATA_OK) return rc;
        const strata_tensor_view &w = *a->w;
        int64_t rpe = 0, n_slots = 0;
        if (int32_t rc = strata::plugin::check_matmul_id_args(a, "cpu", &rpe, &n_slots, st); rc != STRATA_OK)
            return rc;
        const int64_t cols = w.cols;
        const int64_t n_x = a->x_per_slot != 0 ? n_slots : a->n_tokens;
        STRATA_REQUIRE_DEVICE(w.data, static_cast<uint64_t>(w.rows * w.row_bytes), "matmul_id", "the weight");
        STRATA_REQUIRE_DEVICE(a->ids, sizeof(int32_t) * static_cast<uint64_t>(n_slots), "matmul_id", "ids");
        STRATA_REQUIRE_DEVICE(a->x, sizeof(float) * static_cast<uint64_t>(n_x * cols), "matmul_id", "x");
        STRATA_REQUIRE_DEVICE(a->y, sizeof(float) * static_cast<uint64_t>(n_slots * rpe), "matmul_id", "y");
        for (int64_t i = 0; i < n_slots; ++i) // every id before anything is written
            if (a->ids[i] < 0 || a->ids[i] >= a->n_expert)
                return fail(st, invalid, "cpu matmul_id: ids[%lld] = %d is outside [0, n_expert = %d)",
                            static_cast<long long>(i), a->ids[i], a->n_expert);

        std::lock_guard lock(dev->op_mutex);
        // The slots of each expert (a counting sort): offsets[e]..offsets[e + 1] index order[]; then the experts in
        // use, whose rows are the parallel work.
        const int32_t n_expert = a->n_expert;
        std::vector<int32_t> &g = dev->expert_slots;
        g.assign(2 * (static_cast<size_t>(n_expert) + 1) + static_cast<size_t>(n_slots), 0);
        int32_t *offsets = g.data(), *active = offsets + n_expert + 1, *order = active + n_expert + 1;
        for (int64_t i = 0; i < n_slots; ++i) ++offsets[a->ids[i] + 1];
        int32_t n_active = 0;
        for (int32_t e = 0; e < n_expert; ++e) {
            if (offsets[e + 1] > 0) active[n_active++] = e;
            offsets[e + 1] += offsets[e];
        }
        for (int64_t i = 0; i < n_slots; ++i) order[offsets[a->ids[i]]++] = static_cast<int32_t>(i);
        for (int32_t e = n_expert; e > 0; --e) offsets[e] = offsets[e - 1]; // back to each expert's start
        offsets[0] = 0;

        const strata_quant_desc *q = w.quant;
        const auto *data = static_cast<const unsigned char *>(w.data);
        const int32_t k = a->k;
        const bool per_slot = a->x_per_slot != 0;
        auto run = [&](const auto &dot_row) {
            auto body = [&](int64_t i0, int64_t i1, int) noexcept {
                for (int64_t i = i0; i < i1; ++i) {
                    const int32_t e = active[i / rpe];
                    const int64_t r = i % rpe;
                    const unsigned char *row = data + (e * rpe + r) * w.row_bytes;
                    for (int32_t j = offsets[e]; j < offsets[e + 1]; ++j) {
                        const int64_t slot = order[j];
                        a->y[slot * rpe + r] = dot_row(row, per_slot ? slot : slot / k);
                    }
                }
            };
            const int64_t work = static_cast<int64_t>(n_active) * rpe;
            const int threads = dev->pool.size();
            const int64_t grain = threads <= 1 || work * cols < parallel_min_work
                                      ? work
                                      : std::max<int64_t>(1, work / (int64_t{threads} * 4));
            dev->pool.parallel_for(work, grain, body);
        };
        if (!has_integer_path(q) && STRATA_HAS_SLOT(q, gemm_f32)) {
            // As matmul does for the format (ABI 1.22), so an expert's outputs have a matmul's bits.
            run([&](const unsigned char *row, int64_t xi) {
                float out;
                q->gemm_f32(row, w.row_bytes, 1, a->x + xi * cols, cols, 1, cols, &out, 1);
                return out;
            });
            ok(st);
            return STRATA_OK;
        }
        if (!has_integer_path(q)) {
            run([&](const unsigned char *row, int64_t xi) { return q->dot_f32(row, a->x + xi * cols, cols); });
            ok(st);
            return STRATA_OK;
        }
        // Integer path, as matmul: each x row quantized once, then integer block dots.
        const int64_t act_row_bytes = cols / q->block_elems * q->act_block_bytes;
        dev->reserve_activations(act_row_bytes * n_x);
        unsigned char *xq = dev->activations.get();
        auto quantize_rows = [&](int64_t t0, int64_t t1, int) noexcept {
            for (int64_t t = t0; t < t1; ++t) q->quantize_activations(a->x + t * cols, xq + t * act_row_bytes, cols);
        };
        dev->pool.parallel_for(n_x, std::max<int64_t>(1, parallel_min_work / cols), quantize_rows);
        const bool gemm = STRATA_HAS_SLOT(q, gemm_act);
        if (gemm || (n_slots > n_active && STRATA_HAS_SLOT(q, dot_act_multi))) {
            // Each expert's rows meet all of its slots at once: gemm_act (ABI 1.22; then always, as matmul does, so
            // an expert's outputs have the same bits as a matmul over it) or, for prefill, dot_act_multi (ABI 1.2,
            // equal to dot_act bit for bit). The slots' activation rows are gathered in slot order (order[]) so
            // each expert's are contiguous, and the results come back through yg: yg[j][r] for gemm_act,
            // yg[r][j] for dot_act_multi.
            dev->expert_activations.resize(static_cast<size_t>(n_slots * act_row_bytes));
            dev->expert_outputs.resize(static_cast<size_t>(n_slots * rpe));
            unsigned char *xg = dev->expert_activations.data();
            float *yg = dev->expert_outputs.data();
            const int64_t grain = std::max<int64_t>(1, parallel_min_work / std::max<int64_t>(cols, rpe));
            auto gather = [&](int64_t j0, int64_t j1, int) noexcept {
                for (int64_t j = j0; j < j1; ++j) {
                    const int64_t slot = order[j];
                    std::memcpy(xg + j * act_row_bytes, xq + (per_slot ? slot : slot / k) * act_row_bytes,
                                static_cast<size_t>(act_row_bytes));
                }
            };
            // Work units: gemm_act takes whole row tiles of one expert, dot_act_multi single rows.
            const int64_t unit = gemm ? std::max<int64_t>(1, q->gemm_row_tile) : 1;
            const int64_t units_per_expert = (rpe + unit - 1) / unit;
            auto dot_rows = [&](int64_t i0, int64_t i1, int) noexcept {
                for (int64_t i = i0; i < i1; ++i) {
                    const int32_t e = active[i / units_per_expert];
                    const int64_t r0 = i % units_per_expert * unit, r1 = std::min(rpe, r0 + unit);
                    const unsigned char *rows = data + (e * rpe + r0) * w.row_bytes;
                    const int32_t n_e = offsets[e + 1] - offsets[e];
                    if (!gemm) {
                        q->dot_act_multi(rows, xg + offsets[e] * act_row_bytes, act_row_bytes, n_e, cols,
                                         yg + r0 * n_slots + offsets[e]);
                        continue;
                    }
                    for (int32_t j0 = 0; j0 < n_e; j0 += 64) {
                        const int64_t j = offsets[e] + j0;
                        q->gemm_act(rows, w.row_bytes, r1 - r0, xg + j * act_row_bytes, act_row_bytes,
                                    std::min<int32_t>(64, n_e - j0), cols, yg + j * rpe + r0, rpe);
                    }
                }
            };
            auto scatter = [&](int64_t j0, int64_t j1, int) noexcept {
                for (int64_t j = j0; j < j1; ++j) {
                    float *y_slot = a->y + order[j] * rpe;
                    if (gemm)
                        std::memcpy(y_slot, yg + j * rpe, sizeof(float) * static_cast<size_t>(rpe));
                    else
                        for (int64_t r = 0; r < rpe; ++r) y_slot[r] = yg[r * n_slots + j];
                }
            };
            const int64_t work = static_cast<int64_t>(n_active) * units_per_expert;
            const int threads = dev->pool.size();
            dev->pool.parallel_for(n_slots, grain, gather);
            dev->pool.parallel_for(work,
                                   threads <= 1 || work * unit * cols < parallel_min_work
                                       ? work
                                       : std::max<int64_t>(1, work / (int64_t{threads} * 4)),
                                   dot_rows);
            dev->pool.parallel_for(n_slots, grain, scatter);
            ok(st);
            return STRATA_OK;
        }
        run([&](const unsigned char *row, int64_t xi) { return q->dot_act(row, xq + xi * act_row_bytes, cols); });
        ok(st);
        return STRATA_OK;
    });
}

int32_t moe_combine(strata_device *dev, const float *y, const float *weights, int32_t n_tokens, int32_t k, int32_t dim,
                    float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu moe_combine: device is NULL");
        if (int32_t rc = strata::plugin::check_moe_combine_args(y, weights, n_tokens, k, dim, out, "cpu", st);
            rc != STRATA_OK)
            return rc;
        const uint64_t slots = static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(k);
        STRATA_REQUIRE_DEVICE(y, sizeof(float) * slots * static_cast<uint64_t>(dim), "moe_combine", "y");
        STRATA_REQUIRE_DEVICE(weights, sizeof(float) * slots, "moe_combine", "weights");
        STRATA_REQUIRE_DEVICE(out, sizeof(float) * static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(dim),
                              "moe_combine", "out");
        auto body = [&](int64_t t0, int64_t t1, int) noexcept {
            for (int64_t t = t0; t < t1; ++t) {
                const float *w = weights + t * k;
                const float *ys = y + t * k * dim;
                float *o = out + t * dim;
                for (int32_t i = 0; i < dim; ++i) {
                    float acc = ys[i] * w[0];
                    for (int32_t s = 1; s < k; ++s) {
                        const float term = ys[static_cast<int64_t>(s) * dim + i] * w[s]; // rounded, then added
                        acc = acc + term;
                    }
                    o[i] = acc;
                }
            }
        };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(n_tokens, std::max<int64_t>(1, parallel_min_work / (static_cast<int64_t>(k) * dim)), body);
        ok(st);
        return STRATA_OK;
    });
}

int32_t sigmoid_gate_add(strata_device *dev, const float *y, const float *gate, int32_t n_rows, int32_t n_cols,
                         float *acc, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu sigmoid_gate_add: device is NULL");
        if (int32_t rc = strata::plugin::check_sigmoid_gate_add_args(y, gate, n_rows, n_cols, acc, "cpu", st);
            rc != STRATA_OK)
            return rc;
        const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n_rows) * static_cast<uint64_t>(n_cols);
        STRATA_REQUIRE_DEVICE(y, bytes, "sigmoid_gate_add", "y");
        STRATA_REQUIRE_DEVICE(gate, sizeof(float) * static_cast<uint64_t>(n_rows), "sigmoid_gate_add", "gate");
        STRATA_REQUIRE_DEVICE(acc, bytes, "sigmoid_gate_add", "acc");
        auto body = [&](int64_t r0, int64_t r1, int) noexcept {
            for (int64_t r = r0; r < r1; ++r) {
                const float g = gate[r];
                const float silu = g / (1.0f + std::exp(-g)); // ggml_silu_f32
                const float s = silu / g;
                const float *yr = y + r * n_cols;
                float *ar = acc + r * n_cols;
                for (int32_t i = 0; i < n_cols; ++i) {
                    const float term = yr[i] * s; // rounded, then added
                    ar[i] = ar[i] + term;
                }
            }
        };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(n_rows, std::max<int64_t>(1, parallel_min_work / n_cols), body);
        ok(st);
        return STRATA_OK;
    });
}

} // namespace strata::cpu
