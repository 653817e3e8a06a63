// The paged KV cache ops of the CPU device (ABI 1.5): kv_store writes K/V rows into block slots, paged_attention
// attends through the block table with the same inner kernel as the contiguous attention op (so per token the two
// agree bit for bit), and copy/host_addressable say that device memory is host memory. fence_record/copy_after
// (ABI 1.7) are ids and `copy`: every op is complete on return, so there is nothing to order.
//
// Block layout (plugin_abi.h, strata_paged_kv; strata/kv_layout.hpp): at block base + layer_offset_bytes, block_size K
// rows of kv_dim values of kv_type (float32, float16, bfloat16, fp8_e4m3, fp8_e5m2, or q8_0's groups of 32), then
// block_size V rows. Token slot p of a sequence is row p % block_size of its block p / block_size. kv_store rounds
// float rows to the type (the kernel set's to_f16/to_bf16, strata/float8.hpp for FP8, strata/kv_q8_0.hpp for q8_0:
// the same bits on every set); attention reads them exactly.
#include "cpu_attention_driver.hpp"
#include "cpu_device_state.hpp"
#include "cpu_op_support.hpp"
#include "cpu_ops.hpp"

#include <strata/device_args.hpp>
#include <strata/float8.hpp>
#include <strata/kv_layout.hpp>
#include <strata/kv_q8_0.hpp>
#include <strata/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace strata::cpu {
namespace {

using strata::plugin::fail;
using strata::plugin::guarded;
using strata::plugin::ok;

// Checks the block table itself: sizes and the per-sequence block ranges, O(n_seqs). The block bases are checked
// per token in check_token_slots, only those the op will touch.
int32_t check_paged_kv(const strata_paged_kv *kv, const char *what, strata_status *st) {
    char why[256];
    if (int32_t rc = kv_layout::check_table(kv, why, sizeof why); rc != STRATA_OK)
        return fail(st, rc, "cpu %s: %s", what, why);
    const int32_t *start = kv->seq_block_start;
    if (start[kv->n_seqs] > start[0] && kv->block_base == nullptr)
        return fail(st, invalid, "cpu %s: kv.block_base is NULL but the table names %d blocks", what,
                    start[kv->n_seqs] - start[0]);
    return STRATA_OK;
}

// separate_memory mode: every block of the table must be device memory, up to this layer's V rows.
int32_t require_device_blocks(const strata_device *dev, const strata_paged_kv *kv, const char *op, strata_status *st) {
    if (!dev->separate_memory) return STRATA_OK;
    const uint64_t bytes =
        kv->layer_offset_bytes + kv_layout::layer_bytes(kv->block_size, kv->kv_dim, kv_layout::type_of(kv));
    for (int32_t b = kv->seq_block_start[0]; b < kv->seq_block_start[kv->n_seqs]; ++b)
        if (int32_t rc = require_device_memory(dev, kv->block_base[b], bytes, op, "a KV block", st); rc != STRATA_OK)
            return rc;
    return STRATA_OK;
}

// Checks each token's sequence and slot against the table (kv already checked), and the base of every block the op
// touches for it: the slot's block for a store, every block up to it for attention (a cost well below the rows it
// then reads). Writes the longest causal span.
int32_t check_token_slots(const strata_paged_kv *kv, int32_t n_tokens, const int32_t *token_seq,
                          const int32_t *positions, bool whole_prefix, const char *what, int64_t *n_positions,
                          strata_status *st) {
    if (token_seq == nullptr) return fail(st, invalid, "cpu %s: token_seq is NULL", what);
    if (positions == nullptr) return fail(st, invalid, "cpu %s: positions is NULL", what);
    int64_t longest = 0;
    for (int32_t t = 0; t < n_tokens; ++t) {
        const int32_t s = token_seq[t];
        if (s < 0 || s >= kv->n_seqs)
            return fail(st, invalid, "cpu %s: token_seq[%d] = %d is outside [0, kv.n_seqs = %d)", what, t, s,
                        kv->n_seqs);
        const int32_t p = positions[t];
        if (p < 0) return fail(st, invalid, "cpu %s: positions[%d] = %d; positions must be >= 0", what, t, p);
        const int64_t blocks = int64_t{kv->seq_block_start[s + 1]} - kv->seq_block_start[s];
        const int64_t slots = blocks * kv->block_size;
        if (p >= slots)
            return fail(st, invalid,
                        "cpu %s: positions[%d] = %d is past the %lld slots of sequence %d (%lld blocks of %d tokens)",
                        what, t, p, static_cast<long long>(slots), s, static_cast<long long>(blocks), kv->block_size);
        const int32_t last = kv->seq_block_start[s] + p / kv->block_size;
        for (int32_t b = whole_prefix ? kv->seq_block_start[s] : last; b <= last; ++b) {
            const void *base = kv->block_base[b];
            if (base == nullptr) return fail(st, invalid, "cpu %s: kv.block_base[%d] is NULL", what, b);
            if (reinterpret_cast<uintptr_t>(base) % kv_layout::alignment(kv_layout::type_of(kv)) != 0)
                return fail(st, invalid, "cpu %s: kv.block_base[%d] = %p is not aligned for its elements", what, b,
                            base);
        }
        longest = std::max<int64_t>(longest, int64_t{p} + 1);
    }
    *n_positions = longest;
    return STRATA_OK;
}

// This layer's rows of one block, as elements E: K rows first, V rows block_size rows on (a row is
// kv_dim / values_per_element<E> elements).
template <class E> inline E *layer_rows(const strata_paged_kv *kv, int32_t block) {
    return reinterpret_cast<E *>(static_cast<char *>(kv->block_base[block]) + kv->layer_offset_bytes);
}

// Asks for n_rows rows of `bytes` bytes each (row r at p + r * stride bytes) to be brought into the caches ahead of
// their use: a hint, which changes no result and faults on nothing.
inline void prefetch_rows(const void *p, int64_t n_rows, int64_t stride, int64_t bytes) noexcept {
    constexpr uintptr_t line = 64;
    for (int64_t r = 0; r < n_rows; ++r) {
        const uintptr_t begin = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(r * stride);
        for (uintptr_t at = begin & ~(line - 1); at < begin + static_cast<uintptr_t>(bytes); at += line)
            __builtin_prefetch(reinterpret_cast<const void *>(at), 0, 3);
    }
}

// Calls fn with a null pointer of the table's element type (float or an *_element type); the type was checked
// by check_paged_kv.
template <class Fn> void with_element_type(const strata_paged_kv *kv, const Fn &fn) {
    switch (kv_layout::type_of(kv)) {
    case STRATA_KV_F16: fn(static_cast<const f16_element *>(nullptr)); break;
    case STRATA_KV_BF16: fn(static_cast<const bf16_element *>(nullptr)); break;
    case STRATA_KV_FP8_E4M3: fn(static_cast<const e4m3_element *>(nullptr)); break;
    case STRATA_KV_FP8_E5M2: fn(static_cast<const e5m2_element *>(nullptr)); break;
    case STRATA_KV_Q8_0: fn(static_cast<const kv_q8_0::group *>(nullptr)); break;
    default: fn(static_cast<const float *>(nullptr)); break;
    }
}

// Writes n elements of one float row as E.
inline void store_row(const kernels &, const float *x, float *out, int64_t n) {
    std::memcpy(out, x, sizeof(float) * static_cast<size_t>(n));
}
inline void store_row(const kernels &k, const float *x, f16_element *out, int64_t n) { k.to_f16(x, &out->bits, n); }
inline void store_row(const kernels &k, const float *x, bf16_element *out, int64_t n) { k.to_bf16(x, &out->bits, n); }
// FP8 rows are written one element at a time (2 * kv_dim bytes per token and layer: small next to the matmuls).
inline void store_row(const kernels &, const float *x, e4m3_element *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i].bits = float8::fp32_to_e4m3(x[i]);
}
inline void store_row(const kernels &, const float *x, e5m2_element *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i].bits = float8::fp32_to_e5m2(x[i]);
}
// q8_0 rows a group of 32 values at a time (n a multiple of 32, checked with the table).
inline void store_row(const kernels &, const float *x, kv_q8_0::group *out, int64_t n) {
    for (int64_t g = 0; g < n / kv_q8_0::group_values; ++g) kv_q8_0::quantize(x + g * kv_q8_0::group_values, out + g);
}

} // namespace

