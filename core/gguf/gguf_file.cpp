// gguf::file: mapping a file, and typed access to the KVs and tensors the parser validated.
#include "common/error.hpp"
#include "gguf/gguf_internal.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

namespace strata::gguf {

using detail::kv_entry;

namespace {

const kv_entry &kv_at(const file::impl &f, size_t i) {
    if (i >= f.kvs.size()) fail("{}: KV index {} out of range (the file has {} KVs)", f.name, i, f.kvs.size());
    return f.kvs[i];
}

const kv_entry *find_kv(const file::impl &f, std::string_view key) {
    const auto it = f.kv_index.find(key);
    return it == f.kv_index.end() ? nullptr : &f.kvs[it->second];
}

[[noreturn]] void wrong_type(const file::impl &f, const kv_entry &kv, std::string_view expected) {
    std::string actual = value_type_name(kv.type);
    if (kv.type == value_type::array) actual = fmt::format("an array of {}", value_type_name(kv.elem_type));
    fail("{}: KV '{}' (at byte {}) is {}, expected {}; the file does not follow the GGUF conventions for this key",
         f.name, f.view(kv.key), kv.file_offset, actual, expected);
}

// Reads element i of a fixed-size array as T (the payload was bounds-checked by the parser).
template <class T> T element(const file::impl &f, const kv_entry &kv, uint64_t i) {
    T v;
    std::memcpy(&v, f.base + kv.payload_begin + i * sizeof(T), sizeof(T));
    return v;
}

} // namespace

int64_t tensor_info::n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }

file::file(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
file::file(file &&) noexcept = default;
file &file::operator=(file &&) noexcept = default;
file::~file() = default;

file file::open(const std::string &path, const open_options &how) {
    mapped_file mapping = mapped_file::open(path, how, ".gguf file");
    auto p = detail::parse_buffer(mapping.data(), mapping.size(), path);
    p->mapping = std::move(mapping);
    return file(std::move(p));
}

file file::parse(const void *data, size_t size, std::string name) {
    if (data == nullptr && size != 0) fail("{}: null buffer of {} bytes", name, size);
    static const uint8_t empty = 0;
    const uint8_t *bytes = data == nullptr ? &empty : static_cast<const uint8_t *>(data);
    return file(detail::parse_buffer(bytes, size, std::move(name)));
}

uint32_t file::version() const { return impl_->version; }
uint64_t file::alignment() const { return impl_->alignment; }
const std::string &file::name() const { return impl_->name; }
size_t file::kv_count() const { return impl_->kvs.size(); }
std::string_view file::kv_key(size_t i) const { return impl_->view(kv_at(*impl_, i).key); }
value_type file::kv_type(size_t i) const { return kv_at(*impl_, i).type; }
const std::vector<tensor_info> &file::tensors() const { return impl_->tensors; }
uint64_t file::data_offset() const { return impl_->data_offset; }
uint64_t file::file_size() const { return impl_->size; }

std::string file::kv_summary(size_t i, size_t max_len) const {
    const kv_entry &kv = kv_at(*impl_, i);
    std::string out;
    switch (kv.type) {
    case value_type::u8:
    case value_type::u16:
    case value_type::u32:
    case value_type::u64: return fmt::format("{}", kv.u);
    case value_type::i8:
    case value_type::i16:
    case value_type::i32:
    case value_type::i64: return fmt::format("{}", kv.i);
    case value_type::f32: return fmt::format("{}", static_cast<float>(kv.f));
    case value_type::f64: return fmt::format("{}", kv.f);
    case value_type::boolean: return kv.u ? "true" : "false";
    case value_type::string: detail::append_quoted(out, impl_->view(kv.str), max_len); return out;
    case value_type::array: {
        detail::cursor c(impl_->base, kv.payload_end, kv.payload_begin);
        out += '[';
        bool complete = true;
        for (uint64_t e = 0; e < kv.count; ++e) {
            if (out.size() >= max_len) {
                out += e > 0 ? ", ..." : "...";
                complete = false;
                break;
            }
            if (e > 0) out += ", ";
            if (!detail::format_value(c, kv.elem_type, out, max_len, 2)) {
                complete = false;
                break;
            }
        }
        out += ']';
        if (!complete) out += fmt::format(" ({} x {})", kv.count, value_type_name(kv.elem_type));
        return out;
    }
    }
    return "?";
}

bool file::has(std::string_view key) const { return find_kv(*impl_, key) != nullptr; }

std::optional<value_type> file::type_of(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    return kv->type;
}

std::optional<value_type> file::array_type_of(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr || kv->type != value_type::array) return std::nullopt;
    return kv->elem_type;
}

