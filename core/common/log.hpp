// Logging to stderr (stdout is reserved for what the user asked for: generated text, JSON, tables).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace strata::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

void set_level(level l);
level get_level();
void write(level l, std::string_view component, std::string_view message);

template <class... Args> void debug(std::string_view c, fmt::format_string<Args...> f, Args &&...a) {
    if (get_level() <= level::debug) write(level::debug, c, fmt::format(f, std::forward<Args>(a)...));
}
template <class... Args> void info(std::string_view c, fmt::format_string<Args...> f, Args &&...a) {
    if (get_level() <= level::info) write(level::info, c, fmt::format(f, std::forward<Args>(a)...));
}
template <class... Args> void warn(std::string_view c, fmt::format_string<Args...> f, Args &&...a) {
    if (get_level() <= level::warn) write(level::warn, c, fmt::format(f, std::forward<Args>(a)...));
}
template <class... Args> void error(std::string_view c, fmt::format_string<Args...> f, Args &&...a) {
    if (get_level() <= level::error) write(level::error, c, fmt::format(f, std::forward<Args>(a)...));
}

} // namespace strata::log
