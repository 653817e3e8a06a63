// What pipeline ranks that are processes say to each other (#16; the transport is distributed/transport.hpp). Rank 0
// (the engine: scheduler, KV cache, the first stage) sends commands to each rank; a step goes to every rank, the
// residual stream from rank to rank and the logits from the last rank back to rank 0; KV blocks move between rank 0's
// KV cache and each rank's part of them (layer_striped_storage) when the cache swaps, spills or persists a block.
//
//   start      rank 0 -> r: command{start, stage, n_ctx, fingerprint} + text(rank 0's device name) + shared_options
//              r -> 0: reply{ok, kv_block_bytes, device_kv} or reply{!ok} + text(the error)
//   alloc_kv   rank 0 -> r: command{alloc_kv, tier, n_blocks, align} + text(tier name); r -> 0: reply (+ text)
//   bind       rank 0 -> r: command{bind, max_step_blocks}
//   step       rank 0 -> r: command{step} + the packed step; r-1 -> r: hidden; last -> 0: logits (or, from the
//              rank whose layers failed on, failed_step_bytes in their place, then its reason r -> 0: text)
//              (tensor-parallel ranks: every rank runs the step at once, all-gathering its partial sums with every
//              other after each row-parallel matmul (tag_partial); each sends rank 0 its piece of the logits)
//   kv_load    rank 0 -> r: command{kv_load, tier, index}; r -> 0: reply, then block bytes (or text)
//   kv_store   rank 0 -> r: command{kv_store, tier, index} + block bytes; r -> 0: reply (+ text)
//   stop       rank 0 -> r: command{stop}; r -> 0: reply once it released everything; it exits (0, or 2 after a
//              failed start)
#pragma once

#include "engine/step_input.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace strata::engine::pipeline_protocol {

enum tag : int {
    tag_command = 1,
    tag_reply = 2,
    tag_text = 3,
    tag_step = 4,
    tag_hidden = 5,
    tag_logits = 6,
    tag_block = 7,
    tag_options = 8,
    tag_partial = 9 // tensor-parallel ranks' partial sums (process_all_reduce)
};

// A pipeline rank whose layers failed a step sends, in place of the residual stream (and the last rank in place of
// the logits), this many bytes: the failing rank's number (int32) and two zero bytes — no residual stream or logits
// message has a length that is not a multiple of 4. It then sends rank 0 its reason (tag_text, at most
// max_reason_bytes), and the step fails alone.
constexpr size_t failed_step_bytes = 6;
constexpr size_t max_reason_bytes = 4000;

enum class op : int32_t { start = 1, alloc_kv = 2, bind = 3, step = 4, kv_load = 5, kv_store = 6, stop = 7 };

struct command {
    op what = op::stop;
    int32_t tier = 0;      // alloc_kv, kv_load, kv_store: kv::tier
    int32_t x = 0, y = 0;  // start: layer_first, layer_end; bind: max_tokens, max_seqs
    uint64_t a = 0, b = 0, c = 0; // start: n_ctx, fingerprint; alloc_kv: n_blocks, align, block bytes;
                                  // bind: max_step_blocks; kv_load, kv_store: the block's index
};

// What every rank must read as rank 0 does (each reads its own command line and config file): sent with start, and
// a rank whose own differ refuses to start, naming them. They lay out its KV blocks and size its step buffers.
struct shared_options {
    int32_t block_size = 0;
    uint32_t kv_type = 0;
    int32_t max_num_batched_tokens = 0;
    int32_t max_num_seqs = 0;
    int32_t tensor_parallel_size = 1; // each rank holds its share of every layer's heads (the KV layout's too)
    int32_t max_model_len = 0; // the model may read it (Phi-3's LongRoPE picks its factors by it): every rank alike
};

struct reply {
    int32_t ok = 1;
    int32_t reserved = 0;
    uint64_t a = 0, b = 0; // start: kv_block_bytes, device_kv
};

