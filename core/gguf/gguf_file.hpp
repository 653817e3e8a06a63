// GGUF (v2/v3, little-endian) reader and writer. The reader treats every file as untrusted: each count,
// length and offset is checked against the buffer before use, and every defect becomes one strata::error
// that names the file, the defect, the byte offset where it was found and a hint.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.hpp"
#include "gguf/gguf_types.hpp"
#include "model_file/model_file.hpp"

namespace strata::gguf {

using strata::open_options; // common/mapped_file.hpp

// A parsed GGUF file. Movable, not copyable; a moved-from file must not be used.
// Scalar getters: nullopt when the key is missing, strata::error when it holds an incompatible type.
class file final : public model_file {
  public:
    // Maps the file read-only (MAP_PRIVATE) for the lifetime of the object; throws strata::error.
    static file open(const std::string &path, const open_options &how = {});
    // Borrows the buffer: it must outlive the returned object. `name` is used in error messages.
    static file parse(const void *data, size_t size, std::string name = "<memory>");

    file(file &&) noexcept;
    file &operator=(file &&) noexcept;
    file(const file &) = delete;
    file &operator=(const file &) = delete;
    ~file();

    uint32_t version() const;
    uint64_t alignment() const;
    const std::string &name() const override;

    size_t kv_count() const override;
    std::string_view kv_key(size_t i) const override;
    value_type kv_type(size_t i) const override;
    // Printable value: strings quoted and escaped, arrays shortened, at most about max_len characters.
    std::string kv_summary(size_t i, size_t max_len) const override;
    using model_file::kv_summary;

    bool has(std::string_view key) const override;
    std::optional<value_type> type_of(std::string_view key) const override;
    std::optional<value_type> array_type_of(std::string_view key) const override; // element type; nullopt unless an array
    std::optional<uint64_t> get_uint(std::string_view key) const override; // any integer type with a non-negative value; bool
    std::optional<int64_t> get_int(std::string_view key) const override;   // any integer type that fits; bool
    std::optional<double> get_float(std::string_view key) const override;  // f32/f64 and integers
    std::optional<bool> get_bool(std::string_view key) const override;
    std::optional<std::string_view> get_string(std::string_view key) const override; // view into owned, NUL-terminated storage

    // Arrays: nullopt when missing; throws strata::error when present with another (element) type.
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const override; // NUL-terminated views
    std::optional<std::vector<float>> get_float_array(std::string_view key) const override;             // f32 or f64 elements
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const override;             // any integer elements

    const std::vector<tensor_info> &tensors() const override;
    const tensor_info *find_tensor(std::string_view name) const override; // nullptr when absent

    std::string_view format() const override { return "gguf"; }
    uint64_t data_offset() const; // start of the data section (aligned)
    uint64_t file_size() const override;

    struct impl;

  private:
    explicit file(std::unique_ptr<impl> p);
    std::unique_ptr<impl> impl_;
};

// Builds a GGUF v3 file (for tools/make-model and tests). Every add_* validates its input and throws
// strata::error on a defect (duplicate key or tensor, bad shape, wrong byte count).
class writer {
  public:
    writer();
    ~writer();
    writer(writer &&) noexcept;
    writer &operator=(writer &&) noexcept;

    void set_alignment(uint32_t a); // power of two; also writes general.alignment when != 32

    void add_u32(std::string key, uint32_t v); // add_u32("general.alignment", a) is set_alignment(a)
    void add_i32(std::string key, int32_t v);
    void add_u64(std::string key, uint64_t v);
    void add_f32(std::string key, float v);
    void add_bool(std::string key, bool v);
    void add_string(std::string key, std::string v);
    void add_string_array(std::string key, std::vector<std::string> v);
    void add_f32_array(std::string key, std::vector<float> v);
    void add_i32_array(std::string key, std::vector<int32_t> v);

    // ne[0] is the row length; bytes.size() must equal the size implied by type and shape.
    void add_tensor(std::string name, uint32_t ggml_type, std::vector<int64_t> ne, std::vector<uint8_t> bytes);
    // A tensor of the size its type and shape imply whose bytes are never held: write() leaves a hole (reads as
    // zeros; sparse on disk). For files whose shape matters and whose weights do not (make-model --shape-only).
    void add_tensor_hole(std::string name, uint32_t ggml_type, std::vector<int64_t> ne);

    void write(const std::string &path) const; // writes path.tmp then renames: no half-written file on error
    std::vector<uint8_t> to_bytes() const;     // the same content in memory

  private:
    struct state;
    uint64_t checked_size(const std::string &name, uint32_t ggml_type, const std::vector<int64_t> &ne) const;
    std::unique_ptr<state> s_;
};

} // namespace strata::gguf
