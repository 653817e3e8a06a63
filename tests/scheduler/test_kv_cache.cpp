#include "kv_test_support.hpp"

#include <gtest/gtest.h>

#include <numeric>

using namespace strata;
using strata::testing::fake_store;
using strata::testing::memory_storage;

namespace {

constexpr int32_t bs = 4;
constexpr uint64_t bb = 64;

struct rig {
    memory_storage *dev = nullptr, *host = nullptr, *nvme = nullptr;
    std::unique_ptr<kv::kv_cache> kv;
    fake_store store{bb, 1000};

    rig(uint32_t n_dev, uint32_t n_host, uint32_t n_nvme, bool prefix = true, bool reads_host = true,
        bool dev_host_visible = true, bool with_store = false) {
        kv::kv_cache_config c;
        c.block_size = bs;
        c.block_bytes = bb;
        c.prefix_caching = prefix;
        c.fingerprint = 42;
        c.device_reads_host = reads_host;
        kv = std::make_unique<kv::kv_cache>(c);
        auto d = std::make_unique<memory_storage>(n_dev, bb, dev_host_visible);
        dev = d.get();
        kv->add_pool(kv::tier::device, n_dev, std::move(d));
        if (n_host) {
            auto h = std::make_unique<memory_storage>(n_host, bb, true);
            host = h.get();
            kv->add_pool(kv::tier::host, n_host, std::move(h));
        }
        if (n_nvme) {
            auto v = std::make_unique<memory_storage>(n_nvme, bb, false);
            nvme = v.get();
            kv->add_pool(kv::tier::nvme, n_nvme, std::move(v));
        }
        if (with_store) kv->set_store(&store);
    }

    memory_storage *pool(kv::tier t) { return t == kv::tier::device ? dev : t == kv::tier::host ? host : nvme; }

    // "Computes" KV for tokens[0, n): block b gets bytes derived from its tokens and its position.
    void compute(kv::seq_blocks &s, const std::vector<int32_t> &toks, int32_t n) {
        ASSERT_TRUE(kv->ensure_slots(s, n));
        for (int32_t b = 0; b * bs < n; ++b) {
            const kv::block_ref r = s.table[static_cast<size_t>(b)];
            ASSERT_EQ(r.where, kv::tier::device);
            fill(dev->raw(r.index), toks, b);
        }
        kv->register_full_blocks(s, toks, n);
    }
    static void fill(unsigned char *p, const std::vector<int32_t> &toks, int32_t b) {
        for (uint64_t i = 0; i < bb; ++i) {
            const size_t t = static_cast<size_t>(b * bs) + i % bs;
            p[i] = static_cast<unsigned char>((t < toks.size() ? toks[t] : 0) * 7 + b * 13 + static_cast<int>(i));
        }
    }
    // Every block of s holds what compute() wrote for its position.
    void expect_contents(const kv::seq_blocks &s, const std::vector<int32_t> &toks, int32_t n_blocks) {
        std::vector<unsigned char> want(bb), got(bb);
        for (int32_t b = 0; b < n_blocks; ++b) {
            const kv::block_ref r = s.table[static_cast<size_t>(b)];
            fill(want.data(), toks, b);
            pool(r.where)->load(r.index, got.data());
            EXPECT_EQ(want, got) << "block " << b << " in tier " << kv::tier_name(r.where);
        }
    }
    void expect_all_free() {
        const kv::kv_cache_stats st = kv->stats();
        for (int t = 0; t < kv::n_tiers; ++t) {
            EXPECT_EQ(st.blocks_used[t], st.blocks_cached[t]) << "tier " << t << " has blocks held by no sequence";
        }
    }
};

std::vector<int32_t> tokens(int n, int base = 1) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), base);
    return t;
}

} // namespace

TEST(KvCache, AllocatesAllOrNothingAndReleasesEverything) {
    rig r(4, 0, 0, false);
    kv::seq_blocks a, b;
    EXPECT_TRUE(r.kv->ensure_slots(a, 9)); // 3 blocks
    EXPECT_EQ(a.table.size(), 3u);
    EXPECT_FALSE(r.kv->ensure_slots(b, 8)); // needs 2, only 1 left
    EXPECT_TRUE(b.table.empty());
    EXPECT_TRUE(r.kv->ensure_slots(b, 4));
    EXPECT_EQ(r.kv->reclaimable_device_blocks(), 0u);
    r.kv->release(a);
    r.kv->release(b);
    EXPECT_EQ(r.kv->reclaimable_device_blocks(), 4u);
    EXPECT_EQ(r.kv->stats().blocks_used[0], 0);
}

