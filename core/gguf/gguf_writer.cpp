// gguf::writer: builds a GGUF v3 file. Values are encoded as they are added; tensor data is written from the
// caller's buffers, so writing a file never holds a second copy of the weights.
#include "common/error.hpp"
#include "gguf/gguf_internal.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <unistd.h>

namespace strata::gguf {

namespace {

constexpr uint32_t default_alignment = 32;

template <class T> void put(std::vector<uint8_t> &out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t> &out, std::string_view s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

} // namespace

struct writer::state {
    struct kv_record {
        std::string key;
        std::vector<uint8_t> encoded; // value type followed by the value
    };
    struct tensor_record {
        std::string name;
        uint32_t type;
        std::vector<int64_t> ne;
        std::vector<uint8_t> bytes;
        uint64_t size = 0;  // bytes.size(), or a hole's size
        bool hole = false;  // no bytes held: written as a hole in the file (zeros)
    };
    uint32_t alignment = default_alignment;
    std::vector<kv_record> kvs;
    std::unordered_set<std::string> keys;
    std::vector<tensor_record> tensors;
    std::unordered_set<std::string> tensor_names;

    std::vector<uint8_t> &begin_kv(std::string key, value_type t) {
        if (key.empty()) fail("gguf writer: empty KV key; every KV needs a name");
        if (key == "general.alignment")
            fail("gguf writer: KV 'general.alignment' must be a u32; use set_alignment() instead");
        if (!keys.insert(key).second) fail("gguf writer: duplicate KV key '{}'; each key may be added once", key);
        kvs.push_back({std::move(key), {}});
        put<uint32_t>(kvs.back().encoded, static_cast<uint32_t>(t));
        return kvs.back().encoded;
    }

