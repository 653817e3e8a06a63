// The matcher: strings accepted and refused (repetition bounds, classes, negation, any character), UTF-8 characters
// split across tokens, end-of-text semantics, copies for speculation, and the bounds that keep adversarial grammars
// from hanging or exhausting memory.
#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/matcher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace {

using strata::grammar::grammar_limits;
using strata::grammar::matcher;
using strata::grammar::parse_gbnf;

// The text, fed as the given tokens, matches the whole grammar.
bool matches_tokens(const matcher &start, const std::vector<std::string> &tokens) {
    matcher m = start;
    for (const std::string &t : tokens) {
        if (!m.accepts(t)) return false;
        m.advance(t);
    }
    return m.can_end();
}

bool matches(const std::string &gbnf, const std::string &text) {
    return matches_tokens(matcher(parse_gbnf(gbnf)), {text});
}

// Every split of the text into two tokens gives the same answer as the whole text.
void expect_split_invariant(const std::string &gbnf, const std::string &text, bool expected) {
    const matcher m(parse_gbnf(gbnf));
    EXPECT_EQ(matches_tokens(m, {text}), expected) << text;
    for (size_t cut = 1; cut < text.size(); ++cut)
        EXPECT_EQ(matches_tokens(m, {text.substr(0, cut), text.substr(cut)}), expected) << text << " cut at " << cut;
    std::vector<std::string> bytes;
    for (const char c : text) bytes.emplace_back(1, c);
    EXPECT_EQ(matches_tokens(m, bytes), expected) << text << " byte by byte";
}

TEST(grammar_matcher, LiteralSequencesAndAlternatives) {
    const std::string g = "root ::= \"yes\" | \"no\" | \"maybe\" \" so\"";
    EXPECT_TRUE(matches(g, "yes"));
    EXPECT_TRUE(matches(g, "no"));
    EXPECT_TRUE(matches(g, "maybe so"));
    EXPECT_FALSE(matches(g, "maybe"));
    EXPECT_FALSE(matches(g, "yess"));
    EXPECT_FALSE(matches(g, ""));
    const matcher m(parse_gbnf(g));
    EXPECT_TRUE(m.accepts("ma"));  // a prefix
    EXPECT_FALSE(m.accepts("x"));
    EXPECT_TRUE(m.accepts(""));
    EXPECT_FALSE(m.can_end());
}

TEST(grammar_matcher, RepetitionBoundsExactly) {
    for (int n = 0; n <= 7; ++n) {
        const std::string text(static_cast<size_t>(n), 'a');
        EXPECT_EQ(matches("root ::= \"a\"{3}", text), n == 3) << n;
        EXPECT_EQ(matches("root ::= \"a\"{2,}", text), n >= 2) << n;
        EXPECT_EQ(matches("root ::= \"a\"{2,5}", text), n >= 2 && n <= 5) << n;
        EXPECT_EQ(matches("root ::= \"a\"{0,2}", text), n <= 2) << n;
        EXPECT_EQ(matches("root ::= \"a\"*", text), true) << n;
        EXPECT_EQ(matches("root ::= \"a\"+", text), n >= 1) << n;
        EXPECT_EQ(matches("root ::= \"a\"?", text), n <= 1) << n;
        EXPECT_EQ(matches("root ::= (\"a\" \"a\"){1,2}", text), n == 2 || n == 4) << n;
    }
    // The matcher says as early as possible that a bound is reached.
    matcher m(parse_gbnf("root ::= \"a\"{2,3} \"b\""));
    m.advance("aaa");
    EXPECT_FALSE(m.accepts("a"));
    EXPECT_TRUE(m.accepts("b"));
}

TEST(grammar_matcher, ClassesNegationAndAnyCharacter) {
    EXPECT_TRUE(matches("root ::= [a-zA-Z_] [a-zA-Z0-9_]*", "snake_Case9"));
    EXPECT_FALSE(matches("root ::= [a-zA-Z_] [a-zA-Z0-9_]*", "9lives"));
    EXPECT_TRUE(matches("root ::= [^\"]* \"\\\"\"", "any thing \xC3\xA9 \xF0\x9F\x98\x80 here\""));
    EXPECT_FALSE(matches("root ::= [^\"]* \"\\\"\"", "a\"b\""));
    EXPECT_TRUE(matches("root ::= [^a-c\\n]+", "xyz d"));
    EXPECT_FALSE(matches("root ::= [^a-c\\n]+", "xbz"));
    EXPECT_FALSE(matches("root ::= [^a-c\\n]+", "x\nz"));
    EXPECT_TRUE(matches("root ::= ...", "a\xC3\xA9\xF0\x9F\x98\x80")); // three characters of 1, 2 and 4 bytes
    EXPECT_FALSE(matches("root ::= ...", "ab"));
    EXPECT_FALSE(matches("root ::= ...", "abcd"));
    EXPECT_TRUE(matches("root ::= [\\u0400-\\u04FF]+", "\xD0\x9F\xD1\x80\xD0\xB8")); // Cyrillic
    EXPECT_FALSE(matches("root ::= [\\u0400-\\u04FF]+", "\xD0\x9F" "a"));
}

