// The one exception type core code throws; its message is what the user sees, so it says what, where and how to fix.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace strata {

class error : public std::runtime_error {
  public:
    explicit error(const std::string &what) : std::runtime_error(what) {}
};

template <class... Args> [[noreturn]] void fail(fmt::format_string<Args...> f, Args &&...args) {
    throw error(fmt::format(f, std::forward<Args>(args)...));
}

} // namespace strata
