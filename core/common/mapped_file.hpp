// A whole file's bytes in memory, read-only: mapped (MAP_PRIVATE) or, with mmap off, read into anonymous memory with
// progress (llama.cpp's --no-mmap), optionally locked (--mlock). Every model file format opens its files this way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

// How the file's bytes reach memory ([memory] mmap / mlock, llama.cpp's --no-mmap / --mlock).
struct open_options {
    bool mmap = true;   // false: read the whole file into anonymous memory (with progress) instead of mapping it
    bool mlock = false; // lock the pages in RAM (mlock); a refusal is an error that names ulimit -l
};

class mapped_file {
  public:
    // Throws strata::error naming `path`: missing, not a regular file, empty, unmappable, unlockable.
    // `what` completes "pass the path of ..." in the not-a-regular-file message (".gguf file").
    static mapped_file open(const std::string &path, const open_options &how, const char *what);

    // `size` bytes of read-only zeros that are never committed (anonymous, MAP_NORESERVE): the data of tensors whose
    // shape matters and whose bytes do not (`runtime plan` on an HF folder without its shards).
    static mapped_file zeros(size_t size);

    mapped_file() = default;
    mapped_file(mapped_file &&o) noexcept : addr_(o.addr_), size_(o.size_) { o.addr_ = nullptr; }
    mapped_file &operator=(mapped_file &&o) noexcept;
    mapped_file(const mapped_file &) = delete;
    mapped_file &operator=(const mapped_file &) = delete;
    ~mapped_file();

    const uint8_t *data() const { return static_cast<const uint8_t *>(addr_); }
    size_t size() const { return size_; }

  private:
    mapped_file(void *addr, size_t size) : addr_(addr), size_(size) {}
    void *addr_ = nullptr;
    size_t size_ = 0;
};

} // namespace strata
