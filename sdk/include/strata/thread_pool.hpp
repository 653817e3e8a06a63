// A fixed pool of worker threads for data-parallel loops (header-only, for plugins and the host alike: the CPU device
// runs its ops on one, the engine samples many sequences on one), built for many tiny dispatches (an op ~10 times per
// layer per token): workers wait on a generation counter, spinning briefly before sleeping in a futex (std::atomic::wait),
// and the calling thread joins in as worker 0; it returns as soon as every chunk is done, whether or not every worker
// woke up for the task. Dispatch allocates nothing: the loop body is a function pointer plus
// a pointer to the caller's (stack) lambda.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata {

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

namespace thread_pool_detail {

// Spin iterations before a thread sleeps: long enough (tens of microseconds) to cover the gap between two ops of
// one token, short enough not to burn a core while the engine does something else.
inline constexpr int spin_iterations = 1 << 12;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

inline bool pin_to_cpu(std::thread &t, int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t.native_handle(), sizeof set, &set) == 0;
}

} // namespace thread_pool_detail

inline thread_pool::thread_pool(int n_threads, std::span<const int> pin_cpus) : n_threads_(std::max(1, n_threads)) {
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    try {
        for (int i = 1; i < n_threads_; ++i) {
            workers_.emplace_back([this, i] { worker_main(i); });
            if (static_cast<size_t>(i) < pin_cpus.size() && !thread_pool_detail::pin_to_cpu(workers_.back(), pin_cpus[i])) ++pin_failures_;
        }
    } catch (...) {
        // Thread creation failed part-way: stop the ones that started, then report.
        n_threads_ = static_cast<int>(workers_.size()) + 1;
        stop_workers();
        throw;
    }
}

inline thread_pool::~thread_pool() { stop_workers(); }

inline void thread_pool::stop_workers() noexcept {
    if (workers_.empty()) return;
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto &t : workers_) t.join();
    workers_.clear();
}

inline void thread_pool::run_chunks(int thread, uint32_t generation) noexcept {
    uint64_t state = claim_.load(std::memory_order_acquire);
    for (;;) {
        const uint32_t left = static_cast<uint32_t>(state);
        if (static_cast<uint32_t>(state >> 32) != generation || left == 0) return;
        if (!claim_.compare_exchange_weak(state, state - 1, std::memory_order_acq_rel, std::memory_order_acquire))
            continue;
        // The claimed chunk is unfinished, so the caller is still inside run() and the task fields are this task's.
        const uint32_t total = n_chunks_;
        const int64_t begin = static_cast<int64_t>(left - 1) * grain_;
        body_(ctx_, begin, std::min(begin + grain_, n_items_), thread);
        if (done_chunks_.fetch_add(1, std::memory_order_acq_rel) + 1 == total) done_chunks_.notify_one();
        state = claim_.load(std::memory_order_acquire);
    }
}

inline void thread_pool::worker_main(int index) noexcept {
    uint32_t seen = 0;
    for (;;) {
        uint32_t gen = generation_.load(std::memory_order_acquire);
        for (int i = 0; gen == seen && i < thread_pool_detail::spin_iterations; ++i) {
            thread_pool_detail::cpu_relax();
            gen = generation_.load(std::memory_order_acquire);
        }
        if (gen == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            continue;
        }
        seen = gen;
        if (stopping_) return;
        run_chunks(index, gen);
    }
}

inline void thread_pool::run(int64_t n_items, int64_t grain, body_fn body, void *ctx) noexcept {
    if (n_items <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (workers_.empty() || n_items <= grain) {
        body(ctx, 0, n_items, 0);
        return;
    }
    // The claim counter holds 32 bits; a loop with more chunks than that gets bigger chunks.
    constexpr int64_t max_chunks = int64_t{1} << 30;
    if ((n_items + grain - 1) / grain > max_chunks) grain = (n_items + max_chunks - 1) / max_chunks;
    const auto n_chunks = static_cast<uint32_t>((n_items + grain - 1) / grain);

    body_ = body;
    ctx_ = ctx;
    n_items_ = n_items;
    grain_ = grain;
    n_chunks_ = n_chunks;
    done_chunks_.store(0, std::memory_order_relaxed);
    const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1; // only this thread writes it
    // The release publishes the task fields to every thread whose claim reads this value (or a later one).
    claim_.store(uint64_t{gen} << 32 | n_chunks, std::memory_order_release);
    generation_.store(gen, std::memory_order_release);
    generation_.notify_all();

    run_chunks(0, gen);

    // Wait for the chunks other threads claimed; once all are done no worker can touch ctx again.
    uint32_t done = done_chunks_.load(std::memory_order_acquire);
    for (int i = 0; done != n_chunks && i < thread_pool_detail::spin_iterations; ++i) {
        thread_pool_detail::cpu_relax();
        done = done_chunks_.load(std::memory_order_acquire);
    }
    while (done != n_chunks) {
        done_chunks_.wait(done, std::memory_order_acquire);
        done = done_chunks_.load(std::memory_order_acquire);
    }
}

} // namespace strata
