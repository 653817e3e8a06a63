#include "common/progress.hpp"

#include "common/log.hpp"

#include <algorithm>
#include <cstdio>
#include <sys/mman.h>
#include <unistd.h>

namespace strata {

progress::progress(std::string what, uint64_t total)
    : what_(std::move(what)), total_(total == 0 ? 1 : total), tty_(isatty(STDERR_FILENO) != 0) {}

progress::~progress() { finish(); }

void progress::update(uint64_t done) {
    const int pct = static_cast<int>(done * 100 / total_);
    if (tty_) {
        if (pct == last_shown_) return;
        last_shown_ = pct;
        std::fprintf(stderr, "\r%s: %3d%%", what_.c_str(), pct);
        std::fflush(stderr);
    } else {
        const int quarter = pct / 25;
        if (quarter == last_shown_ || quarter == 0 || quarter >= 4) return;
        last_shown_ = quarter;
        log::info("load", "{}: {}%", what_, quarter * 25);
    }
}

void progress::finish() {
    if (finished_) return;
    finished_ = true;
    if (tty_) std::fprintf(stderr, "\r%s: 100%%\n", what_.c_str());
    else log::info("load", "{}: done", what_);
}

void prefault(const void *data, uint64_t size) {
    const auto *p = static_cast<const volatile unsigned char *>(data);
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    // madvise needs a page-aligned start; the kernel reads ahead, then one byte per page makes it resident.
    const uint64_t start = reinterpret_cast<uint64_t>(data) / page * page;
    madvise(reinterpret_cast<void *>(start), size + (reinterpret_cast<uint64_t>(data) - start), MADV_WILLNEED);
    unsigned char sink = 0;
    for (uint64_t i = 0; i < size; i += page) sink ^= p[i];
    (void)sink;
}

void prefault_with_progress(const void *data, uint64_t size, const std::string &what) {
    const auto *p = static_cast<const unsigned char *>(data);
    const uint64_t step = uint64_t{64} << 20; // report every 64 MiB
    progress bar(what, size);
    for (uint64_t off = 0; off < size; off += step) {
        const uint64_t end = std::min(size, off + step);
        prefault(p + off, end - off);
        bar.update(end);
    }
    bar.finish();
}

} // namespace strata
