// Loading a vocab from GGUF metadata (SentencePiece and byte-level BPE): the real files and hand-written ones with
// defects.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "vocab_files.hpp"

#include <optional>

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
    std::optional<std::string> pre;                // tokenizer.ggml.pre
    std::optional<std::vector<std::string>> merges; // tokenizer.ggml.merges

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
        if (pre) w.add_string("tokenizer.ggml.pre", *pre);
        if (merges) w.add_string_array("tokenizer.ggml.merges", *merges);
        return w.to_bytes();
    }
};

vocab_data load(const vocab_gguf &g) {
    const auto b = g.bytes();
    const gguf::file f = gguf::file::parse(b.data(), b.size(), "tiny.gguf");
    return load_vocab(f);
}

std::string load_error(const vocab_gguf &g) {
    try {
        (void)make_tokenizer(load(g));
    } catch (const error &e) {
        return e.what();
    }
    return "(no error)";
}

TEST(vocab_from_gguf, reads_the_llama_spm_vocab) {
    const gguf::file f = gguf::file::open(test::shared_model("vocab/ggml-vocab-llama-spm.gguf"));
    const vocab_data v = load_vocab(f);
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
    const vocab_data v = load_vocab(f);
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
    const vocab_data v = load(g);
    EXPECT_EQ(v.tokens, g.tokens);
    EXPECT_FALSE(v.add_space_prefix);
    const auto tok = make_tokenizer(v);
    EXPECT_EQ(tok->encode(" a", true), (std::vector<int32_t>{1, 3}));
}

// A byte-level BPE vocab in GPT-2's alphabet: "a", "b", "ab", with one merge.
vocab_gguf tiny_bpe() {
    vocab_gguf g;
    g.model = "gpt2";
    g.tokens = {"a", "b", "ab", "<|endoftext|>"};
    g.scores = {0, 0, 0, 0};
    g.types = {1, 1, 1, 3};
    g.bos = 3;
    g.pre = "gpt-2";
    g.merges = std::vector<std::string>{"a b"};
    return g;
}

TEST(vocab_from_gguf, reads_a_small_bpe_vocab) {
    const vocab_data v = load(tiny_bpe());
    EXPECT_EQ(v.model, vocab_model::bpe);
    EXPECT_EQ(v.pre, "gpt-2");
    ASSERT_EQ(v.merges.size(), 1u);
    EXPECT_EQ(v.merges[0], std::make_pair(std::string("a"), std::string("b")));
    EXPECT_FALSE(v.add_bos); // GPT-2 adds no BOS by default
    EXPECT_FALSE(v.add_space_prefix);
    const auto tok = make_tokenizer(v);
    EXPECT_EQ(tok->encode("abab", true), (std::vector<int32_t>{2, 2}));
}

TEST(vocab_from_gguf, reads_the_real_bpe_files) {
    const gguf::file f = gguf::file::open(test::shared_model("vocab/ggml-vocab-llama-bpe.gguf"));
    const vocab_data v = load_vocab(f);
    EXPECT_EQ(v.model, vocab_model::bpe);
    EXPECT_EQ(v.pre, "llama-bpe");
    EXPECT_EQ(v.tokens.size(), 128256u);
    EXPECT_EQ(v.merges.size(), 280147u);
    EXPECT_EQ(v.bos, 128000);
    EXPECT_EQ(v.eos, 128001);
    EXPECT_TRUE(v.add_bos); // the llama3 pre-tokenizer's default, as in llama.cpp
    const gguf::file q = gguf::file::open(test::shared_model("vocab/ggml-vocab-qwen2.gguf"));
    const vocab_data w = load_vocab(q);
    EXPECT_EQ(w.pre, "qwen2");
    EXPECT_FALSE(w.add_bos);
}

TEST(vocab_from_gguf, rejects_tokenizers_strata_does_not_run) {
    vocab_gguf g;
    g.model = "bert";
    std::string msg = load_error(g);
    EXPECT_NE(msg.find("\"bert\" (WordPiece (BERT))"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tiny.gguf"), std::string::npos) << msg;
    g.model = "t5";
    EXPECT_NE(load_error(g).find("Unigram"), std::string::npos);
    g.model = "klingon";
    msg = load_error(g);
    EXPECT_NE(msg.find("\"klingon\", which is not a tokenizer"), std::string::npos) << msg;
}

TEST(vocab_from_gguf, bpe_needs_its_merges) {
    vocab_gguf g = tiny_bpe();
    g.merges.reset();
    const std::string msg = load_error(g);
    EXPECT_NE(msg.find("tokenizer.ggml.merges is missing"), std::string::npos) << msg;
}

TEST(vocab_from_gguf, an_unknown_pre_tokenizer_is_named_with_the_known_ones) {
    vocab_gguf g = tiny_bpe();
    g.pre = "my-new-model";
    const std::string msg = load_error(g);
    EXPECT_NE(msg.find("tokenizer.ggml.pre = \"my-new-model\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("llama-bpe"), std::string::npos) << msg;
    EXPECT_NE(msg.find("qwen2"), std::string::npos) << msg;
}

TEST(vocab_from_gguf, a_missing_pre_tokenizer_is_llama_cpp_default) {
    vocab_gguf g = tiny_bpe();
    g.pre.reset();
    const vocab_data v = load(g);
    EXPECT_EQ(v.pre, "default");
    EXPECT_NO_THROW((void)make_tokenizer(v));
}

TEST(vocab_from_gguf, a_merge_without_a_space_never_applies) {
    vocab_gguf g = tiny_bpe();
    g.merges = std::vector<std::string>{"ab", "a b"};
    const auto tok = make_tokenizer(load(g));
    EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{2}));
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