TEST(KvCache, PrefixHitOnTheDeviceSharesBlocksAndCountsTokens) {
    rig r(8, 0, 0);
    const auto t = tokens(10);
    kv::seq_blocks a;
    r.compute(a, t, 10); // 2 full blocks + 1 partial
    r.kv->release(a);
    EXPECT_EQ(r.kv->stats().blocks_cached[0], 2);
    kv::seq_blocks b;
    EXPECT_EQ(r.kv->match_prefix(b, t, 9), 8);
    EXPECT_EQ(r.kv->stats().prefix_hits[0], 8);
    EXPECT_EQ(r.kv->stats().prefix_queries, 8);
    r.expect_contents(b, t, 2);
    // A different first block breaks the chain even when the second block's tokens are equal.
    auto u = t;
    u[0] = 99;
    kv::seq_blocks c;
    EXPECT_EQ(r.kv->match_prefix(c, u, 9), 0);
    r.kv->release(b);
    r.expect_all_free();
}

TEST(KvCache, EvictedPrefixesAreDemotedToTheHostAndThenTheStoreAndStillHit) {
    rig r(3, 4, 0, true, true, true, true);
    const auto t = tokens(8);
    kv::seq_blocks a;
    r.compute(a, t, 8);
    r.kv->release(a); // 2 cached device blocks
    // Another sequence needs the whole device: the cached blocks move down to the host pool.
    kv::seq_blocks big;
    const auto o = tokens(12, 500);
    r.compute(big, o, 12);
    EXPECT_EQ(r.kv->stats().blocks_cached[1], 2);
    r.expect_contents(big, o, 3);
    r.kv->release(big); // 3 more cached blocks on the device
    kv::seq_blocks b;
    EXPECT_EQ(r.kv->match_prefix(b, t, 8), 8);
    EXPECT_EQ(r.kv->stats().prefix_hits[1], 8) << "both blocks come from the host tier";
    r.expect_contents(b, t, 2);
    r.kv->release(b);
    // Push everything through: device and host full of other prefixes, so `t` goes to the store.
    for (int k = 0; k < 4; ++k) {
        kv::seq_blocks x;
        const auto y = tokens(12, 1000 + 100 * k);
        r.compute(x, y, 12);
        r.kv->release(x);
    }
    EXPECT_GE(r.store.entries(), 2u);
    kv::seq_blocks c;
    EXPECT_EQ(r.kv->match_prefix(c, t, 8), 8);
    EXPECT_EQ(r.kv->stats().prefix_hits[2], 8) << "both blocks come from the store";
    r.expect_contents(c, t, 2);
    r.kv->release(c);
    r.expect_all_free();
}

TEST(KvCache, CorruptStoreEntriesAreRecomputedNeverUsed) {
    rig r(3, 0, 0, true, true, true, true);
    const auto t = tokens(8);
    kv::seq_blocks a;
    r.compute(a, t, 8);
    r.kv->release(a);
    EXPECT_EQ(r.kv->persist_prefixes(), 2u);
    r.store.corrupt_all();
    // A fresh cache (a restart) with the same store.
    rig r2(3, 0, 0, true, true, true, false);
    r2.kv->set_store(&r.store);
    kv::seq_blocks b;
    EXPECT_EQ(r2.kv->match_prefix(b, t, 8), 0);
    EXPECT_EQ(r2.kv->stats().prefix_hits[2], 0);
    EXPECT_EQ(r2.kv->reclaimable_device_blocks(), 3u) << "the block taken for the failed load went back";
}

// Demoting a cached block is best effort: when its copy down fails (a tier's failed read or write), the block is
// dropped and its device block reused; nobody holding blocks notices, and the prefix is a miss later.
TEST(KvCache, ACachedBlockThatCannotBeDemotedIsDroppedNotAnError) {
    rig r(2, 2, 0);
    const auto t = tokens(8);
    kv::seq_blocks a;
    r.compute(a, t, 8);
    r.kv->release(a); // two cached blocks on the device
    r.dev->fail_loads(0, true);
    ::testing::internal::CaptureStderr();
    kv::seq_blocks b;
    ASSERT_TRUE(r.kv->ensure_slots(b, 8)) << "the cached blocks are reclaimed although they cannot move down";
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("could not be demoted from the device pool"), std::string::npos) << log;
    EXPECT_EQ(r.dev->faults(), 2);
    EXPECT_EQ(r.kv->stats().blocks_used[1], 0) << "nothing half-copied stays in the host pool";
    r.kv->release(b);
    r.dev->fail_loads(-1);
    kv::seq_blocks c;
    EXPECT_EQ(r.kv->match_prefix(c, t, 8), 0) << "the dropped prefix is a miss";
    r.kv->release(c);
    r.expect_all_free();
}

