#include "engine/scheduler.hpp"
#include "kv_test_support.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <ostream>

using namespace strata;
using strata::testing::memory_storage;

namespace {

constexpr int32_t bs = 4;
constexpr uint64_t slot_bytes = 8; // (token, position) per slot: what a forward pass would have written
constexpr uint64_t bb = bs * slot_bytes;

struct sim {
    std::unique_ptr<kv::kv_cache> kv;
    memory_storage *host_pool = nullptr, *nvme_pool = nullptr; // owned by kv; for injecting I/O faults
    std::unique_ptr<engine::scheduler> sched;
    std::vector<std::unique_ptr<engine::sequence>> seqs;
    std::vector<engine::scheduled_seq> batch;
    std::vector<std::pair<engine::sequence *, std::string>> failed;
    int steps = 0;
    bool allow_failures = false;
    int failures = 0;
    double prefill_seconds_per_token = 0; // > 0: what the engine would report after each step (auto mode's input)

    sim(uint32_t n_dev, uint32_t n_host, uint32_t n_nvme, engine::preemption_mode mode, bool prefix = false,
        int32_t max_seqs = 64, int32_t max_tokens = 64, int32_t chunk = 16, bool reads_host = true) {
        kv::kv_cache_config c;
        c.block_size = bs;
        c.block_bytes = bb;
        c.prefix_caching = prefix;
        c.fingerprint = 7;
        c.device_reads_host = reads_host;
        kv = std::make_unique<kv::kv_cache>(c);
        kv->add_pool(kv::tier::device, n_dev, std::make_unique<strata::testing::memory_storage>(n_dev, bb, true));
        if (n_host) {
            auto h = std::make_unique<memory_storage>(n_host, bb, true);
            host_pool = h.get();
            kv->add_pool(kv::tier::host, n_host, std::move(h));
        }
        if (n_nvme) {
            auto v = std::make_unique<memory_storage>(n_nvme, bb, false);
            nvme_pool = v.get();
            kv->add_pool(kv::tier::nvme, n_nvme, std::move(v));
        }
        engine::scheduler_config sc;
        sc.max_num_seqs = max_seqs;
        sc.max_num_batched_tokens = max_tokens;
        sc.prefill_chunk = chunk;
        sc.mode = mode;
        sched = std::make_unique<engine::scheduler>(*kv, sc);
    }

    engine::sequence *add(std::vector<int32_t> prompt, int32_t max_new) {
        auto s = std::make_unique<engine::sequence>();
        s->id = seqs.size() + 1;
        s->arrival = seqs.size();
        s->tokens = std::move(prompt);
        s->n_prompt = static_cast<int32_t>(s->tokens.size());
        s->max_tokens = max_new;
        sched->add(s.get());
        seqs.push_back(std::move(s));
        return seqs.back().get();
    }

    static int32_t next_token(const engine::sequence &s) {
        return (s.tokens.back() * 31 + static_cast<int32_t>(s.tokens.size()) * 7) % 1000;
    }

    // One step: schedule, check the plan, "compute" the scheduled tokens into their slots, sample.
    void step() {
        failed.clear();
        sched->schedule(batch, failed);
        if (allow_failures) {
            for (auto &f : failed) {
                sched->remove(f.first);
                ++failures;
            }
        } else {
            ASSERT_TRUE(failed.empty()) << failed.front().second;
        }
        ++steps;
        int32_t tokens = 0;
        ASSERT_LE(batch.size(), static_cast<size_t>(sched->config().max_num_seqs));
        for (const auto &b : batch) {
            engine::sequence &s = *b.seq;
            ASSERT_EQ(s.state, engine::seq_state::running);
            ASSERT_GT(b.n_new, 0);
            ASSERT_LE(s.n_computed + b.n_new, static_cast<int32_t>(s.tokens.size()));
            ASSERT_GE(static_cast<int64_t>(s.kv.table.size()) * bs, s.n_computed + b.n_new);
            tokens += b.n_new;
            // Everything already computed must still be intact wherever its blocks went (swap, spill, sharing).
            for (int32_t p = 0; p < s.n_computed; ++p) {
                int32_t got[2];
                const kv::block_ref r = s.kv.table[static_cast<size_t>(p / bs)];
                auto *base = static_cast<unsigned char *>(kv->device_address(r));
                ASSERT_NE(base, nullptr) << "a running sequence's block must be readable by the device";
                std::memcpy(got, base + (p % bs) * slot_bytes, sizeof got);
                ASSERT_EQ(got[0], s.tokens[static_cast<size_t>(p)]) << "seq " << s.id << " slot " << p;
                ASSERT_EQ(got[1], p);
            }
            for (int32_t p = s.n_computed; p < s.n_computed + b.n_new; ++p) {
                const kv::block_ref r = s.kv.table[static_cast<size_t>(p / bs)];
                const int32_t v[2] = {s.tokens[static_cast<size_t>(p)], p};
                std::memcpy(static_cast<unsigned char *>(kv->device_address(r)) + (p % bs) * slot_bytes, v, sizeof v);
            }
        }
        ASSERT_LE(tokens, sched->config().max_num_batched_tokens);
        if (prefill_seconds_per_token > 0) sched->observe_prefill(prefill_seconds_per_token);
        for (const auto &b : batch) {
            engine::sequence &s = *b.seq;
            s.n_computed += b.n_new;
            kv->register_full_blocks(s.kv, s.tokens, s.n_computed);
            if (s.n_computed == static_cast<int32_t>(s.tokens.size())) {
                s.tokens.push_back(next_token(s));
                if (++s.generated >= s.max_tokens) sched->remove(&s);
            }
        }
    }

