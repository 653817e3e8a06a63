#include "tier_file.hpp"

#include "../common/byte_text.hpp"

#include <strata/plugin.hpp>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace strata::nvme {

namespace {

constexpr const char *plugin_name = "nvme";
constexpr uint64_t probe_bytes = 4096;

using strata::tier::byte_text;

std::string parent_dir(const std::string &path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

// Free bytes for an unprivileged writer of the filesystem holding `dir`; 0 when unknown.
uint64_t free_bytes(const std::string &dir) {
    struct statvfs vfs {};
    if (statvfs(dir.c_str(), &vfs) != 0) return 0;
    return static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
}

int32_t no_space(strata_status *st, const std::string &path, uint64_t need, uint64_t have) {
    return plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY,
                        "nvme: %s needs %s, filesystem has %s free (free space there, choose a path on a bigger "
                        "disk, or lower [nvme] size)",
                        path.c_str(), byte_text(need).c_str(), byte_text(have).c_str());
}

// Whether an O_DIRECT read works on fd: some filesystems accept the open flag but refuse the I/O with EINVAL.
bool direct_read_works(int fd) {
    void *buf = nullptr;
    if (posix_memalign(&buf, probe_bytes, probe_bytes) != 0) return true; // cannot probe; I/O errors will tell
    ssize_t got = -1;
    do {
        got = pread(fd, buf, probe_bytes, 0);
    } while (got < 0 && errno == EINTR);
    const bool ok = got >= 0 || errno != EINVAL;
    std::free(buf);
    return ok;
}

} // namespace

