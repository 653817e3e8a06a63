// Op entry points: the CPU device's argument rules (same messages, "cuda" instead of "cpu"), checks of host index
// arrays before anything is enqueued (so bad input leaves outputs untouched), the index upload, one launch. Ops
// return once the work is enqueued; a kernel's execution error surfaces at the next copy().
#include "cuda_ops.hpp"

#include "cuda_device_state.hpp"
#include "cuda_kernels.hpp"
#include "cuda_op_support.hpp"
#include "weight_formats.hpp"

#include <strata/device_args.hpp>
#include <strata/kv_layout.hpp>
#include <strata/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <mutex>

namespace strata::cuda {
namespace {

// The checks attention and paged attention share.
int32_t check_heads(int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale,
                    const char *what, strata_status *st) {
    if (n_tokens <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0)
        return fail(st, invalid, "cuda %s: n_tokens = %d, n_heads = %d, n_kv_heads = %d, head_dim = %d; all must be > 0",
                    what, n_tokens, n_heads, n_kv_heads, head_dim);
    if (n_heads % n_kv_heads != 0)
        return fail(st, invalid, "cuda %s: n_heads = %d is not a multiple of n_kv_heads = %d", what, n_heads,
                    n_kv_heads);
    if (!std::isfinite(scale))
        return fail(st, invalid, "cuda %s: scale = %g; must be finite", what, static_cast<double>(scale));
    if (head_dim > max_head_dim)
        return fail(st, STRATA_ERR_UNSUPPORTED, "cuda %s: head_dim = %d; this device supports up to %d", what,
                    head_dim, max_head_dim);
    if (n_heads > max_grid_y)
        return fail(st, STRATA_ERR_UNSUPPORTED, "cuda %s: n_heads = %d; this device supports up to %d", what, n_heads,
                    max_grid_y);
    return STRATA_OK;
}

// The block table of a paged op, checked against the tokens that use it: every sequence index in range, every
// token's slot inside its sequence's blocks, every block used non-NULL. All of it host memory.
int32_t check_paged(const strata_paged_kv *kv, int32_t n_tokens, const int32_t *token_seq, const int32_t *positions,
                    int32_t kv_dim_wanted, const char *what, strata_status *st) {
    char why[256];
    if (int32_t rc = kv_layout::check_table(kv, why, sizeof why); rc != STRATA_OK)
        return fail(st, rc, "cuda %s: %s", what, why);
    if (kv_dim_wanted > 0 && kv->kv_dim != kv_dim_wanted)
        return fail(st, invalid, "cuda %s: kv.kv_dim = %d but n_kv_heads * head_dim = %d", what, kv->kv_dim,
                    kv_dim_wanted);
    if (kv->block_base == nullptr) return fail(st, invalid, "cuda %s: kv.block_base is NULL", what);
    if (token_seq == nullptr) return fail(st, invalid, "cuda %s: token_seq is NULL", what);
    if (int32_t rc = check_positions(positions, n_tokens, what, st); rc != STRATA_OK) return rc;
    for (int32_t t = 0; t < n_tokens; ++t) {
        const int32_t s = token_seq[t];
        if (s < 0 || s >= kv->n_seqs)
            return fail(st, invalid, "cuda %s: token_seq[%d] = %d is outside [0, %d)", what, t, s, kv->n_seqs);
        const int64_t blocks = int64_t{kv->seq_block_start[s + 1]} - kv->seq_block_start[s];
        if (positions[t] / kv->block_size >= blocks)
            return fail(st, invalid,
                        "cuda %s: token %d at position %d needs block %d of sequence %d, which has %lld blocks", what,
                        t, positions[t], positions[t] / kv->block_size, s, static_cast<long long>(blocks));
    }
    for (int32_t b = kv->seq_block_start[0]; b < kv->seq_block_start[kv->n_seqs]; ++b)
        if (kv->block_base[b] == nullptr) return fail(st, invalid, "cuda %s: kv.block_base[%d] is NULL", what, b);
    return STRATA_OK;
}

// Uploads the block table and the per-token arrays of a paged op in one copy; fills `layout`, `dev_seq`, `dev_pos`.
cudaError_t upload_paged(strata_device *dev, const strata_paged_kv *kv, int32_t n_tokens, const int32_t *token_seq,
                         const int32_t *positions, paged_layout *layout, const int32_t **dev_seq,
                         const int32_t **dev_pos) {
    const size_t token_bytes = sizeof(int32_t) * static_cast<size_t>(n_tokens);
    const size_t start_bytes = sizeof(int32_t) * static_cast<size_t>(kv->n_seqs + 1);
    const size_t base_bytes = sizeof(uint64_t) * static_cast<size_t>(kv->seq_block_start[kv->n_seqs]);
    const size_t total = 2 * index_staging::padded(token_bytes) + index_staging::padded(start_bytes) +
                         index_staging::padded(std::max<size_t>(base_bytes, 1));
    index_staging::batch batch;
    if (cudaError_t e = dev->staging.begin(total, dev->compute, &batch); e != cudaSuccess) return e;
    *dev_seq = static_cast<const int32_t *>(batch.add(token_seq, token_bytes));
    *dev_pos = static_cast<const int32_t *>(batch.add(positions, token_bytes));
    layout->seq_block_start = static_cast<const int32_t *>(batch.add(kv->seq_block_start, start_bytes));
    // Pointers travel as 64-bit integers (the device's address width).
    static_assert(sizeof(void *) == sizeof(uint64_t), "device addresses are 64-bit");
    layout->block_base = static_cast<const uint64_t *>(batch.add(kv->block_base, base_bytes));
    layout->block_size = kv->block_size;
    layout->kv_dim = kv->kv_dim;
    layout->layer_offset_bytes = kv->layer_offset_bytes;
    layout->kv_type = kv_layout::type_of(kv);
    return batch.upload();
}

} // namespace

int32_t matmul(strata_device *dev, const strata_tensor_view *w, const float *x, int32_t n_tokens, float *y,
               strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda matmul: device is NULL");
        if (int32_t rc = check_tensor(w, "matmul", st, true, true); rc != STRATA_OK) return rc;
        if (x == nullptr || y == nullptr) return fail(st, invalid, "cuda matmul: x or y is NULL");
        if (n_tokens <= 0) return fail(st, invalid, "cuda matmul: n_tokens = %d; must be > 0", n_tokens);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda matmul: cudaSetDevice", st);
        if (const int32_t *order = strata::plugin::input_order_of(w)) {
            // GPTQ act-order (ABI 1.19): the activations are gathered into the weight's input order (the order sits
            // beside the weight, in device memory), then multiplied as for any weight.
            const size_t bytes = sizeof(float) * static_cast<size_t>(n_tokens) * static_cast<size_t>(w->cols);
            if (cudaError_t e = dev->reserve_gathered(bytes); e != cudaSuccess)
                return finish(e, "cuda matmul: the gathered activations", st);
            if (cudaError_t e = launch_gather_columns(x, order, n_tokens, w->cols, dev->gathered, dev->compute);
                e != cudaSuccess)
                return finish(e, "cuda matmul: gather launch", st);
            x = dev->gathered;
        }
        return finish(launch_matmul(ref_of(w), x, n_tokens, y, dev->compute), "cuda matmul: launch", st);
    });
}

