// The parser: @huggingface/jinja's precedence, what it accepts, and syntax errors with line, column and excerpt.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::render;

TEST(jinja_parser, Precedence) {
    EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}|{{ 10 - 2 - 3 }}"), "7|9|64|5");
    // `~` binds as tightly as `+` (Python Jinja2: looser): ('a' ~ 1) + 2.
    EXPECT_EQ(render("{{ 'a' ~ 1 + 2 }}"), "a12");
    // A sign binds tighter than a filter: (-3)|abs.
    EXPECT_EQ(render("{{ -3|abs }}"), "3");
    EXPECT_EQ(render("{{ not 1 == 2 }}|{{ 1 < 2 and 2 < 3 }}|{{ 0 or 2 and 3 }}"), "true|true|3");
    EXPECT_EQ(render("{{ 'x' if false else 'y' if true else 'z' }}"), "y");
    EXPECT_EQ(render("{{ [1, 2]|length is odd }}|{{ 'ab' ~ 'cd'|upper }}"), "false|abCD");
}

TEST(jinja_parser, PostfixChains) {
    const test_support::json ctx = {{"m", {{"a", {{"b", {1, 2, 3}}}}}}};
    EXPECT_EQ(render("{{ m.a.b[1] }}|{{ m['a']['b'][-1] }}|{{ m.a.b[1:] }}|{{ m.a.b.0 }}", ctx), "2|3|[2, 3]|1");
    EXPECT_EQ(render("{{ 'a,b'.split(',')[1].upper() }}"), "B");
    // Python Jinja2 applies member access to a filter's result (@huggingface/jinja cannot parse it).
    EXPECT_EQ(render("{{ 'a b'|upper.split()|length }}|{{ ('a b'|upper).split()[1] }}"), "2|B");
    EXPECT_EQ(render("{{ [3, 1]|sort|first }}|{{ {'k': 'v'}|items|first|last }}"), "1|v");
}

TEST(jinja_parser, LiteralsAndLenientSeparators) {
    EXPECT_EQ(render("{{ [1, 'a', true, none, 1.5] }}|{{ {'k': [1]} }}|{{ 'a' 'b' \"c\" }}"),
              "[1, \"a\", true, null, 1.5]|{\"k\": [1]}|abc");
    // Like @huggingface/jinja: a trailing comma is fine, and so is a missing one.
    EXPECT_EQ(render("{{ [1, 2,] }}|{{ {'a': 1,} }}|{{ [1 2] }}"), "[1, 2]|{\"a\": 1}|[1, 2]");
    EXPECT_EQ(render("{{ True }}{{ False }}{{ None }}{{ none is none }}"), "truefalsetrue");
}

TEST(jinja_parser, TestArgumentsAsInPythonJinja2) {
    EXPECT_EQ(render("{{ 6 is divisibleby(3) }}|{{ 7 is divisibleby 3 }}|{{ 1 is eq 1 }}|{{ none is sameas none }}"),
              "true|false|true|true");
    // Names that continue the expression are not arguments.
    EXPECT_EQ(render("{{ 1 is odd and 2 is even }}|{{ 'a' if 1 is odd else 'b' }}|{{ 1 is number in [true] }}"),
              "true|a|true");
}

TEST(jinja_parser, SyntaxErrorsSayWhereAndShowTheLine) {
    const std::string e = error_of("line one\n{% if x %}\n  {{ x + }}\n{% endif %}");
    EXPECT_TRUE(contains(e, "test.jinja:3:10: unexpected '}}' in an expression")) << e;
    EXPECT_TRUE(contains(e, "\n      {{ x + }}\n")) << e;
    EXPECT_TRUE(contains(e, "\n             ^")) << e;
}

TEST(jinja_parser, UnclosedAndMisplacedBlocks) {
    EXPECT_TRUE(contains(error_of("{% for x in y %}a"), "test.jinja:1:1: {% for %} is never closed with {% endfor %}"));
    EXPECT_TRUE(contains(error_of("{% if x %}a{% endfor %}"), "{% endfor %} without the block it belongs to"));
    EXPECT_TRUE(contains(error_of("{% else %}"), "{% else %} without the block it belongs to"));
    EXPECT_TRUE(contains(error_of("{% break %}"), "{% break %} outside a for loop"));
    EXPECT_TRUE(contains(error_of("{% for x in y %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}"),
                         "{% break %} outside a for loop"));
    EXPECT_TRUE(contains(error_of("{% include 'x' %}"), "{% include %} is not supported in chat templates"));
    EXPECT_TRUE(contains(error_of("{% frobnicate %}"), "unknown statement 'frobnicate'"));
    EXPECT_TRUE(contains(error_of("{% set 1 = 2 %}"), "{% set %} assigns to a name"));
    EXPECT_TRUE(contains(error_of("{% macro m(a=1, b) %}{% endmacro %}"), "a parameter without a default follows"));
    EXPECT_TRUE(contains(error_of("{% macro m(a, a) %}{% endmacro %}"), "parameter 'a' is declared twice"));
    EXPECT_TRUE(contains(error_of("{{ f(a=1, 2) }}"), "positional arguments must come before keyword arguments"));
    EXPECT_TRUE(contains(error_of("{{ x[] }}"), "expected an index or a slice"));
    EXPECT_TRUE(contains(error_of("{{ x[1:2:3:4] }}"), "at most three parts"));
}

TEST(jinja_parser, ColumnsCountCharactersNotBytes) {
    EXPECT_TRUE(contains(error_of("\xC3\xA9\xC3\xA9{{ ) }}"), "test.jinja:1:6:"));
}

TEST(jinja_parser, UnknownFiltersAndTestsFailOnlyWhenTheyRun) {
    // As in @huggingface/jinja: a branch that does not run may use anything.
    EXPECT_EQ(render("{% if false %}{{ x|nonesuch }}{{ x is nonesuch }}{% endif %}ok"), "ok");
    EXPECT_TRUE(contains(error_of("{{ 1|nonesuch }}"), "test.jinja:1:6: unknown filter 'nonesuch'"));
    EXPECT_TRUE(contains(error_of("{{ 1 is nonesuch }}"), "unknown test 'nonesuch'"));
}
