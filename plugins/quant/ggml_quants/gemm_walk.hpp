// The walk the integer GEMM tile kernels share (gemm_act_tile.hpp's 8-row AVX2/AVX-VNNI tile, gemm_act_q4_k_tile.hpp's,
// gemm_act_avx512.cpp's 16-row one): the rows in whole tiles of `Rows`, each tile told where the next starts (for its prefetches, never
// read past n_rows); the activation vectors in in_passes of `Vectors`; the rows past the last whole tile handed to
// `rest(first_row)`. `tile(p, next, x_first, out_first, seq)` computes rows p[0..Rows) for the sizeof...(T) vectors
// of an std::index_sequence<T...> `seq`. Each kernel file instantiates it with lambdas of its own under its own
// target flags, so instantiations never mix across files.
#pragma once

#include "avx2_block_helpers.hpp"

#include <cstdint>
#include <utility>

namespace strata::quants {

template <int Rows, int Vectors, class Tile, class Rest>
STRATA_KERNEL_INLINE void gemm_walk(const unsigned char *rows, int64_t row_bytes, int64_t n_rows, const unsigned char *x,
                      int64_t xq_stride, int32_t n_x, float *out, int64_t out_stride, Tile &&tile, Rest &&rest) {
    int64_t r = 0;
    for (; r + Rows <= n_rows; r += Rows) {
        const unsigned char *p[Rows];
        for (int i = 0; i < Rows; ++i) p[i] = rows + (r + i) * row_bytes;
        const unsigned char *next = rows + (r + Rows) * row_bytes;
        in_passes<Vectors>(n_x, [&](int32_t t, auto seq) {
            tile(p, next, x + t * xq_stride, out + t * out_stride + r, seq);
        });
    }
    if (r < n_rows) rest(r);
}

} // namespace strata::quants
