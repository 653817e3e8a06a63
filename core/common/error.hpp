// The exception types core code throws; the message is what the user sees, so it says what, where and how to fix.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace strata {

class error : public std::runtime_error {
  public:
    explicit error(const std::string &what) : std::runtime_error(what) {}
};

// An error that reaches a caller of the engine API with its own strata_code (e.g. STRATA_ERR_BUSY); a plain `error`
// is reported as STRATA_ERR_INVALID_ARGUMENT.
class coded_error : public error {
  public:
    coded_error(int32_t code, const std::string &what) : error(what), code_(code) {}
    int32_t code() const { return code_; }

  private:
    int32_t code_;
};

template <class... Args> [[noreturn]] void fail(fmt::format_string<Args...> f, Args &&...args) {
    throw error(fmt::format(f, std::forward<Args>(args)...));
}

} // namespace strata
