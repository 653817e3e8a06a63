// Uploads of the small host-memory index arrays ops receive (token ids, positions, block tables) to device memory,
// without allocating or synchronising per op.
//
// A pinned host buffer and a device buffer of the same size are split into `segment_count` segments and used as a
// ring: an op packs its arrays into the next free bytes of the current segment (host side), one cudaMemcpyAsync on
// the compute stream moves them to the same offsets on the device, and its kernel reads them there. Stream order
// makes reusing device bytes safe (the next copy into them runs after every kernel queued before it). Host bytes
// are reused only after an event recorded when their segment was left has completed, which waits only when the GPU
// is a whole ring behind. A request larger than a segment grows the buffers (after synchronising the stream); that
// happens a few times in a device's life, not per token.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace strata::cuda {

class index_staging {
  public:
    static constexpr int segment_count = 4;
    static constexpr size_t initial_segment_bytes = 256 << 10;
    static constexpr size_t alignment = 16;

    index_staging() = default;
    index_staging(const index_staging &) = delete;
    index_staging &operator=(const index_staging &) = delete;
    ~index_staging() { release(); }

    // Allocates the buffers and events (segment_bytes each segment). The current device must be set.
    cudaError_t init(size_t segment_bytes = initial_segment_bytes);
    void release();

    // A packed upload in the making: add() copies arrays into host staging and returns where each will be on the
    // device; upload() queues the one copy.
    class batch {
      public:
        // Copies `bytes` from `src` into the batch (16-byte aligned); returns its device address.
        const void *add(const void *src, size_t bytes);
        cudaError_t upload();

      private:
        friend class index_staging;
        index_staging *owner_ = nullptr;
        cudaStream_t stream_ = nullptr;
        size_t begin_ = 0, end_ = 0;
    };

    // Reserves `total_bytes` (the sum of the arrays, each rounded up to `alignment`) for uploads on `stream`.
    cudaError_t begin(size_t total_bytes, cudaStream_t stream, batch *out);

    static size_t padded(size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }
    size_t segment_bytes() const { return segment_bytes_; }
    int grow_count() const { return grow_count_; }

  private:
    cudaError_t grow(size_t segment_bytes, cudaStream_t stream);

    unsigned char *host_ = nullptr;   // pinned, segment_count * segment_bytes_
    unsigned char *device_ = nullptr; // same size
    size_t segment_bytes_ = 0;
    int segment_ = 0;    // current segment
    size_t offset_ = 0;  // next free byte in it
    std::array<cudaEvent_t, segment_count> left_{};   // recorded when a segment was left
    std::array<bool, segment_count> pending_{};       // left_[i] has been recorded since the segment was last entered
    int grow_count_ = 0;
};

} // namespace strata::cuda
