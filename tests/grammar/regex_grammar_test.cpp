// Regular expressions -> GBNF, checked against std::regex (ECMAScript) as the oracle: for many patterns and random
// ASCII strings the grammar matches exactly when std::regex_match (full) or std::regex_search (JSON Schema's search
// semantics) does; in JSON-string mode the encoded string matches exactly when the decoded one does. Then the
// refusals (backreferences, lookaround, word boundaries, property escapes) with their wording.
#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/regex_grammar.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <regex>
#include <string>
#include <vector>

namespace {

using strata::grammar::matcher;
using strata::grammar::parse_gbnf;
using strata::grammar::regex_match;
using strata::grammar::regex_to_gbnf;
using strata::grammar::regex_to_gbnf_expression;

bool matches(const matcher &start, const std::string &text) {
    matcher m = start;
    if (!m.accepts(text)) return false;
    m.advance(text);
    return m.can_end();
}

const std::vector<std::string> &patterns() {
    static const std::vector<std::string> p = {
        "^[a-z]+$", "a|b", "(ab)*c", "^\\d{3}-\\d{2}$", "colou?r", "[^abc]{2,3}", "^(ab|ba)+z?$", "x*y+z?",
        "\\w+@\\w+\\.c", "^$", "a{2}b{1,}c{0,2}", "[a-c]\\s[^a-c]", "^\\(\\d+\\)$", "(?:ab|cd){2}", "^.{3}$", "a.c",
        "[-a]+", "[a-]+", "a\\.b", "[\\d\\-]+", "^(?<word>[xyz]+)-\\1?$", "(a|)+b", "a{0}b", "[\\w.]+", "\\D\\S\\W",
        "^[^\\n]*$", "(a*)*b", "((a|b)(c|d))+", "^\\x61\\u0062[\\x30-\\x39]$", "a+?b*?c??", "[\\]\\[]", "\\{\\}x{1}",
        "^[+-]?(\\d+\\.?\\d*|\\.\\d+)$", "z$", "^z"};
    return p;
}

std::string random_text(std::mt19937 &rng) {
    static const std::string alphabet = "abcdxyz019-.@()+ \n{}[]";
    std::string s;
    const size_t n = rng() % 9;
    for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    return s;
}

TEST(grammar_regex, FullMatchAgreesWithStdRegex) {
    std::mt19937 rng(2024);
    for (const std::string &p : patterns()) {
        if (p.find("\\1") != std::string::npos) continue; // backreference: refused, tested below
        SCOPED_TRACE(p);
        const matcher m(parse_gbnf(regex_to_gbnf(p)));
        const std::regex oracle(p, std::regex::ECMAScript);
        size_t positives = 0;
        for (int i = 0; i < 3000; ++i) {
            const std::string s = random_text(rng);
            const bool expected = std::regex_match(s, oracle);
            positives += expected;
            EXPECT_EQ(matches(m, s), expected) << "text '" << s << "'";
        }
        (void)positives;
    }
}

TEST(grammar_regex, SearchModeAgreesWithStdRegexSearch) {
    std::mt19937 rng(7);
    for (const std::string &p : patterns()) {
        if (p.find("\\1") != std::string::npos) continue;
        SCOPED_TRACE(p);
        const std::string gbnf = "root ::= " + regex_to_gbnf_expression(p, regex_match::search, false) + "\n";
        const matcher m(parse_gbnf(gbnf));
        const std::regex oracle(p, std::regex::ECMAScript);
        for (int i = 0; i < 1500; ++i) {
            const std::string s = random_text(rng);
            EXPECT_EQ(matches(m, s), std::regex_search(s, oracle)) << "text '" << s << "'";
        }
    }
}

TEST(grammar_regex, JsonStringModeMatchesTheDecodedString) {
    std::mt19937 rng(11);
    const std::vector<std::string> json_patterns = {"^a\"b", "\\\\", "^[^\"]*$", "\\n", "^.+$", "[\\x00-\\x1f]", "\"$",
                                                    "^(\\w+ )*\\w+$", "^[\\s\\S]{2}$"};
    static const std::string alphabet = "ab\"\\\n\t \x01";
    for (const std::string &p : json_patterns) {
        SCOPED_TRACE(p);
        const auto schema = nlohmann::ordered_json{{"type", "string"}, {"pattern", p}};
        const matcher m(parse_gbnf(strata::grammar::json_schema_to_gbnf(schema)));
        const std::regex oracle(p, std::regex::ECMAScript);
        for (int i = 0; i < 1500; ++i) {
            std::string s;
            const size_t n = rng() % 6;
            for (size_t k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
            const std::string encoded = nlohmann::json(s).dump(); // "..." with \" \\ \n \t \u0001
            EXPECT_EQ(matches(m, encoded), std::regex_search(s, oracle)) << "string " << encoded;
        }
    }
    // Other encodings of the same characters are accepted too.
    const matcher quotes(parse_gbnf(strata::grammar::json_schema_to_gbnf(
        nlohmann::ordered_json{{"type", "string"}, {"pattern", "^[\\x00-\\x1f]$"}})));
    EXPECT_TRUE(matches(quotes, "\"\\u001F\""));
    EXPECT_TRUE(matches(quotes, "\"\\b\""));
    EXPECT_FALSE(matches(quotes, "\"\x01\"")); // a raw control character is not JSON
}

TEST(grammar_regex, NonAsciiAndEscapes) {
    const matcher m(parse_gbnf(regex_to_gbnf("^[\\u4e00-\\u9fa5]{2}\\u{1F600}\\uD83D\\uDE00.$")));
    EXPECT_TRUE(matches(m, "\xE4\xB8\xAD\xE6\x96\x87\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xC3\xA9"));
    EXPECT_FALSE(matches(m, "\xE4\xB8\xAD" "a\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xC3\xA9"));
    const matcher dot(parse_gbnf(regex_to_gbnf(".")));
    EXPECT_TRUE(matches(dot, "\xF0\x9F\x98\x80"));
    EXPECT_FALSE(matches(dot, "\xE2\x80\xA8")); // U+2028 is a line terminator
    EXPECT_FALSE(matches(dot, "\r"));
    const matcher space(parse_gbnf(regex_to_gbnf("\\s")));
    EXPECT_TRUE(matches(space, "\xC2\xA0"));      // U+00A0
    EXPECT_TRUE(matches(space, "\xE3\x80\x80"));  // U+3000
}

std::string regex_error(const std::string &pattern) {
    try {
        regex_to_gbnf(pattern);
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

#define EXPECT_REGEX_ERROR(pattern, ...)                                                                              \
    do {                                                                                                              \
        const std::string err_ = regex_error(pattern);                                                                \
        ASSERT_FALSE(err_.empty()) << "converted: " << (pattern);                                                     \
        for (const char *part_ : {__VA_ARGS__}) EXPECT_NE(err_.find(part_), std::string::npos) << err_;               \
    } while (0)

TEST(grammar_regex, Refusals) {
    EXPECT_REGEX_ERROR("(a)\\1", "backreferences are not supported", "at offset 3");
    EXPECT_REGEX_ERROR("a(?=b)", "lookahead and lookbehind are not supported", "at offset 1");
    EXPECT_REGEX_ERROR("(?<!x)y", "lookahead and lookbehind");
    EXPECT_REGEX_ERROR("\\bword\\b", "word boundaries");
    EXPECT_REGEX_ERROR("\\p{L}+", "Unicode property escapes");
    EXPECT_REGEX_ERROR("(?i)abc", "inline flags");
    EXPECT_REGEX_ERROR("(ab", "unterminated group");
    EXPECT_REGEX_ERROR("ab)", "unbalanced ')'", "at offset 2");
    EXPECT_REGEX_ERROR("*a", "nothing to repeat", "at offset 0");
    EXPECT_REGEX_ERROR("a**", "nothing to repeat");
    EXPECT_REGEX_ERROR("[z-a]", "start comes after its end");
    EXPECT_REGEX_ERROR("[abc", "unterminated character class");
    EXPECT_REGEX_ERROR("a{3,1}", "m below n");
    EXPECT_REGEX_ERROR("a{20000}", "above the 10000");
    EXPECT_REGEX_ERROR("a^b", "^ is only supported at the start");
    EXPECT_REGEX_ERROR("a$b", "$ is only supported at the end");
    EXPECT_REGEX_ERROR("(^a)", "anchors inside groups");
    EXPECT_REGEX_ERROR("\\q", "unknown escape '\\q'");
    EXPECT_REGEX_ERROR(std::string(200, '(') + "a" + std::string(200, ')'), "groups nested deeper than 100");
    // In a schema the location is named.
    try {
        strata::grammar::json_schema_to_gbnf(
            nlohmann::ordered_json::parse(R"({"properties":{"id":{"type":"string","pattern":"^(a)\\1$"}}})"));
        FAIL() << "a backreference was converted";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("at #/properties/id/pattern"), std::string::npos) << e.what();
    }
}

} // namespace