TEST(grammar_matcher, InvalidUtf8IsNeverAccepted) {
    const matcher m(parse_gbnf("root ::= .*"));
    EXPECT_TRUE(m.accepts("plain \xC3\xA9"));
    EXPECT_FALSE(m.accepts("\xFF"));
    EXPECT_FALSE(m.accepts("\x80"));          // a continuation byte first
    EXPECT_FALSE(m.accepts("\xC0\x80"));      // overlong NUL
    EXPECT_FALSE(m.accepts("\xE0\x80\x80"));  // overlong
    EXPECT_FALSE(m.accepts("\xED\xA0\x80"));  // UTF-16 surrogate
    EXPECT_FALSE(m.accepts("\xF4\x90\x80\x80")); // above U+10FFFF
    EXPECT_FALSE(m.accepts("\xC3" "a"));      // a character cut short
    EXPECT_TRUE(m.accepts("\xF0\x9F"));       // a partial character that can still complete
}

TEST(grammar_matcher, Utf8CharactersSplitAcrossTokens) {
    expect_split_invariant("root ::= \"caf\xC3\xA9 \xF0\x9F\x98\x80!\"", "caf\xC3\xA9 \xF0\x9F\x98\x80!", true);
    expect_split_invariant("root ::= [\xE4\xB8\x80-\xE9\xBE\xA5]+", "\xE4\xB8\xAD\xE6\x96\x87", true); // CJK range
    expect_split_invariant("root ::= [^\xC3\xA9]+", "a\xC3\xA8" "b", true);
    expect_split_invariant("root ::= [^\xC3\xA9]+", "a\xC3\xA9" "b", false);
    expect_split_invariant("root ::= \"x\" .", "x\xF0\x9F\x98\x80", true);
}

TEST(grammar_matcher, PartialCharacterAcceptedOnlyWhenItCanComplete) {
    const matcher m(parse_gbnf("root ::= \"\xC3\xA9\" | \"\xE4\xB8\xAD\"")); // é or 中
    EXPECT_TRUE(m.accepts("\xC3"));       // can become é
    EXPECT_FALSE(m.accepts("\xC4"));      // U+0100..U+013F: none matches
    EXPECT_TRUE(m.accepts("\xE4\xB8"));   // can become 中
    EXPECT_FALSE(m.accepts("\xE4\xB9"));  // U+4E40..U+4E7F
    EXPECT_FALSE(m.accepts("\xE5"));
    matcher half = m;
    half.advance("\xE4");
    EXPECT_FALSE(half.can_end());           // in the middle of a character
    EXPECT_TRUE(half.accepts("\xB8\xAD"));
    EXPECT_FALSE(half.accepts("\xB8\xAE"));
    EXPECT_FALSE(half.accepts("a"));        // not a continuation byte
    half.advance("\xB8");
    half.advance("\xAD");
    EXPECT_TRUE(half.can_end());
    EXPECT_TRUE(half.done());
}

TEST(grammar_matcher, CanEndAndDone) {
    matcher m(parse_gbnf("root ::= \"a\" \"b\"?"));
    EXPECT_FALSE(m.can_end());
    EXPECT_FALSE(m.done());
    m.advance("a");
    EXPECT_TRUE(m.can_end());
    EXPECT_FALSE(m.done()); // "b" may still come
    m.advance("b");
    EXPECT_TRUE(m.can_end());
    EXPECT_TRUE(m.done());
    EXPECT_FALSE(m.accepts("b"));
    EXPECT_TRUE(m.accepts(""));

    matcher empty(parse_gbnf("root ::= \"\""));
    EXPECT_TRUE(empty.can_end());
    EXPECT_TRUE(empty.done());

    matcher endless(parse_gbnf("root ::= \"a\" root")); // never finishes
    endless.advance("aaaa");
    EXPECT_FALSE(endless.can_end());
    EXPECT_TRUE(endless.accepts("a"));
}

