// Metadata held in memory, with the same getters and type rules as a GGUF file's: the keys a format other than
// GGUF maps its own metadata to (an HF folder's config.json becomes llama.embedding_length, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_types.hpp"

namespace strata {

class metadata_table {
  public:
    // `origin` names where the values came from in messages ("config.json of ./llama-hf").
    explicit metadata_table(std::string origin) : origin_(std::move(origin)) {}

    // Each set_* adds the key or replaces its value; `from` says which source field it came from (for messages).
    void set_u32(std::string key, uint64_t v, std::string from = {});
    void set_u64(std::string key, uint64_t v, std::string from = {});
    void set_i64(std::string key, int64_t v, std::string from = {});
    void set_f32(std::string key, double v, std::string from = {});
    void set_bool(std::string key, bool v, std::string from = {});
    void set_string(std::string key, std::string v, std::string from = {});
    void set_string_array(std::string key, std::vector<std::string> v, std::string from = {});
    void set_f32_array(std::string key, std::vector<float> v, std::string from = {});
    void set_i64_array(std::string key, std::vector<int64_t> v, std::string from = {});

    size_t kv_count() const { return entries_.size(); }
    std::string_view kv_key(size_t i) const;
    gguf::value_type kv_type(size_t i) const;
    std::string kv_summary(size_t i, size_t max_len) const;

    bool has(std::string_view key) const { return find(key) != nullptr; }
    std::optional<gguf::value_type> type_of(std::string_view key) const;
    std::optional<gguf::value_type> array_type_of(std::string_view key) const;
    std::optional<uint64_t> get_uint(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
    std::optional<std::vector<float>> get_float_array(std::string_view key) const;
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  private:
    struct entry {
        std::string key;
        gguf::value_type type = gguf::value_type::u32;
        gguf::value_type elem_type = gguf::value_type::u32; // arrays
        uint64_t u = 0;
        int64_t i = 0;
        double f = 0;
        std::string s;
        std::vector<std::string> strings;
        std::vector<float> floats;
        std::vector<int64_t> ints;
        std::string from;
    };
    const entry *find(std::string_view key) const;
    entry &slot(std::string key, gguf::value_type type, std::string from);
    [[noreturn]] void wrong_type(const entry &e, const char *expected) const;

    std::string origin_;
    std::vector<entry> entries_;
};

} // namespace strata
