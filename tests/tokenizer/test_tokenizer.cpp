// SentencePiece tokenizer: llama.cpp's own test vectors, the stories260K vocab, special-token rules and bad vocabs.
#include <gtest/gtest.h>

#include <algorithm>

#include "error_of.hpp"
#include "tokenizer/spm_tokenizer.hpp"

#include "common/error.hpp"
#include "vocab_files.hpp"

namespace strata {
namespace {

using test::quoted;
using test::read_vectors;

class llama_cpp_vectors : public ::testing::TestWithParam<const char *> {};

TEST_P(llama_cpp_vectors, every_case_matches_llama_cpp) {
    const std::string rel = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
    const auto tok_owner = test::tokenizer_from(rel);
    const tokenizer &tok = *tok_owner;
    const auto cases = read_vectors(rel);
    ASSERT_EQ(cases.size(), 46u);
    for (const auto &c : cases)
        EXPECT_EQ(tok.encode(c.input, /*add_bos=*/false, /*parse_special=*/false), c.expected)
            << "input: " << quoted(c.input);
}

TEST_P(llama_cpp_vectors, decode_inverts_encode) {
    const std::string rel = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
    const auto tok_owner = test::tokenizer_from(rel);
    const tokenizer &tok = *tok_owner;
    for (const auto &c : read_vectors(rel)) {
        EXPECT_EQ(tok.decode(tok.encode(c.input, false)), c.input) << "input: " << quoted(c.input);
        EXPECT_EQ(tok.decode(tok.encode(c.input, true)), c.input) << "with BOS, input: " << quoted(c.input);
    }
}

INSTANTIATE_TEST_SUITE_P(spm, llama_cpp_vectors, ::testing::Values("llama-spm", "phi-3"),
                         [](const auto &info) { return std::string(info.param) == "phi-3" ? "phi3" : "llama_spm"; });

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> all;
    for (const auto &p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
}

// Phi-3's "</s>" is USER_DEFINED in the file, but llama.cpp makes every "</s>" an end-of-generation CONTROL token
// (node-llama-cpp 3.21.1's llama.cpp; older ones cut it out as user-defined even without parse_special). So as
// text it stays text, and with parse_special it is cut out, the whitespace after it dropped (Phi-3's RSTRIP rule)
// and a dummy-prefix space put before the text that follows.
TEST(spm_special_tokens, phi3_end_of_sequence_text_is_a_control_token) {
    const auto tok_owner = test::tokenizer_from("vocab/ggml-vocab-phi-3.gguf");
    const tokenizer &tok = *tok_owner;
    ASSERT_EQ(tok.type(2), token_type::control);
    EXPECT_TRUE(tok.is_eog(2));
    const auto as_text = tok.encode("Hello</s> world", false, false);
    EXPECT_EQ(std::find(as_text.begin(), as_text.end(), 2), as_text.end());
    const auto expected = concat({tok.encode("Hello", false), {2}, tok.encode("world", false)});
    EXPECT_EQ(tok.encode("Hello</s> world", false, true), expected);
    EXPECT_EQ(tok.encode("Hello</s>world", false, true), expected);
    EXPECT_EQ(tok.encode("</s>", true, true), (std::vector<int32_t>{1, 2}));
}

TEST(spm_special_tokens, control_tokens_need_parse_special) {
    const auto phi3_owner = test::tokenizer_from("vocab/ggml-vocab-phi-3.gguf");
    const tokenizer &phi3 = *phi3_owner;
    const int32_t user = phi3.find_token("<|user|>");
    ASSERT_EQ(user, 32010);
    const auto plain = phi3.encode("<|user|>\nHi", false, false);
    EXPECT_EQ(std::find(plain.begin(), plain.end(), user), plain.end());
    // With parse_special it is cut out, and Phi-3's RSTRIP rule drops the newline after it.
    EXPECT_EQ(phi3.encode("<|user|>\nHi", false, true), concat({{user}, phi3.encode("Hi", false)}));

    const auto llama_owner = test::tokenizer_from("vocab/ggml-vocab-llama-spm.gguf");
    const tokenizer &llama = *llama_owner;
    ASSERT_EQ(llama.type(2), token_type::control);
    const auto as_text = llama.encode("Hello</s> world", false, false);
    EXPECT_EQ(std::find(as_text.begin(), as_text.end(), 2), as_text.end());
    // No strip rule for Llama: the space after </s> stays and the dummy prefix adds another.
    EXPECT_EQ(llama.encode("Hello</s> world", false, true),
              concat({llama.encode("Hello", false), {2}, llama.encode(" world", false)}));
}

// A Phi-3 chat turn as llama.cpp tokenizes it (reported from llama.cpp by another project's parity check):
// every newline after a special token is stripped, and "SYS" gets the dummy prefix.
TEST(spm_special_tokens, phi3_chat_turn_matches_llama_cpp) {
    const auto tok_owner = test::tokenizer_from("vocab/ggml-vocab-phi-3.gguf");
    const tokenizer &tok = *tok_owner;
    EXPECT_EQ(tok.encode("<|user|>\nSYS\nHI<|end|>\n<|assistant|>\n", true, true),
              (std::vector<int32_t>{1, 32010, 317, 21554, 13, 17628, 32007, 32001}));
}

TEST(spm_special_tokens, end_of_generation) {
    const auto phi3_owner = test::tokenizer_from("vocab/ggml-vocab-phi-3.gguf");
    const tokenizer &phi3 = *phi3_owner;
    EXPECT_EQ(phi3.eos(), 32000);
    EXPECT_TRUE(phi3.is_eog(32000));                        // EOS, <|endoftext|>
    EXPECT_TRUE(phi3.is_eog(phi3.find_token("<|end|>"))); // end of turn, by its text
    EXPECT_FALSE(phi3.is_eog(1));
    EXPECT_FALSE(phi3.is_eog(phi3.find_token("<|user|>")));
    EXPECT_FALSE(phi3.is_eog(-1));
    EXPECT_FALSE(phi3.is_eog(phi3.n_vocab()));
}

TEST(stories260k_vocab, once_upon_a_time) {
    const auto tok_owner = test::tokenizer_from("stories260K-f32.gguf");
    const tokenizer &tok = *tok_owner;
    ASSERT_EQ(tok.n_vocab(), 512);
    EXPECT_EQ(tok.bos(), 1);
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_TRUE(tok.add_bos());
    const std::vector<int32_t> expected = {1, tok.find_token("\xE2\x96\x81Once"), tok.find_token("\xE2\x96\x81upon"),
                                           tok.find_token("\xE2\x96\x81" "a"), tok.find_token("\xE2\x96\x81time")};
    EXPECT_EQ(expected, (std::vector<int32_t>{1, 403, 407, 261, 378}));
    const auto ids = tok.encode("Once upon a time", true);
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(tok.decode(ids), "Once upon a time"); // without the dummy prefix's space
    EXPECT_EQ(tok.piece(ids[1]), " Once");
}

TEST(stories260k_vocab, empty_text) {
    const auto tok_owner = test::tokenizer_from("stories260K-f32.gguf");
    const tokenizer &tok = *tok_owner;
    EXPECT_EQ(tok.encode("", true), (std::vector<int32_t>{1}));
    EXPECT_TRUE(tok.encode("", false).empty());
    EXPECT_EQ(tok.decode(std::vector<int32_t>{1}), "");
}

TEST(stories260k_vocab, emoji_falls_back_to_byte_tokens) {
    const auto tok_owner = test::tokenizer_from("stories260K-f32.gguf");
    const tokenizer &tok = *tok_owner;
    const std::string text = "Hi \xF0\x9F\x98\x80!"; // U+1F600
    const auto ids = tok.encode(text, false);
    const std::vector<int32_t> bytes = {3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80};
    EXPECT_NE(std::search(ids.begin(), ids.end(), bytes.begin(), bytes.end()), ids.end());
    for (const int32_t b : bytes) EXPECT_EQ(tok.type(b), token_type::byte);
    EXPECT_EQ(tok.decode(ids), text);
}

TEST(stories260k_vocab, pieces) {
    const auto tok_owner = test::tokenizer_from("stories260K-f32.gguf");
    const tokenizer &tok = *tok_owner;
    EXPECT_EQ(tok.piece(403), " Once");
    EXPECT_EQ(tok.piece(3 + '\n'), "\n");
    EXPECT_EQ(tok.piece(1), "");
    EXPECT_EQ(tok.piece(0), "");
    EXPECT_EQ(tok.token_text(1), "<s>");
    EXPECT_THROW((void)tok.piece(512), error);
    EXPECT_THROW((void)tok.decode(std::vector<int32_t>{1, -3}), error);
}

TEST(stories260k_vocab, encode_into_reuses_the_buffer) {
    const auto tok_owner = test::tokenizer_from("stories260K-f32.gguf");
    const tokenizer &tok = *tok_owner;
    std::vector<int32_t> out = {7, 7, 7};
    tok.encode_into("Once", true, false, out);
    EXPECT_EQ(out, (std::vector<int32_t>{1, 403}));
}

// A hand-made vocab: the merge order is the highest score first, the leftmost pair on ties.
vocab_data small_vocab() {
    vocab_data v;
    v.model = vocab_model::spm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true;
    v.tokens = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc"};
    v.scores = {0, 0, 0, -1, -1, -1, -5, -5};
    v.types = {token_type::unknown, token_type::control, token_type::control, token_type::normal,
               token_type::normal,  token_type::normal,  token_type::normal,  token_type::normal};
    v.add_space_prefix = false;
    return v;
}

TEST(spm_merges, ties_go_to_the_leftmost_pair) {
    const auto tok = make_tokenizer(small_vocab());
    EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{6, 5}));
}