TEST(grammar_matcher, AdvanceRefusesAndKeepsItsState) {
    matcher m(parse_gbnf("root ::= \"{\" [0-9]+ \"}\""));
    m.advance("{1");
    try {
        m.advance("2x}");
        FAIL() << "advance accepted text the grammar refuses";
    } catch (const strata::error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("\"2x}\""), std::string::npos) << what;
        EXPECT_NE(what.find("at byte 1"), std::string::npos) << what;
        EXPECT_NE(what.find("[0-9]"), std::string::npos) << what;
        EXPECT_NE(what.find("\"}\""), std::string::npos) << what;
    }
    EXPECT_TRUE(m.accepts("2}")); // unchanged by the failed advance
    m.advance("2}");
    EXPECT_TRUE(m.done());
    EXPECT_THROW(m.advance("\xFF"), strata::error);
}

TEST(grammar_matcher, ExpectedDescribesWhatMayFollow) {
    matcher m(parse_gbnf("root ::= \"a\" (\"b\" | [0-9])?"));
    EXPECT_EQ(m.expected(), "\"a\"");
    m.advance("a");
    EXPECT_EQ(m.expected(), "\"b\", [0-9], or the end");
}

TEST(grammar_matcher, CopiesAreIndependent) {
    matcher a(parse_gbnf("root ::= (\"x\" | \"y\")+ \".\""));
    a.advance("xy");
    matcher b = a; // speculative copy
    b.advance("yy.");
    EXPECT_TRUE(b.done());
    EXPECT_FALSE(a.can_end());
    EXPECT_TRUE(a.accepts("x."));
    matcher c(parse_gbnf("root ::= \"q\""));
    c = a;
    EXPECT_TRUE(c.accepts("."));
}

TEST(grammar_matcher, RecursionAndNullableRules) {
    const std::string g = "root ::= list\n"
                          "list ::= \"[\" ws (item (ws \",\" ws item)*)? ws \"]\"\n"
                          "item ::= list | [0-9]+\n"
                          "ws ::= \" \"?";
    EXPECT_TRUE(matches(g, "[]"));
    EXPECT_TRUE(matches(g, "[ 1, [2 ,[]], [[[3]]] ]"));
    EXPECT_FALSE(matches(g, "[1,]"));
    EXPECT_FALSE(matches(g, "[[1]"));
    EXPECT_FALSE(matches(g, "[  1]")); // ws allows one space, twice in a row here is not
}

TEST(grammar_matcher, DeepNestingIsCappedNotUnbounded) {
    matcher m(parse_gbnf("root ::= \"(\" root \")\" | \"x\""));
    const std::string open(900, '(');
    ASSERT_TRUE(m.accepts(open));
    m.advance(open);
    m.advance("x" + std::string(900, ')'));
    EXPECT_TRUE(m.done());
    // Past the depth limit the grammar refuses to open more: generation is steered to close what it opened.
    matcher deep(parse_gbnf("root ::= \"(\" root \")\" | \"x\""));
    const std::string too_deep(grammar_limits::max_stack_depth + 10, '(');
    EXPECT_FALSE(deep.accepts(too_deep));
    size_t opened = 0;
    while (deep.accepts("(")) {
        deep.advance("(");
        ++opened;
    }
    EXPECT_GT(opened, 500u);
    EXPECT_LE(opened, grammar_limits::max_stack_depth);
    deep.advance("x" + std::string(opened, ')'));
    EXPECT_TRUE(deep.done());
}

TEST(grammar_matcher, ExplodingAmbiguityIsAnErrorNotAHang) {
    // After n a's there are 2^n distinct ways to close (b or c for each a): the stack count explodes.
    matcher m(parse_gbnf("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\""));
    const auto t0 = std::chrono::steady_clock::now();
    try {
        m.advance(std::string(40, 'a'));
        FAIL() << "an exponential number of stacks was accepted";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("grammar too ambiguous"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    EXPECT_THROW((void)m.accepts(std::string(40, 'a')), strata::error);
    EXPECT_TRUE(m.accepts(std::string(8, 'a'))); // within the bound it works
}

TEST(grammar_matcher, LongTextsStayFast) {
    matcher m(parse_gbnf("root ::= [a-z ]* \".\""));
    const std::string text(200000, 'q');
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < text.size(); i += 1000) m.advance(text.substr(i, 1000));
    m.advance(".");
    EXPECT_TRUE(m.done());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
    // Right recursion is a loop, not a growing stack.
    EXPECT_LE(m.state().nodes.size(), 4u);
}

TEST(grammar_matcher, NullGrammarIsAnError) { EXPECT_THROW(matcher(nullptr), strata::error); }

} // namespace
