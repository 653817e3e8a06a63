// A fixed pool of worker threads for data-parallel loops, built for many tiny dispatches (an op ~10 times per layer
// per token): workers wait on a generation counter, spinning briefly before sleeping in a futex (std::atomic::wait),
// and the calling thread joins in as worker 0; it returns as soon as every chunk is done, whether or not every worker
// woke up for the task. Dispatch allocates nothing: the loop body is a function pointer plus
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
    void run_chunks(int thread, uint32_t generation) noexcept;

    int n_threads_;
    int pin_failures_ = 0;
    std::vector<std::thread> workers_;

    // The current task; written by the caller before claim_ publishes it, read-only while any chunk is unfinished.
    body_fn body_ = nullptr;
    void *ctx_ = nullptr;
    int64_t n_items_ = 0;
    int64_t grain_ = 1;
    uint32_t n_chunks_ = 0;
    std::atomic<bool> stopping_{false}; // read by workers that may wake late, while the destructor sets it

    // (generation << 32) | chunks not yet claimed. A thread takes chunk c = left - 1 by compare-exchange, and only
    // if the generation is its task's, so a worker that wakes late can never run a chunk of a finished task: the
    // caller waits for the chunks to finish (done_chunks_), not for every worker to show up. On a loaded machine a
    // descheduled worker therefore costs nothing; the caller runs its share.
    alignas(64) std::atomic<uint64_t> claim_{0};
    alignas(64) std::atomic<uint32_t> generation_{0}; // bumped per task; workers sleep on it
    alignas(64) std::atomic<uint32_t> done_chunks_{0};
};

} // namespace strata::cpu
