// The tier-bandwidth cache: round trips, tolerance of corrupt files, atomic saves, and the measurement helper.
#include "common/error.hpp"
#include "planner/bandwidth_cache.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <unistd.h>

using namespace strata::planner;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test, removed afterwards.
class BandwidthCache : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() / fmt::format("strata-bw-{}-{}", ::getpid(), info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    void write(const fs::path &file, const std::string &text) {
        std::ofstream out(file, std::ios::binary);
        out << text;
    }
    fs::path dir_;
};

} // namespace

TEST_F(BandwidthCache, MissingFileIsEmpty) {
    const bandwidth_cache cache(dir_ / "none" / "bandwidth.json");
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_FALSE(cache.get("nvme:/dev/nvme0n1").has_value());
}

TEST_F(BandwidthCache, RoundTrip) {
    const auto file = dir_ / "nested" / "strata" / "bandwidth.json"; // save creates the folders
    {
        bandwidth_cache cache(file);
        cache.put({"nvme:/dev/nvme0n1", 3.2e9, 1.5e9, "2024-05-01T12:00:00Z"});
        cache.put({"pinned_ram:node0", 2.5e10, 2.0e10, "2024-05-01T12:00:01Z"});
        cache.put({"nvme:/dev/nvme0n1", 3.3e9, 1.6e9, "2024-05-02T12:00:00Z"}); // replaces the first
        EXPECT_EQ(cache.size(), 2u);
        cache.save();
    }
    const bandwidth_cache loaded(file);
    EXPECT_EQ(loaded.size(), 2u);
    const auto nvme = loaded.get("nvme:/dev/nvme0n1");
    ASSERT_TRUE(nvme.has_value());
    EXPECT_EQ(nvme->key, "nvme:/dev/nvme0n1");
    EXPECT_DOUBLE_EQ(nvme->read_bps, 3.3e9);
    EXPECT_DOUBLE_EQ(nvme->write_bps, 1.6e9);
    EXPECT_EQ(nvme->measured_at, "2024-05-02T12:00:00Z");
    const auto ram = loaded.get("pinned_ram:node0");
    ASSERT_TRUE(ram.has_value());
    EXPECT_DOUBLE_EQ(ram->read_bps, 2.5e10);
    // The temporary file was renamed over, not left behind.
    size_t files = 0;
    for (const auto &e : fs::directory_iterator(file.parent_path())) {
        (void)e;
        ++files;
    }
    EXPECT_EQ(files, 1u);
}

TEST_F(BandwidthCache, CorruptFileIsIgnoredAndOverwritten) {
    const auto file = dir_ / "bandwidth.json";
    for (const std::string text : {"{not json", "", "[1,2,3]", "{\"version\": 1, \"entries\": 5}",
                                   "{\"version\": 99, \"entries\": {}}", "\xff\xfe garbage"}) {
        write(file, text);
        std::unique_ptr<bandwidth_cache> cache;
        EXPECT_NO_THROW(cache = std::make_unique<bandwidth_cache>(file)) << text;
        ASSERT_TRUE(cache);
        EXPECT_EQ(cache->size(), 0u) << text;
        cache->put({"nvme", 1e9, 1e9, ""});
        EXPECT_NO_THROW(cache->save());
        EXPECT_TRUE(bandwidth_cache(file).get("nvme").has_value()) << text;
    }
}

TEST_F(BandwidthCache, MalformedEntriesAreSkippedOthersKept) {
    const auto file = dir_ / "bandwidth.json";
    write(file, R"({"version": 1, "entries": {
        "good": {"read_bps": 1e9, "write_bps": 5e8, "measured_at": "2024-01-01T00:00:00Z"},
        "negative": {"read_bps": -1, "write_bps": 5e8},
        "text": {"read_bps": "fast", "write_bps": 5e8},
        "missing": {"read_bps": 1e9},
        "scalar": 7}})");
    const bandwidth_cache cache(file);
    EXPECT_EQ(cache.size(), 1u);
    ASSERT_TRUE(cache.get("good").has_value());
    EXPECT_DOUBLE_EQ(cache.get("good")->write_bps, 5e8);
    EXPECT_FALSE(cache.get("negative").has_value());
}

TEST_F(BandwidthCache, SaveIntoUnwritablePlaceThrows) {
    const auto blocker = dir_ / "file";
    write(blocker, "x");
    const bandwidth_cache cache(blocker / "bandwidth.json"); // a folder that cannot exist under a file
    EXPECT_THROW(cache.save(), strata::error);
}

TEST_F(BandwidthCache, DefaultPathFollowsXdg) {
    const char *old = std::getenv("XDG_CACHE_HOME");
    const std::string saved = old ? old : "";
    ::setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
    EXPECT_EQ(default_bandwidth_cache_path(), dir_ / "strata" / "bandwidth.json");
    ::setenv("XDG_CACHE_HOME", "relative/dir", 1); // XDG: relative values are ignored
    EXPECT_NE(default_bandwidth_cache_path().string().find(".cache/strata/bandwidth.json"), std::string::npos);
    if (old)
        ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else
        ::unsetenv("XDG_CACHE_HOME");
}

TEST(UtcTimestamp, IsIso8601) {
    const auto t = utc_timestamp();
    ASSERT_EQ(t.size(), 20u) << t;
    EXPECT_EQ(t[4], '-');
    EXPECT_EQ(t[10], 'T');
    EXPECT_EQ(t.back(), 'Z');
}

TEST(Measure, ReadsEverythingThreeTimesInChunks) {
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    std::vector<char> source(10000, 1), sink(4096);
    const double bps = measure(
        [&](uint64_t offset, uint64_t bytes) {
            calls.emplace_back(offset, bytes);
            std::copy_n(source.data() + offset, bytes, sink.data());
        },
        source.size(), 4096);
    ASSERT_EQ(calls.size(), 9u); // 3 passes x (4096 + 4096 + 1808)
    for (int pass = 0; pass < 3; ++pass) {
        EXPECT_EQ(calls[pass * 3 + 0], std::make_pair(uint64_t{0}, uint64_t{4096}));
        EXPECT_EQ(calls[pass * 3 + 1], std::make_pair(uint64_t{4096}, uint64_t{4096}));
        EXPECT_EQ(calls[pass * 3 + 2], std::make_pair(uint64_t{8192}, uint64_t{1808}));
    }
    EXPECT_TRUE(std::isfinite(bps));
    EXPECT_GT(bps, 0.0);
}

TEST(Measure, RejectsZeroAndPropagatesReadErrors) {
    EXPECT_THROW(measure([](uint64_t, uint64_t) {}, 0), strata::error);
    EXPECT_THROW(measure([](uint64_t, uint64_t) {}, 100, 0), strata::error);
    EXPECT_THROW(measure([](uint64_t, uint64_t) { throw std::runtime_error("EIO"); }, 100), std::runtime_error);
}
