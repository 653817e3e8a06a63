#include "region_io.hpp"

#include <strata/plugin.hpp>

#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace strata::nvme {

namespace {

constexpr uint64_t page = 4096;

uint64_t round_up(uint64_t v) { return (v + page - 1) / page * page; }
uint64_t round_down(uint64_t v) { return v / page * page; }
bool page_aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % page == 0; }

} // namespace

io_context::io_context(std::unique_ptr<io_queue> queue, uint64_t block_size, uint32_t staging_slots)
    : queue_(std::move(queue)), block_size_(block_size) {
    void *mem = nullptr;
    if (posix_memalign(&mem, page, static_cast<size_t>(block_size * staging_slots)) != 0) throw std::bad_alloc();
    staging_ = static_cast<unsigned char *>(mem);
    hash_ = XXH3_createState();
    if (hash_ == nullptr) {
        std::free(staging_);
        throw std::bad_alloc();
    }
    for (uint32_t s = staging_slots; s > 0; --s) free_slots_.push_back(static_cast<int32_t>(s - 1));
    jobs_.resize(queue_->depth());
    for (uint32_t j = queue_->depth(); j > 0; --j) free_jobs_.push_back(j - 1);
}

io_context::~io_context() {
    // The queue owns no buffers but may still reference staging in the kernel after a failed ring: drop it first.
    queue_.reset();
    XXH3_freeState(hash_);
    std::free(staging_);
}

// The part of chunk `chunk` that the call [offset, offset + bytes) touches.
chunk_job io_context::plan(const region_state &r, uint64_t chunk, uint64_t offset, uint64_t bytes) const {
    chunk_job j;
    j.chunk = chunk;
    j.start = chunk * block_size_;
    j.logical = std::min(block_size_, r.size - j.start);
    j.padded = round_up(j.logical);
    j.want_begin = std::max(offset, j.start) - j.start;
    j.want_end = std::min(offset + bytes, j.start + j.logical) - j.start;
    return j;
}

uint32_t io_context::take_job() {
    const uint32_t j = free_jobs_.back();
    free_jobs_.pop_back();
    jobs_[j].failed = false;
    return j;
}

void io_context::release(uint32_t job) {
    chunk_job &j = jobs_[job];
    if (j.slot >= 0) free_slots_.push_back(j.slot);
    j.slot = -1;
    free_jobs_.push_back(job);
}

void io_context::push(io_kind kind, unsigned char *buffer, uint64_t file_offset, uint64_t length, uint32_t tag) {
    queue_->push(io_request{kind, buffer, file_offset, length, tag});
    ++jobs_[tag].pending;
}

void io_context::fail_io(const region_state &r, const io_completion &c, bool reading, strata_status *st) {
    if (result_ != STRATA_OK) return; // the first error is the one worth reading
    if (c.error == ENODATA) {
        result_ = plugin::fail(st, STRATA_ERR_IO,
                               "nvme: the tier file ended at offset %llu while %s region %llu (was it truncated behind "
                               "the runtime's back?)",
                               static_cast<unsigned long long>(c.file_offset), reading ? "reading" : "writing",
                               static_cast<unsigned long long>(r.id));
    } else {
        result_ = plugin::fail(st, STRATA_ERR_IO, "nvme: %s %llu bytes at file offset %llu (region %llu) failed: %s",
                               reading ? "reading" : "writing", static_cast<unsigned long long>(c.length),
                               static_cast<unsigned long long>(c.file_offset), static_cast<unsigned long long>(r.id),
                               std::strerror(c.error));
    }
}

// Checks the whole chunk against its checksum. The bytes are in the staging slot, except the direct part
// [direct_begin, direct_end), which is already in the caller's buffer at direct_part.
bool io_context::verify(const region_state &r, const chunk_job &j, const unsigned char *direct_part, strata_status *st) {
    uint64_t h = 0;
    if (j.direct_begin < j.direct_end) {
        const unsigned char *slot = j.slot >= 0 ? slot_memory(j.slot) : nullptr;
        XXH3_64bits_reset(hash_);
        if (j.direct_begin > 0) XXH3_64bits_update(hash_, slot, static_cast<size_t>(j.direct_begin));
        XXH3_64bits_update(hash_, direct_part, static_cast<size_t>(j.direct_end - j.direct_begin));
        if (j.logical > j.direct_end)
            XXH3_64bits_update(hash_, slot + j.direct_end, static_cast<size_t>(j.logical - j.direct_end));
        h = XXH3_64bits_digest(hash_);
    } else {
        h = XXH3_64bits(slot_memory(j.slot), static_cast<size_t>(j.logical));
    }
    if (h == r.chunk_hash[j.chunk]) return true;
    if (result_ == STRATA_OK) {
        result_ = plugin::fail(st, STRATA_ERR_IO,
                               "nvme: checksum mismatch in region %llu at offset %llu (chunk of %llu bytes): the NVMe "
                               "file was modified or the device returned bad data",
                               static_cast<unsigned long long>(r.id), static_cast<unsigned long long>(j.start),
                               static_cast<unsigned long long>(j.logical));
    }
    return false;
}

