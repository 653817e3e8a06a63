// The tier conformance suite: every tier plugin (and each nvme I/O configuration) must pass every case here.
// Per-tier behaviour (memlock limits, NUMA nodes, nvme files) is in test_tier_specific.cpp.
#include "tier_harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <unistd.h>

namespace {

using namespace strata::tier_test;
namespace fs = std::filesystem;

constexpr uint64_t capacity = 4ull << 20;
constexpr uint64_t chunk = 64 * 1024; // nvme block_size in these tests: several chunks fit in small regions

struct tier_case {
    const char *label;
    const char *plugin;
    config_table extra; // merged over the defaults for the plugin
};

// Names the case in gtest's messages instead of dumping its bytes.
void PrintTo(const tier_case &c, std::ostream *os) { *os << c.label; }

std::vector<tier_case> all_cases() {
    return {
        {"pinned_ram", "pinned_ram", {}},
        {"numa_ram", "numa_ram", {{"nodes", std::string("auto")}}},
        {"nvme", "nvme", {}},
        {"nvme_psync_buffered", "nvme", {{"io_engine", std::string("psync")}, {"direct_io", false}}},
        {"nvme_queue_depth_1", "nvme", {{"queue_depth", int64_t{1}}}},
        {"nvme_queue_depth_64", "nvme", {{"queue_depth", int64_t{64}}, {"concurrent_calls", int64_t{2}}}},
    };
}

std::string test_dir() { return std::string(STRATA_BINARY_DIR) + "/tier_test_files"; }

class TierConformance : public ::testing::TestWithParam<tier_case> {
  protected:
    void SetUp() override {
        const tier_case &c = GetParam();
        cfg_ = c.extra;
        if (std::string(c.plugin) == "nvme") {
            fs::create_directories(test_dir());
            const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
            std::string name = std::string(info->name());
            std::replace(name.begin(), name.end(), '/', '_');
            path_ = test_dir() + "/" + name + "_" + std::to_string(getpid()) + ".tier";
            fs::remove(path_);
            cfg_.set("path", path_);
            cfg_.set("block_size", int64_t{chunk});
        }
        strata_status st{};
        tier_ = create_tier(c.plugin, cfg_, capacity, &st);
        ASSERT_TRUE(tier_) << st.message;
        desc_ = &tier_plugin(c.plugin);
    }
    void TearDown() override {
        tier_.reset();
        if (!path_.empty()) fs::remove(path_);
    }

    uint64_t alloc(uint64_t bytes) {
        uint64_t id = 0;
        strata_status st{};
        EXPECT_EQ(desc_->region_alloc(tier_.get(), bytes, &id, &st), STRATA_OK) << st.message;
        return id;
    }
    int32_t write(uint64_t region, uint64_t offset, const void *src, uint64_t bytes, strata_status *st) {
        return desc_->write(tier_.get(), region, offset, src, bytes, st);
    }
    int32_t read(uint64_t region, uint64_t offset, void *dst, uint64_t bytes, strata_status *st) {
        return desc_->read(tier_.get(), region, offset, dst, bytes, st);
    }
    // Reads [offset, offset + n) into a buffer at `misalign` bytes past a 4096 boundary and compares with expect.
    ::testing::AssertionResult reads_back(uint64_t region, uint64_t offset, const unsigned char *expect, uint64_t n,
                                          size_t misalign) {
        aligned_buffer buf(static_cast<size_t>(n));
        unsigned char *dst = buf.data + misalign;
        strata_status st{};
        if (read(region, offset, dst, n, &st) != STRATA_OK)
            return ::testing::AssertionFailure() << "read of " << n << " bytes at " << offset << ": " << st.message;
        if (n > 0 && std::memcmp(dst, expect, static_cast<size_t>(n)) != 0) {
            uint64_t i = 0;
            while (dst[i] == expect[i]) ++i;
            return ::testing::AssertionFailure() << "read of " << n << " bytes at " << offset << " (dst misaligned by "
                                                 << misalign << ") differs first at byte " << i;
        }
        return ::testing::AssertionSuccess();
    }

