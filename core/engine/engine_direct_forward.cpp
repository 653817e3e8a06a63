// Engine: forward passes outside the scheduler, over one private KV slot (testing_kv_), run on the step thread
// between two steps: forward_for_testing (the last token's logits, for tools and tests) and forward_logits (every
// position's logits of a text, teacher forcing: perplexity and KL divergence).
#include "engine/engine.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstring>

namespace strata::engine {

// One forward call of the private slot: tokens[0..m) at positions[0..m), the logits of tokens first_row..m-1.
step_output engine::forward_private_piece(const int32_t *tokens, const int32_t *positions, int32_t m, int32_t first_row) {
    step_.clear();
    step_.add_sequence(tokens, positions, m, testing_kv_);
    for (int32_t t = first_row; t < m; ++t) step_.want_logits(t);
    return execute_step();
}

const float *engine::forward_for_testing(const int32_t *tokens, const int32_t *positions, int32_t n) {
    // Copied on the step thread: its next step writes the logits buffer again.
    run_between_steps([&] {
        const float *logits = forward_between_steps(tokens, positions, n);
        testing_logits_.assign(logits, logits + hp_.n_vocab);
    });
    return testing_logits_.data();
}

const float *engine::forward_between_steps(const int32_t *tokens, const int32_t *positions, int32_t n) {
    int32_t max_pos = 0;
    for (int32_t i = 0; i < n; ++i) max_pos = std::max(max_pos, positions[i]);
    if (max_pos >= n_ctx_) fail("position {} is outside max_model_len {}", max_pos, n_ctx_);
    if (!kv_->ensure_slots(testing_kv_, max_pos + 1))
        fail("the device KV cache cannot hold {} positions; raise --kv-cache-memory", max_pos + 1);
    const int32_t chunk = opts_.scheduler.max_num_batched_tokens;
    step_output out;
    for (int32_t done = 0; done < n; done += chunk) {
        const int32_t m = std::min(chunk, n - done);
        out = forward_private_piece(tokens + done, positions + done, m, m - 1);
    }
    return out.row(0);
}

void engine::forward_logits(const int32_t *tokens, int32_t n, int32_t first_row, float *out) {
    if (n < 1 || n > n_ctx_)
        fail("forward_logits: {} tokens; a text of 1 to max_model_len = {} tokens runs from an empty context", n,
             n_ctx_);
    if (first_row < 0 || first_row >= n)
        fail("forward_logits: first row {} is outside the {} positions of the text", first_row, n);
    for (int32_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab)
            fail("token {} at position {} is outside the vocabulary [0, {})", tokens[i], i, hp_.n_vocab);
    }
    const size_t row_floats = static_cast<size_t>(hp_.n_vocab);
    run_between_steps([&] {
        if (!kv_->ensure_slots(testing_kv_, n))
            fail("the device KV cache cannot hold {} positions; raise --kv-cache-memory", n);
        positions_scratch_.resize(static_cast<size_t>(n));
        for (int32_t i = 0; i < n; ++i) positions_scratch_[static_cast<size_t>(i)] = i;
        // Pieces of at most max_num_batched_tokens tokens (the workspace) asking at most max_num_seqs rows (the
        // logits buffer). Positions before first_row attend to what earlier pieces stored in the slot's KV blocks.
        const int32_t max_tokens = opts_.scheduler.max_num_batched_tokens;
        const int32_t max_rows = opts_.scheduler.max_num_seqs;
        for (int32_t done = 0; done < n;) {
            int32_t m = std::min(max_tokens, n - done);
            if (done + m > first_row) m = std::min(m, std::max(first_row - done, 0) + max_rows);
            const int32_t piece_first_row = std::max(first_row - done, 0);
            const int32_t n_rows = std::max(m - piece_first_row, 0);
            const step_output piece =
                forward_private_piece(tokens + done, positions_scratch_.data() + done, m, piece_first_row);
            const size_t out_row = static_cast<size_t>(std::max(done, first_row) - first_row);
            for (int32_t r = 0; r < n_rows; ++r)
                std::memcpy(out + (out_row + static_cast<size_t>(r)) * row_floats, piece.row(r),
                            row_floats * sizeof(float));
            done += m;
        }
    });
}

} // namespace strata::engine
