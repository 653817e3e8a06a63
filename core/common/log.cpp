#include "common/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace strata::log {

namespace {
std::atomic<level> g_level{level::info};
std::mutex g_mutex;
const char *name(level l) {
    switch (l) {
    case level::debug: return "debug";
    case level::info: return "info";
    case level::warn: return "warn";
    case level::error: return "error";
    default: return "";
    }
}
} // namespace

void set_level(level l) { g_level.store(l); }
level get_level() { return g_level.load(); }

void write(level l, std::string_view component, std::string_view message) {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::fprintf(stderr, "[%s] %.*s: %.*s\n", name(l), static_cast<int>(component.size()), component.data(),
                 static_cast<int>(message.size()), message.data());
}

} // namespace strata::log
