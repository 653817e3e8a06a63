#include "tier_harness.hpp"

#include <cstdio>
#include <cstdlib>
#include <random>

namespace strata::tier_test {

namespace {

const config_table::value *lookup(void *ctx, const char *key) {
    auto *values = static_cast<std::map<std::string, config_table::value> *>(ctx);
    auto it = key != nullptr ? values->find(key) : values->end();
    return it == values->end() ? nullptr : &it->second;
}

} // namespace

void config_table::bind() {
    view_.struct_size = sizeof view_;
    view_.ctx = &values_;
    view_.get_bool = [](void *ctx, const char *key, int32_t *out) -> int32_t {
        const value *v = lookup(ctx, key);
        if (v == nullptr || !std::holds_alternative<bool>(*v)) return 0;
        *out = std::get<bool>(*v) ? 1 : 0;
        return 1;
    };
    view_.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
        const value *v = lookup(ctx, key);
        if (v == nullptr || !std::holds_alternative<int64_t>(*v)) return 0;
        *out = std::get<int64_t>(*v);
        return 1;
    };
    view_.get_float = [](void *ctx, const char *key, double *out) -> int32_t {
        const value *v = lookup(ctx, key);
        if (v == nullptr || !std::holds_alternative<double>(*v)) return 0;
        *out = std::get<double>(*v);
        return 1;
    };
    view_.get_string = [](void *ctx, const char *key, const char **out) -> int32_t {
        const value *v = lookup(ctx, key);
        if (v == nullptr || !std::holds_alternative<std::string>(*v)) return 0;
        *out = std::get<std::string>(*v).c_str();
        return 1;
    };
    view_.get_list_size = [](void *, const char *) -> int32_t { return 0; };
    view_.get_list_item = [](void *, const char *, int32_t) -> const char * { return nullptr; };
}

recording_host::recording_host() {
    services_.struct_size = sizeof services_;
    services_.host_abi_major = STRATA_ABI_MAJOR;
    services_.host_abi_minor = STRATA_ABI_MINOR;
    services_.ctx = this;
    services_.log = &recording_host::log;
}

void recording_host::log(void *ctx, int32_t level, const char *plugin, const char *message) {
    auto *self = static_cast<recording_host *>(ctx);
    static const char *const names[] = {"debug", "info", "warn", "error"};
    const std::string line = std::string("[") + (plugin ? plugin : "?") + "] " +
                             (level >= 0 && level <= 3 ? names[level] : "?") + ": " + (message ? message : "");
    std::fprintf(stderr, "%s\n", line.c_str());
    std::lock_guard lock(self->mutex_);
    self->lines_.push_back(line);
}

std::vector<std::string> recording_host::lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
}

bool recording_host::logged(const std::string &needle) const {
    std::lock_guard lock(mutex_);
    for (const auto &l : lines_)
        if (l.find(needle) != std::string::npos) return true;
    return false;
}

void recording_host::clear() {
    std::lock_guard lock(mutex_);
    lines_.clear();
}

recording_host &test_host() {
    static recording_host host;
    return host;
}

const strata_tier_desc &tier_plugin(const std::string &name) {
    static std::mutex mutex;
    static strata::plugins::registry reg(test_host().services());
    static std::map<std::string, strata::plugins::handle<strata_tier_desc>> loaded;
    std::lock_guard lock(mutex);
    auto it = loaded.find(name);
    if (it == loaded.end()) {
        reg.load_file(std::string(STRATA_PLUGIN_DIR) + "/libstrata_tier_" + name + ".so"); // throws when refused
        auto h = reg.find_tier(name);
        if (!h) throw std::runtime_error("plugin libstrata_tier_" + name + ".so has no tier named " + name);
        it = loaded.emplace(name, h).first;
    }
    return *it->second.desc;
}

tier_ptr create_tier(const std::string &name, config_table &cfg, uint64_t capacity, strata_status *st, int32_t rank) {
    const strata_tier_desc &d = tier_plugin(name);
    strata_tier_create_args args{sizeof args, test_host().services(), cfg.view(), capacity, rank};
    *st = strata_status{};
    return tier_ptr(d.create(&args, st), tier_deleter{&d});
}

std::vector<unsigned char> random_bytes(uint64_t seed, size_t n) {
    std::mt19937_64 rng(seed);
    std::vector<unsigned char> out(n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint64_t v = rng();
        for (int b = 0; b < 8; ++b) out[i + static_cast<size_t>(b)] = static_cast<unsigned char>(v >> (8 * b));
    }
    for (; i < n; ++i) out[i] = static_cast<unsigned char>(rng());
    return out;
}

aligned_buffer::aligned_buffer(size_t n) : size(n) {
    data = static_cast<unsigned char *>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096 + 4096));
    if (data == nullptr) throw std::bad_alloc();
}

aligned_buffer::~aligned_buffer() { std::free(data); }

} // namespace strata::tier_test
