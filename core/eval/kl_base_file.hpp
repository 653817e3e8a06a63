// llama-perplexity's KL-divergence base file: the base model's log-probabilities at every scored position, written by
// `llama-perplexity --kl-divergence-base FILE` and read back with `--kl-divergence`. Strata writes and reads the same
// bytes, so a file moves between the two tools in both directions. Layout (host byte order; little-endian, as on every
// machine either runs on):
//
//   char[8] "_logits_" | int32 n_ctx | int32 n_vocab | int32 n_chunk | int32 tokens[n_chunk * n_ctx]
//   n_chunk * (n_ctx - 1 - n_ctx / 2) rows, one per scored position in order (eval/perplexity_math.hpp), each
//   kl_base_row_words(n_vocab) = 2 * ((n_vocab + 1) / 2) + 4 uint16 words: float scale, float min_log_prob, then one
//   uint16 q per token (a zero word pads an odd vocabulary): log p = scale * q + min_log_prob. The 65535 steps span
//   the row's largest logit down to 16 below it (or the row's smallest, when higher); anything lower is stored as 0.
//
// The format has no version and no checksum; the reader checks what it can (the magic, that the file is exactly as
// long as its header says, token ids within the vocabulary, each row's scale and minimum) and says what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace strata::eval {

// uint16 words per row.
size_t kl_base_row_words(int32_t n_vocab);

// One row from a position's logits, as llama-perplexity stores it.
void quantize_log_probs(const float *logits, int32_t n_vocab, uint16_t *row);

// A row back to log-probabilities (n_vocab floats). Throws strata::error when its scale or minimum cannot come from
// quantize_log_probs (a corrupt file); `where` names the row in the message.
void dequantize_log_probs(const uint16_t *row, int32_t n_vocab, float *log_probs, const std::string &where);

struct kl_base_header {
    int32_t n_ctx = 0;
    int32_t n_vocab = 0;
    int32_t n_chunk = 0;
    std::vector<int32_t> tokens; // n_chunk * n_ctx: the text's tokens, chunk after chunk (first ones not BOS-replaced)

    int32_t n_scored() const { return n_ctx - 1 - n_ctx / 2; } // rows per chunk
};

// A FILE* closed when it goes out of scope.
struct file_closer {
    void operator()(std::FILE *f) const noexcept { std::fclose(f); }
};
using file_handle = std::unique_ptr<std::FILE, file_closer>;

// Writes a base file. The rows go to a temporary file next to `path`, renamed to `path` by finish(), so a run stopped
// part way never leaves a file that a later run would read as a base.
class kl_base_writer {
  public:
    // `tokens` holds at least n_chunk * n_ctx ids; the first n_chunk * n_ctx are stored.
    kl_base_writer(std::string path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                   const std::vector<int32_t> &tokens);
    ~kl_base_writer(); // removes the temporary file unless finish() ran
    kl_base_writer(const kl_base_writer &) = delete;
    kl_base_writer &operator=(const kl_base_writer &) = delete;

    // The logits of the next scored position (n_vocab floats).
    void write_row(const float *logits);
    // Checks that every row was written, flushes and moves the file into place.
    void finish();

  private:
    void write_bytes(const void *data, size_t size);

    std::string path_, tmp_path_;
    file_handle f_;
    int32_t n_vocab_ = 0;
    uint64_t rows_expected_ = 0, rows_written_ = 0;
    std::vector<uint16_t> row_;
    bool finished_ = false;
};

// Reads a base file, checking its header and size when opened and each row as it is read.
class kl_base_reader {
  public:
    explicit kl_base_reader(std::string path);
    kl_base_reader(const kl_base_reader &) = delete;
    kl_base_reader &operator=(const kl_base_reader &) = delete;

    const kl_base_header &header() const { return header_; }
    // The next chunk's base log-probabilities: header().n_scored() rows of n_vocab floats.
    void read_chunk(std::vector<float> &log_probs);

  private:
    std::string path_;
    file_handle f_; // closed by its destructor, also when the constructor throws
    kl_base_header header_;
    int32_t next_chunk_ = 0;
    std::vector<uint16_t> rows_;
};

} // namespace strata::eval
