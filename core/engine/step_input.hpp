// One step as the scheduler decided it, in the terms a worker runs it (vLLM v1's scheduler output): the tokens of
// every scheduled sequence, their positions, which sequence each belongs to, each sequence's KV blocks (as block
// references: a worker finds their addresses in its own KV memory) and which tokens need logits. Arrays are borrowed
// for the call; nothing here is allocated per step.
#pragma once

#include "kv/kv_cache.hpp"

#include <cstdint>

namespace strata::engine {

struct step_input {
    const int32_t *tokens = nullptr;        // n_tokens token ids, sequence after sequence
    const int32_t *positions = nullptr;     // their positions in their sequences
    const int32_t *token_seq = nullptr;     // the sequence (0..n_seqs) of each token
    int32_t n_tokens = 0;
    int32_t n_seqs = 0;
    const int32_t *seq_block_start = nullptr; // n_seqs + 1 offsets into blocks: sequence k's are [start[k], start[k+1])
    const kv::block_ref *blocks = nullptr;    // every sequence's block table, in order
    const int32_t *logits_tokens = nullptr;   // the tokens (indices into tokens) whose logits the step returns
    int32_t n_logits = 0;
};

// What a step gives back: one row of n_vocab logits per logits token, in host memory, valid until the next step (the
// sampler penalises a row in place).
struct step_output {
    float *logits = nullptr;
    int32_t n_rows = 0;
    int32_t n_vocab = 0;
    float *row(int32_t i) const { return logits + static_cast<int64_t>(i) * n_vocab; }
};

} // namespace strata::engine
