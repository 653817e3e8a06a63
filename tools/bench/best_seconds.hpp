// The best (shortest) wall time of `repeat` calls of f, in seconds: what the kernel microbenchmarks report.
#pragma once

#include <algorithm>
#include <chrono>

namespace strata::bench {

template <class F> double best_seconds(int repeat, F &&f) {
    double best = 1e30;
    for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

} // namespace strata::bench
