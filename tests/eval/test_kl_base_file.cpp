// llama-perplexity's KL-divergence base file (core/eval/kl_base_file.hpp): the layout byte for byte (a file built here
// from llama.cpp's description reads back), round trips within the quantization step, and every damaged file refused
// with a message that says what is wrong.
#include "error_of.hpp"
#include "eval/kl_base_file.hpp"

#include "common/error.hpp"
#include "eval/perplexity_math.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace strata::eval;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string &name) {
    const fs::path dir = fs::temp_directory_path() / ("strata_kl_base_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / name;
}

using strata::testing::error_of;

std::vector<char> bytes_of(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path &p, const std::vector<char> &b) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// Logits with a spread wider than 16 nats, so the cut-off matters.
std::vector<float> row_logits(int32_t n_vocab, int32_t r) {
    std::vector<float> l(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i)
        l[static_cast<size_t>(i)] = 12.f * std::sin(0.7f * static_cast<float>(i) + static_cast<float>(r)) +
                                    0.01f * static_cast<float>(i % 5);
    return l;
}

struct written {
    int32_t n_ctx, n_vocab, n_chunk;
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> rows;
};

written write_file(const fs::path &p, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk) {
    written w{n_ctx, n_vocab, n_chunk, {}, {}};
    for (int32_t i = 0; i < n_ctx * n_chunk + 3; ++i) w.tokens.push_back((i * 7 + 1) % n_vocab);
    kl_base_writer out(p.string(), n_ctx, n_vocab, n_chunk, w.tokens);
    const int32_t n_rows = n_chunk * (n_ctx - 1 - n_ctx / 2);
    for (int32_t r = 0; r < n_rows; ++r) {
        w.rows.push_back(row_logits(n_vocab, r));
        out.write_row(w.rows.back().data());
    }
    out.finish();
    w.tokens.resize(static_cast<size_t>(n_ctx * n_chunk));
    return w;
}

} // namespace

TEST(KlBaseFile, RowLayoutIsLlamaPerplexitys) {
    EXPECT_EQ(kl_base_row_words(32000), 32004u);
    EXPECT_EQ(kl_base_row_words(7), 12u); // 8 words of q (one padding) + 4 for the two floats
    // Logits 0, -4, -20: max 0, min clamped to -16, scale 16/65535, q = round((l + 16) / scale).
    const std::vector<float> logits{0.f, -4.f, -20.f};
    std::vector<uint16_t> row(kl_base_row_words(3), 0xFFFF);
    quantize_log_probs(logits.data(), 3, row.data());
    float scale = 0, min_log_prob = 0;
    std::memcpy(&scale, row.data(), 4);
    std::memcpy(&min_log_prob, row.data() + 2, 4);
    const double lse = std::log(1 + std::exp(-4.0) + std::exp(-20.0));
    EXPECT_FLOAT_EQ(scale, 16.f / 65535.f);
    EXPECT_NEAR(min_log_prob, -16 - lse, 1e-6);
    EXPECT_EQ(row[4], 65535);
    EXPECT_EQ(row[5], 49151); // 12 / (16 / 65535) = 49151.25
    EXPECT_EQ(row[6], 0);     // below the cut-off
    EXPECT_EQ(row[7], 0);     // padding
    std::vector<float> back(3);
    dequantize_log_probs(row.data(), 3, back.data(), "row");
    EXPECT_NEAR(back[0], -lse, 1e-4);
    EXPECT_NEAR(back[1], -4 - lse, 2e-4);
    EXPECT_NEAR(back[2], -16 - lse, 1e-4); // stored at the floor, so it drops out of the KL sum
}

TEST(KlBaseFile, EqualLogitsGiveAZeroScale) {
    const std::vector<float> logits(10, 3.f);
    std::vector<uint16_t> row(kl_base_row_words(10));
    quantize_log_probs(logits.data(), 10, row.data());
    std::vector<float> back(10);
    dequantize_log_probs(row.data(), 10, back.data(), "row");
    for (float v : back) EXPECT_NEAR(v, -std::log(10.f), 1e-6);
}

