#include "common/error.hpp"
#include "config/units.hpp"

#include <gtest/gtest.h>

using namespace strata::config;

TEST(Units, ParsesBinaryDecimalAndPlainSizes) {
    EXPECT_EQ(parse_bytes("16GiB"), 16ULL << 30);
    EXPECT_EQ(parse_bytes("512MiB"), 512ULL << 20);
    EXPECT_EQ(parse_bytes("1.5GB"), 1'500'000'000ULL);
    EXPECT_EQ(parse_bytes("4096"), 4096ULL);
    EXPECT_EQ(parse_bytes("2 GiB"), 2ULL << 30);
    EXPECT_EQ(parse_bytes("1.5GiB"), 3ULL << 29);
    EXPECT_EQ(parse_bytes("64kib"), 64ULL << 10);
    EXPECT_EQ(parse_bytes("10B"), 10ULL);
    EXPECT_EQ(parse_bytes("  3 MB "), 3'000'000ULL);
    EXPECT_EQ(parse_bytes("2TiB"), 2ULL << 40);
}

TEST(Units, RejectsBadSizesWithAHint) {
    for (const char *bad : {"", "GiB", "-1GiB", "16 gigs", "1.2.3GB", "16G", "99999999999999999999", "20000000TiB"}) {
        try {
            parse_bytes(bad);
            ADD_FAILURE() << "accepted \"" << bad << "\"";
        } catch (const strata::error &e) {
            EXPECT_NE(std::string(e.what()).find("e.g. 4096, 512MiB, 16GiB"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(parse_bytes("16G"), strata::error);
}

TEST(Units, FormatsBinarySizes) {
    EXPECT_EQ(format_bytes(512), "512 B");
    EXPECT_EQ(format_bytes(3ULL << 29), "1.50 GiB");
    EXPECT_EQ(format_bytes(1ULL << 20), "1.00 MiB");
}

TEST(Units, EditDistanceCountsTranspositionsOnce) {
    EXPECT_EQ(edit_distance("model", "model"), 0U);
    EXPECT_EQ(edit_distance("modle", "model"), 1U);
    EXPECT_EQ(edit_distance("temprature", "temperature"), 1U);
    EXPECT_EQ(edit_distance("", "abc"), 3U);
    EXPECT_EQ(edit_distance("kitten", "sitting"), 3U);
    EXPECT_EQ(edit_distance("kitten", "sitting", 3), 3U); // within the cap: exact
    EXPECT_EQ(edit_distance("kitten", "sitting", 1), 2U); // beyond it: cap + 1
    EXPECT_EQ(edit_distance(std::string(4096, 'x'), "model", 3), 4U);
}

TEST(Units, ClosestSuggestsOnlyPlausibleTypos) {
    const std::vector<std::string> keys{"temperature", "top_p", "top_k", "seed"};
    EXPECT_EQ(closest("temprature", keys), "temperature");
    EXPECT_EQ(closest("top-k", keys), "top_k");
    EXPECT_EQ(closest("Seed", keys), "seed");
    EXPECT_EQ(closest("banana", keys), "");
    EXPECT_EQ(closest("x", keys), "");
    EXPECT_EQ(closest("anything", {}), "");
}