std::optional<uint64_t> file::get_uint(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type == value_type::boolean || (detail::is_integer(kv->type) && !detail::is_signed(kv->type)))
        return kv->u;
    if (!detail::is_signed(kv->type)) wrong_type(*impl_, *kv, "an unsigned integer");
    if (kv->i < 0)
        fail("{}: KV '{}' (at byte {}) is {}, expected a non-negative integer", impl_->name, key, kv->file_offset,
             kv->i);
    return static_cast<uint64_t>(kv->i);
}

std::optional<int64_t> file::get_int(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (detail::is_signed(kv->type)) return kv->i;
    if (kv->type != value_type::boolean && !detail::is_integer(kv->type)) wrong_type(*impl_, *kv, "an integer");
    if (kv->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("{}: KV '{}' (at byte {}) is {}, which does not fit in a signed 64-bit integer", impl_->name, key,
             kv->file_offset, kv->u);
    return static_cast<int64_t>(kv->u);
}

std::optional<double> file::get_float(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type == value_type::f32 || kv->type == value_type::f64) return kv->f;
    if (detail::is_signed(kv->type)) return static_cast<double>(kv->i);
    if (detail::is_integer(kv->type)) return static_cast<double>(kv->u);
    wrong_type(*impl_, *kv, "a number");
}

std::optional<bool> file::get_bool(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type != value_type::boolean) wrong_type(*impl_, *kv, "a bool");
    return kv->u != 0;
}

std::optional<std::string_view> file::get_string(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type != value_type::string) wrong_type(*impl_, *kv, "a string");
    return impl_->view(kv->str);
}

std::optional<std::vector<std::string_view>> file::get_string_array(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type != value_type::array || kv->elem_type != value_type::string)
        wrong_type(*impl_, *kv, "an array of strings");
    std::vector<std::string_view> out;
    out.reserve(static_cast<size_t>(kv->count));
    for (uint64_t i = 0; i < kv->count; ++i) out.push_back(impl_->view(impl_->string_elems[kv->first_string + i]));
    return out;
}

std::optional<std::vector<float>> file::get_float_array(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type != value_type::array || (kv->elem_type != value_type::f32 && kv->elem_type != value_type::f64))
        wrong_type(*impl_, *kv, "an array of f32");
    std::vector<float> out(static_cast<size_t>(kv->count));
    for (uint64_t i = 0; i < kv->count; ++i)
        out[i] = kv->elem_type == value_type::f32 ? element<float>(*impl_, *kv, i)
                                                  : static_cast<float>(element<double>(*impl_, *kv, i));
    return out;
}

std::optional<std::vector<int64_t>> file::get_int_array(std::string_view key) const {
    const kv_entry *kv = find_kv(*impl_, key);
    if (kv == nullptr) return std::nullopt;
    if (kv->type != value_type::array || !detail::is_integer(kv->elem_type))
        wrong_type(*impl_, *kv, "an array of integers");
    std::vector<int64_t> out(static_cast<size_t>(kv->count));
    for (uint64_t i = 0; i < kv->count; ++i) {
        switch (kv->elem_type) {
        case value_type::u8: out[i] = element<uint8_t>(*impl_, *kv, i); break;
        case value_type::i8: out[i] = element<int8_t>(*impl_, *kv, i); break;
        case value_type::u16: out[i] = element<uint16_t>(*impl_, *kv, i); break;
        case value_type::i16: out[i] = element<int16_t>(*impl_, *kv, i); break;
        case value_type::u32: out[i] = element<uint32_t>(*impl_, *kv, i); break;
        case value_type::i32: out[i] = element<int32_t>(*impl_, *kv, i); break;
        case value_type::i64: out[i] = element<int64_t>(*impl_, *kv, i); break;
        default: {
            const uint64_t v = element<uint64_t>(*impl_, *kv, i);
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail("{}: KV '{}' (at byte {}) element {} is {}, which does not fit in a signed 64-bit integer",
                     impl_->name, key, kv->file_offset, i, v);
            out[i] = static_cast<int64_t>(v);
        }
        }
    }
    return out;
}

const tensor_info *file::find_tensor(std::string_view name) const {
    const auto it = impl_->tensor_index.find(name);
    return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

} // namespace strata::gguf
