#include "planner/bandwidth_cache.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>

#include <unistd.h>

namespace strata::planner {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int cache_version = 1;
constexpr std::string_view component = "planner";

bool valid_rate(const json &v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0; }

} // namespace

fs::path default_bandwidth_cache_path() {
    // XDG says relative values are invalid and must be ignored.
    if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg && fs::path(xdg).is_absolute())
        return fs::path(xdg) / "strata" / "bandwidth.json";
    if (const char *home = std::getenv("HOME"); home && *home)
        return fs::path(home) / ".cache" / "strata" / "bandwidth.json";
    std::error_code ec;
    const auto tmp = fs::temp_directory_path(ec);
    return (ec ? fs::path("/tmp") : tmp) / "strata-cache" / "bandwidth.json";
}

std::string utc_timestamp() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

bandwidth_cache::bandwidth_cache(fs::path file) : file_(std::move(file)) {
    std::error_code ec;
    if (!fs::exists(file_, ec)) return;
    std::ifstream in(file_, std::ios::binary);
    if (!in) {
        log::warn(component, "cannot read the bandwidth cache {}; tiers will be measured again", file_.string());
        return;
    }
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("entries") || !doc["entries"].is_object()) {
        log::warn(component,
                  "the bandwidth cache {} is not valid JSON of the expected shape; ignoring it (tiers will "
                  "be measured again and the file rewritten)",
                  file_.string());
        return;
    }
    if (!doc.contains("version") || doc["version"] != cache_version) {
        log::warn(component, "the bandwidth cache {} has an unknown version; ignoring it", file_.string());
        return;
    }
    size_t skipped = 0;
    for (const auto &[key, value] : doc["entries"].items()) {
        if (!value.is_object() || !value.contains("read_bps") || !valid_rate(value["read_bps"]) ||
            !value.contains("write_bps") || !valid_rate(value["write_bps"])) {
            ++skipped;
            continue;
        }
        bandwidth_entry entry{key, value["read_bps"].get<double>(), value["write_bps"].get<double>(), ""};
        if (value.contains("measured_at") && value["measured_at"].is_string())
            entry.measured_at = value["measured_at"].get<std::string>();
        entries_[key] = std::move(entry);
    }
    if (skipped > 0)
        log::warn(component, "ignored {} malformed entr{} in the bandwidth cache {}", skipped,
                  skipped == 1 ? "y" : "ies", file_.string());
}

std::optional<bandwidth_entry> bandwidth_cache::get(const std::string &key) const {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
}

void bandwidth_cache::put(bandwidth_entry entry) {
    std::string key = entry.key;
    entries_[std::move(key)] = std::move(entry);
}

void bandwidth_cache::save() const {
    json entries = json::object();
    for (const auto &[key, e] : entries_)
        entries[key] = {{"read_bps", e.read_bps}, {"write_bps", e.write_bps}, {"measured_at", e.measured_at}};
    const json doc = {{"version", cache_version}, {"entries", std::move(entries)}};

    std::error_code ec;
    if (file_.has_parent_path()) {
        fs::create_directories(file_.parent_path(), ec);
        if (ec)
            fail("cannot create the folder {} for the bandwidth cache: {}; set XDG_CACHE_HOME to a writable folder",
                 file_.parent_path().string(), ec.message());
    }
    // A per-process temporary name: two runtimes saving at once must not write into each other's file.
    fs::path tmp = file_;
    tmp += fmt::format(".tmp-{}", ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << doc.dump(2) << '\n';
        out.close();
        if (!out) {
            fs::remove(tmp, ec);
            fail("cannot write the bandwidth cache {}; set XDG_CACHE_HOME to a writable folder", tmp.string());
        }
    }
    fs::rename(tmp, file_, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        fail("cannot replace the bandwidth cache {}: {}", file_.string(), ec.message());
    }
}

double measure(const std::function<void(uint64_t offset, uint64_t bytes)> &read_op, uint64_t total_bytes,
               uint64_t chunk_bytes) {
    if (total_bytes == 0 || chunk_bytes == 0)
        fail("bandwidth measurement needs a non-zero size (total {} bytes, chunk {} bytes)", total_bytes, chunk_bytes);
    using clock = std::chrono::steady_clock;
    double best = std::numeric_limits<double>::infinity();
    for (int pass = 0; pass < 3; ++pass) {
        const auto start = clock::now();
        for (uint64_t offset = 0; offset < total_bytes; offset += chunk_bytes)
            read_op(offset, std::min(chunk_bytes, total_bytes - offset));
        best = std::min(best, std::chrono::duration<double>(clock::now() - start).count());
    }
    // A pass faster than the clock can see would divide by zero.
    best = std::max(best, 1e-9);
    return static_cast<double>(total_bytes) / best;
}

} // namespace strata::planner
