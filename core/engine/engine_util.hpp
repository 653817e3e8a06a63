// Small helpers shared by the engine's source files (internal to core/engine).
#pragma once

#include "engine/engine_options.hpp"

#include <strata/plugin_abi.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

namespace strata::engine::detail {

inline std::string status_text(const strata_status &st) {
    return st.message[0] != '\0' ? std::string(st.message) : std::string("error code ") + std::to_string(st.code);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr uint64_t gib = uint64_t{1} << 30;

inline uint64_t gib_bytes(double g) { return static_cast<uint64_t>(std::llround(g * static_cast<double>(gib))); }

inline std::string human(uint64_t b) {
    if (b >= gib) return fmt::format("{:.2f} GiB", static_cast<double>(b) / static_cast<double>(gib));
    if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / 1048576.0);
    if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024.0);
    return fmt::format("{} B", b);
}

// True when any of the n floats is NaN (one branch-free pass the compiler vectorises; no early exit needed for a
// vocabulary-sized row).
inline bool any_nan(const float *x, int64_t n) {
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) nan |= x[i] != x[i];
    return nan;
}

// [memory] with the KV tiers' bytes added (swap_space on the host tier, kv_nvme_space on NVMe): what each pipeline
// rank's weights are planned beside (engine.cpp, rank_server.cpp).
inline offload_options offload_with_kv_tiers(const engine_options &opts, bool device_reads_host) {
    offload_options offload = opts.offload;
    if (opts.kv.swap_space_gib > 0) {
        offload.kv_tier_bytes[opts.kv.host_tier] += gib_bytes(opts.kv.swap_space_gib);
        if (device_reads_host) offload.kv_spill_bytes = gib_bytes(opts.kv.swap_space_gib);
    }
    if (opts.kv.nvme_space_gib > 0) offload.kv_tier_bytes["nvme"] += gib_bytes(opts.kv.nvme_space_gib);
    return offload;
}

} // namespace strata::engine::detail
