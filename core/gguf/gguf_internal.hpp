// Internal to core/gguf: the parsed representation behind gguf::file and the bounds-checked byte cursor
// the parser and the value formatter read with.
#pragma once

#include "common/mapped_file.hpp"

#include "gguf/gguf_file.hpp"

#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::gguf::detail {

static_assert(std::endian::native == std::endian::little, "GGUF values are read with memcpy: little-endian hosts only");

// Arrays may nest; the limit keeps recursion (and the stack) bounded on hostile input.
constexpr int max_array_depth = 8;

constexpr size_t fixed_value_size(value_type t) {
    switch (t) {
    case value_type::u8:
    case value_type::i8:
    case value_type::boolean: return 1;
    case value_type::u16:
    case value_type::i16: return 2;
    case value_type::u32:
    case value_type::i32:
    case value_type::f32: return 4;
    case value_type::u64:
    case value_type::i64:
    case value_type::f64: return 8;
    case value_type::string:
    case value_type::array: return 0;
    }
    return 0;
}

constexpr bool is_known(uint32_t t) { return t <= static_cast<uint32_t>(value_type::f64); }
constexpr bool is_integer(value_type t) {
    return t == value_type::u8 || t == value_type::i8 || t == value_type::u16 || t == value_type::i16 ||
           t == value_type::u32 || t == value_type::i32 || t == value_type::u64 || t == value_type::i64;
}
constexpr bool is_signed(value_type t) {
    return t == value_type::i8 || t == value_type::i16 || t == value_type::i32 || t == value_type::i64;
}

// A string copied out of the file: arena[offset + size] is '\0'.
struct stored_string {
    size_t offset = 0;
    size_t size = 0;
};

struct kv_entry {
    stored_string key;
    value_type type = value_type::u8;
    uint64_t file_offset = 0; // where the KV (its key length) starts
    // Scalars: unsigned types and bool in u, signed types in i, f32/f64 in f.
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    stored_string str;
    // Arrays: the element bytes stay in the file buffer (validated at parse time).
    value_type elem_type = value_type::u8;
    uint64_t count = 0;
    size_t payload_begin = 0; // first element
    size_t payload_end = 0;   // one past the last element
    size_t first_string = 0;  // index into file::impl::string_elems for arrays of strings
};

// Reads little-endian values from [base, base + size); every read is checked against the end.
class cursor {
  public:
    cursor(const uint8_t *base, size_t size, size_t pos) : base_(base), size_(size), pos_(pos) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    bool has(uint64_t n) const { return n <= remaining(); }
    const uint8_t *here() const { return base_ + pos_; }
    void skip(size_t n) { pos_ += n; } // caller checked has(n)

    template <class T> bool read(T &out) {
        if (!has(sizeof(T))) return false;
        std::memcpy(&out, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return true;
    }

  private:
    const uint8_t *base_;
    size_t size_;
    size_t pos_;
};


// Appends s in double quotes with control characters escaped, cut (at a UTF-8 boundary) once out reaches budget.
void append_quoted(std::string &out, std::string_view s, size_t budget);

// Appends one value of type t read from c (parsed data) to out, shortening strings and arrays once out reaches
// budget characters. Returns false when it stopped early (the cursor is then not past the value).
bool format_value(cursor &c, value_type t, std::string &out, size_t budget, int depth = 0);

} // namespace strata::gguf::detail

namespace strata::gguf {

struct file::impl {
    std::string name;
    mapped_file mapping; // empty for a borrowed buffer
    const uint8_t *base = nullptr;
    size_t size = 0;
    uint32_t version = 0;
    uint64_t alignment = 32;
    uint64_t data_offset = 0;
    std::vector<char> arena; // keys and string values, each followed by '\0'
    std::vector<detail::stored_string> string_elems;
    std::vector<detail::kv_entry> kvs;
    std::unordered_map<std::string_view, size_t> kv_index; // views into arena
    std::vector<tensor_info> tensors;
    std::unordered_map<std::string_view, size_t> tensor_index; // views into tensors[i].name

    std::string_view view(const detail::stored_string &s) const { return {arena.data() + s.offset, s.size}; }
};

namespace detail {
std::unique_ptr<file::impl> parse_buffer(const uint8_t *data, size_t size, std::string name);
}

} // namespace strata::gguf
