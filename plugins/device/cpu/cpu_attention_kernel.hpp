// The inner loop of attention, shared by the contiguous `attention` op and `paged_attention`: one query head against
// n_kv key/value rows. The rows reach it as runs of consecutive rows `stride` floats apart — one run for a
// contiguous cache, one per block for the paged cache — and per row the arithmetic and its order are the same
// whatever the runs, so both ops produce the same bits for the same rows (ABI 1.5 promises that).
#pragma once

#include "cpu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace strata::cpu {

// Elements of the 16-bit KV caches (ABI 1.20): the bits of one IEEE half or bfloat16, read exactly by the kernels.
struct f16_element { uint16_t bits; };
struct bf16_element { uint16_t bits; };
// Elements of the FP8 KV caches: one e4m3 or e5m2 byte, read exactly through its value table.
struct e4m3_element { uint8_t bits; };
struct e5m2_element { uint8_t bits; };

// A q8_0 cache's rows are groups of 32 values: one element of the row pointer is one group.
using strata::kv_q8_0::values_per_element;

// Each row type's kernel slots (its multi-row dot and axpy, its widening) and the pointer they take.
template <class E> struct row_kernels;
template <> struct row_kernels<float> {
    static constexpr auto dot = &kernels::dot_rows;
    static constexpr auto axpy = &kernels::axpy_rows;
    static const float *bits(const float *row) noexcept { return row; }
};
template <auto Dot, auto Axpy, auto Widen, class E> struct row_kernels_of {
    static constexpr auto dot = Dot;
    static constexpr auto axpy = Axpy;
    static constexpr auto widen = Widen;
    static const auto *bits(const E *row) noexcept {
        if constexpr (std::is_same_v<E, kv_q8_0::group>) return row;
        else return &row->bits;
    }
};
template <>
struct row_kernels<f16_element>
    : row_kernels_of<&kernels::dot_f16_rows, &kernels::axpy_f16_rows, &kernels::widen_f16, f16_element> {};
template <>
struct row_kernels<bf16_element>
    : row_kernels_of<&kernels::dot_bf16_rows, &kernels::axpy_bf16_rows, &kernels::widen_bf16, bf16_element> {};
template <>
struct row_kernels<e4m3_element>
    : row_kernels_of<&kernels::dot_e4m3_rows, &kernels::axpy_e4m3_rows, &kernels::widen_e4m3, e4m3_element> {};
template <>
struct row_kernels<e5m2_element>
    : row_kernels_of<&kernels::dot_e5m2_rows, &kernels::axpy_e5m2_rows, &kernels::widen_e5m2, e5m2_element> {};
template <>
struct row_kernels<kv_q8_0::group>
    : row_kernels_of<&kernels::dot_q8_0_rows, &kernels::axpy_q8_0_rows, &kernels::widen_q8_0, kv_q8_0::group> {};

// Several consecutive rows of one run at once (row r at row + r * stride): out[r] = the dot of q and row r, and
// y += w[r] * row r in row order, with the single-row kernels' bits (each kernel set's *_rows slots).
template <class E>
inline void kv_dot_rows(const kernels &k, const float *q, const E *row, int64_t stride, int32_t n_rows, int64_t n,
                        float *out) noexcept {
    (k.*row_kernels<E>::dot)(q, row_kernels<E>::bits(row), stride, n_rows, n, out);
}
template <class E>
inline void kv_axpy_rows(const kernels &k, const float *w, const E *row, int64_t stride, int32_t n_rows, float *y,
                         int64_t n) noexcept {
    (k.*row_kernels<E>::axpy)(w, row_kernels<E>::bits(row), stride, n_rows, y, n);
}

// n_rows rows of head_dim values (row r at row + r * stride) widened to float, exactly, into out (row r at
// out + r * head_dim): the float kernels over them give the bits of the row type's own kernels
// (CpuKernelRows.WideningOnceGivesTheRowTypesBits), so a query block's tokens can share one widening of a step.
template <class E>
inline void widen_rows(const kernels &k, const E *row, int64_t stride, int32_t n_rows, int32_t head_dim,
                       float *out) noexcept {
    for (int32_t r = 0; r < n_rows; ++r)
        (k.*row_kernels<E>::widen)(row_kernels<E>::bits(row + r * stride), out + int64_t{r} * head_dim, head_dim);
}