TEST(spm_merges, higher_score_wins) {
    vocab_data v = small_vocab();
    v.scores[7] = -4; // "bc" now outranks "ab"
    const auto tok = make_tokenizer(std::move(v));
    EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{3, 7}));
}

TEST(spm_merges, unknown_without_byte_tokens) {
    vocab_data v = small_vocab();
    const auto tok = make_tokenizer(v);
    EXPECT_EQ(tok->encode("axb", false), (std::vector<int32_t>{3, 0, 4}));
    v.unk = -1;
    const auto no_unk = make_tokenizer(std::move(v));
    try {
        (void)no_unk->encode("axb", false);
        FAIL() << "expected an error for a byte the vocab can't spell";
    } catch (const error &e) {
        EXPECT_NE(std::string(e.what()).find("0x78"), std::string::npos) << e.what();
    }
}

using strata::testing::error_of;

TEST(spm_bad_vocab, mismatched_sizes) {
    vocab_data v = small_vocab();
    v.scores.pop_back();
    const std::string msg = error_of([&] { (void)make_tokenizer(v); });
    EXPECT_NE(msg.find("8 tokens but 7 scores"), std::string::npos) << msg;
    v = small_vocab();
    v.types.push_back(token_type::normal);
    EXPECT_NE(error_of([&] { (void)make_tokenizer(v); }).find("token types"), std::string::npos);
}

TEST(spm_bad_vocab, bos_out_of_range) {
    vocab_data v = small_vocab();
    v.bos = 8;
    const std::string msg = error_of([&] { (void)make_tokenizer(v); });
    EXPECT_NE(msg.find("BOS token id 8 is out of range"), std::string::npos) << msg;
}

TEST(spm_bad_vocab, empty_and_malformed) {
    EXPECT_NE(error_of([] { (void)make_tokenizer(vocab_data{}); }).find("no tokens"), std::string::npos);
    vocab_data v = small_vocab();
    v.types[3] = token_type::byte; // "a" is not spelled <0xNN>
    EXPECT_NE(error_of([&] { (void)make_tokenizer(v); }).find("<0xNN>"), std::string::npos);
    v = small_vocab();
    v.types[3] = static_cast<token_type>(9);
    EXPECT_NE(error_of([&] { (void)make_tokenizer(v); }).find("token type 9"), std::string::npos);
}

} // namespace
} // namespace strata
