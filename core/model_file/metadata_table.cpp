#include "model_file/metadata_table.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <limits>

namespace strata {

using gguf::value_type;

const metadata_table::entry *metadata_table::find(std::string_view key) const {
    for (const entry &e : entries_)
        if (e.key == key) return &e;
    return nullptr;
}

metadata_table::entry &metadata_table::slot(std::string key, value_type type, std::string from) {
    entry *e = const_cast<entry *>(find(key));
    if (e == nullptr) e = &entries_.emplace_back();
    *e = entry{};
    e->key = std::move(key);
    e->type = type;
    e->from = std::move(from);
    return *e;
}

void metadata_table::set_u32(std::string key, uint64_t v, std::string from) {
    if (v > UINT32_MAX) fail("{}: '{}'{} is {}, more than a 32-bit count holds", origin_, key,
                             from.empty() ? "" : fmt::format(" (from {})", from), v);
    slot(std::move(key), value_type::u32, std::move(from)).u = v;
}
void metadata_table::set_u64(std::string key, uint64_t v, std::string from) {
    slot(std::move(key), value_type::u64, std::move(from)).u = v;
}
void metadata_table::set_i64(std::string key, int64_t v, std::string from) {
    slot(std::move(key), value_type::i64, std::move(from)).i = v;
}
void metadata_table::set_f32(std::string key, double v, std::string from) {
    slot(std::move(key), value_type::f32, std::move(from)).f = v;
}
void metadata_table::set_bool(std::string key, bool v, std::string from) {
    slot(std::move(key), value_type::boolean, std::move(from)).u = v ? 1 : 0;
}
void metadata_table::set_string(std::string key, std::string v, std::string from) {
    slot(std::move(key), value_type::string, std::move(from)).s = std::move(v);
}
void metadata_table::set_string_array(std::string key, std::vector<std::string> v, std::string from) {
    entry &e = slot(std::move(key), value_type::array, std::move(from));
    e.elem_type = value_type::string;
    e.strings = std::move(v);
}
void metadata_table::set_f32_array(std::string key, std::vector<float> v, std::string from) {
    entry &e = slot(std::move(key), value_type::array, std::move(from));
    e.elem_type = value_type::f32;
    e.floats = std::move(v);
}
void metadata_table::set_i64_array(std::string key, std::vector<int64_t> v, std::string from) {
    entry &e = slot(std::move(key), value_type::array, std::move(from));
    e.elem_type = value_type::i64;
    e.ints = std::move(v);
}

std::string_view metadata_table::kv_key(size_t i) const { return entries_.at(i).key; }
value_type metadata_table::kv_type(size_t i) const { return entries_.at(i).type; }

std::string metadata_table::kv_summary(size_t i, size_t max_len) const {
    const entry &e = entries_.at(i);
    std::string out;
    switch (e.type) {
    case value_type::u32:
    case value_type::u64: out = fmt::format("{}", e.u); break;
    case value_type::i64: out = fmt::format("{}", e.i); break;
    case value_type::f32: out = fmt::format("{}", static_cast<float>(e.f)); break;
    case value_type::boolean: out = e.u ? "true" : "false"; break;
    case value_type::string: out = fmt::format("{:?}", e.s); break;
    default: {
        const size_t n = e.elem_type == value_type::string ? e.strings.size()
                         : e.elem_type == value_type::f32  ? e.floats.size()
                                                           : e.ints.size();
        out = "[";
        for (size_t k = 0; k < n && out.size() < max_len; ++k) {
            if (k) out += ", ";
            if (e.elem_type == value_type::string) out += fmt::format("{:?}", e.strings[k]);
            else if (e.elem_type == value_type::f32) out += fmt::format("{}", e.floats[k]);
            else out += fmt::format("{}", e.ints[k]);
        }
        out += fmt::format("] ({} {})", n, gguf::value_type_name(e.elem_type));
    }
    }
    if (out.size() > max_len + 3) out = out.substr(0, max_len) + "...";
    return out;
}

void metadata_table::wrong_type(const entry &e, const char *expected) const {
    fail("{}: '{}'{} is {}, expected {}", origin_, e.key, e.from.empty() ? "" : fmt::format(" (from {})", e.from),
         gguf::value_type_name(e.type), expected);
}

std::optional<value_type> metadata_table::type_of(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    return e->type;
}

std::optional<value_type> metadata_table::array_type_of(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr || e->type != value_type::array) return std::nullopt;
    return e->elem_type;
}

std::optional<uint64_t> metadata_table::get_uint(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type == value_type::u32 || e->type == value_type::u64 || e->type == value_type::boolean) return e->u;
    if (e->type != value_type::i64) wrong_type(*e, "an unsigned integer");
    if (e->i < 0) fail("{}: '{}' is {}, expected a non-negative integer", origin_, e->key, e->i);
    return static_cast<uint64_t>(e->i);
}

std::optional<int64_t> metadata_table::get_int(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type == value_type::i64) return e->i;
    if (e->type != value_type::u32 && e->type != value_type::u64 && e->type != value_type::boolean)
        wrong_type(*e, "an integer");
    if (e->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("{}: '{}' is {}, which does not fit in a signed 64-bit integer", origin_, e->key, e->u);
    return static_cast<int64_t>(e->u);
}

std::optional<double> metadata_table::get_float(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type == value_type::f32) return e->f;
    if (e->type == value_type::i64) return static_cast<double>(e->i);
    if (e->type == value_type::u32 || e->type == value_type::u64) return static_cast<double>(e->u);
    wrong_type(*e, "a number");
}

std::optional<bool> metadata_table::get_bool(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type != value_type::boolean) wrong_type(*e, "a bool");
    return e->u != 0;
}

std::optional<std::string_view> metadata_table::get_string(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type != value_type::string) wrong_type(*e, "a string");
    return std::string_view(e->s);
}

std::optional<std::vector<std::string_view>> metadata_table::get_string_array(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type != value_type::array || e->elem_type != value_type::string) wrong_type(*e, "an array of strings");
    return std::vector<std::string_view>(e->strings.begin(), e->strings.end());
}

std::optional<std::vector<float>> metadata_table::get_float_array(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type != value_type::array || e->elem_type != value_type::f32) wrong_type(*e, "an array of f32");
    return e->floats;
}

std::optional<std::vector<int64_t>> metadata_table::get_int_array(std::string_view key) const {
    const entry *e = find(key);
    if (e == nullptr) return std::nullopt;
    if (e->type != value_type::array || e->elem_type != value_type::i64) wrong_type(*e, "an array of integers");
    return e->ints;
}

} // namespace strata