// Rows one attention pass hands to the multi-row kernels at once: each head (and each token of a query block) reads
// them while they are in L1, and the weighted sum keeps its output in registers across them. A step never crosses a
// run (a paged block: 16 rows at the default block_size). Against 4, with query blocks, a 1,000-token prefill spent
// about a fifth fewer cycles in the CPU device's ops (BENCHMARKS.md "Attention in query blocks").
inline constexpr int32_t rows_per_step = 16;

// The most query heads one attention item takes at once (heads_per_item): it bounds each thread's score scratch.
inline constexpr int32_t max_chunk_heads = 64;

// A pass widens each step's rows once, head by head, for all the spans that read them where the rows are not float,
// the pass has more than one span (a query block) and a head fits this (the widened step lives on the stack).
inline constexpr int32_t max_widened_head_dim = 256;
template <class E> inline constexpr bool widened_type = !std::is_same_v<E, float>;
inline bool widens_steps(int32_t n_spans, int32_t head_dim) noexcept {
    return n_spans > 1 && head_dim <= max_widened_head_dim;
}

// What ABI 1.14 adds to a score: soft-capping (softcap > 0) and a sliding window (rows before `first` are not
// attended). The defaults change nothing.
struct score_terms {
    float softcap = 0.0f;
    int64_t first = 0;
};