int32_t embedding(strata_device *dev, const strata_tensor_view *table, const int32_t *tokens, int32_t n_tokens,
                  float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda embedding: device is NULL");
        if (int32_t rc = check_tensor(table, "embedding", st); rc != STRATA_OK) return rc;
        if (tokens == nullptr || out == nullptr) return fail(st, invalid, "cuda embedding: tokens or out is NULL");
        if (n_tokens <= 0) return fail(st, invalid, "cuda embedding: n_tokens = %d; must be > 0", n_tokens);
        for (int32_t t = 0; t < n_tokens; ++t)
            if (tokens[t] < 0 || tokens[t] >= table->rows)
                return fail(st, invalid, "cuda embedding: token id %d at index %d is outside the vocabulary [0, %lld) "
                                         "of '%s'",
                            tokens[t], t, static_cast<long long>(table->rows), name_of(table));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda embedding: cudaSetDevice", st);
        const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n_tokens);
        index_staging::batch batch;
        if (cudaError_t e = dev->staging.begin(index_staging::padded(bytes), dev->compute, &batch); e != cudaSuccess)
            return finish(e, "cuda embedding: staging token ids", st);
        const auto *dev_tokens = static_cast<const int32_t *>(batch.add(tokens, bytes));
        if (cudaError_t e = batch.upload(); e != cudaSuccess) return finish(e, "cuda embedding: uploading token ids", st);
        return finish(launch_embedding(ref_of(table), dev_tokens, n_tokens, out, dev->compute),
                      "cuda embedding: launch", st);
    });
}

