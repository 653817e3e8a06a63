// A Hugging Face checkpoint folder as a model_file: config.json mapped to GGUF metadata (hf_config), the safetensors
// shards (model.safetensors, or model.safetensors.index.json's weight_map) memory-mapped with their tensors renamed to
// GGUF's (hf_architectures), the vocabulary from tokenizer.json / tokenizer_config.json, and the chat template as
// tokenizer.chat_template. Matrices are never copied: their data points into the shard mappings (1-D norms and
// biases are widened to F32, as llama.cpp's converter stores them); a GPTQ or AWQ layer's qweight / qzeros / scales
// are repacked once into a group-integer weight (hf_quantization.hpp), its integers kept as they are, and an FP8 layer's
// e4m3 weight and scales into FP8 blocks (hf_fp8.hpp), its bytes kept as they are.
#pragma once

#include "common/mapped_file.hpp"
#include "model_file/hf_config.hpp"
#include "model_file/metadata_table.hpp"
#include "model_file/model_file.hpp"
#include "model_file/safetensors_file.hpp"
#include "tokenizer/vocab.hpp"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata {

class hf_checkpoint final : public model_file {
  public:
    // Throws strata::error naming the file and field of the first defect. `plan_only`: a folder holding only
    // config.json (and the shard index) is read as tensors of the shapes and dtype config.json implies, over zero
    // pages, so `runtime plan` shows what a checkpoint needs before it is downloaded; no tokenizer is required.
    static std::unique_ptr<hf_checkpoint> open(const std::string &folder, const open_options &how = {},
                                               bool plan_only = false);

    const std::string &name() const override { return name_; }
    std::string_view format() const override { return "safetensors"; }
    size_t kv_count() const override { return meta_.kv_count(); }
    std::string_view kv_key(size_t i) const override { return meta_.kv_key(i); }
    gguf::value_type kv_type(size_t i) const override { return meta_.kv_type(i); }
    std::string kv_summary(size_t i, size_t max_len) const override { return meta_.kv_summary(i, max_len); }
    using model_file::kv_summary;
    bool has(std::string_view key) const override { return meta_.has(key); }
    std::optional<gguf::value_type> type_of(std::string_view key) const override { return meta_.type_of(key); }
    std::optional<gguf::value_type> array_type_of(std::string_view key) const override {
        return meta_.array_type_of(key);
    }
    std::optional<uint64_t> get_uint(std::string_view key) const override { return meta_.get_uint(key); }
    std::optional<int64_t> get_int(std::string_view key) const override { return meta_.get_int(key); }
    std::optional<double> get_float(std::string_view key) const override { return meta_.get_float(key); }
    std::optional<bool> get_bool(std::string_view key) const override { return meta_.get_bool(key); }
    std::optional<std::string_view> get_string(std::string_view key) const override { return meta_.get_string(key); }
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const override {
        return meta_.get_string_array(key);
    }
    std::optional<std::vector<float>> get_float_array(std::string_view key) const override {
        return meta_.get_float_array(key);
    }
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const override {
        return meta_.get_int_array(key);
    }
    const std::vector<gguf::tensor_info> &tensors() const override { return tensors_; }
    const gguf::tensor_info *find_tensor(std::string_view name) const override;
    uint64_t file_size() const override { return size_; }
    const vocab_data *own_vocab() const override { return vocab_.tokens.empty() ? nullptr : &vocab_; }
    std::string_view quantization() const override { return quant_method_; }

    const std::vector<safetensors_file> &shards() const { return shards_; }

  private:
    explicit hf_checkpoint(std::string folder);
    void open_shards(const open_options &how);
    void map_tensors(const hf_config &cfg);
    void read_tokenizer();
    bool has_weights() const;
    void shapes_from_config(const hf_config &cfg);
    void add_computed_tensors(); // computed_ as F32 tensors
    // Each layer's per-expert matrices copied, in expert order, into one 3-D tensor as GGUF holds them.
    void stack_experts(const std::map<std::string, std::vector<const safetensors_tensor *>> &experts);
    // A GPTQ / AWQ / FP8 layer's parts repacked into one weight named by its .weight's GGUF name; its type.
    uint32_t add_repacked(const hf_config &cfg, const std::string &prefix, repacked_weight r);
    // A mixture's repacked experts (in expert order) stacked into one 3-D weight named `gname`; its type.
    uint32_t add_repacked_experts(const std::string &gname, const std::vector<repacked_weight *> &members);

    std::string name_;
    metadata_table meta_;
    std::vector<safetensors_file> shards_;
    mapped_file zeros_; // shapes_only: every tensor's data
    std::vector<computed_tensor> computed_; // rope_freqs from config.json, 1-D tensors widened to F32
    std::vector<std::vector<uint8_t>> repacked_; // GPTQ / AWQ layers in group-integer blocks, FP8 ones in FP8 blocks
    std::vector<std::unique_ptr<uint8_t[]>> stacked_; // mixtures' expert tensors, stacked
    std::string quant_method_;
    std::vector<gguf::tensor_info> tensors_;
    std::unordered_map<std::string, size_t> index_;
    vocab_data vocab_;
    uint64_t size_ = 0;
    bool trim_vocab_ = false; // hf_architecture::trim_vocab
};

// model.safetensors.index.json's weight_map as shard file -> the tensors in it. Shard names must be plain
// .safetensors file names (no folder part). Throws strata::error naming `origin` and the entry.
std::map<std::string, std::set<std::string>> parse_weight_map(std::string_view text, const std::string &origin);

// The ggml type of a safetensors dtype that loads as is (F32, F16, BF16); -1 otherwise.
int32_t ggml_type_of_dtype(const std::string &dtype);

} // namespace strata