    void run(int max_steps = 10000) {
        while (!sched->idle() && steps < max_steps) {
            step();
            if (::testing::Test::HasFatalFailure()) return;
        }
        ASSERT_TRUE(sched->idle()) << "did not finish in " << max_steps << " steps";
    }

    void expect_pools_full() {
        const kv::kv_cache_stats st = kv->stats();
        for (int t = 0; t < kv::n_tiers; ++t) EXPECT_EQ(st.blocks_used[t], st.blocks_cached[t]) << "tier " << t;
    }
};

std::vector<int32_t> prompt(int n, int seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (seed * 97 + i * 13) % 1000;
    return t;
}

// What a sequence generates alone, with all the KV it wants.
std::vector<int32_t> alone(const std::vector<int32_t> &p, int32_t max_new) {
    sim s(256, 0, 0, engine::preemption_mode::recompute);
    engine::sequence *q = s.add(p, max_new);
    s.run();
    return q->tokens;
}

} // namespace

class SchedulerPreemption : public ::testing::TestWithParam<engine::preemption_mode> {};

TEST_P(SchedulerPreemption, SixteenSequencesUnderAForcedShortageFinishIntactAndFreeEverything) {
    // 24 device blocks for 16 sequences that each grow to ~11 blocks: preemption is certain.
    sim s(24, 64, 32, GetParam());
    std::vector<engine::sequence *> q;
    for (int i = 0; i < 16; ++i) q.push_back(s.add(prompt(5 + 3 * i % 17, i), 20 + i % 5));
    s.run();
    const auto &c = s.sched->counters();
    EXPECT_GT(c.preempt_swap + c.preempt_recompute, 0) << "the budget was meant to force preemption";
    if (GetParam() == engine::preemption_mode::swap) {
        EXPECT_GT(c.preempt_swap, 0);
    }
    if (GetParam() == engine::preemption_mode::recompute) {
        EXPECT_EQ(c.preempt_swap, 0);
        EXPECT_GT(c.preempt_recompute, 0);
    }
    for (int i = 0; i < 16; ++i) EXPECT_EQ(q[static_cast<size_t>(i)]->tokens, alone(prompt(5 + 3 * i % 17, i), 20 + i % 5));
    s.expect_pools_full();
}

INSTANTIATE_TEST_SUITE_P(Modes, SchedulerPreemption,
                         ::testing::Values(engine::preemption_mode::swap, engine::preemption_mode::recompute,
                                           engine::preemption_mode::automatic));

TEST(Scheduler, RespectsSeatsAndTokenBudgetAndChunksPrefill) {
    sim s(256, 0, 0, engine::preemption_mode::recompute, false, 3, 10, 6);
    for (int i = 0; i < 5; ++i) s.add(prompt(14, i), 3);
    s.step();
    ASSERT_EQ(s.batch.size(), 2u) << "6 + 4 tokens of the 10-token budget";
    EXPECT_EQ(s.batch[0].n_new, 6);
    EXPECT_EQ(s.batch[1].n_new, 4);
    s.run(); // the per-step checks assert max_num_seqs and the token budget every step
    s.expect_pools_full();
}

