// How pipeline ranks share a model's layers (#16 item 2): a contiguous range each, either given as layers per rank
// (vLLM's VLLM_PP_LAYER_PARTITION) or balanced by bytes, the embedding counting toward the first rank and the final
// norm and classifier toward the last (each rank holds the weights of its range only).
#pragma once

#include <cstdint>
#include <vector>

namespace strata::engine {

struct layer_range {
    int32_t first = 0, end = 0; // layers [first, end)
};

// slot_bytes has n_layer + 2 entries: [0] the embedding, [1 + l] layer l, [n_layer + 1] the final norm and the
// classifier. With layers_per_rank empty, the ranges minimise the largest rank's bytes (every rank at least one
// layer); otherwise they are those counts in order, which must be n_ranks positive numbers summing to n_layer.
std::vector<layer_range> split_layers(const std::vector<uint64_t> &slot_bytes, int32_t n_ranks,
                                      const std::vector<int32_t> &layers_per_rank);

} // namespace strata::engine