// The first row a query at position pos attends with a sliding window of `window` rows (0: none).
inline int64_t first_attended(int64_t pos, int32_t window) noexcept {
    return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

// Where a chunk of consecutive query heads finds its rows: head c of the chunk (0-based) reads the KV head
// (lead + c) / group of the chunk's first KV head, whose values start (lead + c) / group * head_elements elements
// into the rows handed to the runs (head_elements: a head's elements of the row type).
struct head_chunk {
    int32_t n_heads = 1;
    int32_t group = 1;
    int32_t lead = 0; // the chunk's first query head's index within its KV head's group
    int64_t head_elements = 0;
    int64_t offset(int32_t c) const noexcept { return int64_t{(lead + c) / group} * head_elements; }
};

// A step's n_rows rows (row r at rows + r * stride, the chunk's first KV head first) for each head c of the chunk:
// fn(c, wide) with wide holding the rows of head c's KV head widened (row r at wide + r * head_dim), each KV head's
// rows widened once (the chunk's heads of one KV head are consecutive). head_dim <= max_widened_head_dim.
template <class E, class Fn>
inline void for_each_widened_head(const kernels &k, const E *rows, int64_t stride, int32_t n_rows,
                                  const head_chunk &chunk, int32_t head_dim, const Fn &fn) noexcept {
    float wide[rows_per_step * max_widened_head_dim];
    int64_t widened = -1;
    for (int32_t c = 0; c < chunk.n_heads; ++c) {
        if (chunk.offset(c) != widened) {
            widened = chunk.offset(c);
            widen_rows(k, rows + widened, stride, n_rows, head_dim, wide);
        }
        fn(c, wide);
    }
}

// One query token's part in a pass over rows [lo, hi) of its sequence (score_rows, then weigh_rows): q and out hold
// the chunk's heads, head_dim floats each; head c's score of row j goes to scores[c * n() + j - lo]; its weights are
// those scores times inv_sum[c] (normalised: a token of up to segment_rows keys) or, with inv_sum null, the scores themselves (a segment's
// unnormalised sums: attend_segment).
struct query_span {
    const float *q = nullptr;
    float *out = nullptr;
    float *scores = nullptr;
    const float *inv_sum = nullptr;
    int64_t lo = 0, hi = 0;
    int64_t n() const noexcept { return hi - lo; }
};

// Which rows of the runs a pass reads: the keys (score_rows) or the values (weigh_rows).
enum class kv_part { keys, values };

// for_each_run(fn, lo, hi, part, ahead) must call fn(j0, count, keys, values, stride) for runs that cover rows [lo, hi) in
// ascending order (the first may start before lo and the last end after hi: the callers skip such rows): row j0 + i
// has the chunk's first KV head's key at keys + i * stride and its value at values + i * stride (i < count); keys
// and values point to float, one of the *_element types above or q8_0 groups (then stride and the rows' offsets
// count groups). It is called twice: for the scores (part kv_part::keys), then the weighted sums (kv_part::values).
// ahead: the pass has one span (a decode token's, or a prefill token's where the items hold one token each), whose
// rows come from memory rather than from the caches a query block's earlier passes filled; a source whose runs lie
// apart in memory (the paged cache's blocks) then fetches the part of the next run ahead while fn reads one (a
// 1,000-token decode on one thread: the f16 dots' and axpys' cycles about 40 % fewer, BENCHMARKS.md "Decode at a
// long context, prefetched"; in query blocks the prefetches bought nothing measurable). chunk.n_heads <= max_chunk_heads, as
// heads_per_item gives. A token's q is fully read before its out is written, so a token's out may alias its own q
// (not another token's: in a query block one token's out is written while others still read their q). Rows before
// terms.first are skipped, and with first 0 and no softcap the arithmetic is what it was before ABI 1.14.
//
// Each head's arithmetic and its order are those of one head of one token alone (a dot per row, the max, the
// exponentials, an axpy per row in row order), whatever the chunk and whatever other tokens share the pass: they
// only change the order in which memory is visited. A pass visits its rows once, rows_per_step at a time, and every
// span whose rows include some of a step's reads them for all of the chunk's heads while they are in L1 (the heads of
// a row lie side by side, heads sharing a KV head read the same values, and the tokens of a query block read the same
// rows). A span is handed the step's rows it attends through the multi-row kernels, which keep each row's bits
// however the rows are grouped (CpuKernelRows.MultiRowDotsAndAxpysHaveTheSingleRowBits); in a query block the rows
// of a step are first widened once per KV head (heads outer, spans inner) and read by the float kernels, which give
// the row type's bits over widened rows (CpuKernelRows.WideningOnceGivesTheRowTypesBits).
// The two passes over rows [lo, hi) (the union of the spans' rows, each span's non-empty): the spans' scores (a dot,
// the scale, the soft-cap), then their weighted sums (out of head c += weight(c, j) * row j's value).
template <class ForEachRun>
inline void score_rows(const kernels &k, const query_span *spans, int32_t n_spans, const head_chunk &chunk,
                       int32_t head_dim, float scale, int64_t lo, int64_t hi, const ForEachRun &for_each_run,
                       float softcap) noexcept {
    const float inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
    auto score = [&](const query_span &span, int32_t c, int64_t a, int32_t n_rows, const float *dots) {
        const int64_t n = span.n();
        for (int32_t r = 0; r < n_rows; ++r) {
            const float s = dots[r] * scale;
            span.scores[c * n + a + r - span.lo] = softcap > 0.0f ? std::tanh(s * inv_cap) * softcap : s;
        }
    };
    for_each_run([&](int64_t j0, int64_t count, const auto *keys, const auto *, int64_t stride) {
        using E = std::remove_cv_t<std::remove_pointer_t<decltype(keys)>>;
        const int64_t end = std::min(j0 + count, hi);
        for (int64_t j = std::max(j0, lo); j < end; j += rows_per_step) {
            const int64_t step_end = std::min(j + rows_per_step, end);
            if constexpr (widened_type<E>) if (widens_steps(n_spans, head_dim)) {
                // Each KV head's rows of the step widened once, then every span's heads on it read floats.
                for_each_widened_head(k, keys + (j - j0) * stride, stride, static_cast<int32_t>(step_end - j), chunk,
                                      head_dim, [&](int32_t c, const float *wide) {
                    for (int32_t b = 0; b < n_spans; ++b) {
                        const query_span &span = spans[b];
                        const int64_t a = std::max(j, span.lo), z = std::min(step_end, span.hi);
                        if (a >= z) continue;
                        float dots[rows_per_step];
                        k.dot_rows(span.q + int64_t{c} * head_dim, wide + (a - j) * head_dim, head_dim,
                                   static_cast<int32_t>(z - a), head_dim, dots);
                        score(span, c, a, static_cast<int32_t>(z - a), dots);
                    }
                });
                continue;
            }
            for (int32_t b = 0; b < n_spans; ++b) {
                const query_span &span = spans[b];
                const int64_t a = std::max(j, span.lo), z = std::min(step_end, span.hi);
                if (a >= z) continue;
                const auto *row = keys + (a - j0) * stride;
                const auto n_rows = static_cast<int32_t>(z - a);
                for (int32_t c = 0; c < chunk.n_heads; ++c) {
                    float dots[rows_per_step];
                    kv_dot_rows(k, span.q + int64_t{c} * head_dim, row + chunk.offset(c), stride, n_rows, head_dim,
                                dots);
                    score(span, c, a, n_rows, dots);
                }
            }
        }
    }, lo, hi, kv_part::keys, n_spans == 1);
}

template <class ForEachRun>
inline void weigh_rows(const kernels &k, const query_span *spans, int32_t n_spans, const head_chunk &chunk,
                       int32_t head_dim, int64_t lo, int64_t hi, const ForEachRun &for_each_run) noexcept {
    for (int32_t b = 0; b < n_spans; ++b)
        std::memset(spans[b].out, 0,
                    sizeof(float) * static_cast<size_t>(head_dim) * static_cast<size_t>(chunk.n_heads));
    // Head c's weights of rows [a, a + n_rows) for a span.
    auto weights = [](const query_span &span, int32_t c, int64_t a, int32_t n_rows, float *w) {
        const float *s = span.scores + c * span.n() + a - span.lo;
        if (span.inv_sum != nullptr)
            for (int32_t r = 0; r < n_rows; ++r) w[r] = s[r] * span.inv_sum[c];
        else
            for (int32_t r = 0; r < n_rows; ++r) w[r] = s[r];
    };
    for_each_run([&](int64_t j0, int64_t count, const auto *, const auto *values, int64_t stride) {
        using E = std::remove_cv_t<std::remove_pointer_t<decltype(values)>>;
        const int64_t end = std::min(j0 + count, hi);
        for (int64_t j = std::max(j0, lo); j < end; j += rows_per_step) {
            const int64_t step_end = std::min(j + rows_per_step, end);
            if constexpr (widened_type<E>) if (widens_steps(n_spans, head_dim)) {
                // As in score_rows; a span's head applies the widened rows in row order.
                for_each_widened_head(k, values + (j - j0) * stride, stride, static_cast<int32_t>(step_end - j),
                                      chunk, head_dim, [&](int32_t c, const float *wide) {
                    for (int32_t b = 0; b < n_spans; ++b) {
                        const query_span &span = spans[b];
                        const int64_t a = std::max(j, span.lo), z = std::min(step_end, span.hi);
                        if (a >= z) continue;
                        float w[rows_per_step];
                        weights(span, c, a, static_cast<int32_t>(z - a), w);
                        k.axpy_rows(w, wide + (a - j) * head_dim, head_dim, static_cast<int32_t>(z - a),
                                    span.out + int64_t{c} * head_dim, head_dim);
                    }
                });
                continue;
            }
            for (int32_t b = 0; b < n_spans; ++b) {
                const query_span &span = spans[b];
                const int64_t a = std::max(j, span.lo), z = std::min(step_end, span.hi);
                if (a >= z) continue;
                const auto *row = values + (a - j0) * stride;
                const auto n_rows = static_cast<int32_t>(z - a);
                for (int32_t c = 0; c < chunk.n_heads; ++c) {
                    float w[rows_per_step];
                    weights(span, c, a, n_rows, w);
                    kv_axpy_rows(k, w, row + chunk.offset(c), stride, n_rows, span.out + int64_t{c} * head_dim,
                                 head_dim);
                }
            }
        }
    }, lo, hi, kv_part::values, n_spans == 1);
}

// Beyond this many keys a token's rows are cut into segments of this many by row index (rows [g * segment_rows,
// (g + 1) * segment_rows)): each segment is attended alone (its max, the sum of its exponentials, its unnormalised
// weighted sum of values: attend_segment) and the segments are merged in ascending order (merge_segments), as flash
// decoding does. The cut depends on the token's context only, never on the batch, the items or the threads, so a
// token's bits do not either; up to segment_rows keys a token is attended in one pass. The segments of one
// decode token are items of their own, so every thread reads a share of its rows (attention_items.split).
inline constexpr int64_t segment_rows = 512;

inline int64_t segments_of(int64_t n_kv) noexcept {
    return n_kv <= segment_rows ? 1 : (n_kv + segment_rows - 1) / segment_rows;
}

// A segment's result for a chunk of n heads: n maxima, n sums of exponentials, then n * head_dim weighted sums.
inline int64_t partial_floats(int32_t n_heads, int32_t head_dim) noexcept { return int64_t{n_heads} * (head_dim + 2); }

// Segment g of a token's rows [first, n_kv) (see segment_rows) for a chunk of heads, into `partial`
// (partial_floats(chunk.n_heads, head_dim) floats); nothing is written when the segment lies before `first`. scores
// holds chunk.n_heads * segment_rows floats of scratch; for_each_run as for score_rows.
template <class ForEachRun>
inline void attend_segment(const kernels &k, const float *q, const head_chunk &chunk, int32_t head_dim, float scale,
                           int64_t g, int64_t n_kv, const ForEachRun &for_each_run, float *scores, float *partial,
                           const score_terms &terms = {}) noexcept {
    const int32_t n_heads = chunk.n_heads;
    float *m = partial, *l = partial + n_heads, *o = partial + 2 * int64_t{n_heads};
    const query_span span{q, o, scores, nullptr, std::max(g * segment_rows, terms.first),
                          std::min((g + 1) * segment_rows, n_kv)};
    const int64_t n = span.n();
    if (n <= 0) return;
    score_rows(k, &span, 1, chunk, head_dim, scale, span.lo, span.hi, for_each_run, terms.softcap);
    for (int32_t c = 0; c < n_heads; ++c) {
        float *window = scores + c * n;
        m[c] = k.max(window, n);
        l[c] = static_cast<float>(k.exp_sub_sum(window, m[c], window, n));
    }
    weigh_rows(k, &span, 1, chunk, head_dim, span.lo, span.hi, for_each_run);
}

// Merges segments g_first..n_segs-1 (segment g's partial at partials + g * pf, pf >= partial_floats(n_heads,
// head_dim)) into out, head after head: the largest of their maxima M, L = sum of l_g * exp(m_g - M) in double, then
// out = sum over g in order of o_g * (exp(m_g - M) / L).
inline void merge_segments(const kernels &k, const float *partials, int64_t pf, int64_t g_first, int64_t n_segs,
                           int32_t n_heads, int32_t head_dim, float *out) noexcept {
    for (int32_t c = 0; c < n_heads; ++c) {
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t g = g_first; g < n_segs; ++g) top = std::max(top, partials[g * pf + c]);
        // A segment whose every score is -inf weighs 0, as its rows do in one pass (unless all are: then NaN, as
        // there).
        auto weightless = [&](int64_t g) {
            return partials[g * pf + c] == -std::numeric_limits<float>::infinity() &&
                   top != -std::numeric_limits<float>::infinity();
        };
        double sum = 0.0;
        for (int64_t g = g_first; g < n_segs; ++g)
            if (!weightless(g))
                sum += static_cast<double>(partials[g * pf + n_heads + c]) *
                       std::exp(static_cast<double>(partials[g * pf + c]) - static_cast<double>(top));
        float *y = out + int64_t{c} * head_dim;
        std::memset(y, 0, sizeof(float) * static_cast<size_t>(head_dim));
        for (int64_t g = g_first; g < n_segs; ++g) {
            if (weightless(g)) continue;
            const float w = static_cast<float>(
                std::exp(static_cast<double>(partials[g * pf + c]) - static_cast<double>(top)) / sum);
            k.axpy(w, partials + g * pf + 2 * int64_t{n_heads} + int64_t{c} * head_dim, y, head_dim);
        }
    }
}