    config_table cfg_;
    std::string path_;
    tier_ptr tier_;
    const strata_tier_desc *desc_ = nullptr;
};

TEST_P(TierConformance, CapacityIsTheBudget) {
    EXPECT_GE(desc_->capacity(tier_.get()), capacity);
    EXPECT_LT(desc_->capacity(tier_.get()), capacity + 4096 * 2);
}

TEST_P(TierConformance, BitExactRoundTripsAtRandomOffsetsAndSizes) {
    const uint64_t size = 3 * chunk + 5 * 4096 + 1234; // several chunks plus an unaligned tail
    const uint64_t r = alloc(size);
    std::vector<unsigned char> shadow = random_bytes(1, static_cast<size_t>(size));
    strata_status st{};
    ASSERT_EQ(write(r, 0, shadow.data(), size, &st), STRATA_OK) << st.message;
    ASSERT_TRUE(reads_back(r, 0, shadow.data(), size, 0));

    // Fixed shapes first (offset, bytes), then random ones: 1 byte, one exact chunk, a chunk straddling two,
    // several chunks plus a tail, page-aligned spans that cover chunks only partly, the last byte.
    std::vector<std::pair<uint64_t, uint64_t>> spans = {
        {0, 1}, {chunk, chunk}, {chunk / 2 + 3, chunk}, {7, 3 * chunk + 777}, {4096, 2 * chunk},
        {8192, 16384}, {size - 1, 1}, {size - 4096 - 1234, 4096 + 1234}, {0, size}};
    std::mt19937_64 rng(42);
    for (int i = 0; i < 150; ++i) {
        const uint64_t off = rng() % size;
        const uint64_t max_len = std::min<uint64_t>(size - off, 2 * chunk + 5000);
        spans.emplace_back(off, 1 + rng() % max_len);
    }
    uint64_t seed = 100;
    for (const auto &[off, n] : spans) {
        const std::vector<unsigned char> data = random_bytes(seed++, static_cast<size_t>(n));
        // Alternate page-aligned and misaligned source buffers so both nvme write paths run.
        aligned_buffer src(static_cast<size_t>(n));
        const size_t misalign = seed % 3 == 0 ? 0 : static_cast<size_t>(seed % 4096);
        std::memcpy(src.data + misalign, data.data(), data.size());
        ASSERT_EQ(write(r, off, src.data + misalign, n, &st), STRATA_OK) << st.message;
        std::memcpy(shadow.data() + off, data.data(), data.size());
        ASSERT_TRUE(reads_back(r, off, data.data(), n, 0)) << "span " << off << "+" << n;
        ASSERT_TRUE(reads_back(r, off, data.data(), n, 1 + static_cast<size_t>(n % 4000)));
    }
    // Random reads of the whole history, aligned and not.
    for (int i = 0; i < 100; ++i) {
        const uint64_t off = i % 4 == 0 ? (rng() % (size / 4096)) * 4096 : rng() % size;
        const uint64_t n = 1 + rng() % (size - off);
        ASSERT_TRUE(reads_back(r, off, shadow.data() + off, n, i % 2 == 0 ? 0 : static_cast<size_t>(i)));
    }
    ASSERT_TRUE(reads_back(r, 0, shadow.data(), size, 0));
}

TEST_P(TierConformance, ManyRegionsAllocatedAndFreedInRandomOrderKeepTheirData) {
    struct live {
        uint64_t id;
        std::vector<unsigned char> data;
    };
    std::mt19937_64 rng(7);
    std::vector<live> regions;
    uint64_t seed = 1000;
    auto add = [&](size_t count) {
        for (size_t i = 0; i < count; ++i) {
            const uint64_t n = 1 + rng() % 60000;
            live l{alloc(n), random_bytes(seed++, static_cast<size_t>(n))};
            strata_status st{};
            ASSERT_EQ(write(l.id, 0, l.data.data(), n, &st), STRATA_OK) << st.message;
            regions.push_back(std::move(l));
        }
    };
    add(40);
    std::shuffle(regions.begin(), regions.end(), rng);
    for (int i = 0; i < 20; ++i) {
        desc_->region_free(tier_.get(), regions.back().id);
        regions.pop_back();
    }
    add(15);
    std::shuffle(regions.begin(), regions.end(), rng);
    for (int i = 0; i < 10; ++i) {
        desc_->region_free(tier_.get(), regions.back().id);
        regions.pop_back();
    }
    add(10);
    for (const live &l : regions) ASSERT_TRUE(reads_back(l.id, 0, l.data.data(), l.data.size(), 0)) << "region " << l.id;

    // Where the tier is addressable, regions must not overlap in memory either.
    if (STRATA_HAS_SLOT(desc_, map)) {
        std::vector<std::pair<uintptr_t, uintptr_t>> spans;
        for (const live &l : regions) {
            const auto p = reinterpret_cast<uintptr_t>(desc_->map(tier_.get(), l.id));
            ASSERT_NE(p, 0u);
            spans.emplace_back(p, p + l.data.size());
        }
        std::sort(spans.begin(), spans.end());
        for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
    }
}

TEST_P(TierConformance, ConcurrentWritesAndReadsFromFourThreads) {
    const uint64_t shared_size = 3 * chunk + 999;
    const uint64_t shared = alloc(shared_size);
    const std::vector<unsigned char> shared_data = random_bytes(5, static_cast<size_t>(shared_size));
    strata_status st{};
    ASSERT_EQ(write(shared, 0, shared_data.data(), shared_size, &st), STRATA_OK) << st.message;

    constexpr int threads = 4;
    const uint64_t own_size = 2 * chunk + 4321;
    std::vector<uint64_t> own(threads);
    for (auto &id : own) id = alloc(own_size);
    std::atomic<int> failures{0};
    std::mutex first_mutex;
    std::string first;
    auto report = [&](const std::string &what) {
        if (failures.fetch_add(1) == 0) {
            std::lock_guard lock(first_mutex);
            first = what;
        }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<uint64_t>(t) + 77);
            std::vector<unsigned char> mine = random_bytes(static_cast<uint64_t>(t) + 500, static_cast<size_t>(own_size));
            strata_status s{};
            if (write(own[static_cast<size_t>(t)], 0, mine.data(), own_size, &s) != STRATA_OK) report(s.message);
            std::vector<unsigned char> buf(static_cast<size_t>(own_size));
            for (int i = 0; i < 40 && failures.load() == 0; ++i) {
                const uint64_t off = rng() % own_size;
                const uint64_t n = 1 + rng() % (own_size - off);
                const std::vector<unsigned char> data = random_bytes(rng(), static_cast<size_t>(n));
                if (write(own[static_cast<size_t>(t)], off, data.data(), n, &s) != STRATA_OK) report(s.message);
                std::memcpy(mine.data() + off, data.data(), data.size());
                if (read(own[static_cast<size_t>(t)], 0, buf.data(), own_size, &s) != STRATA_OK) report(s.message);
                if (buf != mine) report("thread " + std::to_string(t) + ": own region differs after write " + std::to_string(i));
                const uint64_t soff = rng() % shared_size;
                const uint64_t sn = 1 + rng() % (shared_size - soff);
                if (read(shared, soff, buf.data(), std::min(sn, own_size), &s) != STRATA_OK) report(s.message);
                if (std::memcmp(buf.data(), shared_data.data() + soff, static_cast<size_t>(std::min(sn, own_size))) != 0)
                    report("thread " + std::to_string(t) + ": shared region read differs");
            }
        });
    }
    for (auto &th : pool) th.join();
    EXPECT_EQ(failures.load(), 0) << first;
}

