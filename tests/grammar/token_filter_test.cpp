// The token filter's masks equal a brute-force check (matcher::accepts on every piece) on the real Llama 3 vocabulary
// (128256 tokens, read from llama.cpp's vocab GGUF) in many grammar states: JSON between and inside tokens, inside
// strings and escapes, CJK and emoji grammars, negated non-ASCII classes, states in the middle of a UTF-8 character,
// and the finished state. Plus a small synthetic vocabulary with raw bytes, duplicates and empty (special) pieces.
#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/token_filter.hpp"
#include "vocab_pieces.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace {

using strata::grammar::json_object_gbnf;
using strata::grammar::json_schema_to_gbnf;
using strata::grammar::matcher;
using strata::grammar::parse_gbnf;
using strata::grammar::token_filter;
namespace testing_ = strata::grammar::testing;

const std::string llama3_vocab = std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-llama-bpe.gguf";

const testing_::vocab_pieces &llama3() {
    static const testing_::vocab_pieces v = testing_::load_byte_level_pieces(llama3_vocab);
    return v;
}

const token_filter &llama3_filter() {
    static const token_filter f(llama3().pieces);
    return f;
}

std::string shown(const std::string &s) {
    std::string out;
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7F) out += c;
        else out += "\\x" + std::string(1, "0123456789ABCDEF"[u >> 4]) + "0123456789ABCDEF"[u & 15];
    }
    return out;
}

// The mask equals accepts() on every piece; returns how many tokens are allowed.
size_t expect_mask_matches_brute_force(const token_filter &filter, const std::vector<std::string> &pieces,
                                       const matcher &m, const std::string &what) {
    std::vector<uint8_t> mask;
    filter.allowed(m, mask);
    EXPECT_EQ(mask.size(), pieces.size());
    size_t allowed = 0, mismatches = 0;
    for (size_t i = 0; i < pieces.size() && i < mask.size(); ++i) {
        const bool expected = !pieces[i].empty() && m.accepts(pieces[i]);
        allowed += mask[i];
        if ((mask[i] != 0) != expected && ++mismatches <= 5)
            ADD_FAILURE() << what << ": token " << i << " '" << shown(pieces[i]) << "' mask " << int(mask[i])
                          << " but accepts() says " << expected;
    }
    EXPECT_EQ(mismatches, 0u) << what;
    return allowed;
}

TEST(grammar_token_filter_vocab, LoadsTheLlama3Vocabulary) {
    const auto &v = llama3();
    ASSERT_EQ(v.pieces.size(), 128256u);
    EXPECT_EQ(v.n_control, 256u); // <|begin_of_text|>, <|eot_id|>, reserved special tokens
    EXPECT_EQ(v.pieces[0], "!");
    EXPECT_EQ(v.pieces[220], " ");                  // "Ġ"
    EXPECT_EQ(v.pieces[198], "\n");                 // "Ċ"
    EXPECT_TRUE(v.pieces[128000].empty());          // <|begin_of_text|>
    EXPECT_GT(llama3_filter().trie_nodes(), 100000u);
    EXPECT_EQ(llama3_filter().size(), 128256u);
}

TEST(grammar_token_filter_vocab, JsonObjectStatesMatchBruteForce) {
    const auto g = parse_gbnf(json_object_gbnf());
    const std::vector<std::string> prefixes = {
        "",  "{", "{\"", "{\"na", "{\"name\"", "{\"name\":", "{\"name\": ", "{\"name\": \"Jo", "{\"a\": \"x\\",
        "{\"a\": \"x\\u00", "{\"a\": 1", "{\"a\": 12.5e", "{\"a\": -", "{\"a\": [", "{\"a\": [1, ", "{\"a\": [true",
        "{\"a\": {\"b\": null}", "{\"a\": 1}", "{\n  \"a\": \"\xE4\xB8\xAD", "{\"a\": \"\xF0\x9F"};
    size_t total = 0;
    for (const std::string &p : prefixes) {
        matcher m(g);
        m.advance(p);
        total += expect_mask_matches_brute_force(llama3_filter(), llama3().pieces, m,
                                                 "json_object after '" + shown(p) + "'");
    }
    EXPECT_GT(total, 128000u); // inside strings most of the vocabulary is allowed
}

TEST(grammar_token_filter_vocab, SchemaStatesMatchBruteForce) {
    const auto schema = nlohmann::ordered_json::parse(R"({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "format": "email"},
            "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
            "born": {"type": "string", "format": "date"}
        },
        "required": ["name", "age"]
    })");
    const auto g = parse_gbnf(json_schema_to_gbnf(schema));
    for (const std::string p : {"", "{ \"name\"", "{\"name\": \"Ada\", \"age\": 3", "{\"name\": \"Ada\", \"age\": 36,",
                                "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"re",
                                "{\"name\":\"A\",\"age\":1,\"born\":\"19"}) {
        matcher m(g);
        m.advance(p);
        expect_mask_matches_brute_force(llama3_filter(), llama3().pieces, m, "schema after '" + p + "'");
    }
}

