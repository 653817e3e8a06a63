// The lexer: tokens, @huggingface/jinja's preprocessing (trailing newline, lstrip_blocks, trim_blocks, generation
// tags), whitespace control, comments, raw blocks, string escapes, and errors at the right offset.
#include "chat/jinja_lexer.hpp"

#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using namespace strata::chat::jinja;
using test_support::render;

namespace {

std::string kinds(std::string_view source) {
    std::string out;
    for (const token &t : tokenize(source)) {
        if (!out.empty()) out += ' ';
        out += token_kind_name(t.kind);
        if (t.kind == token_kind::identifier || t.kind == token_kind::number || t.kind == token_kind::string ||
            t.kind == token_kind::text || t.kind == token_kind::additive || t.kind == token_kind::unary)
            out += "(" + t.text + ")";
    }
    return out;
}

} // namespace

TEST(jinja_lexer, SplitsTextTagsAndOperators) {
    EXPECT_EQ(
        kinds("a{{ x.y[0] | f(1, 'q') }}b"),
        "text(a) '{{' name(x) '.' name(y) '[' number(0) ']' '|' name(f) '(' number(1) ',' string(q) ')' '}}' text(b)");
    EXPECT_EQ(kinds("{% if a == 1 and not b %}"),
              "'{%' name(if) name(a) comparison number(1) name(and) name(not) name(b) '%}'");
    EXPECT_EQ(kinds("{{ a ** 2 // 3 ~ 'x' }}"),
              "'{{' name(a) '**' number(2) operator number(3) operator(~) string(x) '}}'");
}

TEST(jinja_lexer, SignsAfterOperatorsBelongToNumbers) {
    EXPECT_EQ(kinds("{{ a - 1 }}"), "'{{' name(a) operator(-) number(1) '}}'");
    EXPECT_EQ(kinds("{{ [-1, -x] }}"), "'{{' '[' number(-1) ',' sign(-) name(x) ']' '}}'");
    EXPECT_EQ(kinds("{{ f(-2.5) }}"), "'{{' name(f) '(' number(-2.5) ')' '}}'");
    // After a dot a number has no fraction: a.0.1 is a[0][1].
    EXPECT_EQ(kinds("{{ a.0.1 }}"), "'{{' name(a) '.' number(0) '.' number(1) '}}'");
}

TEST(jinja_lexer, StringEscapes) {
    const auto tokens = tokenize(R"({{ 'a\n\t\'\"\\\x41\u00e9\d' }})");
    ASSERT_EQ(tokens.size(), 3u);
    EXPECT_EQ(tokens[1].text, "a\n\t'\"\\A\xC3\xA9\\d"); // an unknown escape stays as written, as in Python
    EXPECT_EQ(tokenize(R"({{ "\ud83d\ude00" }})")[1].text, "\xF0\x9F\x98\x80"); // a surrogate pair is one character
}

TEST(jinja_lexer, DictLiteralClosingBracesAreNotTheEndOfTheExpression) {
    EXPECT_EQ(render("{{ {'a': {'b': 1}}}}"), "{\"a\": {\"b\": 1}}");
    EXPECT_EQ(render("{{ '}}' }}"), "}}");
}

TEST(jinja_lexer, TrailingNewlineOfTheTemplateIsDropped) {
    EXPECT_EQ(render("a\n"), "a");
    EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(jinja_lexer, BlocksStripIndentationAndTheirNewline) {
    // lstrip_blocks and trim_blocks, as transformers configures Jinja2 and @huggingface/jinja always does.
    EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
    EXPECT_EQ(render("  {# comment #}\nx"), "x");
    // Expressions keep both.
    EXPECT_EQ(render("  {{ 'v' }}\nx"), "  v\nx");
    // Indentation before text other than a block stays.
    EXPECT_EQ(render("x {% if true %}y{% endif %}"), "x y");
}

TEST(jinja_lexer, DashesStripWhitespace) {
    EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
    EXPECT_EQ(render("a \n {{- 'x' -}} \n b"), "axb");
    EXPECT_EQ(render("a  {#- note -#}  b"), "ab");
    // JavaScript's whitespace, so also no-break and ideographic spaces.
    EXPECT_EQ(render("a\xC2\xA0{{- 'x' -}}\xE3\x80\x80"
                     "b"),
              "axb");
}

TEST(jinja_lexer, GenerationTagsVanish) {
    EXPECT_EQ(render("a {% generation %}b{% endgeneration %} c"), "a b c");
    EXPECT_EQ(render("a {%- generation -%} b {%- endgeneration -%} c"), "abc");
}

TEST(jinja_lexer, RawBlocksKeepTagsAsText) {
    EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}!"), "{{ x }}{% if %}!");
    EXPECT_EQ(render("a {%- raw -%} b {%- endraw -%} c"), "abc");
}

TEST(jinja_lexer, ErrorsPointAtTheOffendingCharacter) {
    try {
        tokenize("ab\n{{ x @ y }}");
        FAIL() << "no error";
    } catch (const syntax_error &e) {
        EXPECT_EQ(e.message, "unexpected character '@'");
        EXPECT_EQ(e.offset, 8u);
    }
    EXPECT_THROW(tokenize("{{ 'open"), syntax_error);
    EXPECT_THROW(tokenize("{# never closed"), syntax_error);
    EXPECT_THROW(tokenize("{% raw %}x"), syntax_error);
    EXPECT_THROW(tokenize("{{ '\\x4' }}"), syntax_error);
    EXPECT_THROW(tokenize("{{ x"), syntax_error);
}
