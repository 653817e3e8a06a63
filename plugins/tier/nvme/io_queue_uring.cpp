// io_uring engine: up to depth requests in flight on one ring. Requests are prepared in push() and submitted in
// one system call when the caller waits, so a whole window of chunks costs one io_uring_enter.
#include "io_queue.hpp"

#include <liburing.h>

#include <cerrno>
#include <cstring>

namespace strata::nvme {

namespace {

class uring_queue final : public io_queue {
  public:
    uring_queue(uint32_t depth, int fd) : io_queue(depth), fd_(fd), slots_(depth) {
        free_.reserve(depth);
        for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
    }
    ~uring_queue() override {
        if (ring_ready_) io_uring_queue_exit(&ring_);
    }

    // 0 or a negative errno from io_uring_queue_init.
    int init() {
        const int rc = io_uring_queue_init(depth_, &ring_, 0);
        ring_ready_ = rc == 0;
        return rc;
    }

    void push(const io_request &r) override {
        const uint32_t slot = free_.back();
        free_.pop_back();
        slots_[slot] = r;
        prepare(slot);
        ++in_flight_;
    }

    io_completion wait_one() override {
        for (;;) {
            io_uring_cqe *cqe = nullptr;
            int rc = unsubmitted_ > 0 ? io_uring_submit_and_wait(&ring_, 1) : io_uring_wait_cqe(&ring_, &cqe);
            if (rc == -EINTR) continue;
            if (rc >= 0) {
                unsubmitted_ = 0;
                rc = io_uring_peek_cqe(&ring_, &cqe);
                if (rc == -EAGAIN) continue;
            }
            if (rc < 0) return fail_all(-rc); // the ring itself broke: report, nothing is left in flight
            const uint32_t slot = static_cast<uint32_t>(cqe->user_data);
            const int res = cqe->res;
            io_uring_cqe_seen(&ring_, cqe);
            io_request &r = slots_[slot];
            if (res == -EINTR || res == -EAGAIN) {
                prepare(slot); // the kernel asked us to retry
                continue;
            }
            if (res <= 0) return finish(slot, res < 0 ? -res : ENODATA);
            if (static_cast<uint64_t>(res) < r.length) {
                r.buffer += res; // short transfer: continue with the rest
                r.file_offset += static_cast<uint64_t>(res);
                r.length -= static_cast<uint64_t>(res);
                prepare(slot);
                continue;
            }
            return finish(slot, 0);
        }
    }

  private:
    void prepare(uint32_t slot) {
        const io_request &r = slots_[slot];
        io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) { // cannot happen with <= depth requests in flight, but never crash over it
            io_uring_submit(&ring_);
            unsubmitted_ = 0;
            sqe = io_uring_get_sqe(&ring_);
        }
        const unsigned n = static_cast<unsigned>(r.length);
        if (r.kind == io_kind::read) {
            io_uring_prep_read(sqe, fd_, r.buffer, n, r.file_offset);
        } else {
            io_uring_prep_write(sqe, fd_, r.buffer, n, r.file_offset);
        }
        io_uring_sqe_set_data64(sqe, slot);
        ++unsubmitted_;
    }

    io_completion finish(uint32_t slot, int error) {
        const io_request &r = slots_[slot];
        free_.push_back(slot);
        --in_flight_;
        return io_completion{r.tag, error, r.file_offset, r.length};
    }

    // After a ring failure the kernel may still own buffers of submitted requests; drain what completes, then
    // report the failure for one request per call so the caller's bookkeeping stays consistent.
    io_completion fail_all(int error) {
        for (uint32_t s = 0; s < depth_; ++s) {
            bool busy = true;
            for (uint32_t f : free_) busy = busy && f != s;
            if (busy) return finish(s, error);
        }
        return io_completion{0, error, 0, 0};
    }

    int fd_;
    io_uring ring_{};
    bool ring_ready_ = false;
    std::vector<io_request> slots_; // in-flight requests, indexed by user_data
    std::vector<uint32_t> free_;
    uint32_t unsubmitted_ = 0;
};

} // namespace

std::unique_ptr<io_queue> make_uring_queue(int fd, uint32_t depth, std::string *why_not) {
    auto q = std::make_unique<uring_queue>(depth, fd);
    const int rc = q->init();
    if (rc != 0) {
        if (why_not != nullptr) *why_not = std::string("io_uring_queue_init: ") + std::strerror(-rc);
        return nullptr;
    }
    return q;
}

} // namespace strata::nvme