int32_t kv_store(strata_device *dev, const strata_kv_store_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu kv_store: device is NULL");
        if (a == nullptr) return fail(st, invalid, "cpu kv_store: args is NULL");
        if (a->struct_size < sizeof(strata_kv_store_args))
            return fail(st, invalid, "cpu kv_store: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_kv_store_args));
        if (a->n_tokens <= 0) return fail(st, invalid, "cpu kv_store: n_tokens = %d; must be > 0", a->n_tokens);
        if (a->k == nullptr || a->v == nullptr) return fail(st, invalid, "cpu kv_store: k or v is NULL");
        if (int32_t rc = check_paged_kv(a->kv, "kv_store", st); rc != STRATA_OK) return rc;
        int64_t n_positions = 0;
        if (int32_t rc =
                check_token_slots(a->kv, a->n_tokens, a->token_seq, a->positions, false, "kv_store", &n_positions, st);
            rc != STRATA_OK)
            return rc;

        if (a->kv != nullptr) {
            const uint64_t rows = sizeof(float) * static_cast<uint64_t>(a->n_tokens) * static_cast<uint64_t>(a->kv->kv_dim);
            if (int32_t rc = require_device_memory(dev, a->k, rows, "kv_store", "k", st); rc != STRATA_OK) return rc;
            if (int32_t rc = require_device_memory(dev, a->v, rows, "kv_store", "v", st); rc != STRATA_OK) return rc;
            if (int32_t rc = require_device_blocks(dev, a->kv, "kv_store", st); rc != STRATA_OK) return rc;
        }
        // A copy (or conversion) of 2 * n_tokens rows: memory-bound and small next to the matmuls around it, so it
        // stays on the calling thread (no pool wake-up, no op lock needed: it touches no device scratch).
        const strata_paged_kv *kv = a->kv;
        const int64_t kv_dim = kv->kv_dim, block_size = kv->block_size;
        const kernels &k = dev->kern;
        with_element_type(kv, [&](const auto *element) {
            using E = std::remove_const_t<std::remove_pointer_t<decltype(element)>>;
            const int64_t row = kv_dim / values_per_element<E>;
            for (int32_t t = 0; t < a->n_tokens; ++t) {
                const int32_t p = a->positions[t];
                const int32_t block = kv->seq_block_start[a->token_seq[t]] + p / kv->block_size;
                E *rows = layer_rows<E>(kv, block);
                const int64_t slot = p % kv->block_size;
                store_row(k, a->k + int64_t{t} * kv_dim, rows + slot * row, kv_dim);
                store_row(k, a->v + int64_t{t} * kv_dim, rows + (block_size + slot) * row, kv_dim);
            }
        });
        ok(st);
        return STRATA_OK;
    });
}

