// Runs the CUDA plugin's kernel headers (plugins/device/cuda/kernels_*.cuh) on the host, so their indexing,
// reductions and barriers are exercised on machines without a GPU. Include this first in its translation unit.
//
// The execution model, emulated: a launch runs its blocks one after another; a block's threads are fibers
// (ucontext) on the calling thread, scheduled round-robin. __syncthreads() is a barrier over the block's running
// threads, a warp shuffle is a write-barrier-read-barrier over the warp's running lanes, and __shared__ variables are
// function statics, which the threads of the one block running share. Device memory is host memory. A fiber starts
// with setcontext and then switches with _setjmp/_longjmp, which (unlike swapcontext) make no system call.
//
// What this does not show: anything about real GPU timing, memory coalescing, races between warps that a real GPU
// would expose, or the device math library's last-bit behaviour (host expf/cosf stand in). It checks logic, not the
// hardware: a pass here is not a GPU result.
#pragma once

#define STRATA_CUDA_HOST_EMULATION 1

// Fortified longjmp refuses to jump between stacks; these jumps go between fiber stacks on purpose.
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif

#include <math.h>
#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

// ---- the CUDA spellings the kernels use ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
using cudaError_t = int;
using cudaStream_t = void *;
inline constexpr cudaError_t cudaSuccess = 0;
inline constexpr cudaError_t cudaErrorInvalidValue = 1;

// Set by the scheduler before it resumes a thread.
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }

namespace cuda_emulation {

constexpr size_t stack_bytes = 128 << 10;
constexpr unsigned lanes = 32;

struct fiber {
    ucontext_t context{};
    jmp_buf jump{};
    std::unique_ptr<char[]> stack;
    uint3 index{};
    bool started = false;
    bool done = false;
};

struct block_run {
    std::vector<fiber> threads;
    jmp_buf scheduler{};
    size_t current = 0;
    void (*body)(void *) = nullptr;
    void *body_arg = nullptr;
    // __syncthreads()
    uint64_t block_generation = 0;
    size_t block_arrived = 0;
    // warp shuffles
    std::vector<float> slots;
    std::vector<uint64_t> warp_generation;
    std::vector<size_t> warp_arrived;
};

inline block_run *running = nullptr;

inline void yield() {
    block_run &r = *running;
    if (_setjmp(r.threads[r.current].jump) == 0) _longjmp(r.scheduler, 1);
}

inline size_t live_threads(size_t first, size_t count) {
    size_t n = 0;
    for (size_t i = first; i < first + count && i < running->threads.size(); ++i) n += running->threads[i].done ? 0 : 1;
    return n;
}

// A barrier over threads [first, first + count) that are still running.
inline void barrier(uint64_t &generation, size_t &arrived, size_t first, size_t count) {
    const uint64_t mine = generation;
    ++arrived;
    while (generation == mine) {
        if (arrived >= live_threads(first, count)) {
            arrived = 0;
            ++generation;
            break;
        }
        yield();
    }
}

inline void block_barrier() {
    block_run &r = *running;
    barrier(r.block_generation, r.block_arrived, 0, r.threads.size());
}

inline float shuffle(float v, unsigned source_lane) {
    block_run &r = *running;
    const size_t me = r.current, warp = me / lanes, base = warp * lanes;
    r.slots[me] = v;
    barrier(r.warp_generation[warp], r.warp_arrived[warp], base, lanes);
    const size_t from = base + source_lane;
    const float out = from < r.threads.size() ? r.slots[from] : v;
    barrier(r.warp_generation[warp], r.warp_arrived[warp], base, lanes);
    return out;
}

[[noreturn]] inline void fiber_entry() {
    block_run &r = *running;
    r.body(r.body_arg);
    r.threads[r.current].done = true;
    _longjmp(r.scheduler, 1);
}

// Runs thread i until it yields or finishes. The jump back lands in this frame, which has no state to lose.
__attribute__((noinline)) inline void resume(block_run &r, size_t i) {
    fiber &f = r.threads[i];
    if (_setjmp(r.scheduler) != 0) return;
    if (!f.started) {
        f.started = true;
        setcontext(&f.context);
    }
    _longjmp(f.jump, 1);
}

// Runs every block of the grid; returns cudaSuccess.
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t, Args... args) {
    const size_t n_threads = size_t{block.x} * block.y * block.z;
    if (n_threads == 0 || n_threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) return cudaErrorInvalidValue;
    std::tuple<Params...> params(args...);
    struct call {
        void (*kernel)(Params...);
        std::tuple<Params...> *params;
        static void run(void *self) {
            auto *c = static_cast<call *>(self);
            std::apply(c->kernel, *c->params);
        }
    } c{kernel, &params};

    block_run r;
    r.threads.resize(n_threads);
    for (auto &t : r.threads) t.stack.reset(new char[stack_bytes]); // not zeroed: fibers start on fresh frames
    r.slots.assign(n_threads, 0.0f);
    const size_t n_warps = (n_threads + lanes - 1) / lanes;
    r.warp_generation.assign(n_warps, 0);
    r.warp_arrived.assign(n_warps, 0);
    r.body = &call::run;
    r.body_arg = &c;
    block_run *outer = running;
    running = &r;
    blockDim = block;
    gridDim = grid;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = uint3{bx, by, bz};
                for (size_t i = 0; i < n_threads; ++i) {
                    fiber &f = r.threads[i];
                    f.done = false;
                    f.started = false;
                    f.index = uint3{static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x % block.y),
                                    static_cast<unsigned>(i / (size_t{block.x} * block.y))};
                    getcontext(&f.context);
                    f.context.uc_stack.ss_sp = f.stack.get();
                    f.context.uc_stack.ss_size = stack_bytes;
                    f.context.uc_link = nullptr; // fiber_entry never returns
                    makecontext(&f.context, fiber_entry, 0);
                }
                r.block_generation = 0;
                r.block_arrived = 0;
                std::fill(r.warp_generation.begin(), r.warp_generation.end(), 0);
                std::fill(r.warp_arrived.begin(), r.warp_arrived.end(), 0);
                for (size_t remaining = n_threads; remaining > 0;) {
                    remaining = 0;
                    for (size_t i = 0; i < n_threads; ++i) {
                        if (r.threads[i].done) continue;
                        r.current = i;
                        threadIdx = r.threads[i].index;
                        resume(r, i);
                        remaining += r.threads[i].done ? 0 : 1;
                    }
                }
            }
    running = outer;
    return cudaSuccess;
}

} // namespace cuda_emulation

inline void __syncthreads() { cuda_emulation::block_barrier(); }

inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    const unsigned lane = static_cast<unsigned>(cuda_emulation::running->current % cuda_emulation::lanes);
    return cuda_emulation::shuffle(v, lane ^ static_cast<unsigned>(lane_mask));
}

inline float __shfl_down_sync(unsigned, float v, unsigned delta) {
    const unsigned lane = static_cast<unsigned>(cuda_emulation::running->current % cuda_emulation::lanes);
    // Lanes past the warp's end get their own value back, as on the GPU.
    return lane + delta < cuda_emulation::lanes ? cuda_emulation::shuffle(v, lane + delta)
                                                : cuda_emulation::shuffle(v, lane);
}
