#include "kv/prefix_store.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "kv/entry_format.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <string_view>
#include <sys/file.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <utility>
#include <vector>

namespace strata::kv {

namespace {

constexpr const char *k_log = "kv_store";
constexpr const char *k_lock_name = ".lock";
constexpr const char *k_probe_name = ".write_probe.tmp";

std::string reason(int err) { return std::generic_category().message(err); }

bool write_all(int fd, const void *data, uint64_t n, uint64_t offset) {
    const char *p = static_cast<const char *>(data);
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return false;
        }
        p += w;
        n -= static_cast<uint64_t>(w);
        offset += static_cast<uint64_t>(w);
    }
    return true;
}

// False on an error or when the file ends first.
bool read_all(int fd, void *data, uint64_t n, uint64_t offset) {
    char *p = static_cast<char *>(data);
    while (n > 0) {
        const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<uint64_t>(r);
        offset += static_cast<uint64_t>(r);
    }
    return true;
}

// "<16 lowercase hex digits>.kvb" -> the hash; anything else is not an entry.
bool parse_entry_name(std::string_view name, uint64_t &hash) {
    if (name.size() != k_entry_name_len || name.substr(16) != ".kvb") return false;
    uint64_t h = 0;
    for (char c : name.substr(0, 16)) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return false;
        h = (h << 4) | static_cast<uint64_t>(d);
    }
    hash = h;
    return true;
}

int64_t mtime_ns(const struct stat &st) {
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

} // namespace

prefix_store::prefix_store(options o) : opts_(std::move(o)) {
    if (opts_.dir.empty()) fail("KV prefix store: no directory given; set one it may create and write");
    if (opts_.block_size < 1 || opts_.block_size > k_max_block_size) {
        fail("KV prefix store '{}': block_size must be in [1, {}], got {}", opts_.dir, k_max_block_size, opts_.block_size);
    }
    if (opts_.block_bytes == 0) fail("KV prefix store '{}': block_bytes (payload bytes per block) must be > 0", opts_.dir);
    entry_bytes_ = entry_file_bytes(opts_.block_size, opts_.block_bytes);
    capacity_entries_ = std::min<uint64_t>(opts_.capacity_bytes / entry_bytes_, uint64_t{1} << 31);
    if (capacity_entries_ == 0) {
        fail("KV prefix store '{}': capacity {} bytes holds no entry of {} bytes ({} header and token bytes + {} KV bytes); "
             "raise its capacity",
             opts_.dir, opts_.capacity_bytes, entry_bytes_, entry_bytes_ - opts_.block_bytes, opts_.block_bytes);
    }
    char fingerprint[17];
    std::snprintf(fingerprint, sizeof fingerprint, "%016llx", static_cast<unsigned long long>(opts_.model_fingerprint));
    folder_ = opts_.dir + "/" + fingerprint;

    try {
        std::error_code ec;
        std::filesystem::create_directories(folder_, ec);
        if (ec) fail("KV prefix store: cannot create the folder '{}': {}; choose a directory this user can write", folder_, ec.message());
        dir_fd_ = ::open(folder_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd_ < 0) fail("KV prefix store: cannot open the folder '{}': {}", folder_, reason(errno));
        lock_fd_ = ::openat(dir_fd_, k_lock_name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock_fd_ < 0) {
            fail("KV prefix store: the folder '{}' is not writable ({}: {}); choose a directory this user can write", folder_,
                 k_lock_name, reason(errno));
        }
        if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK) {
                fail("KV prefix store: the folder '{}' is in use by another store (another runtime?); give each runtime its own "
                     "directory",
                     folder_);
            }
            fail("KV prefix store: cannot lock '{}/{}': {}", folder_, k_lock_name, reason(errno));
        }
        // The lock file may exist from an earlier run while the folder itself is no longer writable.
        const int probe = ::openat(dir_fd_, k_probe_name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (probe < 0) {
            fail("KV prefix store: the folder '{}' is not writable: {}; choose a directory this user can write", folder_,
                 reason(errno));
        }
        ::close(probe);
        ::unlinkat(dir_fd_, k_probe_name, 0);
        scan();
    } catch (...) {
        if (lock_fd_ >= 0) ::close(lock_fd_);
        if (dir_fd_ >= 0) ::close(dir_fd_);
        throw;
    }
}

prefix_store::~prefix_store() {
    ::close(lock_fd_); // releases the flock
    ::close(dir_fd_);
}

