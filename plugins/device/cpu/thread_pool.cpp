#include "thread_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata::cpu {
namespace {

// Spin iterations before a thread sleeps: long enough (tens of microseconds) to cover the gap between two ops of
// one token, short enough not to burn a core while the engine does something else.
constexpr int spin_iterations = 1 << 12;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

bool pin_to_cpu(std::thread &t, int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t.native_handle(), sizeof set, &set) == 0;
}

} // namespace

thread_pool::thread_pool(int n_threads, std::span<const int> pin_cpus) : n_threads_(std::max(1, n_threads)) {
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    try {
        for (int i = 1; i < n_threads_; ++i) {
            workers_.emplace_back([this, i] { worker_main(i); });
            if (static_cast<size_t>(i) < pin_cpus.size() && !pin_to_cpu(workers_.back(), pin_cpus[i])) ++pin_failures_;
        }
    } catch (...) {
        // Thread creation failed part-way: stop the ones that started, then report.
        n_threads_ = static_cast<int>(workers_.size()) + 1;
        stop_workers();
        throw;
    }
}

thread_pool::~thread_pool() { stop_workers(); }

void thread_pool::stop_workers() noexcept {
    if (workers_.empty()) return;
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto &t : workers_) t.join();
    workers_.clear();
}

void thread_pool::run_chunks(int thread) noexcept {
    for (;;) {
        const int64_t begin = next_item_.fetch_add(grain_, std::memory_order_relaxed);
        if (begin >= n_items_) return;
        body_(ctx_, begin, std::min(begin + grain_, n_items_), thread);
    }
}

void thread_pool::worker_main(int index) noexcept {
    uint32_t seen = 0;
    for (;;) {
        uint32_t gen = generation_.load(std::memory_order_acquire);
        for (int i = 0; gen == seen && i < spin_iterations; ++i) {
            cpu_relax();
            gen = generation_.load(std::memory_order_acquire);
        }
        if (gen == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            continue;
        }
        seen = gen;
        if (stopping_) return;
        run_chunks(index);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
}

void thread_pool::run(int64_t n_items, int64_t grain, body_fn body, void *ctx) noexcept {
    if (n_items <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (workers_.empty() || n_items <= grain) {
        body(ctx, 0, n_items, 0);
        return;
    }
    body_ = body;
    ctx_ = ctx;
    n_items_ = n_items;
    grain_ = grain;
    next_item_.store(0, std::memory_order_relaxed);
    pending_.store(static_cast<int32_t>(workers_.size()), std::memory_order_relaxed);
    // The release publishes the task fields above to every worker that observes the new generation.
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();

    run_chunks(0);

    // Wait for every worker to leave the task (not just for the items), so the caller's ctx can go out of scope.
    int32_t left = pending_.load(std::memory_order_acquire);
    for (int i = 0; left != 0 && i < spin_iterations; ++i) {
        cpu_relax();
        left = pending_.load(std::memory_order_acquire);
    }
    while (left != 0) {
        pending_.wait(left, std::memory_order_acquire);
        left = pending_.load(std::memory_order_acquire);
    }
}

} // namespace strata::cpu
