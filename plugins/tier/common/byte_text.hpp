// Byte counts in error messages: the exact number (what the user compares with config) plus a readable size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace strata::tier {

inline std::string byte_text(uint64_t bytes) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    char buf[64];
    if (bytes < 1024) {
        std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
        return buf;
    }
    double v = static_cast<double>(bytes) / 1024.0;
    int unit = 0;
    while (v >= 1024.0 && unit < 5) {
        v /= 1024.0;
        ++unit;
    }
    std::snprintf(buf, sizeof buf, "%llu bytes (%.1f %s)", static_cast<unsigned long long>(bytes), v, units[unit]);
    return buf;
}

} // namespace strata::tier