    // Header, KVs, tensor infos and the padding up to the data section.
    std::vector<uint8_t> metadata() const {
        std::vector<uint8_t> out;
        put<uint32_t>(out, 0x46554747u); // "GGUF"
        put<uint32_t>(out, 3);
        put<uint64_t>(out, tensors.size());
        put<uint64_t>(out, kvs.size() + (alignment != default_alignment ? 1 : 0));
        if (alignment != default_alignment) {
            put_string(out, "general.alignment");
            put<uint32_t>(out, static_cast<uint32_t>(value_type::u32));
            put<uint32_t>(out, alignment);
        }
        for (const kv_record &kv : kvs) {
            put_string(out, kv.key);
            out.insert(out.end(), kv.encoded.begin(), kv.encoded.end());
        }
        uint64_t offset = 0;
        for (const tensor_record &t : tensors) {
            put_string(out, t.name);
            put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
            for (int64_t n : t.ne) put<uint64_t>(out, static_cast<uint64_t>(n));
            put<uint32_t>(out, t.type);
            put<uint64_t>(out, offset);
            offset = align_up(offset + t.size, alignment);
        }
        out.resize(align_up(out.size(), alignment), 0);
        return out;
    }
};

writer::writer() : s_(std::make_unique<state>()) {}
writer::~writer() = default;
writer::writer(writer &&) noexcept = default;
writer &writer::operator=(writer &&) noexcept = default;

void writer::set_alignment(uint32_t a) {
    if (a == 0 || (a & (a - 1)) != 0) fail("gguf writer: alignment {} is not a nonzero power of two", a);
    s_->alignment = a;
}

void writer::add_u32(std::string key, uint32_t v) {
    if (key == "general.alignment") return set_alignment(v);
    put(s_->begin_kv(std::move(key), value_type::u32), v);
}
void writer::add_i32(std::string key, int32_t v) { put(s_->begin_kv(std::move(key), value_type::i32), v); }
void writer::add_u64(std::string key, uint64_t v) { put(s_->begin_kv(std::move(key), value_type::u64), v); }
void writer::add_f32(std::string key, float v) { put(s_->begin_kv(std::move(key), value_type::f32), v); }
void writer::add_bool(std::string key, bool v) {
    put<uint8_t>(s_->begin_kv(std::move(key), value_type::boolean), v ? 1 : 0);
}
void writer::add_string(std::string key, std::string v) { put_string(s_->begin_kv(std::move(key), value_type::string), v); }

void writer::add_string_array(std::string key, std::vector<std::string> v) {
    std::vector<uint8_t> &out = s_->begin_kv(std::move(key), value_type::array);
    put<uint32_t>(out, static_cast<uint32_t>(value_type::string));
    put<uint64_t>(out, v.size());
    for (const std::string &s : v) put_string(out, s);
}

void writer::add_f32_array(std::string key, std::vector<float> v) {
    std::vector<uint8_t> &out = s_->begin_kv(std::move(key), value_type::array);
    put<uint32_t>(out, static_cast<uint32_t>(value_type::f32));
    put<uint64_t>(out, v.size());
    for (float f : v) put(out, f);
}

void writer::add_i32_array(std::string key, std::vector<int32_t> v) {
    std::vector<uint8_t> &out = s_->begin_kv(std::move(key), value_type::array);
    put<uint32_t>(out, static_cast<uint32_t>(value_type::i32));
    put<uint64_t>(out, v.size());
    for (int32_t i : v) put(out, i);
}

void writer::add_tensor(std::string name, uint32_t ggml_type, std::vector<int64_t> ne, std::vector<uint8_t> bytes) {
    const uint64_t expected = checked_size(name, ggml_type, ne);
    if (expected != bytes.size())
        fail("gguf writer: tensor '{}' needs {} bytes but {} were given", name, expected, bytes.size());
    s_->tensor_names.insert(name);
    const uint64_t size = bytes.size();
    s_->tensors.push_back({std::move(name), ggml_type, std::move(ne), std::move(bytes), size, false});
}

void writer::add_tensor_hole(std::string name, uint32_t ggml_type, std::vector<int64_t> ne) {
    const uint64_t size = checked_size(name, ggml_type, ne);
    s_->tensor_names.insert(name);
    s_->tensors.push_back({std::move(name), ggml_type, std::move(ne), {}, size, true});
}

uint64_t writer::checked_size(const std::string &name, uint32_t ggml_type, const std::vector<int64_t> &ne) const {
    if (name.empty()) fail("gguf writer: tensor with an empty name");
    const type_traits *tt = ggml_type < first_strata_type ? ggml_type_traits(ggml_type) : nullptr;
    if (tt == nullptr) fail("gguf writer: tensor '{}' has unknown ggml type {} (Strata's own formats are not GGUF's)", name, ggml_type);
    if (ne.empty() || ne.size() > 4)
        fail("gguf writer: tensor '{}' has {} dimensions; give 1 to 4 (ne[0] is the row length)", name, ne.size());
    uint64_t n_elements = 1;
    for (int64_t n : ne) {
        if (n < 0) fail("gguf writer: tensor '{}' has negative dimension {}", name, n);
        if (__builtin_mul_overflow(n_elements, static_cast<uint64_t>(n), &n_elements) ||
            n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            fail("gguf writer: tensor '{}' has an element count that overflows", name);
    }
    if (ne[0] % tt->block_elems != 0)
        fail("gguf writer: tensor '{}' has row length {}, not a multiple of the {} block size {}", name, ne[0],
             tt->name, tt->block_elems);
    const uint64_t rows = ne[0] == 0 ? 0 : n_elements / static_cast<uint64_t>(ne[0]);
    uint64_t row_bytes = 0, expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(ne[0]) / tt->block_elems, tt->block_bytes, &row_bytes) ||
        __builtin_mul_overflow(rows, row_bytes, &expected))
        fail("gguf writer: tensor '{}' ({}, {} elements) has a byte size that overflows", name, tt->name, n_elements);
    if (s_->tensor_names.count(name) != 0) fail("gguf writer: duplicate tensor name '{}'", name);
    return expected;
}

std::vector<uint8_t> writer::to_bytes() const {
    std::vector<uint8_t> out = s_->metadata();
    for (const state::tensor_record &t : s_->tensors) {
        out.insert(out.end(), t.bytes.begin(), t.bytes.end());
        out.resize(align_up(out.size() + (t.hole ? t.size : 0), s_->alignment), 0);
    }
    return out;
}

void writer::write(const std::string &path) const {
    const std::string tmp = path + ".tmp";
    std::FILE *f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) fail("{}: cannot create: {}; check that the directory exists and is writable", tmp, std::strerror(errno));
    // Removes the partial file on every failure path.
    auto give_up = [&](const char *what) {
        const int err = errno;
        if (f != nullptr) std::fclose(f);
        std::remove(tmp.c_str());
        fail("{}: {} failed: {}; check free disk space and permissions", tmp, what, std::strerror(err));
    };
    const std::vector<uint8_t> meta = s_->metadata();
    if (std::fwrite(meta.data(), 1, meta.size(), f) != meta.size()) give_up("write");
    static const uint8_t zeros[256] = {};
    uint64_t pos = meta.size();
    for (const state::tensor_record &t : s_->tensors) {
        if (!t.bytes.empty() && std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) != t.bytes.size()) give_up("write");
        pos += t.size;
        uint64_t pad = align_up(pos, s_->alignment) - pos;
        if (t.hole) { // skipped: the file's end is set below, so the skipped bytes read as zeros
            pos += pad;
            if (::fseeko(f, static_cast<off_t>(pos), SEEK_SET) != 0) give_up("seek");
            continue;
        }
        pos += pad;
        while (pad > 0) {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof zeros));
            if (std::fwrite(zeros, 1, n, f) != n) give_up("write");
            pad -= n;
        }
    }
    if (std::fflush(f) != 0) give_up("flush");
    if (::ftruncate(::fileno(f), static_cast<off_t>(pos)) != 0) give_up("setting the file size");
    const int rc = std::fclose(f);
    f = nullptr;
    if (rc != 0) give_up("close");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) give_up("rename to the final name");
}

} // namespace strata::gguf
