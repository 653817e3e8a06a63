// The 16-bit float conversions of the quant plugin: the SDK's (strata/float16.hpp), under the names its formats use.
#pragma once

#include <strata/float16.hpp>

namespace strata::quants {

using strata::float16::bf16_to_fp32;
using strata::float16::bits_to_float;
using strata::float16::float_bits;
using strata::float16::fp16_to_fp32;
using strata::float16::fp32_to_bf16;
using strata::float16::fp32_to_fp16;

} // namespace strata::quants
