// The portable dot kernels of the FP8 formats: per block, sum e4m3(q) * x through a 256-entry table, times the
// block's scale.
#include "fp8_formats.hpp"

#include <array>

namespace strata::fp8 {

namespace {

const std::array<float, 256> &e4m3_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int q = 0; q < 256; ++q) t[static_cast<size_t>(q)] = e4m3_to_float(static_cast<uint8_t>(q));
        return t;
    }();
    return table;
}

struct kernels {
    template <int B> static float dot(const void *row, const float *x, int64_t n);
};

template <int B> float kernels::dot(const void *row, const float *x, int64_t n) {
    constexpr format f{0, B};
    const std::array<float, 256> &table = e4m3_table();
    const auto *b = static_cast<const uint8_t *>(row);
    float sum = 0.0f;
    for (int64_t g = 0; g < n / B; ++g, b += f.block_bytes(), x += B) {
        float acc = 0.0f;
        for (int i = 0; i < B; ++i) acc += table[b[4 + i]] * x[i];
        sum += block_scale(b) * acc;
    }
    return sum;
}

} // namespace

dot_fn dot_scalar_for(uint32_t type) { return dot_for<kernels>(type); }

} // namespace strata::fp8