// A step in one message of int32 words: n_tokens, n_seqs, n_blocks, n_logits, then tokens, positions, token_seq,
// seq_block_start (n_seqs + 1), the blocks as (tier, index) pairs and logits_tokens.
inline size_t packed_step_words(size_t max_tokens, size_t max_seqs, size_t max_blocks) {
    return 4 + 3 * max_tokens + max_seqs + 1 + 2 * max_blocks + max_seqs;
}

// Packs `s` into `out` (reserved for the largest step: nothing is allocated per step); returns the words used.
inline size_t pack_step(const step_input &s, std::vector<int32_t> &out) {
    const int32_t n_blocks = s.seq_block_start[s.n_seqs];
    const size_t words = 4 + 3 * static_cast<size_t>(s.n_tokens) + static_cast<size_t>(s.n_seqs) + 1 +
                         2 * static_cast<size_t>(n_blocks) + static_cast<size_t>(s.n_logits);
    out.resize(words);
    int32_t *w = out.data();
    *w++ = s.n_tokens, *w++ = s.n_seqs, *w++ = n_blocks, *w++ = s.n_logits;
    auto put = [&w](const int32_t *src, int32_t n) {
        if (n > 0) std::memcpy(w, src, sizeof(int32_t) * static_cast<size_t>(n));
        w += n;
    };
    put(s.tokens, s.n_tokens);
    put(s.positions, s.n_tokens);
    put(s.token_seq, s.n_tokens);
    put(s.seq_block_start, s.n_seqs + 1);
    for (int32_t i = 0; i < n_blocks; ++i) {
        *w++ = static_cast<int32_t>(s.blocks[i].where);
        *w++ = static_cast<int32_t>(s.blocks[i].index);
    }
    put(s.logits_tokens, s.n_logits);
    return words;
}

// The step packed in `words` (n of them), its arrays pointing into `words` and `blocks` (reserved for the largest
// step); false when the message is not a whole step.
inline bool unpack_step(const int32_t *words, size_t n, std::vector<kv::block_ref> &blocks, step_input &s) {
    if (n < 4) return false;
    const int32_t n_tokens = words[0], n_seqs = words[1], n_blocks = words[2], n_logits = words[3];
    if (n_tokens < 0 || n_seqs < 0 || n_blocks < 0 || n_logits < 0) return false;
    const size_t need = 4 + 3 * static_cast<size_t>(n_tokens) + static_cast<size_t>(n_seqs) + 1 +
                        2 * static_cast<size_t>(n_blocks) + static_cast<size_t>(n_logits);
    if (need != n) return false;
    const int32_t *w = words + 4;
    s.n_tokens = n_tokens, s.n_seqs = n_seqs, s.n_logits = n_logits;
    s.tokens = w, w += n_tokens;
    s.positions = w, w += n_tokens;
    s.token_seq = w, w += n_tokens;
    s.seq_block_start = w, w += n_seqs + 1;
    blocks.resize(static_cast<size_t>(n_blocks));
    for (int32_t i = 0; i < n_blocks; ++i, w += 2) {
        if (w[0] < 0 || w[0] >= kv::n_tiers) return false;
        blocks[static_cast<size_t>(i)] = kv::block_ref{static_cast<kv::tier>(w[0]), static_cast<uint32_t>(w[1])};
    }
    s.blocks = blocks.data();
    s.logits_tokens = w;
    if (s.seq_block_start[0] != 0 || s.seq_block_start[n_seqs] != n_blocks) return false;
    for (int32_t k = 0; k < n_seqs; ++k)
        if (s.seq_block_start[k + 1] < s.seq_block_start[k]) return false;
    for (int32_t i = 0; i < n_tokens; ++i)
        if (s.token_seq[i] < 0 || s.token_seq[i] >= n_seqs || s.positions[i] < 0) return false;
    for (int32_t i = 0; i < n_logits; ++i)
        if (s.logits_tokens[i] < 0 || s.logits_tokens[i] >= n_tokens) return false;
    return true;
}

} // namespace strata::engine::pipeline_protocol
