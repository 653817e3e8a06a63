// How pipeline ranks share the layers (core/engine/pipeline_split.cpp): balanced by bytes with the embedding on the
// first rank and the classifier on the last, or as given; bad partitions refused with what is wrong.
#include "engine/pipeline_split.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

using strata::engine::layer_range;
using strata::engine::split_layers;

namespace {

std::string ranges(const std::vector<layer_range> &r) {
    std::string s;
    for (const auto &x : r) s += "[" + std::to_string(x.first) + "," + std::to_string(x.end) + ")";
    return s;
}

std::string refusal(const std::vector<uint64_t> &bytes, int32_t n, const std::vector<int32_t> &given) {
    try {
        split_layers(bytes, n, given);
    } catch (const std::exception &e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(PipelineSplit, EqualLayersWithoutEmbeddingSplitEvenly) {
    const std::vector<uint64_t> b = {0, 10, 10, 10, 10, 0};
    EXPECT_EQ(ranges(split_layers(b, 1, {})), "[0,4)");
    EXPECT_EQ(ranges(split_layers(b, 2, {})), "[0,2)[2,4)");
    EXPECT_EQ(ranges(split_layers(b, 4, {})), "[0,1)[1,2)[2,3)[3,4)");
    // Three ranks over four equal layers: the largest rank holds two, whichever it is.
    const auto three = split_layers(b, 3, {});
    ASSERT_EQ(three.size(), 3u);
    EXPECT_EQ(three.front().first, 0);
    EXPECT_EQ(three.back().end, 4);
    for (const auto &r : three) EXPECT_GE(r.end - r.first, 1);
}

TEST(PipelineSplit, TheEmbeddingAndClassifierWeighOnTheFirstAndLastRanks) {
    // Eight layers of 10; an embedding of 30 on rank 0 and a classifier of 30 on the last: the end ranks take fewer
    // layers. No split has a largest rank under 50 (rank 0 holds 40 alone; [0,1) leaves 60 for two ranks with the
    // classifier's 40), and each range runs as long as that bound allows: 50, 50, 40.
    const std::vector<uint64_t> b = {30, 10, 10, 10, 10, 10, 10, 10, 10, 30};
    EXPECT_EQ(ranges(split_layers(b, 3, {})), "[0,2)[2,7)[7,8)");
    // Only the embedding: rank 0 takes fewer layers than rank 1.
    const std::vector<uint64_t> e = {40, 10, 10, 10, 10, 10, 10, 10, 10, 0};
    EXPECT_EQ(ranges(split_layers(e, 2, {})), "[0,2)[2,8)");
}

TEST(PipelineSplit, OneHeavyLayerStillLeavesEveryRankALayer) {
    const std::vector<uint64_t> b = {0, 1000, 1, 1, 1, 0};
    const auto r = split_layers(b, 4, {});
    EXPECT_EQ(ranges(r), "[0,1)[1,2)[2,3)[3,4)");
    EXPECT_EQ(ranges(split_layers(b, 2, {})), "[0,1)[1,4)");
}

TEST(PipelineSplit, AGivenPartitionIsUsedAsIsAndABadOneRefused) {
    const std::vector<uint64_t> b = {0, 10, 10, 10, 10, 10, 0};
    EXPECT_EQ(ranges(split_layers(b, 2, {1, 4})), "[0,1)[1,5)");
    EXPECT_EQ(ranges(split_layers(b, 3, {2, 2, 1})), "[0,2)[2,4)[4,5)");
    EXPECT_NE(refusal(b, 2, {2, 2}).find("pipeline layer partition of 2 numbers summing to 4: it must give each of "
                                         "the 2 ranks at least one layer, 5 layers in all"),
              std::string::npos)
        << refusal(b, 2, {2, 2});
    EXPECT_NE(refusal(b, 2, {5, 0}).find("at least one layer"), std::string::npos);
    EXPECT_NE(refusal(b, 3, {1, 4}).find("partition of 2 numbers"), std::string::npos);
    EXPECT_NE(refusal(b, 6, {}).find("pipeline_parallel_size 6 must be between 1 and the model's 5 layers"),
              std::string::npos)
        << refusal(b, 6, {});
    EXPECT_NE(refusal(b, 0, {}).find("pipeline_parallel_size 0"), std::string::npos);
}