int32_t rms_norm(strata_device *dev, const float *x, const float *weight, int32_t n_tokens, int32_t dim, float eps,
                 float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda rms_norm: device is NULL");
        if (x == nullptr || weight == nullptr || out == nullptr)
            return fail(st, invalid, "cuda rms_norm: x, weight or out is NULL");
        if (n_tokens <= 0 || dim <= 0)
            return fail(st, invalid, "cuda rms_norm: n_tokens = %d, dim = %d; both must be > 0", n_tokens, dim);
        if (!(eps >= 0.0f) || !std::isfinite(eps))
            return fail(st, invalid, "cuda rms_norm: eps = %g; must be finite and >= 0", static_cast<double>(eps));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda rms_norm: cudaSetDevice", st);
        return finish(launch_rms_norm(x, weight, n_tokens, dim, eps, out, dev->compute), "cuda rms_norm: launch", st);
    });
}

int32_t rope(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
             const int32_t *positions, float theta_base, int32_t mode, strata_status *st) {
    return rope_ext(dev, x, n_tokens, n_heads, head_dim, rot_dims, positions, theta_base, mode, 1.0f, nullptr, st);
}

int32_t rope_ext(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                 const int32_t *positions, float theta_base, int32_t mode, float freq_scale, const float *freq_factors,
                 strata_status *st) {
    const strata_rope_args a = strata::plugin::rope_ext_args(n_tokens, n_heads, head_dim, rot_dims, positions,
                                                             theta_base, mode, freq_scale, freq_factors);
    return rope_scaled(dev, x, &a, st);
}

