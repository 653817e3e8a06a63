// Test-only GGUF byte builder: writes any value type (nested arrays too) and any malformed layout the writer
// refuses to produce.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace strata::gguf::test {

class gguf_bytes {
  public:
    std::vector<uint8_t> data;

    template <class T> gguf_bytes &put(T v) {
        const size_t at = data.size();
        data.resize(at + sizeof(T));
        std::memcpy(data.data() + at, &v, sizeof(T));
        return *this;
    }
    gguf_bytes &u8(uint8_t v) { return put(v); }
    gguf_bytes &u32(uint32_t v) { return put(v); }
    gguf_bytes &u64(uint64_t v) { return put(v); }
    gguf_bytes &str(std::string_view s) {
        u64(s.size());
        data.insert(data.end(), s.begin(), s.end());
        return *this;
    }
    gguf_bytes &magic() {
        data.insert(data.end(), {'G', 'G', 'U', 'F'});
        return *this;
    }
    // Magic, version, tensor count, KV count.
    gguf_bytes &header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return magic().u32(version).u64(n_tensors).u64(n_kv);
    }
    // Key and value type; the value follows.
    gguf_bytes &key(std::string_view k, uint32_t type) { return str(k).u32(type); }
    gguf_bytes &array_of(uint32_t elem_type, uint64_t count) { return u32(elem_type).u64(count); }
    gguf_bytes &tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(ne.size()));
        for (uint64_t n : ne) u64(n);
        return u32(type).u64(offset);
    }
    gguf_bytes &pad_to(size_t alignment) {
        data.resize((data.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
    gguf_bytes &zeros(size_t n) {
        data.resize(data.size() + n, 0);
        return *this;
    }
};

} // namespace strata::gguf::test