// How many consecutive query tokens of one sequence an attention item takes in a prefill (a query block): the
// block's tokens read each row of a pass while it is in L1 (score_rows, weigh_rows), where a token alone reads all
// its rows from L2 or memory itself; each token keeps the bits it has alone.
inline constexpr int32_t query_block = 8;

// One token of a query block: its chunk's q and out (head_dim floats a head), its rows [first, n_kv).
struct block_token {
    const float *q = nullptr;
    float *out = nullptr;
    int64_t first = 0, n_kv = 0;
};

// A query block's tokens (n_tokens <= query_block, all of one sequence: for_each_run's rows are every token's)
// attended for a chunk of heads. Each token gets the bits of one normalised pass over its rows (up to segment_rows keys) or
// those of its segments (attend_segment) merged by merge_segments: the tokens' passes over segment g run together,
// each token with its own rows of the segment, scores, softmax and output. scores holds n_tokens *
// scores_per_token floats (scores_per_token >= chunk.n_heads * min(the longest context, segment_rows)); partials
// n_tokens * segments * pf floats (pf >= partial_floats(chunk.n_heads, head_dim)), read only for tokens with more
// than segment_rows keys (segments: the most any token has).
template <class ForEachRun>
inline void attend_block(const kernels &k, const block_token *tokens, int32_t n_tokens, const head_chunk &chunk,
                         int32_t head_dim, float scale, float softcap, const ForEachRun &for_each_run, float *scores,
                         int64_t scores_per_token, float *partials, int64_t pf, int64_t segments) noexcept {
    const int32_t n_heads = chunk.n_heads;
    float inv_sum[query_block][max_chunk_heads];
    auto partial_of = [&](int32_t b, int64_t g) { return partials + (b * segments + g) * pf; };
    int64_t g_lo = std::numeric_limits<int64_t>::max(), g_hi = 0;
    for (int32_t b = 0; b < n_tokens; ++b) {
        const int64_t segs = segments_of(tokens[b].n_kv);
        g_lo = std::min(g_lo, segs == 1 ? 0 : tokens[b].first / segment_rows);
        g_hi = std::max(g_hi, segs);
    }
    for (int64_t g = g_lo; g < g_hi; ++g) {
        query_span spans[query_block];
        int32_t token_of[query_block];
        int32_t n_spans = 0;
        int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
        for (int32_t b = 0; b < n_tokens; ++b) {
            const block_token &t = tokens[b];
            query_span span;
            if (segments_of(t.n_kv) == 1) {
                if (g != 0) continue;
                span = {t.q, t.out, scores + b * scores_per_token, inv_sum[b], t.first, t.n_kv};
            } else {
                span = {t.q, partial_of(b, g) + 2 * int64_t{n_heads}, scores + b * scores_per_token, nullptr,
                        std::max(g * segment_rows, t.first), std::min((g + 1) * segment_rows, t.n_kv)};
            }
            if (span.n() <= 0) continue;
            lo = std::min(lo, span.lo);
            hi = std::max(hi, span.hi);
            token_of[n_spans] = b;
            spans[n_spans++] = span;
        }
        if (n_spans == 0) continue;
        score_rows(k, spans, n_spans, chunk, head_dim, scale, lo, hi, for_each_run, softcap);
        for (int32_t i = 0; i < n_spans; ++i) {
            const int64_t n = spans[i].n();
            const int32_t b = token_of[i];
            for (int32_t c = 0; c < n_heads; ++c) {
                float *window = spans[i].scores + c * n;
                const float m = k.max(window, n);
                const double sum = k.exp_sub_sum(window, m, window, n);
                if (spans[i].inv_sum != nullptr) {
                    inv_sum[b][c] = static_cast<float>(1.0 / sum);
                } else {
                    partial_of(b, g)[c] = m;
                    partial_of(b, g)[n_heads + c] = static_cast<float>(sum);
                }
            }
        }
        weigh_rows(k, spans, n_spans, chunk, head_dim, lo, hi, for_each_run);
    }
    for (int32_t b = 0; b < n_tokens; ++b) {
        const int64_t segs = segments_of(tokens[b].n_kv);
        if (segs > 1)
            merge_segments(k, partials + b * segments * pf, pf, tokens[b].first / segment_rows, segs, n_heads,
                           head_dim, tokens[b].out);
    }
}