std::unique_ptr<tier_file> tier_file::open(const tier_file_options &opts, const strata_host_services *host,
                                           strata_status *st) {
    const std::string &path = opts.path;
    std::unique_ptr<tier_file> f(new tier_file());
    f->path_ = path;

    struct stat existing {};
    const bool exists = ::stat(path.c_str(), &existing) == 0;
    if (!exists && errno != ENOENT) {
        plugin::fail(st, STRATA_ERR_IO, "nvme: cannot use %s: %s (check [nvme] path)", path.c_str(), std::strerror(errno));
        return nullptr;
    }
    if (exists && S_ISDIR(existing.st_mode)) {
        plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                     "nvme: [nvme] path %s is a directory; give a file name inside it, e.g. %s/strata.tier",
                     path.c_str(), path.c_str());
        return nullptr;
    }
    if (exists && !S_ISREG(existing.st_mode) && !S_ISBLK(existing.st_mode)) {
        plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: [nvme] path %s is neither a regular file nor a block device",
                     path.c_str());
        return nullptr;
    }
    f->block_device_ = exists && S_ISBLK(existing.st_mode);
    // A non-empty file the user did not mark as ours may be anything (a model file, say): never overwrite it.
    if (exists && S_ISREG(existing.st_mode) && existing.st_size > 0 && !opts.keep_file) {
        plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                     "nvme: %s already exists (%s) and would be overwritten; remove it, choose another [nvme] path, or "
                     "set keep_file = true to reuse it as this tier's file",
                     path.c_str(), byte_text(static_cast<uint64_t>(existing.st_size)).c_str());
        return nullptr;
    }

    const std::string dir = parent_dir(path);
    if (!exists) {
        struct stat d {};
        if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode)) {
            plugin::fail(st, STRATA_ERR_NOT_FOUND,
                         "nvme: directory %s (for [nvme] path %s) does not exist; create it or choose another path",
                         dir.c_str(), path.c_str());
            return nullptr;
        }
    }
    if (!f->block_device_) {
        // Checked before creating anything so an impossible size leaves no file behind.
        const uint64_t have = free_bytes(dir) + (exists ? static_cast<uint64_t>(existing.st_blocks) * 512u : 0u);
        if (opts.size > have) {
            no_space(st, path, opts.size, have);
            return nullptr;
        }
    }

    int flags = O_RDWR | O_CLOEXEC | (f->block_device_ ? 0 : O_CREAT);
    int fd = ::open(path.c_str(), flags | (opts.direct_io ? O_DIRECT : 0), 0600);
    bool direct = opts.direct_io && fd >= 0;
    if (fd < 0 && opts.direct_io && errno == EINVAL) { // the filesystem refuses O_DIRECT at open time
        fd = ::open(path.c_str(), flags, 0600);
    }
    if (fd < 0) {
        const int err = errno;
        plugin::fail(st, err == EACCES || err == EROFS || err == EPERM ? STRATA_ERR_INVALID_ARGUMENT : STRATA_ERR_IO,
                     "nvme: cannot %s %s: %s (choose a writable [nvme] path)", exists ? "open" : "create",
                     path.c_str(), std::strerror(err));
        return nullptr;
    }
    f->fd_ = fd;
    f->delete_on_close_ = !f->block_device_ && !opts.keep_file;
    f->created_ = !exists;
    // From here on, any failure must take the file back out of existence if we created it.
    auto give_up = [&]() -> std::unique_ptr<tier_file> {
        f->remove_if_created();
        return nullptr;
    };

    if (f->block_device_) {
        uint64_t device_bytes = 0;
        if (ioctl(fd, BLKGETSIZE64, &device_bytes) != 0) {
            plugin::fail(st, STRATA_ERR_IO, "nvme: cannot read the size of block device %s: %s", path.c_str(),
                         std::strerror(errno));
            return nullptr;
        }
        if (device_bytes < opts.size) {
            plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY, "nvme: block device %s has %s, [nvme] size asks for %s",
                         path.c_str(), byte_text(device_bytes).c_str(), byte_text(opts.size).c_str());
            return nullptr;
        }
    } else if (fallocate(fd, 0, 0, static_cast<off_t>(opts.size)) != 0) {
        const int err = errno;
        if (err == ENOSPC) {
            no_space(st, path, opts.size, free_bytes(dir));
            return give_up();
        }
        if (err == EFBIG) {
            plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                         "nvme: %s cannot grow to %s: larger than this filesystem's maximum file size (lower [nvme] size)",
                         path.c_str(), byte_text(opts.size).c_str());
            return give_up();
        }
        if (err != EOPNOTSUPP) {
            plugin::fail(st, STRATA_ERR_IO, "nvme: cannot preallocate %s for %s: %s", byte_text(opts.size).c_str(),
                         path.c_str(), std::strerror(err));
            return give_up();
        }
        // No fallocate here: size the file sparsely; space is then only claimed as regions are written.
        plugin::log(host, STRATA_LOG_WARN, plugin_name,
                    "WARNING: the filesystem of %s cannot preallocate (fallocate unsupported); the file is sparse and "
                    "a full disk will only show up as a write error later",
                    path.c_str());
        struct stat now {};
        if (fstat(fd, &now) == 0 && static_cast<uint64_t>(now.st_size) < opts.size &&
            ftruncate(fd, static_cast<off_t>(opts.size)) != 0) {
            plugin::fail(st, STRATA_ERR_IO, "nvme: cannot size %s to %s: %s", path.c_str(), byte_text(opts.size).c_str(),
                         std::strerror(errno));
            return give_up();
        }
    }

    if (direct && !direct_read_works(fd)) direct = false;
    if (opts.direct_io && !direct) {
        // Open or I/O refused with EINVAL: this filesystem (tmpfs, overlayfs, some network filesystems) has no
        // O_DIRECT. Still usable, through the page cache.
        const int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_DIRECT);
        plugin::log(host, STRATA_LOG_WARN, plugin_name,
                    "WARNING: the filesystem of %s does not support O_DIRECT; using buffered I/O instead (slower for "
                    "streaming, and the page cache keeps a second copy of what passes through)",
                    path.c_str());
    }
    f->direct_ = direct;
    return f;
}

void tier_file::remove_if_created() {
    if (created_) ::unlink(path_.c_str());
    created_ = false;
    delete_on_close_ = false;
}

tier_file::~tier_file() {
    if (fd_ >= 0) ::close(fd_);
    if (delete_on_close_) ::unlink(path_.c_str());
}

} // namespace strata::nvme