TEST(KvCache, PersistedPrefixesHitAfterARestart) {
    rig r(3, 0, 0, true, true, true, true);
    const auto t = tokens(8);
    kv::seq_blocks a;
    r.compute(a, t, 8);
    r.kv->release(a);
    r.kv->persist_prefixes();
    rig r2(3, 0, 0, true, true, false /*device not host-visible: goes through store()*/, false);
    r2.kv->set_store(&r.store);
    kv::seq_blocks b;
    EXPECT_EQ(r2.kv->match_prefix(b, t, 8), 8);
    r2.expect_contents(b, t, 2);
}

TEST(KvCache, CopyOnWriteGivesAForkItsOwnBlock) {
    rig r(6, 0, 0, false);
    const auto t = tokens(6);
    kv::seq_blocks a, b;
    r.compute(a, t, 6); // blocks: [0..3] full, [4..5] partial
    r.kv->fork(a, b);
    EXPECT_EQ(r.kv->reclaimable_device_blocks(), 4u);
    ASSERT_TRUE(r.kv->make_writable(b, 6)); // b writes slot 6: its partial block must be copied first
    EXPECT_NE(a.table[1].index, b.table[1].index);
    EXPECT_EQ(a.table[0].index, b.table[0].index) << "the full block stays shared";
    EXPECT_EQ(0, std::memcmp(r.dev->raw(a.table[1].index), r.dev->raw(b.table[1].index), bb));
    r.dev->raw(b.table[1].index)[0] ^= 0xff;
    EXPECT_NE(0, std::memcmp(r.dev->raw(a.table[1].index), r.dev->raw(b.table[1].index), bb));
    ASSERT_TRUE(r.kv->make_writable(a, 6)); // a's block is now private: no copy
    r.kv->release(a);
    r.kv->release(b);
    EXPECT_EQ(r.kv->reclaimable_device_blocks(), 6u);
}

TEST(KvCache, SwapOutAndInRoundTripsEveryByteThroughHostAndNvme) {
    rig r(4, 1, 4, false, false /*a GPU-like device: blocks must come back*/, false);
    const auto t = tokens(12);
    kv::seq_blocks a;
    r.compute(a, t, 12);
    kv::tier to{};
    uint64_t bytes = 0;
    ASSERT_TRUE(r.kv->swap_out(a, to, bytes));
    EXPECT_EQ(to, kv::tier::nvme) << "one block fits the host pool, the rest go to NVMe";
    EXPECT_EQ(bytes, 3 * bb);
    EXPECT_EQ(r.kv->blocks_in(a, kv::tier::device), 0u);
    EXPECT_EQ(r.kv->blocks_in(a, kv::tier::host) + r.kv->blocks_in(a, kv::tier::nvme), 3u);
    r.expect_contents(a, t, 3);
    // Fill the device so the sequence cannot come back yet: nothing may be lost.
    kv::seq_blocks other;
    ASSERT_TRUE(r.kv->ensure_slots(other, 8));
    EXPECT_FALSE(r.kv->swap_in(a, 0, bytes));
    r.expect_contents(a, t, 3);
    r.kv->release(other);
    ASSERT_TRUE(r.kv->swap_in(a, 0, bytes));
    EXPECT_EQ(r.kv->blocks_in(a, kv::tier::device), 3u);
    r.expect_contents(a, t, 3);
    EXPECT_EQ(r.kv->stats().bytes_out, static_cast<int64_t>(3 * bb));
    EXPECT_EQ(r.kv->stats().bytes_in, static_cast<int64_t>(3 * bb));
    r.kv->release(a);
    r.expect_all_free();
    EXPECT_EQ(r.kv->stats().blocks_used[2], 0);
}

TEST(KvCache, SwapOutRefusesWhenTheLowerTiersAreFull) {
    rig r(4, 1, 0, false);
    kv::seq_blocks a;
    ASSERT_TRUE(r.kv->ensure_slots(a, 8));
    kv::tier to{};
    uint64_t bytes = 0;
    EXPECT_FALSE(r.kv->swap_out(a, to, bytes));
    EXPECT_EQ(r.kv->blocks_in(a, kv::tier::device), 2u);
    r.kv->release(a);
}