void prefix_store::scan() {
    const int list_fd = ::dup(dir_fd_);
    DIR *d = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
    if (d == nullptr) {
        if (list_fd >= 0) ::close(list_fd);
        fail("KV prefix store: cannot list the folder '{}': {}", folder_, reason(errno));
    }
    struct found {
        int64_t mtime;
        uint64_t hash;
    };
    std::vector<found> entries;
    uint64_t stale = 0, torn = 0;
    while (const dirent *e = ::readdir(d)) {
        const std::string_view name(e->d_name);
        uint64_t hash = 0;
        if (name.size() > 4 && name.substr(name.size() - 4) == ".tmp") {
            // A write that never got renamed (the process died): nobody else writes here while we hold the lock.
            if (::unlinkat(dir_fd_, e->d_name, 0) == 0) ++stale;
        } else if (parse_entry_name(name, hash)) {
            struct stat st;
            if (::fstatat(dir_fd_, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
                if (static_cast<uint64_t>(st.st_size) != entry_bytes_) {
                    // Torn (a crash without fsync kept only part of it) or not ours: its size alone says it can
                    // never pass get's checks, so it goes now rather than on first use. Other damage is found there.
                    if (::unlinkat(dir_fd_, e->d_name, 0) == 0) ++torn;
                } else {
                    entries.push_back({mtime_ns(st), hash});
                }
            }
        }
    }
    ::closedir(d);
    std::sort(entries.begin(), entries.end(),
              [](const found &a, const found &b) { return a.mtime != b.mtime ? a.mtime < b.mtime : a.hash < b.hash; });
    std::lock_guard<std::mutex> lock(mu_);
    for (const found &f : entries) index_.insert_or_touch(f.hash); // oldest first: the last one is the most recent
    if (!entries.empty()) last_stamp_ns_ = entries.back().mtime;
    uint64_t evicted = 0;
    while (index_.size() > capacity_entries_) {
        evict_oldest_locked();
        ++evicted;
    }
    if (stale > 0 || torn > 0) {
        log::warn(k_log,
                  "{}: discarded {} partial entr{} left by an interrupted run ({} unfinished write(s), {} torn entr{} of "
                  "the wrong size); their blocks are recomputed when next needed",
                  folder_, stale + torn, stale + torn == 1 ? "y" : "ies", stale, torn, torn == 1 ? "y" : "ies");
    }
    log::info(k_log, "{}: {} of at most {} entries ({} bytes each){}{}", folder_, index_.size(), capacity_entries_, entry_bytes_,
              stale ? fmt::format("; removed {} unfinished write(s)", stale) : std::string(),
              evicted ? fmt::format("; deleted the {} least recently used beyond capacity", evicted) : std::string());
}

int64_t prefix_store::next_stamp_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    const int64_t now = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    int64_t last = last_stamp_ns_.load();
    // Strictly increasing even when the clock is coarse or steps back, so mtimes order every use.
    for (;;) {
        const int64_t next = std::max(now, last + 1);
        if (last_stamp_ns_.compare_exchange_weak(last, next)) return next;
    }
}

namespace {
void set_mtime(int fd, int64_t stamp_ns) {
    timespec t[2];
    t[0].tv_sec = t[1].tv_sec = static_cast<time_t>(stamp_ns / 1'000'000'000);
    t[0].tv_nsec = t[1].tv_nsec = static_cast<long>(stamp_ns % 1'000'000'000);
    (void)::futimens(fd, t); // best effort: a failure only blurs the LRU order after a restart
}
} // namespace

void prefix_store::log_write_error_once(const char *what, int err) {
    if (write_error_logged_.exchange(true)) return;
    log::warn(k_log, "{}: {}: {} (KV blocks are not persisted while this lasts; further write errors are not logged)",
              folder_, what, reason(err));
}

void prefix_store::evict_oldest_locked() {
    const auto oldest = index_.oldest();
    if (!oldest) return;
    const entry_name name = entry_file_name(*oldest);
    if (::unlinkat(dir_fd_, name.text, 0) != 0 && errno != ENOENT) log_write_error_once("cannot delete an evicted entry", errno);
    index_.erase(*oldest);
}

bool prefix_store::contains(uint64_t hash) const {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.contains(hash);
}

bool prefix_store::put(uint64_t hash, std::span<const int32_t> tokens, const void *payload) {
    if (tokens.size() != static_cast<size_t>(opts_.block_size) || payload == nullptr) {
        log_write_error_once(tokens.size() != static_cast<size_t>(opts_.block_size) ? "put with a token count other than block_size"
                                                                                    : "put without a payload",
                             EINVAL);
        return false;
    }
    entry_header h{};
    std::memcpy(h.magic, k_entry_magic, sizeof h.magic);
    h.version = k_entry_version;
    h.block_size = opts_.block_size;
    h.model_fingerprint = opts_.model_fingerprint;
    h.hash = hash;
    h.payload_bytes = opts_.block_bytes;
    h.payload_checksum = XXH3_64bits(payload, opts_.block_bytes);

    const entry_name temp = temp_file_name(hash, temp_serial_.fetch_add(1));
    const int fd = ::openat(dir_fd_, temp.text, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_write_error_once("cannot create an entry", errno);
        return false;
    }
    const bool written = write_all(fd, &h, sizeof h, 0) &&
                         write_all(fd, tokens.data(), tokens.size_bytes(), entry_tokens_offset()) &&
                         write_all(fd, payload, opts_.block_bytes, entry_payload_offset(opts_.block_size));
    if (!written) {
        const int err = errno;
        ::close(fd);
        ::unlinkat(dir_fd_, temp.text, 0);
        log_write_error_once("cannot write an entry", err);
        return false;
    }
    const entry_name name = entry_file_name(hash);
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!index_.contains(hash)) {
            while (index_.size() >= capacity_entries_) evict_oldest_locked();
        }
        if (::renameat(dir_fd_, temp.text, dir_fd_, name.text) != 0) {
            const int err = errno;
            ::unlinkat(dir_fd_, temp.text, 0);
            ::close(fd);
            log_write_error_once("cannot rename an entry into place", err);
            return false;
        }
        set_mtime(fd, next_stamp_ns()); // under the lock, so mtime order is the index's order
        index_.insert_or_touch(hash);
    }
    if (::close(fd) != 0) {
        // Some filesystems report a failed write only at close: the entry cannot be trusted.
        const int err = errno;
        erase(hash);
        log_write_error_once("cannot write an entry", err);
        return false;
    }
    return true;
}

