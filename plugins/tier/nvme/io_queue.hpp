// The nvme tier's I/O engines behind one small interface: queue up to depth() requests, then wait for them one by
// one. io_uring keeps them all in flight at once; the psync fallback (no io_uring: old kernel, seccomp) runs each
// request inside push() and only reports it in wait_one(), so the callers' pipelining code is the same for both.
//
// Neither engine is thread-safe: each concurrent read/write call of the tier borrows its own queue.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::nvme {

enum class io_kind : uint8_t { read, write };

struct io_request {
    io_kind kind = io_kind::read;
    unsigned char *buffer = nullptr; // for writes the engine only reads it
    uint64_t file_offset = 0;
    uint64_t length = 0;
    uint32_t tag = 0; // the caller's, returned with the completion
};

struct io_completion {
    uint32_t tag = 0;
    int error = 0;            // 0, or an errno value (ENODATA: the file ended early)
    uint64_t file_offset = 0; // of the part that failed, for messages
    uint64_t length = 0;
};

class io_queue {
  public:
    explicit io_queue(uint32_t depth) : depth_(depth) {}
    virtual ~io_queue() = default;
    io_queue(const io_queue &) = delete;
    io_queue &operator=(const io_queue &) = delete;

    uint32_t depth() const { return depth_; }
    uint32_t in_flight() const { return in_flight_; }

    // Queues one request. The caller keeps in_flight() < depth() and the buffer alive until its completion.
    virtual void push(const io_request &r) = 0;
    // Blocks until one queued request has completed entirely (short transfers are continued internally) or failed.
    // Only call with in_flight() > 0.
    virtual io_completion wait_one() = 0;

  protected:
    uint32_t depth_;
    uint32_t in_flight_ = 0;
};

// nullptr with *why_not set when io_uring cannot be used here.
std::unique_ptr<io_queue> make_uring_queue(int fd, uint32_t depth, std::string *why_not);
std::unique_ptr<io_queue> make_psync_queue(int fd, uint32_t depth);

} // namespace strata::nvme
