// The loop the contiguous `attention` op and `paged_attention` share: every item of attention_items on the pool,
// each pair (a block of tokens and a chunk of their heads) attended by attend_block, the block's tokens of one
// sequence together, or, when the op is split (a decode step with long contexts), each segment of a token its own
// item (attend_segment) merged by a second pass over the pairs (merge_segments). The ops differ only in where a
// token's rows are: rows_of(t) gives its context, runs_of(item, t) the runs of rows for the item's first KV head
// (score_rows' for_each_run).
#pragma once

#include "cpu_attention_kernel.hpp"
#include "cpu_device_state.hpp"

#include <cstdint>

namespace strata::cpu {

// The rows a token attends: [first, n_kv) of `source` (tokens of one source read the same rows: a sequence).
struct token_context {
    int64_t n_kv = 0;
    int64_t first = 0;
    int64_t source = 0;
};

// Runs under the device's op lock (the scratch is the device's). head_elements: a head's elements of the row type.
template <class RowsOf, class RunsOf>
void attend_items(strata_device &dev, const attention_items &items, const float *q, float *out, float scale,
                  float softcap, int64_t head_elements, const RowsOf &rows_of, const RunsOf &runs_of) {
    const kernels &k = dev.kern;
    const int64_t pf = partial_floats(items.per_item, items.head_dim);
    float *shared = items.split ? dev.reserve_partials(items.shared_partials()) : nullptr;
    const int64_t per_token = items.scores_per_token();
    auto body = [&](int64_t i0, int64_t i1, int thread) noexcept {
        float *scores = dev.scores_of(thread);
        for (int64_t item = i0; item < i1; ++item) {
            const head_chunk chunk = items.chunk(item, head_elements);
            if (items.split) { // one token per pair
                const int64_t t = items.first_token(item);
                const token_context ctx = rows_of(t);
                const int64_t g = items.segment(item), segs = segments_of(ctx.n_kv);
                if (segs > 1) {
                    if (g < segs)
                        attend_segment(k, q + items.at(item, t), chunk, items.head_dim, scale, g, ctx.n_kv,
                                       runs_of(item, t), scores, shared + (items.pair(item) * items.segments + g) * pf,
                                       score_terms{softcap, ctx.first});
                    continue;
                }
                if (g != 0) continue; // a short context is attended whole, by its pair's first item
            }
            // The item's tokens, cut where the sequence changes.
            const int64_t end = items.end_token(item);
            for (int64_t t0 = items.first_token(item); t0 < end;) {
                block_token tokens[query_block];
                int32_t n = 0;
                const int64_t source = rows_of(t0).source;
                for (int64_t t = t0; t < end; ++t) {
                    const token_context ctx = rows_of(t);
                    if (ctx.source != source) break;
                    tokens[n++] = {q + items.at(item, t), out + items.at(item, t), ctx.first, ctx.n_kv};
                }
                attend_block(k, tokens, n, chunk, items.head_dim, scale, softcap, runs_of(item, t0), scores,
                             per_token, scores + items.block * per_token, pf, items.segments);
                t0 += n;
            }
        }
    };
    dev.pool.parallel_for(items.n_items, items.grain, body);
    if (!items.split) return;
    auto merge = [&](int64_t p0, int64_t p1, int) noexcept {
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t item = p * items.seg_items; // the pair's first item
            const int64_t t = items.first_token(item);
            const token_context ctx = rows_of(t);
            const int64_t segs = segments_of(ctx.n_kv);
            if (segs == 1) continue;
            merge_segments(k, shared + p * items.segments * pf, pf, ctx.first / segment_rows, segs,
                           items.chunk(item, head_elements).n_heads, items.head_dim, out + items.at(item, t));
        }
    };
    dev.pool.parallel_for(items.n_pairs(), 1, merge);
}

} // namespace strata::cpu
