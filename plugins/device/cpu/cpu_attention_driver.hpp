// The loop the contiguous `attention` op and `paged_attention` share: every item of attention_items on the pool,
// each pair (a token and a chunk of its heads) attended whole (attend_heads) or by segments (attend_segment), merged
// in the same item, or, when the op is split, by a second pass over the pairs (merge_segments). The ops differ only
// in where a token's rows are: rows_of(t) gives its context, runs_of(item, t) the runs of rows for the item's first
// KV head (attend_heads' for_each_run).
#pragma once

#include "cpu_attention_kernel.hpp"
#include "cpu_device_state.hpp"

#include <cstdint>

namespace strata::cpu {

// The rows a token attends: [first, n_kv).
struct token_context {
    int64_t n_kv = 0;
    int64_t first = 0;
};

// Runs under the device's op lock (the scratch is the device's). head_elements: a head's elements of the row type.
template <class RowsOf, class RunsOf>
void attend_items(strata_device &dev, const attention_items &items, const float *q, float *out, float scale,
                  float softcap, int64_t head_elements, const RowsOf &rows_of, const RunsOf &runs_of) {
    const kernels &k = dev.kern;
    const int64_t pf = partial_floats(items.per_item, items.head_dim);
    float *shared = items.split ? dev.reserve_partials(items.shared_partials()) : nullptr;
    auto body = [&](int64_t i0, int64_t i1, int thread) noexcept {
        float *scores = dev.scores_of(thread);
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t t = items.token(item);
            const token_context ctx = rows_of(t);
            const head_chunk chunk = items.chunk(item, head_elements);
            const score_terms terms{softcap, ctx.first};
            const auto runs = runs_of(item, t);
            const float *qi = q + items.at(item);
            float *oi = out + items.at(item);
            const int64_t segs = segments_of(ctx.n_kv);
            if (segs == 1) {
                if (items.segment(item) == 0)
                    attend_heads(k, qi, chunk, items.head_dim, scale, ctx.n_kv, runs, scores, oi, terms);
            } else if (items.split) {
                const int64_t g = items.segment(item);
                if (g < segs)
                    attend_segment(k, qi, chunk, items.head_dim, scale, g, ctx.n_kv, runs, scores,
                                   shared + (items.pair(item) * items.segments + g) * pf, terms);
            } else {
                float *partials = scores + segment_rows * items.per_item;
                for (int64_t g = ctx.first / segment_rows; g < segs; ++g)
                    attend_segment(k, qi, chunk, items.head_dim, scale, g, ctx.n_kv, runs, scores, partials + g * pf,
                                   terms);
                merge_segments(k, partials, pf, ctx.first / segment_rows, segs, chunk.n_heads, items.head_dim, oi);
            }
        }
    };
    dev.pool.parallel_for(items.n_items, items.grain, body);
    if (!items.split) return;
    auto merge = [&](int64_t p0, int64_t p1, int) noexcept {
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t item = p * items.seg_items; // the pair's first item
            const token_context ctx = rows_of(items.token(item));
            const int64_t segs = segments_of(ctx.n_kv);
            if (segs == 1) continue;
            merge_segments(k, shared + p * items.segments * pf, pf, ctx.first / segment_rows, segs,
                           items.chunk(item, head_elements).n_heads, items.head_dim, out + items.at(item));
        }
    };
    dev.pool.parallel_for(items.n_pairs(), 1, merge);
}

} // namespace strata::cpu
