// Builds one step_input, sequence by sequence, in buffers reserved once: the engine's scheduled steps, its private
// forward passes (tools, perplexity) and tests that drive a worker all lay a step out this one way.
#pragma once

#include "engine/step_input.hpp"
#include "kv/kv_cache.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::engine {

// How many block references a step's tables are reserved for: every block of every pool, plus one per sequence. A
// step whose tables share more blocks than that (prefix-cache hits in many sequences) grows the buffers once.
inline size_t step_block_reserve(const kv::kv_cache &kv, int32_t max_seqs) {
    return static_cast<size_t>(kv.capacity(kv::tier::device)) + kv.capacity(kv::tier::host) +
           kv.capacity(kv::tier::nvme) + static_cast<size_t>(max_seqs);
}

class step_builder {
  public:
    // Nothing is allocated by a step of at most max_tokens tokens, max_seqs sequences and max_blocks block refs.
    void reserve(int32_t max_tokens, int32_t max_seqs, size_t max_blocks) {
        tokens_.reserve(static_cast<size_t>(max_tokens));
        positions_.reserve(static_cast<size_t>(max_tokens));
        token_seq_.reserve(static_cast<size_t>(max_tokens));
        logits_tokens_.reserve(static_cast<size_t>(max_seqs));
        seq_block_start_.reserve(static_cast<size_t>(max_seqs) + 1);
        blocks_.reserve(max_blocks);
        clear();
    }

    void clear() {
        tokens_.clear();
        positions_.clear();
        token_seq_.clear();
        logits_tokens_.clear();
        blocks_.clear();
        seq_block_start_.assign(1, 0);
    }

    // The next sequence: n tokens at positions first_position, first_position + 1, ..., and its block table.
    void add_sequence(const int32_t *tokens, int32_t first_position, int32_t n, const kv::seq_blocks &kv) {
        const auto k = static_cast<int32_t>(seq_block_start_.size()) - 1;
        for (int32_t j = 0; j < n; ++j) {
            tokens_.push_back(tokens[j]);
            positions_.push_back(first_position + j);
            token_seq_.push_back(k);
        }
        add_blocks(kv);
    }

    // The next sequence: n tokens at the given positions, and its block table.
    void add_sequence(const int32_t *tokens, const int32_t *positions, int32_t n, const kv::seq_blocks &kv) {
        const auto k = static_cast<int32_t>(seq_block_start_.size()) - 1;
        tokens_.insert(tokens_.end(), tokens, tokens + n);
        positions_.insert(positions_.end(), positions, positions + n);
        token_seq_.insert(token_seq_.end(), static_cast<size_t>(n), k);
        add_blocks(kv);
    }

    // The step returns the logits of its token t (an index into the step's tokens) in row n_logits() - 1.
    void want_logits(int32_t t) { logits_tokens_.push_back(t); }

    int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
    int32_t n_seqs() const { return static_cast<int32_t>(seq_block_start_.size()) - 1; }
    int32_t n_logits() const { return static_cast<int32_t>(logits_tokens_.size()); }

    // The step as built so far; its arrays are the builder's, valid until the next change.
    step_input input() const {
        step_input s;
        s.tokens = tokens_.data();
        s.positions = positions_.data();
        s.token_seq = token_seq_.data();
        s.n_tokens = n_tokens();
        s.n_seqs = n_seqs();
        s.seq_block_start = seq_block_start_.data();
        s.blocks = blocks_.data();
        s.logits_tokens = logits_tokens_.data();
        s.n_logits = n_logits();
        return s;
    }

  private:
    void add_blocks(const kv::seq_blocks &kv) {
        blocks_.insert(blocks_.end(), kv.table.begin(), kv.table.end());
        seq_block_start_.push_back(static_cast<int32_t>(blocks_.size()));
    }

    std::vector<int32_t> tokens_, positions_, token_seq_, logits_tokens_, seq_block_start_;
    std::vector<kv::block_ref> blocks_;
};

} // namespace strata::engine
