// A fixed pool of worker threads for data-parallel loops, built for many tiny dispatches (an op ~10 times per layer
// per token): workers wait on a generation counter, spinning briefly before sleeping in a futex (std::atomic::wait),
// and the calling thread joins in as worker 0. Dispatch allocates nothing: the loop body is a function pointer plus
// a pointer to the caller's (stack) lambda.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace strata::cpu {

class thread_pool {
  public:
    // body(ctx, begin, end, thread): items [begin, end) on pool thread `thread` (0 = the caller, < size()).
    using body_fn = void (*)(void *ctx, int64_t begin, int64_t end, int thread) noexcept;

    // n_threads >= 1 counts the caller, so n_threads - 1 workers are started. When pin_cpus is not empty, worker i
    // (1-based) is pinned to pin_cpus[i] if that entry exists; entry 0 is left for the calling thread, which the
    // pool does not pin because it does not own it.
    thread_pool(int n_threads, std::span<const int> pin_cpus);
    ~thread_pool();
    thread_pool(const thread_pool &) = delete;
    thread_pool &operator=(const thread_pool &) = delete;

    int size() const { return n_threads_; }
    // Workers whose pthread_setaffinity_np call failed (pinning is best effort).
    int pin_failures() const { return pin_failures_; }

    // Runs body over [0, n_items) in chunks of `grain` items handed out dynamically; returns when all are done.
    // Not re-entrant: one run at a time per pool (the device serialises its ops).
    void run(int64_t n_items, int64_t grain, body_fn body, void *ctx) noexcept;

    // f(begin, end, thread) must not throw. Runs inline (no wake-up) when one chunk covers everything.
    template <class F> void parallel_for(int64_t n_items, int64_t grain, F &f) noexcept {
        run(n_items, grain,
            [](void *c, int64_t begin, int64_t end, int thread) noexcept { (*static_cast<F *>(c))(begin, end, thread); },
            &f);
    }

  private:
    void worker_main(int index) noexcept;
    void stop_workers() noexcept;
    void run_chunks(int thread) noexcept;

    int n_threads_;
    int pin_failures_ = 0;
    std::vector<std::thread> workers_;

    // The current task; written by the caller before `generation_` is bumped, read-only while workers run it.
    body_fn body_ = nullptr;
    void *ctx_ = nullptr;
    int64_t n_items_ = 0;
    int64_t grain_ = 1;
    bool stopping_ = false;

    // Separate cache lines: workers hammer next_item_ while the caller polls pending_.
    alignas(64) std::atomic<int64_t> next_item_{0};
    alignas(64) std::atomic<uint32_t> generation_{0};
    alignas(64) std::atomic<int32_t> pending_{0};
};

} // namespace strata::cpu
