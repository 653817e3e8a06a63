// psync engine: pread/pwrite, one request at a time. Used where io_uring is unavailable or when asked for
// (io_engine = "psync"). push() performs the transfer; wait_one() hands the completions back in order.
#include "io_queue.hpp"

#include <unistd.h>

#include <cerrno>

namespace strata::nvme {

namespace {

class psync_queue final : public io_queue {
  public:
    psync_queue(int fd, uint32_t depth) : io_queue(depth), fd_(fd), done_(depth) {}

    void push(const io_request &r) override {
        io_completion c{r.tag, 0, r.file_offset, r.length};
        uint64_t done = 0;
        while (done < r.length) {
            const size_t n = static_cast<size_t>(r.length - done);
            const off_t at = static_cast<off_t>(r.file_offset + done);
            const ssize_t got = r.kind == io_kind::read ? pread(fd_, r.buffer + done, n, at)
                                                        : pwrite(fd_, r.buffer + done, n, at);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                c.error = got < 0 ? errno : ENODATA; // 0 bytes: the file is shorter than it should be
                c.file_offset = r.file_offset + done;
                c.length = r.length - done;
                break;
            }
            done += static_cast<uint64_t>(got); // a short transfer continues where it stopped
        }
        done_[(head_ + in_flight_) % depth_] = c;
        ++in_flight_;
    }

    io_completion wait_one() override {
        const io_completion c = done_[head_];
        head_ = (head_ + 1) % depth_;
        --in_flight_;
        return c;
    }

  private:
    int fd_;
    std::vector<io_completion> done_; // ring of completed requests, in push order
    uint32_t head_ = 0;
};

} // namespace

std::unique_ptr<io_queue> make_psync_queue(int fd, uint32_t depth) { return std::make_unique<psync_queue>(fd, depth); }

} // namespace strata::nvme
