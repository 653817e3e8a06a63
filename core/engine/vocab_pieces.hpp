// Tensor-parallel ranks each compute their piece of the vocabulary's logits (ABI 1.29: rank r of T holds the rows
// strata_split_piece(n_vocab, r, T) of the classifier and writes n_rows rows of its piece, one after another); the
// host joins the pieces into whole rows. One place for the layout, whether the ranks are threads
// (tensor_parallel_group) or processes (executor).
#pragma once

#include "common/error.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <cstring>

namespace strata::engine {

// The floats rank `rank` of `n_ranks` writes for one logits row.
inline int64_t vocab_piece_width(int32_t n_vocab, int32_t rank, int32_t n_ranks) {
    int64_t first = 0, count = 0;
    strata_split_piece(n_vocab, rank, n_ranks, &first, &count);
    return count;
}

// Joins pieces[r] (n_rows rows of rank r's piece) for every rank into n_rows whole rows of n_vocab at `out`.
inline void join_vocab_pieces(const float *const *pieces, int32_t n_ranks, int32_t n_rows, int32_t n_vocab,
                              float *out) {
    for (int32_t r = 0; r < n_ranks; ++r) {
        int64_t first = 0, count = 0;
        strata_split_piece(n_vocab, r, n_ranks, &first, &count);
        if (n_rows > 0 && pieces[r] == nullptr) fail("internal: tensor-parallel rank {} returned no logits", r);
        for (int32_t i = 0; i < n_rows; ++i)
            std::memcpy(out + static_cast<size_t>(i) * static_cast<size_t>(n_vocab) + static_cast<size_t>(first),
                        pieces[r] + static_cast<size_t>(i) * static_cast<size_t>(count),
                        static_cast<size_t>(count) * sizeof(float));
    }
}

} // namespace strata::engine