int32_t rope_scaled(strata_device *dev, float *x, const strata_rope_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda rope: device is NULL");
        if (x == nullptr) return fail(st, invalid, "cuda rope: x is NULL");
        if (a == nullptr) return fail(st, invalid, "cuda rope: args is NULL");
        if (a->struct_size < sizeof(strata_rope_args))
            return fail(st, invalid, "cuda rope: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_rope_args));
        const int32_t n_tokens = a->n_tokens, n_heads = a->n_heads, head_dim = a->head_dim, rot_dims = a->rot_dims;
        const int32_t mode = a->mode;
        if (n_tokens <= 0 || n_heads <= 0 || head_dim <= 0)
            return fail(st, invalid, "cuda rope: n_tokens = %d, n_heads = %d, head_dim = %d; all must be > 0",
                        n_tokens, n_heads, head_dim);
        if (rot_dims <= 0 || rot_dims > head_dim || rot_dims % 2 != 0)
            return fail(st, invalid, "cuda rope: rot_dims = %d; must be even and in [2, head_dim = %d]", rot_dims,
                        head_dim);
        if (mode != STRATA_ROPE_PAIRS && mode != STRATA_ROPE_NEOX)
            return fail(st, invalid,
                        "cuda rope: mode %d is unknown; use STRATA_ROPE_PAIRS (0) or STRATA_ROPE_NEOX (2)", mode);
        if (!(a->theta_base > 0.0f) || !std::isfinite(a->theta_base))
            return fail(st, invalid, "cuda rope: theta_base = %g; must be finite and > 0",
                        static_cast<double>(a->theta_base));
        if (!(a->freq_scale > 0.0f) || !std::isfinite(a->freq_scale))
            return fail(st, invalid, "cuda rope: freq_scale = %g; must be finite and > 0",
                        static_cast<double>(a->freq_scale));
        if (!(a->attn_factor > 0.0f) || !std::isfinite(a->attn_factor))
            return fail(st, invalid, "cuda rope: attn_factor = %g; must be finite and > 0",
                        static_cast<double>(a->attn_factor));
        if (!(a->ext_factor >= 0.0f && a->ext_factor <= 1.0f) || !std::isfinite(a->corr_low) ||
            !std::isfinite(a->corr_high))
            return fail(st, invalid,
                        "cuda rope: ext_factor = %g must be in [0, 1] and corr_low/corr_high (%g, %g) finite",
                        static_cast<double>(a->ext_factor), static_cast<double>(a->corr_low),
                        static_cast<double>(a->corr_high));
        if (rot_dims > max_rot_dims)
            return fail(st, STRATA_ERR_UNSUPPORTED, "cuda rope: rot_dims = %d; this device supports up to %d",
                        rot_dims, max_rot_dims);
        const int32_t *positions = a->positions;
        const float *freq_factors = a->freq_factors;
        if (int32_t rc = check_positions(positions, n_tokens, "rope", st); rc != STRATA_OK) return rc;
        // The CPU device's expressions (float pow and log on the host), so both devices use the same angle step and
        // magnitude.
        const float theta_scale = std::pow(a->theta_base, -2.0f / static_cast<float>(rot_dims));
        rope_terms terms{};
        terms.freq_scale = a->freq_scale;
        terms.ext_factor = a->ext_factor;
        terms.corr_low = a->corr_low;
        terms.ramp_width = std::max(0.001f, a->corr_high - a->corr_low);
        terms.mscale = a->ext_factor != 0.0f ? a->attn_factor * (1.0f + 0.1f * std::log(1.0f / a->freq_scale))
                                             : a->attn_factor;
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda rope: cudaSetDevice", st);
        const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n_tokens);
        const size_t factor_bytes = freq_factors != nullptr ? sizeof(float) * static_cast<size_t>(rot_dims / 2) : 0;
        index_staging::batch batch;
        if (cudaError_t e = dev->staging.begin(index_staging::padded(bytes) + index_staging::padded(factor_bytes),
                                               dev->compute, &batch);
            e != cudaSuccess)
            return finish(e, "cuda rope: staging positions", st);
        const auto *dev_positions = static_cast<const int32_t *>(batch.add(positions, bytes));
        const float *dev_factors =
            freq_factors != nullptr
                ? static_cast<const float *>(batch.add(freq_factors, factor_bytes))
                : nullptr;
        if (cudaError_t e = batch.upload(); e != cudaSuccess) return finish(e, "cuda rope: uploading positions", st);
        return finish(launch_rope(x, n_tokens, n_heads, head_dim, rot_dims, dev_positions, theta_scale, mode,
                                  dev->compute, dev_factors, terms),
                      "cuda rope: launch", st);
    });
}

