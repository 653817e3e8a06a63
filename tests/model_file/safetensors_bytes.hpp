// Builds .safetensors bytes from a header text and a data size, for the reader's tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::testing {

inline std::vector<uint8_t> safetensors_bytes(const std::string &header, size_t data_bytes, bool pad = true) {
    std::string h = header;
    if (pad) h.append((8 - h.size() % 8) % 8, ' ');
    std::vector<uint8_t> out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i)));
    out.insert(out.end(), h.begin(), h.end());
    for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i));
    return out;
}

} // namespace strata::testing
