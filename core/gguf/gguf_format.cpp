// Printable, length-limited rendering of GGUF values (for `kv_summary`, model info listings and logs).
#include "gguf/gguf_internal.hpp"

#include <fmt/format.h>

namespace strata::gguf::detail {

void append_quoted(std::string &out, std::string_view s, size_t budget) {
    out += '"';
    size_t i = 0;
    for (; i < s.size() && out.size() < budget; ++i) {
        const unsigned char ch = static_cast<unsigned char>(s[i]);
        switch (ch) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (ch < 0x20 || ch == 0x7f)
                out += fmt::format("\\x{:02x}", ch);
            else
                out += static_cast<char>(ch);
        }
    }
    if (i < s.size()) {
        // Cut at a character boundary: drop the partial UTF-8 sequence (continuation bytes and their lead).
        if ((static_cast<unsigned char>(s[i]) & 0xc0) == 0x80) {
            while ((static_cast<unsigned char>(out.back()) & 0xc0) == 0x80) out.pop_back();
            if ((static_cast<unsigned char>(out.back()) & 0xc0) == 0xc0) out.pop_back();
        }
        out += "...";
    }
    out += '"';
}

namespace {

template <class T> bool read_as(cursor &c, T &v, std::string &out) {
    if (c.read(v)) return true;
    out += '?'; // cannot happen on parsed data; keeps the formatter total anyway
    return false;
}

template <class T> void append_number(cursor &c, std::string &out) {
    T v{};
    if (read_as(c, v, out)) out += fmt::format("{}", v);
}

} // namespace

bool format_value(cursor &c, value_type t, std::string &out, size_t budget, int depth) {
    switch (t) {
    case value_type::u8: append_number<uint8_t>(c, out); return true;
    case value_type::i8: append_number<int8_t>(c, out); return true;
    case value_type::u16: append_number<uint16_t>(c, out); return true;
    case value_type::i16: append_number<int16_t>(c, out); return true;
    case value_type::u32: append_number<uint32_t>(c, out); return true;
    case value_type::i32: append_number<int32_t>(c, out); return true;
    case value_type::u64: append_number<uint64_t>(c, out); return true;
    case value_type::i64: append_number<int64_t>(c, out); return true;
    case value_type::f32: append_number<float>(c, out); return true;
    case value_type::f64: append_number<double>(c, out); return true;
    case value_type::boolean: {
        uint8_t b = 0;
        if (read_as(c, b, out)) out += b ? "true" : "false";
        return true;
    }
    case value_type::string: {
        uint64_t len = 0;
        if (!read_as(c, len, out)) return false;
        if (!c.has(len)) {
            out += '?';
            return false;
        }
        append_quoted(out, {reinterpret_cast<const char *>(c.here()), static_cast<size_t>(len)}, budget);
        c.skip(static_cast<size_t>(len));
        return true;
    }
    case value_type::array: {
        uint32_t elem = 0;
        uint64_t count = 0;
        if (!read_as(c, elem, out) || !read_as(c, count, out)) return false;
        if (!is_known(elem) || depth > max_array_depth) {
            out += '?';
            return false;
        }
        out += '[';
        for (uint64_t i = 0; i < count; ++i) {
            if (out.size() >= budget) {
                out += i > 0 ? ", ...]" : "...]";
                return false;
            }
            if (i > 0) out += ", ";
            if (!format_value(c, static_cast<value_type>(elem), out, budget, depth + 1)) {
                out += ']';
                return false;
            }
        }
        out += ']';
        return true;
    }
    }
    out += '?';
    return false;
}

} // namespace strata::gguf::detail
