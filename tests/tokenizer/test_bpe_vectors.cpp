// Byte-level BPE against llama.cpp's own test vectors: every case of every BPE vocab GGUF in the shared folder
// (the ids are Hugging Face's tokenizer output, which llama.cpp also reproduces), and decode(encode(s)) == s.
#include <gtest/gtest.h>

#include "vocab_files.hpp"

namespace strata {
namespace {

using test::quoted;
using test::read_vectors;

class bpe_vectors : public ::testing::TestWithParam<const char *> {};

TEST_P(bpe_vectors, every_case_matches_llama_cpp) {
    const std::string rel = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
    const auto tok = test::tokenizer_from(rel);
    const auto cases = read_vectors(rel);
    ASSERT_EQ(cases.size(), 46u);
    for (const auto &c : cases)
        EXPECT_EQ(tok->encode(c.input, /*add_special=*/false, /*parse_special=*/false), c.expected)
            << "input: " << quoted(c.input);
}

TEST_P(bpe_vectors, decode_inverts_encode) {
    const std::string rel = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
    const auto tok = test::tokenizer_from(rel);
    for (const auto &c : read_vectors(rel)) {
        EXPECT_EQ(tok->decode(tok->encode(c.input, false)), c.input) << "input: " << quoted(c.input);
        EXPECT_EQ(tok->decode(tok->encode(c.input, true)), c.input) << "with BOS, input: " << quoted(c.input);
    }
}

INSTANTIATE_TEST_SUITE_P(bpe, bpe_vectors,
                         ::testing::Values("gpt-2", "mpt", "starcoder", "command-r", "falcon", "deepseek-coder",
                                           "deepseek-llm", "qwen2", "llama-bpe"),
                         [](const auto &info) {
                             std::string name = info.param;
                             for (char &c : name)
                                 if (c == '-') c = '_';
                             return name;
                         });

} // namespace
} // namespace strata