int32_t attention(strata_device *dev, const strata_attention_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda attention: device is NULL");
        if (a == nullptr) return fail(st, invalid, "cuda attention: args is NULL");
        if (a->struct_size < offsetof(strata_attention_args, softcap))
            return fail(st, invalid, "cuda attention: args.struct_size = %u, expected >= %zu", a->struct_size,
                        offsetof(strata_attention_args, softcap));
        float softcap = 0.0f;
        int32_t window = 0;
        if (int32_t rc = strata::plugin::attention_score_terms(a, "cuda attention", &softcap, &window, st);
            rc != STRATA_OK)
            return rc;
        if (int32_t rc = check_heads(a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, "attention", st);
            rc != STRATA_OK)
            return rc;
        if (int64_t{a->kv_row_stride} < int64_t{a->n_kv_heads} * a->head_dim)
            return fail(st, invalid, "cuda attention: kv_row_stride = %d is less than n_kv_heads * head_dim = %lld",
                        a->kv_row_stride, static_cast<long long>(int64_t{a->n_kv_heads} * a->head_dim));
        if (a->q == nullptr || a->k_cache == nullptr || a->v_cache == nullptr || a->out == nullptr)
            return fail(st, invalid, "cuda attention: q, k_cache, v_cache or out is NULL");
        if (int32_t rc = check_positions(a->positions, a->n_tokens, "attention", st); rc != STRATA_OK) return rc;
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda attention: cudaSetDevice", st);
        const size_t bytes = sizeof(int32_t) * static_cast<size_t>(a->n_tokens);
        index_staging::batch batch;
        if (cudaError_t e = dev->staging.begin(index_staging::padded(bytes), dev->compute, &batch); e != cudaSuccess)
            return finish(e, "cuda attention: staging positions", st);
        const auto *dev_positions = static_cast<const int32_t *>(batch.add(a->positions, bytes));
        if (cudaError_t e = batch.upload(); e != cudaSuccess)
            return finish(e, "cuda attention: uploading positions", st);
        const attention_shape shape{a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, softcap, window};
        return finish(launch_attention(shape, dev_positions, a->q, a->k_cache, a->v_cache, a->kv_row_stride, a->out,
                                       dev->compute),
                      "cuda attention: launch", st);
    });
}

int32_t kv_store(strata_device *dev, const strata_kv_store_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda kv_store: device is NULL");
        if (a == nullptr) return fail(st, invalid, "cuda kv_store: args is NULL");
        if (a->struct_size < sizeof(strata_kv_store_args))
            return fail(st, invalid, "cuda kv_store: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_kv_store_args));
        if (a->n_tokens <= 0) return fail(st, invalid, "cuda kv_store: n_tokens = %d; must be > 0", a->n_tokens);
        if (a->k == nullptr || a->v == nullptr) return fail(st, invalid, "cuda kv_store: k or v is NULL");
        if (int32_t rc = check_paged(a->kv, a->n_tokens, a->token_seq, a->positions, 0, "kv_store", st);
            rc != STRATA_OK)
            return rc;
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda kv_store: cudaSetDevice", st);
        paged_layout layout{};
        const int32_t *dev_seq = nullptr, *dev_pos = nullptr;
        if (cudaError_t e = upload_paged(dev, a->kv, a->n_tokens, a->token_seq, a->positions, &layout, &dev_seq,
                                         &dev_pos);
            e != cudaSuccess)
            return finish(e, "cuda kv_store: uploading the block table", st);
        return finish(launch_kv_store(a->n_tokens, dev_seq, dev_pos, layout, a->k, a->v, dev->compute),
                      "cuda kv_store: launch", st);
    });
}

