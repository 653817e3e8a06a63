// A persistent KV prefix store: full KV blocks on disk, one file per block, found again after a restart.
//
// Layout: <dir>/<model fingerprint as 16 hex digits>/<block hash as 16 hex digits>.kvb (format: entry_format.hpp),
// plus a ".lock" file that one store holds (flock) for its lifetime, so two runtimes never share a folder's LRU
// bookkeeping. Entries are written to a temporary name and renamed into place, so a reader sees a whole old entry or
// a whole new one; there is no fsync, because a torn file after a crash fails its checks and is dropped like any
// corrupt entry. Each entry's mtime is its last use (set explicitly, strictly increasing), which restores the LRU
// order on restart.
//
// File I/O runs outside the store's mutex; the mutex guards the index and the renames/unlinks, so concurrent puts
// and gets of different blocks overlap. put and get allocate nothing (names are fixed buffers, the directory is
// addressed through a descriptor); the index grows only when the entry count reaches a new high.
#pragma once

#include "kv/lru_index.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

namespace strata::kv {

// Full KV blocks on disk, keyed by the block's chained prefix hash; survives restarts. Every entry carries a header
// (magic, format version, model fingerprint, block_size, payload bytes, the block's hash, its block_size token ids,
// an XXH3-64 checksum of the payload); a read checks all of them and a corrupt or foreign entry is deleted and
// reported as a miss, never used.
class prefix_store {
  public:
    struct options {
        std::string dir;               // created if missing
        uint64_t capacity_bytes = 0;   // payload+header bytes kept; least recently used entries are deleted beyond it
        uint64_t model_fingerprint = 0;
        int32_t block_size = 16;
        uint64_t block_bytes = 0;      // payload bytes per block
    };
    // Throws strata::error with a clear message if dir cannot be created/written, another store holds it, or the
    // options are unusable (block_size outside [1, 65536], block_bytes 0, capacity below one entry). Scans the
    // fingerprint's folder: removes stale temporary files and entries of the wrong size (torn by a crash; both logged
    // as discarded partial entries), indexes the rest oldest mtime first, and deletes the least recently used ones
    // beyond capacity. Entries of other fingerprints (other folders) are left alone.
    explicit prefix_store(options o);
    ~prefix_store();
    prefix_store(const prefix_store &) = delete;
    prefix_store &operator=(const prefix_store &) = delete;

    bool contains(uint64_t hash) const;
    // Writes (or overwrites) one block; evicts LRU entries to stay within capacity. Returns false on an I/O error
    // (logged once with the reason via core/common/log.hpp), never throws for I/O. tokens must hold block_size ids.
    bool put(uint64_t hash, std::span<const int32_t> tokens, const void *payload);
    // Reads and verifies into payload (block_bytes). Any mismatch (magic, version, fingerprint, block_size, size, hash,
    // tokens, checksum, short file) deletes the entry and returns false. On false, payload's bytes are unspecified.
    // A hit makes the entry the most recently used.
    bool get(uint64_t hash, std::span<const int32_t> tokens, void *payload);
    void erase(uint64_t hash);
    uint64_t entries() const;
    uint64_t capacity_entries() const;
    const std::string &dir() const;

  private:
    // nullptr when the open entry matches everything expected (payload then holds it), else why it does not.
    const char *check_entry(int fd, uint64_t hash, std::span<const int32_t> tokens, void *payload) const;
    void drop_corrupt(int fd, uint64_t hash, const char *why);
    void evict_oldest_locked();
    void scan();
    int64_t next_stamp_ns();
    void log_write_error_once(const char *what, int err);

    options opts_;
    std::string folder_; // dir/<fingerprint>
    uint64_t entry_bytes_ = 0;
    uint64_t capacity_entries_ = 0;
    int dir_fd_ = -1;
    int lock_fd_ = -1;
    mutable std::mutex mu_;
    lru_index index_;
    std::atomic<int64_t> last_stamp_ns_{0};
    std::atomic<uint64_t> temp_serial_{0};
    std::atomic<bool> write_error_logged_{false};
    std::atomic<bool> corrupt_logged_{false};
};

} // namespace strata::kv