TEST(KlBaseFile, RoundTripKeepsHeaderTokensAndLogProbsWithinOneStep) {
    const fs::path p = temp_file("round_trip.logits");
    const written w = write_file(p, 16, 101, 3);
    // Exactly the documented size: header, tokens, rows of 2 * ((101 + 1) / 2) + 4 words.
    const uint64_t rows = 3 * (16 - 1 - 8);
    EXPECT_EQ(fs::file_size(p), 20 + 4 * 16 * 3 + rows * 2 * (102 + 4));
    EXPECT_FALSE(fs::exists(p.string() + ".partial"));

    kl_base_reader in(p.string());
    EXPECT_EQ(in.header().n_ctx, 16);
    EXPECT_EQ(in.header().n_vocab, 101);
    EXPECT_EQ(in.header().n_chunk, 3);
    EXPECT_EQ(in.header().n_scored(), 7);
    EXPECT_EQ(in.header().tokens, w.tokens);
    std::vector<float> lp;
    size_t r = 0;
    for (int32_t c = 0; c < 3; ++c) {
        in.read_chunk(lp);
        ASSERT_EQ(lp.size(), 7u * 101u);
        for (int32_t k = 0; k < 7; ++k, ++r) {
            std::vector<float> exact(101);
            const float *row = w.rows[r].data();
            log_softmax(row, 101, exact.data());
            float mx = row[0];
            for (int32_t i = 0; i < 101; ++i) mx = std::max(mx, row[i]);
            for (int32_t i = 0; i < 101; ++i) {
                const float got = lp[static_cast<size_t>(k) * 101 + static_cast<size_t>(i)];
                if (row[i] > mx - 16) EXPECT_NEAR(got, exact[static_cast<size_t>(i)], 16.0 / 65535) << r << " " << i;
                else EXPECT_TRUE(got + 1e-3f >= exact[static_cast<size_t>(i)] && got <= -16.f + 1e-3f)
                    << "below the cut-off: the row's floor, max - 16 - log Z: " << got;
            }
        }
    }
    EXPECT_THROW(in.read_chunk(lp), strata::error); // no fourth chunk
}

