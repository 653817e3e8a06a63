// The CPU device's thread pool: every item of every run is visited exactly once, by a valid thread index, across
// many back-to-back runs (the pattern of a decode step, where late-waking workers must never touch a finished task).
#include <strata/thread_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <vector>

namespace {

TEST(CpuThreadPool, EveryItemOnceAcrossManyBackToBackRuns) {
    for (int threads : {1, 2, 3, 5}) {
        strata::thread_pool pool(threads, {});
        ASSERT_EQ(pool.size(), threads);
        std::mt19937 rng(static_cast<uint32_t>(threads));
        std::vector<std::atomic<int>> hits(5000);
        for (int run = 0; run < 3000; ++run) {
            const int64_t n = 1 + static_cast<int64_t>(rng() % hits.size());
            const int64_t grain = 1 + static_cast<int64_t>(rng() % 64);
            for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
            std::atomic<int> bad_thread{0};
            auto body = [&](int64_t begin, int64_t end, int thread) noexcept {
                if (thread < 0 || thread >= threads || begin < 0 || end > n || begin >= end) bad_thread.fetch_add(1);
                for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
            };
            pool.parallel_for(n, grain, body);
            ASSERT_EQ(bad_thread.load(), 0) << "run " << run;
            for (int64_t i = 0; i < n; ++i)
                ASSERT_EQ(hits[static_cast<size_t>(i)].load(std::memory_order_relaxed), 1)
                    << threads << " threads, run " << run << ", item " << i << " of " << n << ", grain " << grain;
        }
    }
}

TEST(CpuThreadPool, EmptyAndSingleChunkRunsStayOnTheCaller) {
    strata::thread_pool pool(3, {});
    int calls = 0, thread_seen = -1;
    auto body = [&](int64_t, int64_t, int thread) noexcept {
        ++calls;
        thread_seen = thread;
    };
    pool.parallel_for(0, 4, body);
    EXPECT_EQ(calls, 0);
    pool.parallel_for(10, 16, body);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(thread_seen, 0);
}

} // namespace
