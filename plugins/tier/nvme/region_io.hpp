// Reads and writes of one nvme region, chunk by chunk, with a checksum per chunk.
//
// Layout: a region is a 4096-aligned extent of the tier file cut into chunks of block_size bytes (the last one
// shorter, padded on disk to 4096). Each chunk has an XXH3-64 checksum of its bytes, set when the chunk is written
// and verified on every read of it; a chunk never written reads as zeros without touching the disk.
//
// Reads keep up to queue_depth requests in flight. Where the caller's buffer lines up with the file on a 4096
// boundary, the bytes go straight from the device into the caller's buffer (no staging copy); only the edges of a
// chunk the caller did not ask for (needed to verify the whole chunk's checksum) land in a staging slot. Writes
// that cover a chunk partly read it first (read-modify-write), so the chunk's checksum always covers all its bytes.
#pragma once

#include "io_queue.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

struct XXH3_state_s;

namespace strata::nvme {

// One live region. Readers hold `lock` shared, writers exclusive, so a read never sees a chunk and its checksum
// from two different writes.
struct region_state {
    uint64_t id = 0;
    uint64_t file_offset = 0; // multiple of 4096
    uint64_t size = 0;        // bytes the caller may read and write
    std::vector<uint64_t> chunk_hash;
    std::vector<uint8_t> chunk_written;
    std::shared_mutex lock;
};

// What one chunk in flight needs; kept in the context so nothing is allocated per call.
struct chunk_job {
    enum class step : uint8_t { read, rmw_read, write };
    uint64_t chunk = 0;
    uint64_t start = 0;   // region offset of the chunk
    uint64_t logical = 0; // bytes of region data in the chunk
    uint64_t padded = 0;  // bytes on disk (logical rounded up to 4096)
    uint64_t want_begin = 0, want_end = 0;     // the caller's part, relative to the chunk
    uint64_t direct_begin = 0, direct_end = 0; // read straight into the caller's buffer (empty: all staged)
    uint64_t new_hash = 0;
    int32_t slot = -1; // staging slot, -1 when none
    uint32_t pending = 0;
    step what = step::read;
    bool failed = false;
};

// Everything one concurrent read/write call uses: a queue, staging slots, job records, a hash state.
class io_context {
  public:
    // Throws std::bad_alloc when the staging memory cannot be had.
    io_context(std::unique_ptr<io_queue> queue, uint64_t block_size, uint32_t staging_slots);
    ~io_context();
    io_context(const io_context &) = delete;
    io_context &operator=(const io_context &) = delete;

    // Both return STRATA_OK or fill *st. The range [offset, offset + bytes) must already be checked against
    // r.size, bytes > 0, and the caller holds r.lock (shared for read, exclusive for write).
    int32_t read(const region_state &r, uint64_t offset, unsigned char *dst, uint64_t bytes, strata_status *st);
    int32_t write(region_state &r, uint64_t offset, const unsigned char *src, uint64_t bytes, strata_status *st);

  private:
    chunk_job plan(const region_state &r, uint64_t chunk, uint64_t offset, uint64_t bytes) const;
    unsigned char *slot_memory(int32_t slot) const { return staging_ + static_cast<uint64_t>(slot) * block_size_; }
    uint32_t take_job();
    void release(uint32_t job);
    void push(io_kind kind, unsigned char *buffer, uint64_t file_offset, uint64_t length, uint32_t tag);
    bool verify(const region_state &r, const chunk_job &j, const unsigned char *dst_chunk, strata_status *st);
    void fail_io(const region_state &r, const io_completion &c, bool reading, strata_status *st);

    std::unique_ptr<io_queue> queue_;
    uint64_t block_size_;
    unsigned char *staging_ = nullptr; // staging slots, block_size bytes each, 4096-aligned
    std::vector<int32_t> free_slots_;
    std::vector<chunk_job> jobs_; // one per request the queue can hold
    std::vector<uint32_t> free_jobs_;
    XXH3_state_s *hash_ = nullptr;
    int32_t result_ = 0; // first error of the current call
};

} // namespace strata::nvme