int32_t io_context::read(const region_state &r, uint64_t offset, unsigned char *dst, uint64_t bytes,
                         strata_status *st) {
    result_ = STRATA_OK;
    const uint64_t last = (offset + bytes - 1) / block_size_;
    uint64_t next = offset / block_size_;
    while (next <= last || queue_->in_flight() > 0) {
        // Fill the window: as many chunks as the queue, the staging slots and the job records allow.
        while (next <= last && result_ == STRATA_OK) {
            chunk_job j = plan(r, next, offset, bytes);
            // dst address of chunk byte x, for x >= want_begin (the chunk may start before the caller's range).
            auto dst_at = [&](uint64_t x) { return dst + (j.start + x - offset); };
            if (!r.chunk_written[next]) {
                std::memset(dst_at(j.want_begin), 0, static_cast<size_t>(j.want_end - j.want_begin));
                ++next;
                continue;
            }
            j.direct_begin = round_up(j.want_begin);
            j.direct_end = round_down(j.want_end);
            bool direct = j.direct_begin < j.direct_end && page_aligned(dst_at(j.direct_begin));
            const bool head = direct && j.direct_begin > 0;
            const bool tail = direct && j.direct_end < j.padded;
            uint32_t requests = direct ? 1u + head + tail : 1u;
            if (requests > queue_->depth()) { // a shallow queue stages the whole chunk in one request
                direct = false;
                requests = 1;
            }
            if (!direct) j.direct_begin = j.direct_end = 0;
            const bool staged = !direct || head || tail;
            if (requests > queue_->depth() - queue_->in_flight() || (staged && free_slots_.empty()) ||
                free_jobs_.empty())
                break;
            const uint32_t id = take_job();
            j.slot = -1;
            if (staged) {
                j.slot = free_slots_.back();
                free_slots_.pop_back();
            }
            j.what = chunk_job::step::read;
            j.pending = 0;
            jobs_[id] = j;
            const uint64_t at = r.file_offset + j.start;
            unsigned char *slot = staged ? slot_memory(j.slot) : nullptr;
            if (!direct) {
                push(io_kind::read, slot, at, j.padded, id);
            } else {
                if (j.direct_begin > 0) push(io_kind::read, slot, at, j.direct_begin, id);
                push(io_kind::read, dst_at(j.direct_begin), at + j.direct_begin, j.direct_end - j.direct_begin, id);
                if (j.direct_end < j.padded)
                    push(io_kind::read, slot + j.direct_end, at + j.direct_end, j.padded - j.direct_end, id);
            }
            ++next;
        }
        if (queue_->in_flight() == 0) {
            if (result_ != STRATA_OK) break;
            continue;
        }
        const io_completion c = queue_->wait_one();
        chunk_job &j = jobs_[c.tag];
        if (c.error != 0) {
            j.failed = true;
            fail_io(r, c, true, st);
        }
        if (--j.pending > 0) continue;
        auto dst_at = [&](uint64_t x) { return dst + (j.start + x - offset); };
        const bool had_direct = j.direct_begin < j.direct_end;
        if (!j.failed && verify(r, j, had_direct ? dst_at(j.direct_begin) : nullptr, st)) {
            // Copy the caller's bytes that were staged: all of them, or just the edges around the direct part.
            const unsigned char *slot = j.slot >= 0 ? slot_memory(j.slot) : nullptr;
            if (j.direct_begin == j.direct_end) {
                std::memcpy(dst_at(j.want_begin), slot + j.want_begin, static_cast<size_t>(j.want_end - j.want_begin));
            } else {
                if (j.want_begin < j.direct_begin)
                    std::memcpy(dst_at(j.want_begin), slot + j.want_begin,
                                static_cast<size_t>(j.direct_begin - j.want_begin));
                if (j.direct_end < j.want_end)
                    std::memcpy(dst_at(j.direct_end), slot + j.direct_end,
                                static_cast<size_t>(j.want_end - j.direct_end));
            }
        }
        release(c.tag);
    }
    if (result_ == STRATA_OK) plugin::ok(st);
    return result_;
}