TEST(Scheduler, CancellingMidGenerationFreesItsBlocksAtOnce) {
    sim s(32, 0, 0, engine::preemption_mode::recompute);
    engine::sequence *a = s.add(prompt(20, 1), 100);
    s.add(prompt(8, 2), 100);
    for (int i = 0; i < 4; ++i) s.step();
    const uint32_t before = s.kv->reclaimable_device_blocks();
    ASSERT_FALSE(a->kv.table.empty());
    const size_t held = a->kv.table.size();
    s.sched->remove(a);
    EXPECT_EQ(s.kv->reclaimable_device_blocks(), before + held);
    EXPECT_EQ(a->state, engine::seq_state::finished);
    s.run();
    s.expect_pools_full();
}

TEST(Scheduler, AContextFourTimesTheDeviceKvCompletesBySpillingToTheHost) {
    // 6 device blocks = 24 tokens; the sequence reaches 96.
    sim s(6, 64, 0, engine::preemption_mode::swap);
    engine::sequence *a = s.add(prompt(40, 3), 56);
    s.run();
    EXPECT_EQ(a->tokens, alone(prompt(40, 3), 56));
    EXPECT_GT(s.kv->stats().bytes_out, 0);
    s.expect_pools_full();
}

TEST(Scheduler, ASequenceThatCanNeverFitFailsWithTheReason) {
    sim s(2, 0, 0, engine::preemption_mode::recompute);
    s.add(prompt(12, 1), 4);
    s.sched->schedule(s.batch, s.failed);
    ASSERT_EQ(s.failed.size(), 1u);
    EXPECT_NE(s.failed[0].second.find("--kv-cache-memory"), std::string::npos) << s.failed[0].second;
    s.sched->remove(s.failed[0].first);
    s.expect_pools_full();
}

TEST(Scheduler, SharedPrefixesHitTheCacheAndGiveTheSameTokens) {
    sim s(64, 16, 0, engine::preemption_mode::recompute, true);
    auto p = prompt(21, 5);
    engine::sequence *a = s.add(p, 5);
    s.run();
    engine::sequence *b = s.add(p, 5);
    s.run();
    EXPECT_EQ(s.kv->stats().prefix_hits[0], 20) << "5 full blocks of the 21-token prompt";
    EXPECT_EQ(a->tokens, b->tokens);
    s.expect_pools_full();
}

// A GPU-like device (no attention from host memory): a waiting sequence must not sit on prefix blocks it matched,
// and one sequence that cannot run must not make the ones behind it fail (both seen in review).
TEST(Scheduler, WaitingSequencesHoldNoBlocksAndOneFailureDoesNotCascade) {
    sim s(4, 0, 0, engine::preemption_mode::recompute, true, 64, 64, 16, false);
    const auto p = prompt(8, 9);
    s.add(p, 1); // leaves 2 cached prefix blocks
    s.run();
    auto a_prompt = prompt(5, 1);
    engine::sequence *a = s.add(a_prompt, 11); // grows to 16 tokens = the whole device
    s.step();
    auto b_prompt = p;
    b_prompt.push_back(7);
    engine::sequence *b = s.add(b_prompt, 2); // shares p's prefix, must wait for a
    s.run();
    EXPECT_EQ(a->generated, 11);
    EXPECT_EQ(b->generated, 2);
    s.expect_pools_full();

    // One prompt too long for the device fails alone; the short ones queued behind it run.
    sim t(4, 0, 0, engine::preemption_mode::recompute, true, 64, 64, 16, false);
    t.allow_failures = true;
    engine::sequence *long_one = t.add(prompt(20, 1), 1);
    engine::sequence *c = t.add(prompt(2, 2), 2);
    engine::sequence *d = t.add(prompt(3, 3), 2);
    t.run();
    EXPECT_EQ(t.failures, 1);
    EXPECT_EQ(long_one->generated, 0);
    EXPECT_EQ(c->generated, 2);
    EXPECT_EQ(d->generated, 2);
    t.expect_pools_full();
}