int32_t paged_attention(strata_device *dev, const strata_paged_attention_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda paged_attention: device is NULL");
        if (a == nullptr) return fail(st, invalid, "cuda paged_attention: args is NULL");
        if (a->struct_size < offsetof(strata_paged_attention_args, softcap))
            return fail(st, invalid, "cuda paged_attention: args.struct_size = %u, expected >= %zu", a->struct_size,
                        offsetof(strata_paged_attention_args, softcap));
        float softcap = 0.0f;
        int32_t window = 0;
        if (int32_t rc = strata::plugin::attention_score_terms(a, "cuda paged_attention", &softcap, &window, st);
            rc != STRATA_OK)
            return rc;
        if (int32_t rc =
                check_heads(a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, "paged_attention", st);
            rc != STRATA_OK)
            return rc;
        if (a->q == nullptr || a->out == nullptr) return fail(st, invalid, "cuda paged_attention: q or out is NULL");
        if (int32_t rc = check_paged(a->kv, a->n_tokens, a->token_seq, a->positions, a->n_kv_heads * a->head_dim,
                                     "paged_attention", st);
            rc != STRATA_OK)
            return rc;
        if (!kv_layout::holds_heads_of(kv_layout::type_of(a->kv), a->head_dim))
            return fail(st, STRATA_ERR_UNSUPPORTED, "cuda paged_attention: a %s cache holds heads of whole groups of "
                        "%lld values; head_dim = %d is not one", kv_layout::type_name(kv_layout::type_of(a->kv)),
                        static_cast<long long>(kv_layout::group_values(kv_layout::type_of(a->kv))), a->head_dim);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda paged_attention: cudaSetDevice", st);
        paged_layout layout{};
        const int32_t *dev_seq = nullptr, *dev_pos = nullptr;
        if (cudaError_t e = upload_paged(dev, a->kv, a->n_tokens, a->token_seq, a->positions, &layout, &dev_seq,
                                         &dev_pos);
            e != cudaSuccess)
            return finish(e, "cuda paged_attention: uploading the block table", st);
        const attention_shape shape{a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, softcap, window};
        return finish(launch_paged_attention(shape, dev_seq, dev_pos, layout, a->q, a->out, dev->compute),
                      "cuda paged_attention: launch", st);
    });
}

int32_t swiglu(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda swiglu: device is NULL");
        if (gate == nullptr || up == nullptr || out == nullptr)
            return fail(st, invalid, "cuda swiglu: gate, up or out is NULL");
        if (n <= 0) return fail(st, invalid, "cuda swiglu: n = %lld; must be > 0", static_cast<long long>(n));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda swiglu: cudaSetDevice", st);
        return finish(launch_swiglu(gate, up, n, out, dev->compute), "cuda swiglu: launch", st);
    });
}

int32_t scale(strata_device *dev, const float *x, int64_t n, float s, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda scale: device is NULL");
        if (x == nullptr || out == nullptr) return fail(st, invalid, "cuda scale: x or out is NULL");
        if (n <= 0) return fail(st, invalid, "cuda scale: n = %lld; must be > 0", static_cast<long long>(n));
        if (!std::isfinite(s)) return fail(st, invalid, "cuda scale: s = %g; must be finite", static_cast<double>(s));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda scale: cudaSetDevice", st);
        return finish(launch_scale(x, n, s, out, dev->compute), "cuda scale: launch", st);
    });
}

int32_t geglu(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda geglu: device is NULL");
        if (gate == nullptr || up == nullptr || out == nullptr)
            return fail(st, invalid, "cuda geglu: gate, up or out is NULL");
        if (n <= 0) return fail(st, invalid, "cuda geglu: n = %lld; must be > 0", static_cast<long long>(n));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda geglu: cudaSetDevice", st);
        return finish(launch_geglu(gate, up, n, out, dev->compute), "cuda geglu: launch", st);
    });
}

int32_t softcap(strata_device *dev, const float *x, int64_t n, float cap, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda softcap: device is NULL");
        if (x == nullptr || out == nullptr) return fail(st, invalid, "cuda softcap: x or out is NULL");
        if (n <= 0) return fail(st, invalid, "cuda softcap: n = %lld; must be > 0", static_cast<long long>(n));
        if (!(cap > 0.0f) || !std::isfinite(cap))
            return fail(st, invalid, "cuda softcap: cap = %g; must be finite and > 0", static_cast<double>(cap));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda softcap: cudaSetDevice", st);
        return finish(launch_softcap(x, n, cap, out, dev->compute), "cuda softcap: launch", st);
    });
}

