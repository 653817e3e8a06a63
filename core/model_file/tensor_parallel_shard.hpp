// One tensor-parallel rank's view of a model file (Megatron's split, vLLM's --tensor-parallel-size): the same metadata,
// and every weight as that rank's part of it — for each tensor the model plugin said how it splits (its rows or its
// columns, in the groups a fused tensor holds), rank r keeps piece r of T of each group. A part that is a contiguous
// range of the file (one group of rows, or of a vector's elements) stays a view of the mapping; any other (columns of a
// matrix, a fused tensor's groups) is gathered once into memory the shard owns. The planner, the tiers and the model
// plugin then see only the part: each rank plans, places and reads its share of the bytes.
#pragma once

#include "common/mapped_file.hpp"
#include "model_file/model_file.hpp"

#include <strata/plugin_abi.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace strata {

struct tensor_split_rule {
    enum class axis { none, rows, cols };
    axis along = axis::none;
    std::vector<int64_t> groups; // rows (or columns) of each consecutive group, summing to the tensor's
};

// The rule a model plugin's strata_tensor_split gives (ABI 1.29; its groups repeated `repeat` times since 1.30: a stack
// of experts), or nullopt for one the ABI does not know (an axis other than none / rows / columns, other than 1 to 4
// parts, a repeat outside 0..65536).
inline std::optional<tensor_split_rule> split_rule_of(const strata_tensor_split &s) {
    tensor_split_rule rule;
    if (s.axis == STRATA_SPLIT_NONE) return rule;
    if ((s.axis != STRATA_SPLIT_ROWS && s.axis != STRATA_SPLIT_COLS) || s.n_parts < 1 || s.n_parts > 4 ||
        s.repeat < 0 || s.repeat > 65536)
        return std::nullopt;
    rule.along = s.axis == STRATA_SPLIT_ROWS ? tensor_split_rule::axis::rows : tensor_split_rule::axis::cols;
    for (int32_t i = 0; i < std::max(s.repeat, 1); ++i) rule.groups.insert(rule.groups.end(), s.part, s.part + s.n_parts);
    return rule;
}

class tensor_parallel_shard final : public model_file {
  public:
    // Elements and bytes of one block of a tensor type ({0, 0}: unknown), for cutting rows into columns.
    using block_lookup = std::function<std::pair<int64_t, int64_t>(uint32_t type)>;

    // Borrows `whole` for its lifetime. Throws strata::error naming the tensor when a part cannot be cut: a group not
    // a multiple of `size`, a column piece not whole blocks of its type, a tensor of more than two dimensions or with
    // an input order, a rule naming a tensor the file lacks.
    // shapes_only (`runtime plan`): the parts' shapes and bytes, no weight read or copied (a gathered part's data is
    // an untouched zero mapping, as an HF folder planned from config.json alone).
    tensor_parallel_shard(const model_file &whole, const std::map<std::string, tensor_split_rule> &rules, int32_t rank,
                          int32_t size, const block_lookup &blocks, bool shapes_only = false);

    int32_t rank() const { return rank_; }
    int32_t size() const { return size_; }
    // Bytes of the tensors this rank holds (whole ones included) and the bytes gathered into memory of its own.
    uint64_t tensor_bytes() const;
    uint64_t gathered_bytes() const { return gathered_bytes_; }
    // The parts this shard gathered are this rank's alone; the rest are the file's, which other ranks read too.
    bool tensor_memory_is_private(const gguf::tensor_info &t) const override { return gathered_.count(t.name) != 0; }

    const std::string &name() const override { return whole_.name(); }
    std::string_view format() const override { return whole_.format(); }
    size_t kv_count() const override { return whole_.kv_count(); }
    std::string_view kv_key(size_t i) const override { return whole_.kv_key(i); }
    gguf::value_type kv_type(size_t i) const override { return whole_.kv_type(i); }
    std::string kv_summary(size_t i, size_t max_len) const override { return whole_.kv_summary(i, max_len); }
    bool has(std::string_view key) const override { return whole_.has(key); }
    std::optional<gguf::value_type> type_of(std::string_view key) const override { return whole_.type_of(key); }
    std::optional<gguf::value_type> array_type_of(std::string_view key) const override {
        return whole_.array_type_of(key);
    }
    std::optional<uint64_t> get_uint(std::string_view key) const override { return whole_.get_uint(key); }
    std::optional<int64_t> get_int(std::string_view key) const override { return whole_.get_int(key); }
    std::optional<double> get_float(std::string_view key) const override { return whole_.get_float(key); }
    std::optional<bool> get_bool(std::string_view key) const override { return whole_.get_bool(key); }
    std::optional<std::string_view> get_string(std::string_view key) const override { return whole_.get_string(key); }
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const override {
        return whole_.get_string_array(key);
    }
    std::optional<std::vector<float>> get_float_array(std::string_view key) const override {
        return whole_.get_float_array(key);
    }
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const override {
        return whole_.get_int_array(key);
    }
    const std::vector<gguf::tensor_info> &tensors() const override { return tensors_; }
    const gguf::tensor_info *find_tensor(std::string_view name) const override;
    uint64_t file_size() const override { return whole_.file_size(); }
    std::string_view quantization() const override { return whole_.quantization(); }
    const vocab_data *own_vocab() const override { return whole_.own_vocab(); }

  private:
    gguf::tensor_info cut(const gguf::tensor_info &t, const tensor_split_rule &rule, const block_lookup &blocks);
    unsigned char *own(uint64_t bytes);

    const model_file &whole_;
    int32_t rank_, size_;
    bool shapes_only_;
    std::vector<gguf::tensor_info> tensors_;
    std::unordered_map<std::string_view, size_t> index_; // into tensors_ (their names)
    struct free_deleter {
        void operator()(unsigned char *p) const;
    };
    std::vector<std::unique_ptr<unsigned char, free_deleter>> owned_;
    uint64_t gathered_bytes_ = 0;
    std::unordered_set<std::string> gathered_; // names of the parts in owned_
    mapped_file zeros_; // shapes_only: every gathered part's data
};

} // namespace strata