// `auto` compares the swap time at the swap bandwidth it measured with the recompute time at the prefill speed the
// engine reports: a recompute that costs nearly nothing is chosen over a swap, an expensive one is not.
TEST(Scheduler, AutoPreemptionChoosesByCost) {
    for (const bool cheap_recompute : {true, false}) {
        sim s(24, 64, 0, engine::preemption_mode::automatic);
        s.prefill_seconds_per_token = cheap_recompute ? 1e-15 : 1e3;
        for (int i = 0; i < 16; ++i) s.add(prompt(5 + 3 * i % 17, i), 20 + i % 5);
        s.run();
        const auto &c = s.sched->counters();
        // The first preemption swaps (nothing measured yet); after that the cost decides.
        EXPECT_GT(c.preempt_swap, 0);
        if (cheap_recompute) {
            EXPECT_GT(c.preempt_recompute, 0) << "a free recompute must win over a swap";
        } else {
            EXPECT_EQ(c.preempt_recompute, 0) << "a costly recompute must lose to a swap";
        }
        s.expect_pools_full();
    }
}

// A KV swap whose tier I/O fails (a write on the way out, a read on the way back, or the tier broken for good) costs
// that sequence its blocks, not its request: it is recomputed from its tokens, every sequence still finishes with
// the tokens it has alone (the per-step checks verify every computed slot), and every block goes back.
struct swap_fault {
    const char *name;
    bool loads;   // fail a read (swap-in) rather than a write (swap-out)
    int after;    // operations let through first
    bool forever; // and every one after it
};

void PrintTo(const swap_fault &f, std::ostream *os) { *os << f.name; }

class SchedulerSwapFault : public ::testing::TestWithParam<swap_fault> {};

TEST_P(SchedulerSwapFault, RecomputesTheSequenceWhoseSwapFailedAndEveryoneFinishesIntact) {
    sim s(24, 0, 64, engine::preemption_mode::swap); // no host pool: every swap goes through the nvme pool
    ASSERT_NE(s.nvme_pool, nullptr);
    if (GetParam().loads) s.nvme_pool->fail_loads(GetParam().after, GetParam().forever);
    else s.nvme_pool->fail_stores(GetParam().after, GetParam().forever);
    std::vector<engine::sequence *> q;
    for (int i = 0; i < 16; ++i) q.push_back(s.add(prompt(5 + 3 * i % 17, i), 20 + i % 5));
    ::testing::internal::CaptureStderr();
    s.run();
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_GT(s.nvme_pool->faults(), 0) << "the fault never fired";
    EXPECT_NE(log.find(GetParam().loads ? "swapping in sequence group" : "swapping out sequence group"),
              std::string::npos);
    EXPECT_NE(log.find("injected"), std::string::npos) << "the log says why";
    EXPECT_NE(log.find("is recomputed instead"), std::string::npos);
    // A failed swap-out is counted as the recompute preemption it became; a failed swap-in was a swap preemption.
    if (!GetParam().loads) {
        EXPECT_GT(s.sched->counters().preempt_recompute, 0);
    }
    for (int i = 0; i < 16; ++i) EXPECT_EQ(q[static_cast<size_t>(i)]->tokens, alone(prompt(5 + 3 * i % 17, i), 20 + i % 5));
    s.expect_pools_full();
}

INSTANTIATE_TEST_SUITE_P(Faults, SchedulerSwapFault,
                         ::testing::Values(swap_fault{"swap_out_once", false, 3, false},
                                           swap_fault{"swap_in_once", true, 2, false},
                                           swap_fault{"swap_out_always", false, 3, true},
                                           swap_fault{"swap_in_always", true, 0, true}),
                         [](const auto &info) { return std::string(info.param.name); });

// A prefix-cache hit in the host tier that cannot be copied onto the device is a miss: the prompt is computed.
TEST(Scheduler, APrefixHitThatCannotBeCopiedInIsComputedInstead) {
    sim s(8, 16, 0, engine::preemption_mode::recompute, true);
    const auto p = prompt(13, 4); // 3 full blocks
    engine::sequence *a = s.add(p, 3);
    s.run();
    // Other prompts push p's cached blocks from the device down into the host tier.
    for (int i = 0; i < 3; ++i) {
        s.add(prompt(20, 40 + i), 8);
        s.run();
    }
    ASSERT_GT(s.kv->stats().blocks_cached[1], 0) << "nothing was demoted to the host tier";
    s.host_pool->fail_loads(0, true);
    ::testing::internal::CaptureStderr();
    engine::sequence *b = s.add(p, 3);
    s.run();
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(b->tokens, a->tokens);
    EXPECT_GT(s.host_pool->faults(), 0);
    EXPECT_NE(log.find("prefix-cache lookup of sequence group"), std::string::npos) << log;
    EXPECT_EQ(s.kv->stats().prefix_hits[1], 0);
    s.expect_pools_full();
}
