// One .safetensors file (Hugging Face's format): an 8-byte little-endian header length N, N bytes of JSON naming each
// tensor's dtype, shape and [begin, end) byte range within the data that follows, and the data. The reader treats the
// file as untrusted and checks what Hugging Face's own reader checks: the header's size and JSON, each entry's fields,
// that each range holds exactly its shape's bytes, and that the ranges tile the data with no overlap or hole.
#pragma once

#include "common/mapped_file.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata {

struct safetensors_tensor {
    std::string name;
    std::string dtype;          // "F32", "F16", "BF16", "I8", "F8_E4M3", ...
    std::vector<int64_t> shape; // outermost first (PyTorch order)
    uint64_t begin = 0;         // within the data section
    uint64_t n_bytes = 0;
    const uint8_t *data = nullptr;
};

class safetensors_file {
  public:
    // Maps the file for the lifetime of the object; throws strata::error naming the file and defect.
    static safetensors_file open(const std::string &path, const open_options &how = {});
    // Borrows the buffer (it must outlive the result); `name` is used in messages.
    static safetensors_file parse(const void *data, size_t size, std::string name);

    const std::string &name() const { return name_; }
    const std::vector<safetensors_tensor> &tensors() const { return tensors_; }
    const std::map<std::string, std::string> &metadata() const { return metadata_; } // "__metadata__"
    uint64_t size() const { return size_; }

    // Bytes of one element of `dtype`; 0 when the dtype is not one safetensors defines.
    static uint32_t dtype_bytes(const std::string &dtype);

  private:
    std::string name_;
    mapped_file mapping_;
    uint64_t size_ = 0;
    std::vector<safetensors_tensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

} // namespace strata
