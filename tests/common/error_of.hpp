// What a call throws as strata::error (its message), for tests that check a refusal's words: one helper for every
// suite, so "no error" reads the same everywhere.
#pragma once

#include "common/error.hpp"

#include <string>

namespace strata::testing {

// e.what() of the strata::error `f()` throws, or "(no error)" when it returns. Any other exception propagates (a
// test then fails on it, as it should).
template <class F> std::string error_of(F &&f) {
    try {
        f();
    } catch (const strata::error &e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace strata::testing
