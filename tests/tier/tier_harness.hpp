// What the tier tests share: loading a tier plugin through the real plugin host, a small in-memory config view for
// its table, a host whose log lines the test can read, and an owning handle that destroys the tier.
#pragma once

#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

namespace strata::tier_test {

// A plugin's config table as the host would hand it over: BYTES keys are plain integers here.
class config_table {
  public:
    using value = std::variant<bool, int64_t, double, std::string>;

    config_table() = default;
    config_table(std::initializer_list<std::pair<const std::string, value>> v) : values_(v) { bind(); }
    config_table(const config_table &o) : values_(o.values_) { bind(); }
    config_table &operator=(const config_table &o) {
        values_ = o.values_;
        bind();
        return *this;
    }
    void set(const std::string &key, value v) { values_[key] = std::move(v); }
    const strata_config_view *view() {
        bind();
        return &view_;
    }

  private:
    void bind();
    std::map<std::string, value> values_;
    strata_config_view view_{};
};

// Host services that record every log line (and echo it to stderr).
class recording_host {
  public:
    recording_host();
    const strata_host_services *services() const { return &services_; }
    std::vector<std::string> lines() const;
    bool logged(const std::string &needle) const;
    void clear();

  private:
    static void log(void *ctx, int32_t level, const char *plugin, const char *message);
    strata_host_services services_{};
    mutable std::mutex mutex_;
    std::vector<std::string> lines_;
};

recording_host &test_host();

// The tier descriptor from libstrata_tier_<name>.so in STRATA_PLUGIN_DIR, loaded once per process.
const strata_tier_desc &tier_plugin(const std::string &name);

struct tier_deleter {
    const strata_tier_desc *desc = nullptr;
    void operator()(strata_tier *t) const {
        if (t != nullptr) desc->destroy(t);
    }
};
using tier_ptr = std::unique_ptr<strata_tier, tier_deleter>;

// Creates a tier (for pipeline rank `rank`, ABI 1.26); on failure returns null and leaves the status in *st.
tier_ptr create_tier(const std::string &name, config_table &cfg, uint64_t capacity, strata_status *st,
                     int32_t rank = 0);

// Deterministic random bytes.
std::vector<unsigned char> random_bytes(uint64_t seed, size_t n);

// A 4096-aligned buffer, so tests can hit the nvme tier's O_DIRECT path (and, by offsetting, miss it).
struct aligned_buffer {
    explicit aligned_buffer(size_t n);
    ~aligned_buffer();
    aligned_buffer(const aligned_buffer &) = delete;
    aligned_buffer &operator=(const aligned_buffer &) = delete;
    unsigned char *data = nullptr;
    size_t size = 0;
};

} // namespace strata::tier_test