int32_t add(strata_device *dev, const float *a, const float *b, int64_t n, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda add: device is NULL");
        if (a == nullptr || b == nullptr || out == nullptr) return fail(st, invalid, "cuda add: a, b or out is NULL");
        if (n <= 0) return fail(st, invalid, "cuda add: n = %lld; must be > 0", static_cast<long long>(n));
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda add: cudaSetDevice", st);
        return finish(launch_add(a, b, n, out, dev->compute), "cuda add: launch", st);
    });
}

int32_t add_rows(strata_device *dev, const float *x, const float *row, int32_t n_rows, int32_t n_cols, float *out,
                 strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda add_rows: device is NULL");
        if (x == nullptr || row == nullptr || out == nullptr)
            return fail(st, invalid, "cuda add_rows: x, row or out is NULL");
        if (n_rows <= 0 || n_cols <= 0)
            return fail(st, invalid, "cuda add_rows: n_rows = %d, n_cols = %d; both must be > 0", n_rows, n_cols);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda add_rows: cudaSetDevice", st);
        return finish(launch_add_rows(x, row, n_rows, n_cols, out, dev->compute), "cuda add_rows: launch", st);
    });
}

int32_t softmax(strata_device *dev, float *x, int32_t n_rows, int32_t n_cols, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cuda softmax: device is NULL");
        if (x == nullptr) return fail(st, invalid, "cuda softmax: x is NULL");
        if (n_rows <= 0 || n_cols <= 0)
            return fail(st, invalid, "cuda softmax: n_rows = %d, n_cols = %d; both must be > 0", n_rows, n_cols);
        op_scope scope(dev);
        if (scope.error() != cudaSuccess) return finish(scope.error(), "cuda softmax: cudaSetDevice", st);
        return finish(launch_softmax(x, n_rows, n_cols, dev->compute), "cuda softmax: launch", st);
    });
}

int32_t supports(strata_device *, const strata_support_query *q, char *why, uint32_t why_cap) {
    if (q == nullptr || q->struct_size < offsetof(strata_support_query, kv_type)) return 1; // nothing to refuse
    strata_status st{};
    int32_t rc = STRATA_OK;
    switch (q->kind) {
    case STRATA_SUPPORT_WEIGHT: {
        // A tensor of experts is read by matmul_id, which takes no input order.
        const strata_tensor_view *w = q->weight;
        const bool experts = strata::plugin::holds_experts(w);
        rc = check_tensor(w, experts ? "matmul_id" : "matmul", &st, false, !experts);
        break;
    }
    case STRATA_SUPPORT_ATTENTION:
        rc = check_heads(1, q->n_heads, q->n_kv_heads, q->head_dim, 1.0f, "attention", &st);
        if (rc == STRATA_OK && !kv_layout::known(kv_layout::type_of(q)))
            rc = fail(&st, STRATA_ERR_UNSUPPORTED, "cuda: a KV cache of type %u; this device stores %s",
                      kv_layout::type_of(q), kv_layout::type_list);
        else if (rc == STRATA_OK && !kv_layout::holds_heads_of(kv_layout::type_of(q), q->head_dim))
            rc = fail(&st, STRATA_ERR_UNSUPPORTED,
                      "cuda: a %s KV cache keeps heads in groups of %lld values; heads of %d values are not whole groups",
                      kv_layout::type_name(kv_layout::type_of(q)),
                      static_cast<long long>(kv_layout::group_values(kv_layout::type_of(q))), q->head_dim);
        break;
    case STRATA_SUPPORT_ROPE:
        if (q->rot_dims > max_rot_dims)
            rc = fail(&st, STRATA_ERR_UNSUPPORTED, "cuda rope: rot_dims = %d; this device supports up to %d",
                      q->rot_dims, max_rot_dims);
        break;
    default: break;
    }
    if (rc == STRATA_OK) return 1;
    if (why != nullptr && why_cap > 0) std::snprintf(why, why_cap, "%s", st.message);
    return 0;
}

} // namespace strata::cuda
