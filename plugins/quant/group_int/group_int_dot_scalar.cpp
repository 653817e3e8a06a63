// The portable dot kernels of the group-integer formats: per block, sum (q - zero) * x, times the block's scale.
#include "group_int_formats.hpp"

namespace strata::group_int {

namespace {

template <int Bits, int G> float dot(const void *row, const float *x, int64_t n) {
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

dot_fn dot_scalar_for(uint32_t type) {
    switch (type) {
    case STRATA_TYPE_Q4_G32: return dot<4, 32>;
    case STRATA_TYPE_Q4_G64: return dot<4, 64>;
    case STRATA_TYPE_Q4_G128: return dot<4, 128>;
    case STRATA_TYPE_Q8_G32: return dot<8, 32>;
    case STRATA_TYPE_Q8_G64: return dot<8, 64>;
    case STRATA_TYPE_Q8_G128: return dot<8, 128>;
    default: return nullptr;
    }
}

} // namespace strata::group_int
