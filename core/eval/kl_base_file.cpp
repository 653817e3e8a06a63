#include "eval/kl_base_file.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace strata::eval {

static_assert(std::endian::native == std::endian::little,
              "the KL base file is read and written in little-endian order");

namespace {

constexpr char k_magic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr uint64_t k_header_bytes = 8 + 3 * sizeof(int32_t);
// Sanity limits before any size is multiplied: far above any real context or vocabulary.
constexpr int32_t k_max_dim = 1 << 24;
// The widest span a row's 65535 steps cover (llama.cpp's 16 nats).
constexpr float k_span = 16.f;

uint64_t row_bytes(int32_t n_vocab) { return kl_base_row_words(n_vocab) * sizeof(uint16_t); }

} // namespace

size_t kl_base_row_words(int32_t n_vocab) { return 2 * ((static_cast<size_t>(n_vocab) + 1) / 2) + 4; }

void quantize_log_probs(const float *logits, int32_t n_vocab, uint16_t *row) {
    float max_logit = logits[0], min_logit = logits[0];
    for (int32_t i = 1; i < n_vocab; ++i) {
        max_logit = std::max(max_logit, logits[i]);
        min_logit = std::min(min_logit, logits[i]);
    }
    min_logit = std::max(min_logit, max_logit - k_span);
    double sum_exp = 0;
    for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
    const float log_sum_exp = static_cast<float>(std::log(sum_exp));
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    std::memcpy(row, &scale, sizeof scale);
    std::memcpy(row + 2, &min_log_prob, sizeof min_log_prob);
    uint16_t *q = row + 4;
    std::fill(q, row + kl_base_row_words(n_vocab), uint16_t{0});
    if (scale == 0.f) return; // every logit equal: every q is 0
    const float inv_scale = 1.f / scale;
    for (int32_t i = 0; i < n_vocab; ++i) {
        if (!(logits[i] > min_logit)) continue;
        const float v = std::nearbyint(inv_scale * (logits[i] - min_logit)); // halves to even, as llama.cpp
        q[i] = static_cast<uint16_t>(std::min(v, 65535.f));
    }
}

void dequantize_log_probs(const uint16_t *row, int32_t n_vocab, float *log_probs, const std::string &where) {
    float scale = 0, min_log_prob = 0;
    std::memcpy(&scale, row, sizeof scale);
    std::memcpy(&min_log_prob, row + 2, sizeof min_log_prob);
    // What quantize_log_probs can write: 0 <= scale <= 16 / 65535; the smallest stored log-probability is at least
    // -16 - log(n_vocab) and the largest (scale * 65535 + min_log_prob, the top token's) at most 0.
    const float lowest = -k_span - std::log(static_cast<float>(n_vocab)) - 1.f;
    if (!std::isfinite(scale) || !std::isfinite(min_log_prob) || scale < 0 || scale > k_span / 65535.f * 1.001f ||
        min_log_prob < lowest || scale * 65535.f + min_log_prob > 1e-3f) {
        fail("{} is corrupt: its scale {} and smallest log-probability {} cannot come from a base file's "
             "quantization; write the base file again",
             where, scale, min_log_prob);
    }
    const uint16_t *q = row + 4;
    for (int32_t i = 0; i < n_vocab; ++i) log_probs[i] = scale * static_cast<float>(q[i]) + min_log_prob;
}

kl_base_writer::kl_base_writer(std::string path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                               const std::vector<int32_t> &tokens)
    : path_(std::move(path)), n_vocab_(n_vocab) {
    const uint64_t n_tokens = static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(n_ctx);
    if (n_ctx < 1 || n_vocab < 1 || n_chunk < 1 || tokens.size() < n_tokens)
        fail("internal: KL base file {} with n_ctx {}, n_vocab {}, {} chunks and {} tokens", path_, n_ctx, n_vocab,
             n_chunk, tokens.size());
    tmp_path_ = path_ + ".partial";
    f_.reset(std::fopen(tmp_path_.c_str(), "wb"));
    if (f_ == nullptr)
        fail("cannot write the KL-divergence base file: opening {} failed: {}; check that its folder exists and is "
             "writable",
             tmp_path_, std::strerror(errno));
    rows_expected_ = static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(n_ctx - 1 - n_ctx / 2);
    row_.resize(kl_base_row_words(n_vocab));
    write_bytes(k_magic, sizeof k_magic);
    write_bytes(&n_ctx, sizeof n_ctx);
    write_bytes(&n_vocab, sizeof n_vocab);
    write_bytes(&n_chunk, sizeof n_chunk);
    write_bytes(tokens.data(), n_tokens * sizeof(int32_t));
}

kl_base_writer::~kl_base_writer() {
    f_.reset();
    if (!finished_) {
        std::error_code ec;
        std::filesystem::remove(tmp_path_, ec);
    }
}

void kl_base_writer::write_bytes(const void *data, size_t size) {
    if (size == 0) return;
    if (std::fwrite(data, 1, size, f_.get()) != size)
        fail("writing the KL-divergence base file {} failed: {}", tmp_path_, std::strerror(errno));
}

void kl_base_writer::write_row(const float *logits) {
    if (finished_ || rows_written_ >= rows_expected_)
        fail("internal: more rows than the {} the KL base file {} was opened for", rows_expected_, path_);
    quantize_log_probs(logits, n_vocab_, row_.data());
    write_bytes(row_.data(), row_.size() * sizeof(uint16_t));
    ++rows_written_;
}

