#include "common/mapped_file.hpp"

#include "common/error.hpp"
#include "common/progress.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace strata {

namespace {

// Closes a descriptor on every path out of open.
struct fd_guard {
    int fd;
    ~fd_guard() { ::close(fd); }
};

// Unmaps on every path out unless released.
struct unmap_guard {
    void *addr;
    size_t size;
    ~unmap_guard() {
        if (addr != nullptr) ::munmap(addr, size);
    }
};

// --no-mmap: the file's bytes in anonymous memory, read in 64 MiB pieces with progress, then made read-only like the
// mapping they replace.
void *read_whole_file(int fd, size_t size, const std::string &path) {
    void *addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) fail("{}: cannot allocate {} bytes to read the model into (mmap = false): {}", path, size,
                                 std::strerror(errno));
    unmap_guard guard{addr, size};
    progress shown("reading " + path, size);
    auto *dst = static_cast<uint8_t *>(addr);
    size_t done = 0;
    while (done < size) {
        const size_t piece = std::min<size_t>(size - done, size_t{64} << 20);
        const ssize_t n = ::pread(fd, dst + done, piece, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("{}: read failed at byte {}: {}", path, done, std::strerror(errno));
        if (n == 0) fail("{}: the file ended at byte {} of {} while it was read (it changed or was truncated)", path,
                         done, size);
        done += static_cast<size_t>(n);
        shown.update(done);
    }
    shown.finish();
    if (::mprotect(addr, size, PROT_READ) != 0) fail("{}: cannot make the read model read-only: {}", path, std::strerror(errno));
    guard.addr = nullptr;
    return addr;
}

} // namespace

mapped_file mapped_file::open(const std::string &path, const open_options &how, const char *what) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open: {}; check the model path", path, std::strerror(errno));
    fd_guard guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("{}: not a regular file; pass the path of a {}", path, what);
    if (st.st_size == 0) fail("{}: the file is empty (0 bytes); it is truncated or was never written", path);
    const size_t size = static_cast<size_t>(st.st_size);
    void *addr = how.mmap ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : read_whole_file(fd, size, path);
    if (addr == MAP_FAILED) fail("{}: cannot map {} bytes: {}", path, size, std::strerror(errno));
    unmap_guard unmap{addr, size};
    if (how.mlock && ::mlock(addr, size) != 0) {
        fail("{}: cannot lock its {} bytes in RAM (mlock = true): {}; raise the locked-memory limit (ulimit -l, "
             "LimitMEMLOCK= for a service) or drop --mlock", path, size, std::strerror(errno));
    }
    unmap.addr = nullptr;
    return mapped_file(addr, size);
}

mapped_file mapped_file::zeros(size_t size) {
    if (size == 0) size = 1;
    void *addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addr == MAP_FAILED) fail("cannot reserve {} bytes of address space: {}", size, std::strerror(errno));
    return mapped_file(addr, size);
}

mapped_file &mapped_file::operator=(mapped_file &&o) noexcept {
    if (this != &o) {
        if (addr_ != nullptr) ::munmap(addr_, size_);
        addr_ = o.addr_;
        size_ = o.size_;
        o.addr_ = nullptr;
    }
    return *this;
}

mapped_file::~mapped_file() {
    if (addr_ != nullptr) ::munmap(addr_, size_);
}

} // namespace strata