// How many query heads one attention item takes. A token's heads stay in one item, so each pass reads whole rows
// front to back (measured on 2 threads at a 4,096-token f16 context: decode 1.4-1.7x, prefill 1.7-1.8x faster than
// an item per head; BENCHMARKS.md "A token's heads in one attention item"; a decode token's rows beyond
// segment_rows are then shared among the threads by segments), unless there are fewer tokens than half the threads: then about n_threads / 2 items per token,
// whole KV groups each where an item holds more than one (a rule not yet measured on more than 2 threads). At most
// max_chunk_heads.
inline int32_t heads_per_item(int32_t n_heads, int32_t group, int64_t n_tokens, int n_threads) noexcept {
    const int64_t wanted_items = std::max(1, n_threads / 2);
    const int64_t chunks_per_token = std::max<int64_t>(1, (wanted_items + n_tokens - 1) / n_tokens);
    int64_t per = (n_heads + chunks_per_token - 1) / chunks_per_token;
    // Heads sharing a KV head stay in one item where the items are that large.
    if (per > group) per = std::min<int64_t>(n_heads, (per + group - 1) / group * group);
    per = std::min<int64_t>(per, max_chunk_heads);
    return static_cast<int32_t>(std::max<int64_t>(1, per));
}

// How an attention op over n_tokens query tokens of n_heads heads is cut into items, said once for the contiguous
// and the paged op. A pair is a block of consecutive tokens (query_block of them where there are at least 2 *
// n_threads * query_block tokens, a prefill; else one) and a chunk of their heads: pair p is block p / chunks, heads
// [h0, h0 + chunk.n_heads) from p % chunks; q and out of the pair's token t start at at(item, t) floats. A block's
// tokens are attended together where they share a sequence (attend_block). A token with more than segment_rows keys
// is attended by segments: when there are fewer pairs than threads (a decode step), each segment is an item of its
// own (split; a second pass merges them), otherwise one item attends its pair's segments one after the other and
// merges them itself. All give the same bits. grain hands each thread enough work per claim.
struct attention_items {
    int32_t n_tokens, n_heads, head_dim, group, per_item, chunks;
    int32_t block;     // query tokens per pair
    int64_t n_blocks;
    int64_t segments;  // segments of the longest context (1: no token is cut)
    bool split;        // a pair's segments are items of their own (only where block is 1)
    int64_t seg_items; // items per pair: segments when split, else 1
    int64_t n_items, grain;
    int64_t n_positions; // the longest context

