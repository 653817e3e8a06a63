// The portable dot kernels of the group-integer formats: per block, sum (q - zero) * x, times the block's scale.
#include "group_int_formats.hpp"

namespace strata::group_int {

namespace {

struct kernels {
    template <int Bits, int G> static float dot(const void *row, const float *x, int64_t n);
};

template <int Bits, int G> float kernels::dot(const void *row, const float *x, int64_t n) {
    constexpr format f{0, Bits, G};
    const auto *b = static_cast<const uint8_t *>(row);
    float sum = 0.0f;
    for (int64_t g = 0; g < n / G; ++g, b += f.block_bytes(), x += G) {
        const float z = static_cast<float>(block_zero(b));
        float acc = 0.0f;
        for (int i = 0; i < G; ++i) acc += (static_cast<float>(block_q(f, b, i)) - z) * x[i];
        sum += block_scale(b) * acc;
    }
    return sum;
}

} // namespace

dot_fn dot_scalar_for(uint32_t type) { return dot_for<kernels>(type); }

} // namespace strata::group_int
