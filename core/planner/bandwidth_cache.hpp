// Measured tier bandwidths, cached across runs so start-up does not re-measure every time. The cache is a JSON file
// ($XDG_CACHE_HOME/strata/bandwidth.json, else ~/.cache/strata/bandwidth.json); a corrupt or unreadable file is
// ignored with a warning, never fatal: the worst case is measuring again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace strata::planner {

struct bandwidth_entry {
    std::string key;     // what was measured, e.g. "nvme:/dev/nvme0n1" or "pinned_ram:node0"
    double read_bps = 0; // bytes per second
    double write_bps = 0;
    std::string measured_at; // UTC, ISO 8601 ("2024-05-01T12:00:00Z")
};

// $XDG_CACHE_HOME/strata/bandwidth.json when XDG_CACHE_HOME is an absolute path, else $HOME/.cache/strata/...,
// else <temp dir>/strata-cache/bandwidth.json.
std::filesystem::path default_bandwidth_cache_path();

// Now, UTC, ISO 8601 to the second: the measured_at of a fresh measurement.
std::string utc_timestamp();

class bandwidth_cache {
  public:
    // Loads `file` if it exists; a missing file is an empty cache, a corrupt one is an empty cache and a warning.
    explicit bandwidth_cache(std::filesystem::path file = default_bandwidth_cache_path());

    std::optional<bandwidth_entry> get(const std::string &key) const;
    void put(bandwidth_entry entry); // replaces the entry with the same key
    // Writes a temporary file next to the cache and renames it over, so readers never see half a file.
    // Throws strata::error (naming the path) when the folder cannot be created or the file written.
    void save() const;

    const std::filesystem::path &path() const { return file_; }
    size_t size() const { return entries_.size(); }

  private:
    std::filesystem::path file_;
    std::map<std::string, bandwidth_entry> entries_;
};

// Bytes per second of `read_op` over [0, total_bytes) in chunks of chunk_bytes (the last may be shorter): the best
// of three passes, so one slow pass (page cache cold, a context switch) does not stick. Throws strata::error when
// total_bytes or chunk_bytes is 0; exceptions from read_op propagate.
double measure(const std::function<void(uint64_t offset, uint64_t bytes)> &read_op, uint64_t total_bytes,
               uint64_t chunk_bytes = 4ull << 20);

} // namespace strata::planner