TEST(grammar_token_filter_vocab, NonAsciiGrammarsAndPartialCharactersMatchBruteForce) {
    struct state {
        const char *gbnf;
        const char *prefix;
    };
    const std::vector<state> states = {
        {"root ::= [\xE4\xB8\x80-\xE9\xBE\xA5]+ | \"\xF0\x9F\x98\x80\"+", ""},               // CJK or 😀
        {"root ::= [\xE4\xB8\x80-\xE9\xBE\xA5]+ | \"\xF0\x9F\x98\x80\"+", "\xE4"},           // mid-character
        {"root ::= [\xE4\xB8\x80-\xE9\xBE\xA5]+ | \"\xF0\x9F\x98\x80\"+", "\xF0\x9F\x98"},   // 3 of 4 bytes
        {"root ::= [^\xC3\xA9\xE4\xB8\xAD]*", ""},                                          // negated non-ASCII
        {"root ::= [^\xC3\xA9\xE4\xB8\xAD]*", "\xC3"},
        {"root ::= .*", ""},
        {"root ::= .*", "\xE2\x82"},
        {"root ::= \"caf\xC3\xA9\" | \"cafe\" [ \\n]", ""},
        {"root ::= [a-z]{0,3} \" \"", "ab"},
        {"root ::= \"a\"", "a"}, // finished: nothing is allowed
        {"root ::= ([\\u0080-\\u07FF] | [\\U00010000-\\U0010FFFF])+", ""},
    };
    for (const state &s : states) {
        matcher m(parse_gbnf(s.gbnf));
        m.advance(s.prefix);
        const std::string what = std::string(s.gbnf) + " after '" + shown(s.prefix) + "'";
        const size_t allowed = expect_mask_matches_brute_force(llama3_filter(), llama3().pieces, m, what);
        if (std::string(s.gbnf) == "root ::= \"a\"") {
            EXPECT_EQ(allowed, 0u);
        }
        if (std::string(s.gbnf) == "root ::= .*" && std::string(s.prefix).empty()) {
            EXPECT_GT(allowed, 127000u);
        }
    }
}

TEST(grammar_token_filter_vocab, FollowsAGenerationTokenByToken) {
    // Greedy "generation": always take the allowed token with the longest piece, and check the mask at every step.
    const auto g = parse_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(
        R"({"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}},
            "required":["city","n"]})")));
    matcher m(g);
    std::vector<uint8_t> mask;
    std::string text;
    for (int step = 0; step < 40 && !m.done(); ++step) {
        expect_mask_matches_brute_force(llama3_filter(), llama3().pieces, m, "step " + std::to_string(step));
        llama3_filter().allowed(m, mask);
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < mask.size(); ++i) {
            // prefer digits and letters so the text moves on (not endless whitespace)
            const std::string &p = llama3().pieces[i];
            if (mask[i] && p.size() > best_len && p.find_first_of(" \n\t") == std::string::npos) {
                best = i;
                best_len = p.size();
            }
        }
        ASSERT_GT(best_len, 0u) << "no token allowed after '" << text << "'";
        text += llama3().pieces[best];
        m.advance(llama3().pieces[best]);
        if (m.can_end()) break;
    }
    EXPECT_TRUE(m.can_end()) << text;
    EXPECT_TRUE(nlohmann::json::accept(text)) << text;
}

TEST(grammar_token_filter_synthetic, RawBytesDuplicatesAndEmptyPieces) {
    std::vector<std::string> pieces = {"",     "a",    "a",  "ab",  "\xC3", "\xA9", "\xC3\xA9", "\xE4\xB8\xAD",
                                       "\xE4", "\xB8\xAD", "\xFF", "\x80", "{\"",   "\"}",   "}",    "",
                                       "\xF0\x9F\x98\x80", "\xF0\x9F", "\x98\x80", "ab\xC3", "\xA9z", "z"};
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    const token_filter filter(pieces);
    const std::vector<const char *> grammars = {
        "root ::= [a-z\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80]*",
        "root ::= (\"a\" | \"\xC3\xA9\" | [^\\x00-\\x7F])+ \"z\"",
        "root ::= \"{\\\"\" [^\"]* \"\\\"}\"",
        "root ::= [^\xC3\xA9]+",
    };
    std::mt19937 rng(42);
    for (const char *gbnf : grammars) {
        const auto g = parse_gbnf(gbnf);
        // A random walk through allowed tokens, checking the mask at each step (including mid-character states).
        for (int walk = 0; walk < 20; ++walk) {
            matcher m(g);
            for (int step = 0; step < 12; ++step) {
                expect_mask_matches_brute_force(filter, pieces, m, gbnf);
                std::vector<uint8_t> mask;
                filter.allowed(m, mask);
                std::vector<size_t> ok;
                for (size_t i = 0; i < mask.size(); ++i)
                    if (mask[i]) ok.push_back(i);
                if (ok.empty()) break;
                m.advance(pieces[ok[rng() % ok.size()]]);
            }
        }
    }
}

TEST(grammar_token_filter_synthetic, ExplodingGrammarIsAnErrorNotAHang) {
    // After n a's there are 2^n ways to close them: a long token of a's must be refused with an error, quickly.
    const token_filter filter({"a", "b", std::string(30, 'a'), "aab"});
    matcher m(parse_gbnf("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\""));
    std::vector<uint8_t> mask;
    try {
        filter.allowed(m, mask);
        FAIL() << "an exponential number of parse stacks was followed";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("grammar too ambiguous"), std::string::npos) << e.what();
    }
    const token_filter short_pieces({"a", "b", "c", "aab"});
    short_pieces.allowed(m, mask);
    EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(grammar_token_filter_synthetic, EmptyVocabularyAndSpecialTokens) {
    const token_filter none({});
    std::vector<uint8_t> mask{1, 1};
    none.allowed(matcher(parse_gbnf("root ::= .*")), mask);
    EXPECT_TRUE(mask.empty());
    const token_filter special({"", "", "x"});
    special.allowed(matcher(parse_gbnf("root ::= .*")), mask);
    EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 1}));
}

} // namespace
