// The nvme tier under I/O faults: injected ones ([nvme] inject_faults, TEST ONLY: EIO, ENOSPC, a transfer that ends
// early) through both I/O engines, and a real one (the tier file truncated underneath the tier). Each failed call is a
// STRATA_ERR_IO whose message names the tier and the errno text; the next call works, and neither a failed read nor a
// failed write damages what the region held.
#include "tier_harness.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using namespace strata::tier_test;
namespace fs = std::filesystem;

constexpr int64_t chunk = 65536;

std::string fault_file_path(const std::string &name) {
    const std::string dir = std::string(STRATA_BINARY_DIR) + "/tier_test_files";
    fs::create_directories(dir);
    const std::string p = dir + "/fault_" + name + "_" + std::to_string(getpid()) + ".tier";
    fs::remove(p);
    return p;
}

bool has(const char *haystack, const std::string &needle) { return std::string(haystack).find(needle) != std::string::npos; }

// A tier of 1 MiB with 64 KiB chunks, one region of three chunks holding `data` (written before any rule counts a
// write: rules count from create, so the plans below let this first write through).
struct faulty_tier {
    config_table cfg;
    tier_ptr t;
    uint64_t region = 0;
    std::vector<unsigned char> data = random_bytes(7, 3 * chunk);
    const strata_tier_desc &d = tier_plugin("nvme");

    faulty_tier(const std::string &name, const std::string &engine, const std::string &faults)
        : cfg{{"path", fault_file_path(name + "_" + engine)},
              {"block_size", chunk},
              {"io_engine", engine},
              {"inject_faults", faults}} {
        strata_status st{};
        t = create_tier("nvme", cfg, 1 << 20, &st);
        EXPECT_TRUE(t) << st.message;
        if (!t) return;
        EXPECT_EQ(d.region_alloc(t.get(), data.size(), &region, &st), STRATA_OK) << st.message;
    }
    int32_t write(uint64_t offset, const unsigned char *src, uint64_t n, strata_status *st) {
        return d.write(t.get(), region, offset, src, n, st);
    }
    int32_t read(uint64_t offset, unsigned char *dst, uint64_t n, strata_status *st) {
        return d.read(t.get(), region, offset, dst, n, st);
    }
    // True when the whole region reads back as `data`.
    bool intact() {
        std::vector<unsigned char> back(data.size());
        strata_status st{};
        return read(0, back.data(), back.size(), &st) == STRATA_OK && back == data;
    }
};

class NvmeFaults : public ::testing::TestWithParam<std::string> {};

TEST_P(NvmeFaults, AnInjectedReadErrorFailsThatCallWithEioAndTheNextReadWorks) {
    // Three chunks written (three write requests), then: the second read request fails.
    faulty_tier f("read_eio", GetParam(), "read:eio:after=1");
    ASSERT_TRUE(f.t);
    strata_status st{};
    ASSERT_EQ(f.write(0, f.data.data(), f.data.size(), &st), STRATA_OK) << st.message;
    std::vector<unsigned char> back(f.data.size());
    ASSERT_EQ(f.read(0, back.data(), chunk, &st), STRATA_OK) << st.message; // request 1
    EXPECT_EQ(f.read(0, back.data(), back.size(), &st), STRATA_ERR_IO);       // requests 2..4: 2 fails
    EXPECT_TRUE(has(st.message, "nvme: reading")) << st.message;
    EXPECT_TRUE(has(st.message, "Input/output error")) << st.message;
    EXPECT_TRUE(test_host().logged("TEST ONLY: injected fault #1"));
    EXPECT_TRUE(f.intact()) << "one failed read leaves the tier working";
}

TEST_P(NvmeFaults, AnInjectedShortReadIsReportedAsAFileThatEndedEarly) {
    faulty_tier f("read_short", GetParam(), "read:short");
    ASSERT_TRUE(f.t);
    strata_status st{};
    ASSERT_EQ(f.write(0, f.data.data(), f.data.size(), &st), STRATA_OK) << st.message;
    std::vector<unsigned char> back(f.data.size());
    EXPECT_EQ(f.read(0, back.data(), back.size(), &st), STRATA_ERR_IO);
    // The first chunk's request (file offset 0, 64 KiB) stops after 32 KiB.
    EXPECT_TRUE(has(st.message, "the tier file ended at offset 32768 while reading region")) << st.message;
    EXPECT_TRUE(f.intact());
}

TEST_P(NvmeFaults, AnInjectedEnospcFailsThatWriteAndLeavesTheRegionAsItWas) {
    // The first region write (3 requests) goes through; the partial write below reads its chunk (a read request) and
    // then fails to write it back; every later write fails too (count=0) until the plan is gone.
    faulty_tier f("write_enospc", GetParam(), "write:enospc:after=3:count=0");
    ASSERT_TRUE(f.t);
    strata_status st{};
    ASSERT_EQ(f.write(0, f.data.data(), f.data.size(), &st), STRATA_OK) << st.message;
    const std::vector<unsigned char> other = random_bytes(8, 100);
    EXPECT_EQ(f.write(chunk + 10, other.data(), other.size(), &st), STRATA_ERR_IO);
    EXPECT_TRUE(has(st.message, "nvme: writing")) << st.message;
    EXPECT_TRUE(has(st.message, "No space left on device")) << st.message;
    EXPECT_TRUE(f.intact()) << "a refused write changes neither the chunk nor its neighbours";
    EXPECT_EQ(f.write(0, f.data.data(), f.data.size(), &st), STRATA_ERR_IO) << "count=0 keeps failing";
    EXPECT_TRUE(f.intact());
}

