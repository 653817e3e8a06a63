// Loading an SPM vocab from GGUF metadata: the real files and hand-written ones with defects.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "vocab_files.hpp"

namespace strata {
namespace {

// A minimal valid SPM vocab as GGUF bytes; `edit` can change or drop keys before they are written.
struct vocab_gguf {
    std::string model = "llama";
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a"};
    std::vector<float> scores = {0, 0, 0, -1};
    std::vector<int32_t> types = {2, 3, 3, 1};
    int32_t bos = 1;
    std::string name = "tiny";
    bool write_space_prefix = false;

    std::vector<uint8_t> bytes() const {
        gguf::writer w;
        w.add_string("general.architecture", "llama");
        w.add_string("general.name", name);
        w.add_string("tokenizer.ggml.model", model);
        w.add_string_array("tokenizer.ggml.tokens", tokens);
        w.add_f32_array("tokenizer.ggml.scores", scores);
        w.add_i32_array("tokenizer.ggml.token_type", types);
        w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
        w.add_u32("tokenizer.ggml.eos_token_id", 2);
        if (write_space_prefix) w.add_bool("tokenizer.ggml.add_space_prefix", false);
        return w.to_bytes();
    }
};

spm_vocab load(const vocab_gguf &g) {
    const auto b = g.bytes();
    const gguf::file f = gguf::file::parse(b.data(), b.size(), "tiny.gguf");
    return load_spm_vocab(f);
}

std::string load_error(const vocab_gguf &g) {
    try {
        (void)spm_tokenizer(load(g));
    } catch (const error &e) {
        return e.what();
    }
    return "(no error)";
}

TEST(vocab_from_gguf, reads_the_llama_spm_vocab) {
    const gguf::file f = gguf::file::open(test::shared_model("vocab/ggml-vocab-llama-spm.gguf"));
    const spm_vocab v = load_spm_vocab(f);
    EXPECT_EQ(v.tokens.size(), 32000u);
    EXPECT_EQ(v.scores.size(), 32000u);
    EXPECT_EQ(v.types[1], token_type::control);
    EXPECT_EQ(v.types[0], token_type::unknown);
    EXPECT_EQ(v.types[3], token_type::byte);
    EXPECT_EQ(v.bos, 1);
    EXPECT_EQ(v.eos, 2);
    EXPECT_EQ(v.unk, 0);
    EXPECT_TRUE(v.add_bos);
    EXPECT_FALSE(v.add_eos);
    EXPECT_TRUE(v.add_space_prefix);
    EXPECT_TRUE(v.rstrip.empty()); // not Phi-3
}

TEST(vocab_from_gguf, phi3_gets_llama_cpp_strip_rule) {
    const gguf::file f = gguf::file::open(test::shared_model("vocab/ggml-vocab-phi-3.gguf"));
    const spm_vocab v = load_spm_vocab(f);
    ASSERT_EQ(v.rstrip.size(), 32064u);
    EXPECT_EQ(v.eos, 32000);
    EXPECT_EQ(v.pad, 32000);
    EXPECT_EQ(v.rstrip[2], 1);     // </s>
    EXPECT_EQ(v.rstrip[32010], 1); // <|user|>
    EXPECT_EQ(v.rstrip[1], 0);     // <s>
    EXPECT_EQ(v.rstrip[32000], 0); // <|endoftext|>
    EXPECT_EQ(v.rstrip[100], 0);   // a normal token
}

TEST(vocab_from_gguf, small_file_round_trips) {
    vocab_gguf g;
    g.write_space_prefix = true;
    const spm_vocab v = load(g);
    EXPECT_EQ(v.tokens, g.tokens);
    EXPECT_FALSE(v.add_space_prefix);
    const spm_tokenizer tok(v);
    EXPECT_EQ(tok.encode(" a", true), (std::vector<int32_t>{1, 3}));
}

TEST(vocab_from_gguf, rejects_bpe_vocab) {
    vocab_gguf g;
    g.model = "gpt2";
    const std::string msg = load_error(g);
    EXPECT_NE(msg.find("\"gpt2\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("only SentencePiece"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tiny.gguf"), std::string::npos) << msg;
}

TEST(vocab_from_gguf, rejects_the_real_bpe_file) {
    const gguf::file f = gguf::file::open(test::shared_model("vocab/ggml-vocab-gpt-2.gguf"));
    EXPECT_THROW((void)load_spm_vocab(f), error);
}

TEST(vocab_from_gguf, rejects_mismatched_sizes) {
    vocab_gguf g;
    g.scores.pop_back();
    const std::string msg = load_error(g);
    EXPECT_NE(msg.find("tokenizer.ggml.scores has 3 entries but tokenizer.ggml.tokens has 4"), std::string::npos)
        << msg;
}

TEST(vocab_from_gguf, rejects_bos_out_of_range) {
    vocab_gguf g;
    g.bos = 4;
    const std::string msg = load_error(g);
    EXPECT_NE(msg.find("tokenizer.ggml.bos_token_id = 4 is out of range"), std::string::npos) << msg;
}

TEST(vocab_from_gguf, rejects_bad_token_type) {
    vocab_gguf g;
    g.types[3] = 42;
    const std::string msg = load_error(g);
    EXPECT_NE(msg.find("token_type[3] = 42"), std::string::npos) << msg;
}

} // namespace
} // namespace strata
