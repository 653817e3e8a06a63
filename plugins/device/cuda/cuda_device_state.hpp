// What a strata_device is for the CUDA plugin (internal to the plugin).
//
// Ordering: every op is enqueued on one compute stream and returns without waiting for the GPU; copy() runs on a
// separate copy stream after waiting (event) for the compute work enqueued before it, and the compute stream waits
// (event) for the copy, so work keeps the order the caller issued it in. copy() returns only when its bytes have
// arrived, which is also where a kernel's execution error surfaces.
//
// Fences (ABI 1.7): fence_record records one of a fixed pool of events on the compute stream; copy_after makes the
// copy stream wait only on that event, so a prefetch copy into a ring slot overlaps the layers queued after the
// slot's last reader instead of waiting for them too. Fence f lives in fence_events[f % fence_pool_size]; a fence
// whose event has since been recorded again is waited on through the newer record (later compute: safe, just less
// overlap).
#pragma once

#include "index_staging.hpp"

#include <strata/plugin_abi.h>

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

struct strata_device {
    strata_device() = default;
    strata_device(const strata_device &) = delete;
    strata_device &operator=(const strata_device &) = delete;
    ~strata_device();

    int index = 0;                          // CUDA device ordinal ([cuda] device_index)
    const strata_host_services *host = nullptr; // borrowed, may be null
    std::string name;                       // e.g. "NVIDIA H200"
    int cc_major = 0, cc_minor = 0;
    cudaStream_t compute = nullptr;
    cudaStream_t copy = nullptr;
    // Prefetch copies (copy_after) get a stream of their own: a plain copy (KV swap, logits) waits for all compute
    // queued before it, and prefetches queued behind it on one stream would wait for that too.
    cudaStream_t prefetch = nullptr;
    cudaEvent_t compute_done = nullptr; // recorded on compute; the copy stream waits on it
    // More than the fences a prefetch ring keeps in flight (about one per slot), so a fence is normally exact.
    static constexpr uint64_t fence_pool_size = 64;
    std::array<cudaEvent_t, fence_pool_size> fence_events{}; // created with the streams, recorded by fence_record
    std::atomic<uint64_t> last_fence{0}; // the newest fence id recorded; written under `mutex`, read by copy_after checks
    strata::cuda::index_staging staging;
    // matmul's activations gathered into a weight's input order (GPTQ act-order); grows (cudaMalloc, which waits for
    // the device), never shrinks.
    float *gathered = nullptr;
    size_t gathered_bytes = 0;
    cudaError_t reserve_gathered(size_t bytes);
    std::mutex mutex; // serialises calls: the staging ring and the events serve one call at a time
};

namespace strata::cuda {

// The device ordinal must be current on the calling thread for runtime calls to reach it (the engine may call from
// another thread than create()'s).
cudaError_t make_current(const strata_device *dev);

// Writes "<what>: <cudaGetErrorName>: <cudaGetErrorString>" into st and clears the runtime's last error, so a later
// launch check does not report this failure again. Returns code.
int32_t fail_cuda(strata_status *st, int32_t code, cudaError_t err, const char *what);

} // namespace strata::cuda