int32_t paged_attention(strata_device *dev, const strata_paged_attention_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu paged_attention: device is NULL");
        if (a == nullptr) return fail(st, invalid, "cpu paged_attention: args is NULL");
        if (a->struct_size < offsetof(strata_paged_attention_args, softcap))
            return fail(st, invalid, "cpu paged_attention: args.struct_size = %u, expected >= %zu", a->struct_size,
                        offsetof(strata_paged_attention_args, softcap));
        score_terms terms;
        int32_t window = 0;
        if (int32_t rc = strata::plugin::attention_score_terms(a, "cpu paged_attention", &terms.softcap, &window, st);
            rc != STRATA_OK)
            return rc;
        if (int32_t rc = check_attention_heads("paged_attention", a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim,
                                               a->q, a->out, a->scale, st);
            rc != STRATA_OK)
            return rc;
        if (int32_t rc = check_paged_kv(a->kv, "paged_attention", st); rc != STRATA_OK) return rc;
        if (int64_t{a->kv->kv_dim} != int64_t{a->n_kv_heads} * a->head_dim)
            return fail(st, invalid, "cpu paged_attention: kv.kv_dim = %d but n_kv_heads * head_dim = %lld",
                        a->kv->kv_dim, static_cast<long long>(int64_t{a->n_kv_heads} * a->head_dim));
        if (!kv_layout::holds_heads_of(kv_layout::type_of(a->kv), a->head_dim))
            return fail(st, STRATA_ERR_UNSUPPORTED, "cpu paged_attention: a %s cache holds heads of whole groups of %lld "
                        "values; head_dim = %d is not one", kv_layout::type_name(kv_layout::type_of(a->kv)),
                        static_cast<long long>(kv_layout::group_values(kv_layout::type_of(a->kv))), a->head_dim);
        int64_t n_positions = 0;
        if (int32_t rc =
                check_token_slots(a->kv, a->n_tokens, a->token_seq, a->positions, true, "paged_attention", &n_positions,
                                  st);
            rc != STRATA_OK)
            return rc;
        const uint64_t q_bytes = sizeof(float) * static_cast<uint64_t>(a->n_tokens) * static_cast<uint64_t>(a->n_heads) *
                                 static_cast<uint64_t>(a->head_dim);
        if (int32_t rc = require_device_memory(dev, a->q, q_bytes, "paged_attention", "q", st); rc != STRATA_OK) return rc;
        if (int32_t rc = require_device_memory(dev, a->out, q_bytes, "paged_attention", "out", st); rc != STRATA_OK)
            return rc;
        if (int32_t rc = require_device_blocks(dev, a->kv, "paged_attention", st); rc != STRATA_OK) return rc;

        const attention_items items(a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, n_positions,
                                    dev->pool.size(), parallel_min_work);
        std::lock_guard lock(dev->op_mutex);
        dev->reserve_scores(items.scores_per_thread());

        const strata_paged_kv *kv = a->kv;
        const int64_t kv_dim = kv->kv_dim, block_size = kv->block_size;
        // The rows of a token's sequence come one block at a time; tokens of a sequence read the same rows.
        auto rows_of = [&](int64_t t) {
            return token_context{int64_t{a->positions[t]} + 1, first_attended(a->positions[t], window),
                                 a->token_seq[t]};
        };
        with_element_type(kv, [&](const auto *element) {
            using E = std::remove_const_t<std::remove_pointer_t<decltype(element)>>;
            const int64_t row = kv_dim / values_per_element<E>;
            const int64_t head_elements = a->head_dim / values_per_element<E>;
            auto runs_of = [&](int64_t item, int64_t t) {
                const int32_t first_block = kv->seq_block_start[a->token_seq[t]];
                const int64_t head_offset = items.kv_offset(item, head_elements);
                const head_chunk chunk = items.chunk(item, head_elements);
                // The bytes of a row the item's heads read: up to the end of its last head's KV head.
                const int64_t chunk_bytes =
                    (chunk.offset(chunk.n_heads - 1) + head_elements) * static_cast<int64_t>(sizeof(E));
                // The blocks holding rows [lo, hi), whole (a segment or a window starts anywhere in a block); ahead,
                // the part of the next block the pass reads is prefetched while fn reads one (the blocks of a layer
                // lie a whole block of every layer apart, where the hardware's prefetchers do not follow).
                return [kv, first_block, head_offset, block_size, row, chunk_bytes](
                           const auto &fn, int64_t lo, int64_t hi, kv_part part, bool ahead) {
                    const int64_t part_offset = part == kv_part::keys ? head_offset : block_size * row + head_offset;
                    auto block = static_cast<int32_t>(first_block + lo / block_size);
                    for (int64_t j0 = lo / block_size * block_size; j0 < hi; j0 += block_size, ++block) {
                        const E *rows = layer_rows<const E>(kv, block);
                        if (ahead && j0 + block_size < hi)
                            prefetch_rows(layer_rows<const E>(kv, block + 1) + part_offset,
                                          std::min(block_size, hi - j0 - block_size), row * sizeof(E), chunk_bytes);
                        fn(j0, std::min(block_size, hi - j0), rows + head_offset, rows + block_size * row + head_offset,
                           row);
                    }
                };
            };
            attend_items(*dev, items, a->q, a->out, a->scale, terms.softcap, head_elements, rows_of, runs_of);
        });
        ok(st);
        return STRATA_OK;
    });
}