TEST_P(TierConformance, ExhaustionIsOutOfMemoryAndTheTierKeepsWorking) {
    const uint64_t cap = desc_->capacity(tier_.get());
    uint64_t id = 12345;
    strata_status st{};
    EXPECT_EQ(desc_->region_alloc(tier_.get(), cap + 1, &id, &st), STRATA_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(st.code, STRATA_ERR_OUT_OF_MEMORY);
    EXPECT_GT(std::strlen(st.message), 10u) << "exhaustion needs a message";
    EXPECT_EQ(id, 12345u) << "outputs stay untouched on error";
    EXPECT_EQ(desc_->region_alloc(tier_.get(), UINT64_MAX, &id, &st), STRATA_ERR_OUT_OF_MEMORY) << st.message;

    const uint64_t half = alloc(cap / 2);
    st = {};
    EXPECT_EQ(desc_->region_alloc(tier_.get(), cap / 2 + 4096, &id, &st), STRATA_ERR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(st.message).find("free"), std::string::npos) << st.message;

    // Still working: the rest fits, data round-trips, and after freeing everything the whole budget is one block.
    const uint64_t rest = alloc(cap / 2);
    const std::vector<unsigned char> data = random_bytes(9, 100000);
    ASSERT_EQ(write(rest, 1000, data.data(), data.size(), &st), STRATA_OK) << st.message;
    EXPECT_TRUE(reads_back(rest, 1000, data.data(), data.size(), 3));
    desc_->region_free(tier_.get(), half);
    desc_->region_free(tier_.get(), rest);
    const uint64_t all = alloc(cap);
    ASSERT_EQ(write(all, cap - data.size(), data.data(), data.size(), &st), STRATA_OK) << st.message;
    EXPECT_TRUE(reads_back(all, cap - data.size(), data.data(), data.size(), 0));
}

TEST_P(TierConformance, DestroyWithLiveRegionsFreesEverything) {
    for (int i = 0; i < 5; ++i) {
        const uint64_t r = alloc(100000 + static_cast<uint64_t>(i));
        const std::vector<unsigned char> data = random_bytes(static_cast<uint64_t>(i), 100000);
        strata_status st{};
        ASSERT_EQ(write(r, 0, data.data(), data.size(), &st), STRATA_OK) << st.message;
    }
    tier_.reset(); // destroy with five live regions (leaks show under ASan/valgrind runs of this test)
    if (!path_.empty()) {
        EXPECT_FALSE(fs::exists(path_)) << "the nvme file outlives the tier without keep_file";
    }
    // The budget is usable again by a new tier.
    strata_status st{};
    tier_ = create_tier(GetParam().plugin, cfg_, capacity, &st);
    ASSERT_TRUE(tier_) << st.message;
    EXPECT_NE(alloc(capacity), 0u);
}

TEST_P(TierConformance, OutOfRangeAccessIsInvalidArgumentNotACrash) {
    const uint64_t size = chunk + 100;
    const uint64_t r = alloc(size);
    std::vector<unsigned char> buf(static_cast<size_t>(size) + 8192, 0xab);
    strata_status st{};
    EXPECT_EQ(write(r, 0, buf.data(), size + 1, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_GT(std::strlen(st.message), 0u);
    EXPECT_EQ(read(r, 0, buf.data(), size + 1, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(read(r, size, buf.data(), 1, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(read(r, size + 1, buf.data(), 0, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(write(r, 10, buf.data(), size - 9, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(read(r, 1, buf.data(), UINT64_MAX, &st), STRATA_ERR_INVALID_ARGUMENT) << "offset + bytes overflows";
    EXPECT_EQ(write(r, UINT64_MAX, buf.data(), 2, &st), STRATA_ERR_INVALID_ARGUMENT);
    // Unknown and freed regions.
    EXPECT_EQ(read(r + 1000, 0, buf.data(), 1, &st), STRATA_ERR_NOT_FOUND);
    const uint64_t gone = alloc(10);
    desc_->region_free(tier_.get(), gone);
    desc_->region_free(tier_.get(), gone); // a second free is a no-op
    EXPECT_EQ(write(gone, 0, buf.data(), 1, &st), STRATA_ERR_NOT_FOUND);
    // Edges that are valid: empty copies and the last byte.
    EXPECT_EQ(read(r, size, buf.data(), 0, &st), STRATA_OK) << st.message;
    EXPECT_EQ(write(r, size - 1, buf.data(), 1, &st), STRATA_OK) << st.message;
    // Zero-byte regions are refused with a message, not reserved.
    uint64_t id = 0;
    EXPECT_EQ(desc_->region_alloc(tier_.get(), 0, &id, &st), STRATA_ERR_INVALID_ARGUMENT);
}

TEST_P(TierConformance, MapGivesTheRegionsBytesOrIsAbsent) {
    const uint64_t r = alloc(10000);
    const std::vector<unsigned char> data = random_bytes(3, 10000);
    strata_status st{};
    ASSERT_EQ(write(r, 0, data.data(), data.size(), &st), STRATA_OK) << st.message;
    if (!STRATA_HAS_SLOT(desc_, map)) {
        EXPECT_EQ(std::string(GetParam().plugin), "nvme") << "RAM tiers must be addressable";
        return;
    }
    auto *p = static_cast<unsigned char *>(desc_->map(tier_.get(), r));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u) << "regions are page-aligned for O_DIRECT copies";
    EXPECT_EQ(std::memcmp(p, data.data(), data.size()), 0);
    p[5] = static_cast<unsigned char>(~data[5]); // compute in place, then read through the tier
    unsigned char b = 0;
    ASSERT_EQ(read(r, 5, &b, 1, &st), STRATA_OK);
    EXPECT_EQ(b, static_cast<unsigned char>(~data[5]));
    EXPECT_EQ(desc_->map(tier_.get(), r + 999), nullptr);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, TierConformance, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<tier_case> &i) { return std::string(i.param.label); });

} // namespace