TEST_P(NvmeFaults, AnInjectedWriteErrorOnceIsFollowedByWorkingWrites) {
    faulty_tier f("write_once", GetParam(), "any:eio:after=3");
    ASSERT_TRUE(f.t);
    strata_status st{};
    ASSERT_EQ(f.write(0, f.data.data(), f.data.size(), &st), STRATA_OK) << st.message;
    const std::vector<unsigned char> fresh = random_bytes(9, 3 * chunk);
    EXPECT_EQ(f.write(0, fresh.data(), fresh.size(), &st), STRATA_ERR_IO);
    EXPECT_TRUE(has(st.message, "Input/output error")) << st.message;
    // Chunk 0 was refused; chunks 1 and 2 were already queued and may have been written. Each chunk reads back whole,
    // old or new, never a mix and never unchecked.
    std::vector<unsigned char> back(f.data.size());
    ASSERT_EQ(f.read(0, back.data(), back.size(), &st), STRATA_OK) << st.message;
    EXPECT_EQ(std::memcmp(back.data(), f.data.data(), chunk), 0) << "the refused chunk keeps its old bytes";
    for (int64_t c = 1; c < 3; ++c) {
        const size_t at = static_cast<size_t>(c * chunk);
        EXPECT_TRUE(std::memcmp(back.data() + at, f.data.data() + at, chunk) == 0 ||
                    std::memcmp(back.data() + at, fresh.data() + at, chunk) == 0)
            << "chunk " << c;
    }
    ASSERT_EQ(f.write(0, fresh.data(), fresh.size(), &st), STRATA_OK) << st.message;
    f.data = fresh;
    EXPECT_TRUE(f.intact());
}

INSTANTIATE_TEST_SUITE_P(Engines, NvmeFaults, ::testing::Values("io_uring", "psync"),
                         [](const auto &info) { return info.param; });

TEST(NvmeFaultPlan, ABadRuleIsAClearCreateErrorAndAnArmedPlanIsLoggedAsTestOnly) {
    for (const char *bad : {"read", "read:eio:after=x", "reed:eio", "read:eperm", "read:eio:every=2", "read:eio;"}) {
        config_table cfg{{"path", fault_file_path("bad")}, {"inject_faults", std::string(bad)}};
        strata_status st{};
        EXPECT_FALSE(create_tier("nvme", cfg, 1 << 20, &st)) << bad;
        EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT) << bad;
        EXPECT_TRUE(has(st.message, "[nvme] inject_faults rule")) << st.message;
    }
    test_host().clear();
    config_table ok{{"path", fault_file_path("armed")}, {"inject_faults", std::string("read:eio;write:short:count=0")}};
    strata_status st{};
    tier_ptr t = create_tier("nvme", ok, 1 << 20, &st);
    ASSERT_TRUE(t) << st.message;
    EXPECT_TRUE(test_host().logged("TEST ONLY: I/O fault injection is armed")) << "an armed plan must be visible";
    // Unset, nothing is armed and nothing is said.
    t.reset();
    test_host().clear();
    config_table off{{"path", fault_file_path("off")}};
    t = create_tier("nvme", off, 1 << 20, &st);
    ASSERT_TRUE(t) << st.message;
    EXPECT_FALSE(test_host().logged("fault injection"));
}

// A real failure: the tier file shrinks behind the tier's back. Reads past the new end are an error that says so;
// restoring the size brings zeros back, which the checksums refuse, never serve.
TEST(NvmeRealFaults, ATierFileTruncatedUnderTheTierIsAnErrorNeverWrongData) {
    const std::string path = fault_file_path("truncated");
    config_table cfg{{"path", path}, {"block_size", chunk}};
    strata_status st{};
    tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
    ASSERT_TRUE(t) << st.message;
    const strata_tier_desc &d = tier_plugin("nvme");
    uint64_t r = 0;
    const std::vector<unsigned char> data = random_bytes(11, 3 * chunk);
    ASSERT_EQ(d.region_alloc(t.get(), data.size(), &r, &st), STRATA_OK);
    ASSERT_EQ(d.write(t.get(), r, 0, data.data(), data.size(), &st), STRATA_OK) << st.message;
    ASSERT_EQ(::truncate(path.c_str(), chunk), 0);
    std::vector<unsigned char> back(data.size());
    EXPECT_EQ(d.read(t.get(), r, 0, back.data(), back.size(), &st), STRATA_ERR_IO);
    EXPECT_TRUE(has(st.message, "the tier file ended at offset")) << st.message;
    EXPECT_TRUE(has(st.message, "truncated")) << st.message;
    ASSERT_EQ(d.read(t.get(), r, 0, back.data(), chunk, &st), STRATA_OK) << "the chunk before the cut: " << st.message;
    EXPECT_EQ(std::memcmp(back.data(), data.data(), chunk), 0);
    ASSERT_EQ(::truncate(path.c_str(), 1 << 20), 0); // the size is back, the bytes are zeros
    EXPECT_EQ(d.read(t.get(), r, 0, back.data(), back.size(), &st), STRATA_ERR_IO);
    EXPECT_TRUE(has(st.message, "checksum mismatch")) << st.message;
    // Writing the lost chunks again repairs the region.
    ASSERT_EQ(d.write(t.get(), r, 0, data.data(), data.size(), &st), STRATA_OK) << st.message;
    ASSERT_EQ(d.read(t.get(), r, 0, back.data(), back.size(), &st), STRATA_OK) << st.message;
    EXPECT_EQ(back, data);
}

} // namespace