int32_t copy(strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t kind, strata_status *st) {
    if (dev == nullptr) return fail(st, invalid, "cpu copy: device is NULL");
    if (kind != STRATA_COPY_H2D && kind != STRATA_COPY_D2H && kind != STRATA_COPY_D2D)
        return fail(st, invalid, "cpu copy: kind %d is unknown; use STRATA_COPY_H2D (1), D2H (2) or D2D (3)", kind);
    if (bytes > 0 && (dst == nullptr || src == nullptr)) return fail(st, invalid, "cpu copy: dst or src is NULL");
    if (int32_t rc = check_copy_direction(dev, dst, src, bytes, kind, st); rc != STRATA_OK) return rc;
    // Device memory is host memory, so every kind is one host copy; memmove keeps an overlapping D2D copy defined.
    if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
    ok(st);
    return STRATA_OK;
}

int32_t fence_record(strata_device *dev, uint64_t *fence, strata_status *st) {
    if (dev == nullptr) return fail(st, invalid, "cpu fence_record: device is NULL");
    if (fence == nullptr) return fail(st, invalid, "cpu fence_record: fence is NULL");
    *fence = dev->last_fence.fetch_add(1, std::memory_order_relaxed) + 1;
    ok(st);
    return STRATA_OK;
}

// Checks the fence as the CUDA device does, so a host that passes a fence it never got fails here too.
int32_t copy_after(strata_device *dev, uint64_t fence, void *dst, const void *src, uint64_t bytes, int32_t kind,
                   strata_status *st) {
    if (dev == nullptr) return fail(st, invalid, "cpu copy_after: device is NULL");
    const uint64_t last = dev->last_fence.load(std::memory_order_relaxed);
    if (fence == 0 || fence > last)
        return fail(st, invalid, "cpu copy_after: fence %llu was never returned by fence_record (the newest is %llu)",
                    static_cast<unsigned long long>(fence), static_cast<unsigned long long>(last));
    return copy(dev, dst, src, bytes, kind, st);
}

// 0 only in the `separate_memory` test mode, where the host must treat device memory as a discrete GPU's.
int32_t host_addressable(strata_device *dev) { return dev != nullptr && dev->separate_memory ? 0 : 1; }

} // namespace strata::cpu
