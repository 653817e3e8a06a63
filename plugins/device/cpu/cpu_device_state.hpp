// What a strata_device is for the CPU plugin (internal to the plugin).
#pragma once

#include "cpu_kernels.hpp"
#include "separate_memory.hpp"
#include <strata/thread_pool.hpp>

#include <strata/plugin_abi.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

struct strata_device {
    strata_device(int n_threads, std::span<const int> pin_cpus, const strata::cpu::kernels &k,
                  const strata_host_services *h);

    // Makes every thread's attention score buffer hold at least n_positions floats. Grows by at least 2x, so only
    // O(log n_ctx) allocations happen in a device's life; never shrinks.
    void reserve_scores(int64_t n_positions);
    float *scores_of(int thread) { return scores.get() + thread * scores_per_thread; }
    // Makes the quantized-activation scratch (matmul's integer path) hold at least `bytes`; same growth rule.
    void reserve_activations(int64_t bytes);
    void reserve_gathered(int64_t floats);
    // The segment partials of a split attention op (attend_items) hold at least `floats`; grows, never shrinks.
    float *reserve_partials(int64_t floats) {
        if (static_cast<int64_t>(partials.size()) < floats) partials.resize(static_cast<size_t>(floats));
        return partials.data();
    }

    strata::thread_pool pool;
    const strata::cpu::kernels &kern;
    const strata_host_services *host; // borrowed, may be null
    // [cpu] separate_memory: report host_addressable = 0 so the host moves data as it must for a discrete GPU
    // (weights uploaded, KV and logits through `copy`); a test mode for those paths on machines without a GPU.
    bool separate_memory = false;
    strata::cpu::device_ranges ranges; // what mem_alloc handed out (kept in separate_memory mode only)
    std::mutex op_mutex;              // serialises ops: the pool and the scratch serve one op at a time
    // The newest id fence_record returned. Ops complete on return, so a fence orders nothing; the ids exist so the
    // host's fence path (the prefetch ring's copy_after) runs, and is checked, on the CPU device too.
    std::atomic<uint64_t> last_fence{0};

    std::unique_ptr<float[]> scores;
    int64_t scores_per_thread = 0;
    // The activations of the current matmul in the weight format's activation blocks, one row per token. 64-byte
    // aligned (the ABI asks for 16).
    struct free_deleter {
        void operator()(void *p) const noexcept { std::free(p); }
    };
    std::unique_ptr<unsigned char[], free_deleter> activations;
    int64_t activation_bytes = 0;
    // The activations of the current matmul gathered into a weight's input order (GPTQ act-order), one row per
    // token; grows, never shrinks.
    std::unique_ptr<float[]> gathered;
    int64_t gathered_floats = 0;
    // matmul_id's slots grouped by expert (offsets, then slot indices); grows, never shrinks.
    std::vector<int32_t> expert_slots;
    // matmul_id's prefill: the slots' quantized activations in expert order, and their outputs by row (they grow to
    // the largest batch and stay).
    std::vector<unsigned char> expert_activations;
    std::vector<float> expert_outputs;
    std::vector<float> partials; // reserve_partials
};

namespace strata::cpu {

// Positions the score scratch covers from create() on, so typical contexts never allocate in an op.
constexpr int64_t initial_score_positions = 4096;
// Quantized-activation bytes preallocated in create(): a decode step of any model up to ~60k columns (Q8_0 blocks)
// and small batches never allocate.
constexpr int64_t initial_activation_bytes = 64 << 10;

} // namespace strata::cpu
