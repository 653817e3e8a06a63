// The seam between model files and the rest of the runtime: metadata (GGUF's key names and value types) and a tensor
// table (name, ggml type, shape, bytes, data). A GGUF file implements it directly; an HF safetensors folder
// (hf_checkpoint) maps config.json and HF tensor names into the same vocabulary, so the engine, planner, tiered
// weights, fingerprint and model plugins read both the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_types.hpp"

namespace strata {

struct vocab_data;

class model_file {
  public:
    virtual ~model_file() = default;

    virtual const std::string &name() const = 0; // the path users gave, for messages
    virtual std::string_view format() const = 0; // "gguf" or "safetensors"

    virtual size_t kv_count() const = 0;
    virtual std::string_view kv_key(size_t i) const = 0;
    virtual gguf::value_type kv_type(size_t i) const = 0;
    // Printable value: strings quoted and escaped, arrays shortened, at most about max_len characters.
    virtual std::string kv_summary(size_t i, size_t max_len) const = 0;
    std::string kv_summary(size_t i) const { return kv_summary(i, 60); }

    // Scalar getters: nullopt when the key is missing, strata::error when it holds an incompatible type.
    virtual bool has(std::string_view key) const = 0;
    virtual std::optional<gguf::value_type> type_of(std::string_view key) const = 0;
    virtual std::optional<gguf::value_type> array_type_of(std::string_view key) const = 0;
    virtual std::optional<uint64_t> get_uint(std::string_view key) const = 0;
    virtual std::optional<int64_t> get_int(std::string_view key) const = 0;
    virtual std::optional<double> get_float(std::string_view key) const = 0;
    virtual std::optional<bool> get_bool(std::string_view key) const = 0;
    virtual std::optional<std::string_view> get_string(std::string_view key) const = 0; // NUL-terminated view

    virtual std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const = 0;
    virtual std::optional<std::vector<float>> get_float_array(std::string_view key) const = 0;
    virtual std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const = 0;

    virtual const std::vector<gguf::tensor_info> &tensors() const = 0;
    virtual const gguf::tensor_info *find_tensor(std::string_view name) const = 0; // nullptr when absent

    virtual uint64_t file_size() const = 0; // bytes of every file the model is read from

    // The checkpoint's quantization method as vLLM names it ("gptq", "awq") when its weights were repacked from a
    // quantized HF checkpoint; empty otherwise (a GGUF's types are its tensors').
    virtual std::string_view quantization() const { return {}; }

    // Whether a tensor's bytes are memory no other reader of the underlying file shares (a tensor-parallel rank's
    // gathered columns), so that dropping their pages once the tensor lives elsewhere harms no one. The file's own
    // bytes are not: several ranks in one process read them, and under --no-mmap dropped pages read back as zeros.
    virtual bool tensor_memory_is_private(const gguf::tensor_info &) const { return false; }

    // A vocabulary that comes beside the weights (an HF folder's tokenizer.json) rather than in the metadata
    // (GGUF's tokenizer.ggml.* keys); nullptr when the metadata holds it.
    virtual const vocab_data *own_vocab() const { return nullptr; }

  protected:
    model_file() = default;
    model_file(const model_file &) = default;
    model_file &operator=(const model_file &) = default;
};

} // namespace strata