TEST(KvCache, SpillMovesTheOldestBlockToTheHostForALongContext) {
    rig r(2, 4, 0, true, true);
    const auto t = tokens(8);
    kv::seq_blocks a;
    r.compute(a, t, 8);
    EXPECT_FALSE(r.kv->ensure_slots(a, 12));
    ASSERT_TRUE(r.kv->spill_oldest(a));
    EXPECT_EQ(a.table[0].where, kv::tier::host);
    ASSERT_TRUE(r.kv->ensure_slots(a, 12));
    EXPECT_NE(r.kv->device_address(a.table[0]), nullptr) << "attention reads the spilled block in place";
    r.expect_contents(a, t, 2);
    r.kv->release(a);
    r.expect_all_free();
    // A device that cannot read host memory never spills.
    rig g(2, 4, 0, true, false);
    kv::seq_blocks b;
    ASSERT_TRUE(g.kv->ensure_slots(b, 8));
    EXPECT_FALSE(g.kv->spill_oldest(b));
    g.kv->release(b);
}

// The prefix cache's hash index: blocks chained in their hash's bucket, found by the hash they were indexed under,
// unlinked from anywhere in a chain; a block not indexed under a hash is left alone.
TEST(BlockHashIndex, ChainsFindAndEraseBlocksInOneBucket) {
    strata::kv::block_hash_index idx(4); // 4 buckets: hashes 3, 7, 11 share bucket 3
    constexpr uint32_t none = strata::kv::block_hash_index::none;
    EXPECT_EQ(idx.find(3), none);
    idx.insert(3, 0);
    idx.insert(7, 2);
    idx.insert(11, 1);
    idx.insert(4, 3);
    EXPECT_EQ(idx.find(3), 0u);
    EXPECT_EQ(idx.find(7), 2u);
    EXPECT_EQ(idx.find(11), 1u);
    EXPECT_EQ(idx.find(4), 3u);
    EXPECT_EQ(idx.find(15), none);
    idx.erase(7, 2); // the middle of bucket 3's chain
    EXPECT_EQ(idx.find(7), none);
    EXPECT_EQ(idx.find(3), 0u);
    EXPECT_EQ(idx.find(11), 1u);
    idx.erase(3, 1); // block 1 is not indexed under 3: nothing changes
    EXPECT_EQ(idx.find(3), 0u);
    EXPECT_EQ(idx.find(11), 1u);
    idx.insert(7, 2); // a block indexed again after it was erased
    EXPECT_EQ(idx.find(7), 2u);
    idx.erase(11, 1);
    idx.erase(3, 0);
    idx.erase(7, 2);
    EXPECT_EQ(idx.find(3), none);
    EXPECT_EQ(idx.find(11), none);
    EXPECT_EQ(idx.find(4), 3u);
    idx.resize(4);
    EXPECT_EQ(idx.find(4), none) << "resize empties the index";
}

// The cached blocks' LRU order: pushed at the back, taken out from anywhere, the front always the oldest left.
TEST(BlockLru, KeepsTheOrderOfUseAndRemovesFromAnywhere) {
    strata::kv::block_lru lru(5);
    EXPECT_TRUE(lru.empty());
    for (uint32_t i : {3u, 0u, 4u, 1u}) lru.push_back(i);
    EXPECT_EQ(lru.size(), 4u);
    EXPECT_EQ(lru.front(), 3u);
    EXPECT_TRUE(lru.contains(4));
    EXPECT_FALSE(lru.contains(2));
    lru.remove(2); // not in the list: nothing changes
    EXPECT_EQ(lru.size(), 4u);
    lru.remove(0); // the middle
    lru.remove(3); // the front
    EXPECT_EQ(lru.front(), 4u);
    lru.push_back(3); // used again: now the newest
    lru.remove(4);
    EXPECT_EQ(lru.front(), 1u);
    lru.remove(1);
    EXPECT_EQ(lru.front(), 3u);
    lru.remove(3);
    EXPECT_TRUE(lru.empty());
    lru.push_back(2);
    EXPECT_EQ(lru.front(), 2u);
    lru.resize(5);
    EXPECT_TRUE(lru.empty());
    EXPECT_FALSE(lru.contains(2));
}