int32_t io_context::write(region_state &r, uint64_t offset, const unsigned char *src, uint64_t bytes,
                          strata_status *st) {
    result_ = STRATA_OK;
    const uint64_t last = (offset + bytes - 1) / block_size_;
    uint64_t next = offset / block_size_;
    while (next <= last || queue_->in_flight() > 0) {
        while (next <= last && result_ == STRATA_OK) {
            chunk_job j = plan(r, next, offset, bytes);
            const bool whole = j.want_begin == 0 && j.want_end == j.logical;
            const unsigned char *src_want = src + (j.start + j.want_begin - offset); // the caller's bytes for it
            // The caller's buffer goes to the device as is when it is a whole, page-aligned, page-sized chunk.
            const bool direct = whole && j.logical == j.padded && page_aligned(src_want);
            if (queue_->in_flight() == queue_->depth() || (!direct && free_slots_.empty()) || free_jobs_.empty())
                break;
            const uint32_t id = take_job();
            j.slot = -1;
            if (!direct) {
                j.slot = free_slots_.back();
                free_slots_.pop_back();
            }
            j.pending = 0;
            const uint64_t at = r.file_offset + j.start;
            unsigned char *slot = direct ? nullptr : slot_memory(j.slot);
            if (direct) {
                j.what = chunk_job::step::write;
                j.new_hash = XXH3_64bits(src_want, static_cast<size_t>(j.logical));
                jobs_[id] = j;
                push(io_kind::write, const_cast<unsigned char *>(src_want), at, j.padded, id); // only read from
            } else if (whole || !r.chunk_written[next]) {
                // Nothing old to keep: the chunk is the caller's bytes (zeros around them for a fresh chunk).
                if (!whole) std::memset(slot, 0, static_cast<size_t>(j.padded));
                std::memcpy(slot + j.want_begin, src_want, static_cast<size_t>(j.want_end - j.want_begin));
                std::memset(slot + j.logical, 0, static_cast<size_t>(j.padded - j.logical));
                j.what = chunk_job::step::write;
                j.new_hash = XXH3_64bits(slot, static_cast<size_t>(j.logical));
                jobs_[id] = j;
                push(io_kind::write, slot, at, j.padded, id);
            } else {
                j.what = chunk_job::step::rmw_read; // partial overwrite: fetch the chunk, patch it, write it back
                jobs_[id] = j;
                push(io_kind::read, slot, at, j.padded, id);
            }
            ++next;
        }
        if (queue_->in_flight() == 0) {
            if (result_ != STRATA_OK) break;
            continue;
        }
        const io_completion c = queue_->wait_one();
        chunk_job &j = jobs_[c.tag];
        if (c.error != 0) {
            j.failed = true;
            fail_io(r, c, j.what == chunk_job::step::rmw_read, st);
        }
        if (--j.pending > 0) continue;
        if (j.what == chunk_job::step::rmw_read && !j.failed && result_ == STRATA_OK && verify(r, j, nullptr, st)) {
            unsigned char *slot = slot_memory(j.slot);
            const unsigned char *src_want = src + (j.start + j.want_begin - offset);
            std::memcpy(slot + j.want_begin, src_want, static_cast<size_t>(j.want_end - j.want_begin));
            j.new_hash = XXH3_64bits(slot, static_cast<size_t>(j.logical));
            j.what = chunk_job::step::write;
            // The read that just completed freed its place in the queue, so the write always fits.
            push(io_kind::write, slot, r.file_offset + j.start, j.padded, c.tag);
            continue;
        }
        if (j.what == chunk_job::step::write && !j.failed) {
            r.chunk_hash[j.chunk] = j.new_hash;
            r.chunk_written[j.chunk] = 1;
        }
        release(c.tag);
    }
    if (result_ == STRATA_OK) plugin::ok(st);
    return result_;
}

} // namespace strata::nvme