TEST(KlBaseFile, AFileBuiltFromLlamaCppsLayoutReadsBack) {
    // Built byte by byte as tools/perplexity/perplexity.cpp writes it: magic, n_ctx, n_vocab, n_chunk, tokens, rows.
    const int32_t n_ctx = 4, n_vocab = 3, n_chunk = 2;
    std::vector<char> b{'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
    auto put = [&b](const void *p, size_t n) {
        b.insert(b.end(), static_cast<const char *>(p), static_cast<const char *>(p) + n);
    };
    put(&n_ctx, 4);
    put(&n_vocab, 4);
    put(&n_chunk, 4);
    const int32_t tokens[8] = {1, 2, 0, 1, 1, 0, 0, 2};
    put(tokens, sizeof tokens);
    // n_ctx - 1 - n_ctx/2 = 1 row per chunk; each 2*((3+1)/2)+4 = 8 words.
    for (int c = 0; c < n_chunk; ++c) {
        const float scale = 2e-4f, min_log_prob = -14.f - static_cast<float>(c);
        const uint16_t q[4] = {static_cast<uint16_t>(65535 - c), 0, 5, 0};
        put(&scale, 4);
        put(&min_log_prob, 4);
        put(q, sizeof q);
    }
    const fs::path p = temp_file("llama_layout.logits");
    write_bytes(p, b);
    kl_base_reader in(p.string());
    EXPECT_EQ(in.header().tokens, std::vector<int32_t>(tokens, tokens + 8));
    std::vector<float> lp;
    in.read_chunk(lp);
    ASSERT_EQ(lp.size(), 3u);
    EXPECT_FLOAT_EQ(lp[0], 2e-4f * 65535.f - 14.f);
    EXPECT_FLOAT_EQ(lp[1], -14.f);
    EXPECT_FLOAT_EQ(lp[2], 2e-4f * 5.f - 14.f);
    in.read_chunk(lp);
    EXPECT_FLOAT_EQ(lp[0], 2e-4f * 65534.f - 15.f);
}

TEST(KlBaseFile, TruncatedFilesAreRefusedWithTheSizes) {
    const fs::path good = temp_file("good.logits");
    write_file(good, 8, 20, 2);
    const std::vector<char> b = bytes_of(good);
    const fs::path p = temp_file("cut.logits");
    for (const size_t cut : {size_t{0}, size_t{5}, size_t{8}, size_t{15}, size_t{20}, size_t{40}, b.size() - 1}) {
        write_bytes(p, std::vector<char>(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(cut)));
        const std::string e = error_of([&] { kl_base_reader r(p.string()); });
        if (cut < 20) {
            EXPECT_NE(e.find("is not a KL-divergence base file"), std::string::npos) << cut << ": " << e;
        } else {
            EXPECT_NE(e.find("is truncated"), std::string::npos) << cut << ": " << e;
            EXPECT_NE(e.find(std::to_string(b.size()) + " bytes"), std::string::npos) << e;
            EXPECT_NE(e.find("write the base file again"), std::string::npos) << e;
        }
    }
    std::vector<char> longer = b;
    longer.push_back(0);
    write_bytes(p, longer);
    EXPECT_NE(error_of([&] { kl_base_reader r(p.string()); }).find("1 bytes after its last chunk"), std::string::npos);
}

// A refused file is closed again (fuzz_kl_base ran out of file descriptors when the constructor threw after fopen).
TEST(KlBaseFile, ARefusedFileLeavesNoDescriptorOpen) {
    const fs::path p = temp_file("refused.logits");
    write_bytes(p, std::vector<char>(40, 'x'));
    const auto open_descriptors = [] {
        return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
    };
    const auto before = open_descriptors();
    for (int i = 0; i < 50; ++i)
        EXPECT_NE(error_of([&] { kl_base_reader r(p.string()); }).find("is not a KL-divergence base file"),
                  std::string::npos);
    EXPECT_EQ(open_descriptors(), before);
}

TEST(KlBaseFile, CorruptHeadersTokensAndRowsAreRefused) {
    const fs::path good = temp_file("good2.logits");
    write_file(good, 8, 20, 2);
    const std::vector<char> b = bytes_of(good);
    const fs::path p = temp_file("bad.logits");
    auto with = [&](size_t offset, int32_t v) {
        std::vector<char> c = b;
        std::memcpy(c.data() + offset, &v, 4);
        write_bytes(p, c);
        return error_of([&] {
            kl_base_reader r(p.string());
            std::vector<float> lp;
            r.read_chunk(lp);
            r.read_chunk(lp);
        });
    };
    std::vector<char> magic = b;
    magic[0] = 'X';
    write_bytes(p, magic);
    EXPECT_NE(error_of([&] { kl_base_reader r(p.string()); }).find("does not start with \"_logits_\""),
              std::string::npos);
    EXPECT_NE(with(8, 0).find("is corrupt: its header says n_ctx 0"), std::string::npos);
    EXPECT_NE(with(12, -5).find("n_vocab -5"), std::string::npos);
    EXPECT_NE(with(16, 3).find("is truncated"), std::string::npos); // more chunks than the file holds
    EXPECT_NE(with(16, 1).find("after its last chunk"), std::string::npos);
    const std::string tok = with(20 + 4 * 9, 20); // chunk 2, token 1: outside a vocabulary of 20
    EXPECT_NE(tok.find("token 1 of chunk 2 is 20, outside its vocabulary of 20"), std::string::npos) << tok;
    const size_t rows_at = 20 + 4 * 16;
    const size_t row_bytes = 2 * kl_base_row_words(20);
    float nan = std::nanf("");
    int32_t nan_bits = 0;
    std::memcpy(&nan_bits, &nan, 4);
    const std::string row = with(rows_at + 2 * row_bytes, nan_bits); // chunk 1's 3rd (last) row: a NaN scale
    EXPECT_NE(row.find("row 3 of chunk 1 is corrupt"), std::string::npos) << row;
    const float huge = 1.f;
    int32_t huge_bits = 0;
    std::memcpy(&huge_bits, &huge, 4);
    EXPECT_NE(with(rows_at + 3 * row_bytes, huge_bits).find("row 1 of chunk 2 is corrupt"), std::string::npos);
    EXPECT_NE(error_of([] { kl_base_reader r("/nonexistent/strata.logits"); })
                  .find("cannot read the KL-divergence base file"),
              std::string::npos);
}

TEST(KlBaseFile, AnUnfinishedWriteLeavesNoFile) {
    const fs::path p = temp_file("unfinished.logits");
    fs::remove(p);
    {
        const std::vector<int32_t> tokens(16, 1);
        kl_base_writer w(p.string(), 8, 20, 2, tokens);
        const std::vector<float> row = row_logits(20, 0);
        w.write_row(row.data());
        EXPECT_THROW(w.finish(), strata::error); // 1 of 6 rows
    }
    EXPECT_FALSE(fs::exists(p));
    EXPECT_FALSE(fs::exists(p.string() + ".partial"));
    const std::string e =
        error_of([] { kl_base_writer w("/nonexistent/dir/x.logits", 8, 20, 1, std::vector<int32_t>(8, 1)); });
    EXPECT_NE(e.find("check that its folder exists"), std::string::npos) << e;
}