    attention_items(int32_t n_tokens_, int32_t n_heads_, int32_t n_kv_heads, int32_t head_dim_, int64_t n_positions_,
                    int n_threads, int64_t min_work) noexcept
        : n_tokens(n_tokens_), n_heads(n_heads_), head_dim(head_dim_), group(n_heads_ / n_kv_heads),
          per_item(heads_per_item(n_heads_, group, n_tokens_, n_threads)), chunks((n_heads_ + per_item - 1) / per_item),
          block(int64_t{n_tokens_} >= int64_t{2} * n_threads * query_block ? query_block : 1),
          n_blocks((n_tokens_ + block - 1) / block), segments(segments_of(n_positions_)),
          split(segments > 1 && n_blocks * chunks < n_threads), seg_items(split ? segments : 1),
          n_items(n_blocks * chunks * seg_items),
          grain(std::max<int64_t>(1, min_work / std::max<int64_t>(1, (split ? segment_rows : n_positions_) * head_dim_ *
                                                                         2 * per_item * block))),
          n_positions(n_positions_) {}

    // Score scratch per token of a block, and per thread (with the partials of a block whose tokens attend their
    // segments one after the other, after the scores). The partials grow with the context and the block: at 131,072
    // keys, 32 heads of 128 an item and a block of 8, 8 x 256 segments x 4,160 floats, about 34 MB a thread (4.3 MB
    // for one token); the device keeps the largest it has needed.
    int64_t scores_per_token() const noexcept { return int64_t{per_item} * std::min(n_positions, segment_rows); }
    int64_t scores_per_thread() const noexcept {
        return block * scores_per_token() +
               (segments > 1 && !split ? block * segments * partial_floats(per_item, head_dim) : 0);
    }
    // Partials shared by the items of a split op (every pair's segments).
    int64_t shared_partials() const noexcept {
        return split ? int64_t{n_tokens} * chunks * segments * partial_floats(per_item, head_dim) : 0;
    }
    int64_t n_pairs() const noexcept { return n_blocks * chunks; }
    int64_t pair(int64_t item) const noexcept { return item / seg_items; }
    int64_t segment(int64_t item) const noexcept { return item % seg_items; }
    // The item's tokens: [first_token, end_token).
    int64_t first_token(int64_t item) const noexcept { return pair(item) / chunks * block; }
    int64_t end_token(int64_t item) const noexcept { return std::min<int64_t>(n_tokens, first_token(item) + block); }
    int32_t first_head(int64_t item) const noexcept { return static_cast<int32_t>(pair(item) % chunks) * per_item; }
    // The item's heads, head_elements elements of the row type each.
    head_chunk chunk(int64_t item, int64_t head_elements) const noexcept {
        const int32_t h0 = first_head(item);
        return {std::min(per_item, n_heads - h0), group, h0 % group, head_elements};
    }
    // Elements from a row's start to the item's first KV head.
    int64_t kv_offset(int64_t item, int64_t head_elements) const noexcept {
        return int64_t{first_head(item) / group} * head_elements;
    }
    // Where q and out of the item's heads of token t start.
    int64_t at(int64_t item, int64_t t) const noexcept { return (t * n_heads + first_head(item)) * head_dim; }
};

} // namespace strata::cpu