void kl_base_writer::finish() {
    if (finished_) return;
    if (rows_written_ != rows_expected_)
        fail("internal: {} of the {} rows of the KL base file {} were written", rows_written_, rows_expected_, path_);
    const int flushed = std::fflush(f_.get());
    const int err = errno;
    const int closed = std::fclose(f_.release());
    if (flushed != 0 || closed != 0)
        fail("writing the KL-divergence base file {} failed: {}", tmp_path_, std::strerror(flushed != 0 ? err : errno));
    std::error_code ec;
    std::filesystem::rename(tmp_path_, path_, ec);
    if (ec) fail("moving the KL-divergence base file {} to {} failed: {}", tmp_path_, path_, ec.message());
    finished_ = true;
}

kl_base_reader::kl_base_reader(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path_, ec);
    if (ec) fail("cannot read the KL-divergence base file {}: {}", path_, ec.message());
    f_.reset(std::fopen(path_.c_str(), "rb"));
    if (f_ == nullptr) fail("cannot read the KL-divergence base file {}: {}", path_, std::strerror(errno));
    const auto read_exact = [&](void *dst, size_t bytes, const char *what) {
        if (std::fread(dst, 1, bytes, f_.get()) != bytes) fail("{}: reading {} failed (the file ends early)", path_, what);
    };
    char magic[8] = {};
    if (size < k_header_bytes || std::fread(magic, 1, sizeof magic, f_.get()) != sizeof magic ||
        std::memcmp(magic, k_magic, sizeof magic) != 0)
        fail("{} is not a KL-divergence base file (it does not start with \"_logits_\"); write one with runtime "
             "perplexity --kl-divergence-base FILE --save-kl-base, or with llama-perplexity --kl-divergence-base FILE",
             path_);
    read_exact(&header_.n_ctx, sizeof header_.n_ctx, "n_ctx");
    read_exact(&header_.n_vocab, sizeof header_.n_vocab, "n_vocab");
    read_exact(&header_.n_chunk, sizeof header_.n_chunk, "n_chunk");
    const kl_base_header &h = header_;
    if (h.n_ctx < 4 || h.n_ctx > k_max_dim || h.n_vocab < 1 || h.n_vocab > k_max_dim || h.n_chunk < 1)
        fail("{} is corrupt: its header says n_ctx {}, n_vocab {}, {} chunks (this reader takes n_ctx in [4, {}], "
             "n_vocab in [1, {}] and at least one chunk); write the base file again",
             path_, h.n_ctx, h.n_vocab, h.n_chunk, k_max_dim, k_max_dim);
    const uint64_t chunk_bytes = static_cast<uint64_t>(h.n_ctx) * sizeof(int32_t) +
                                 static_cast<uint64_t>(h.n_scored()) * row_bytes(h.n_vocab);
    const uint64_t body = size - k_header_bytes;
    const uint64_t n_chunk = static_cast<uint64_t>(h.n_chunk);
    if (n_chunk > body / chunk_bytes) {
        const bool representable = chunk_bytes <= (UINT64_MAX - k_header_bytes) / n_chunk;
        fail("{} is truncated: its header says {} chunks of {} tokens over a vocabulary of {}, which take {} bytes, "
             "but the file has {}; write the base file again",
             path_, h.n_chunk, h.n_ctx, h.n_vocab,
             representable ? std::to_string(k_header_bytes + n_chunk * chunk_bytes) : std::string("over 2^64"), size);
    }
    const uint64_t expected = k_header_bytes + n_chunk * chunk_bytes;
    if (size != expected)
        fail("{} has {} bytes after its last chunk ({} chunks of {} tokens over a vocabulary of {} take {} bytes); it "
             "is not a KL-divergence base file as llama-perplexity writes it",
             path_, size - expected, h.n_chunk, h.n_ctx, h.n_vocab, expected);
    header_.tokens.resize(static_cast<size_t>(h.n_chunk) * static_cast<size_t>(h.n_ctx));
    read_exact(header_.tokens.data(), header_.tokens.size() * sizeof(int32_t), "the tokens");
    for (size_t i = 0; i < header_.tokens.size(); ++i) {
        const int32_t t = header_.tokens[i];
        if (t < 0 || t >= h.n_vocab)
            fail("{} is corrupt: token {} of chunk {} is {}, outside its vocabulary of {}; write the base file again",
                 path_, i % static_cast<size_t>(h.n_ctx), i / static_cast<size_t>(h.n_ctx) + 1, t, h.n_vocab);
    }
    rows_.resize(static_cast<size_t>(h.n_scored()) * kl_base_row_words(h.n_vocab));
}

void kl_base_reader::read_chunk(std::vector<float> &log_probs) {
    const kl_base_header &h = header_;
    if (next_chunk_ >= h.n_chunk) fail("internal: {} has only {} chunks", path_, h.n_chunk);
    const int32_t chunk = next_chunk_++;
    if (std::fread(rows_.data(), sizeof(uint16_t), rows_.size(), f_.get()) != rows_.size())
        fail("{}: reading the log-probabilities of chunk {} failed (the file ends early)", path_, chunk + 1);
    const size_t nv = kl_base_row_words(h.n_vocab);
    log_probs.resize(static_cast<size_t>(h.n_scored()) * static_cast<size_t>(h.n_vocab));
    for (int32_t r = 0; r < h.n_scored(); ++r) {
        dequantize_log_probs(rows_.data() + static_cast<size_t>(r) * nv, h.n_vocab,
                             log_probs.data() + static_cast<size_t>(r) * static_cast<size_t>(h.n_vocab),
                             fmt::format("{}: row {} of chunk {}", path_, r + 1, chunk + 1));
    }
}

} // namespace strata::eval