const char *prefix_store::check_entry(int fd, uint64_t hash, std::span<const int32_t> tokens, void *payload) const {
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "not a readable regular file";
    entry_header h;
    if (!read_all(fd, &h, sizeof h, 0)) return "shorter than its header";
    if (std::memcmp(h.magic, k_entry_magic, sizeof h.magic) != 0) return "wrong magic";
    if (h.version != k_entry_version) return "unknown format version";
    if (h.model_fingerprint != opts_.model_fingerprint) return "another model's fingerprint";
    if (h.block_size != opts_.block_size) return "another block_size";
    if (h.payload_bytes != opts_.block_bytes) return "another payload size";
    if (h.hash != hash) return "a hash other than its name";
    if (static_cast<uint64_t>(st.st_size) != entry_bytes_) return "truncated or extended";
    // The tokens in fixed-size pieces: no allocation, any block_size.
    int32_t piece[256];
    for (size_t at = 0; at < tokens.size(); at += std::size(piece)) {
        const size_t n = std::min(std::size(piece), tokens.size() - at);
        if (!read_all(fd, piece, n * sizeof(int32_t), entry_tokens_offset() + at * sizeof(int32_t))) return "short read of its tokens";
        if (std::memcmp(piece, tokens.data() + at, n * sizeof(int32_t)) != 0) return "other tokens (a hash collision)";
    }
    if (!read_all(fd, payload, opts_.block_bytes, entry_payload_offset(opts_.block_size))) return "short read of its payload";
    if (XXH3_64bits(payload, opts_.block_bytes) != h.payload_checksum) return "payload checksum mismatch";
    return nullptr;
}

void prefix_store::drop_corrupt(int fd, uint64_t hash, const char *why) {
    const entry_name name = entry_file_name(hash);
    {
        std::lock_guard<std::mutex> lock(mu_);
        struct stat mine, now;
        if (::fstatat(dir_fd_, name.text, &now, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) index_.erase(hash); // already gone
        } else if (::fstat(fd, &mine) == 0 && mine.st_ino == now.st_ino && mine.st_dev == now.st_dev) {
            ::unlinkat(dir_fd_, name.text, 0);
            index_.erase(hash);
        }
        // Otherwise a put replaced the file since it was opened: the new entry stays.
    }
    if (!corrupt_logged_.exchange(true)) {
        log::warn(k_log, "{}/{}: deleted, {} (further corrupt or foreign entries are logged at debug level)", folder_, name.text, why);
    } else {
        log::debug(k_log, "{}/{}: deleted, {}", folder_, name.text, why);
    }
}

bool prefix_store::get(uint64_t hash, std::span<const int32_t> tokens, void *payload) {
    if (tokens.size() != static_cast<size_t>(opts_.block_size) || payload == nullptr) return false; // the caller's mistake: the entry stays
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!index_.contains(hash)) return false;
    }
    const entry_name name = entry_file_name(hash);
    // O_NONBLOCK: a FIFO under an entry's name must not hang the reader (read_entry refuses anything not regular).
    const int fd = ::openat(dir_fd_, name.text, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        // Deleted by hand, or evicted/erased by another thread since the check: forget it unless a put wrote it again.
        std::lock_guard<std::mutex> lock(mu_);
        struct stat st;
        if (::fstatat(dir_fd_, name.text, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) index_.erase(hash);
        return false;
    }
    const char *why = check_entry(fd, hash, tokens, payload);
    if (why == nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        if (index_.touch(hash)) set_mtime(fd, next_stamp_ns());
    } else {
        drop_corrupt(fd, hash, why);
    }
    ::close(fd);
    return why == nullptr;
}

void prefix_store::erase(uint64_t hash) {
    const entry_name name = entry_file_name(hash);
    std::lock_guard<std::mutex> lock(mu_);
    ::unlinkat(dir_fd_, name.text, 0);
    index_.erase(hash);
}

uint64_t prefix_store::entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.size();
}

uint64_t prefix_store::capacity_entries() const { return capacity_entries_; }

const std::string &prefix_store::dir() const { return opts_.dir; }

} // namespace strata::kv
