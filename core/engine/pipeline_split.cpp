#include "engine/pipeline_split.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <numeric>

namespace strata::engine {

namespace {

// Contiguous ranges of `cost` in exactly n parts, none above `most`, each closed as late as it may be while leaving
// a layer for every later part; empty when they do not fit.
std::vector<layer_range> pack(const std::vector<uint64_t> &cost, int32_t n, uint64_t most) {
    const auto n_layer = static_cast<int32_t>(cost.size());
    std::vector<layer_range> out;
    int32_t first = 0;
    uint64_t load = 0;
    for (int32_t l = 0; l < n_layer; ++l) {
        if (cost[static_cast<size_t>(l)] > most) return {};
        const int32_t parts_left = n - static_cast<int32_t>(out.size()); // this one included
        const bool must_close = n_layer - l < parts_left;                 // layer l must start a later part
        if (l > first && (load + cost[static_cast<size_t>(l)] > most || must_close)) {
            out.push_back({first, l});
            first = l;
            load = 0;
        }
        load += cost[static_cast<size_t>(l)];
    }
    out.push_back({first, n_layer});
    if (static_cast<int32_t>(out.size()) != n) return {};
    return out;
}

} // namespace

std::vector<layer_range> split_layers(const std::vector<uint64_t> &slot_bytes, int32_t n_ranks,
                                      const std::vector<int32_t> &layers_per_rank) {
    const auto n_layer = static_cast<int32_t>(slot_bytes.size()) - 2;
    if (n_layer < 1) fail("internal: split_layers needs the bytes of at least one layer");
    if (n_ranks < 1 || n_ranks > n_layer)
        fail("pipeline_parallel_size {} must be between 1 and the model's {} layers: every rank needs at least one",
             n_ranks, n_layer);
    std::vector<layer_range> out;
    if (!layers_per_rank.empty()) {
        const int64_t sum = std::accumulate(layers_per_rank.begin(), layers_per_rank.end(), int64_t{0});
        const bool positive = std::all_of(layers_per_rank.begin(), layers_per_rank.end(), [](int32_t n) { return n > 0; });
        if (static_cast<int32_t>(layers_per_rank.size()) != n_ranks || !positive || sum != n_layer)
            fail("pipeline layer partition of {} numbers summing to {}: it must give each of the {} ranks at least one "
                 "layer, {} layers in all",
                 layers_per_rank.size(), sum, n_ranks, n_layer);
        int32_t first = 0;
        for (int32_t n : layers_per_rank) {
            out.push_back({first, first + n});
            first += n;
        }
        return out;
    }
    // Each layer's bytes, the embedding's added to the first and the classifier's to the last; then the smallest
    // largest part that still packs into n_ranks parts (binary search: packing is monotone in the bound).
    std::vector<uint64_t> cost(slot_bytes.begin() + 1, slot_bytes.end() - 1);
    cost.front() += slot_bytes.front();
    cost.back() += slot_bytes.back();
    uint64_t lo = *std::max_element(cost.begin(), cost.end());
    uint64_t hi = std::accumulate(cost.begin(), cost.end(), uint64_t{0});
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (pack(cost, n_ranks, mid).empty()) lo = mid + 1;
        else hi = mid;
    }
    return pack(cost, n_ranks, lo);
}

} // namespace strata::engine
