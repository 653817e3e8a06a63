// The value of one hexadecimal digit, for the parsers that read \xHH-style escapes and <0xNN> token texts.
#pragma once

namespace strata {

// 0-15, or -1 when `c` is not a hex digit (either case).
constexpr int hex_digit_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace strata
