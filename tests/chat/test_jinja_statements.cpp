// Statements: for (loop variables, else, filter, unpacking, break/continue), if/elif/else, set (plain, tuple, block,
// namespace attribute), macro (defaults, varargs/kwargs, dynamic scope), call blocks with caller, filter blocks.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

TEST(jinja_statements, ForLoopVariables) {
    EXPECT_EQ(render("{% for x in [7, 8, 9] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                     "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
              "1032truefalse3|2121falsefalse3|3210falsetrue3|");
    EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}"),
              "<1>2;1<2>3;2<3>;");
    EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
    // `loop` is a dict, as in @huggingface/jinja.
    EXPECT_EQ(render("{% for x in [5] %}{{ loop|tojson }}{% endfor %}"),
              "{\"index\": 1, \"index0\": 0, \"revindex\": 1, \"revindex0\": 0, \"first\": true, \"last\": true, "
              "\"length\": 1, \"previtem\": null, \"nextitem\": null}");
}

TEST(jinja_statements, ForOverDictsStringsAndNothing) {
    const json ctx = {{"d", {{"b", 1}, {"a", 2}}}};
    EXPECT_EQ(
        render("{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", ctx),
        "ba|b=1;a=2;");
    EXPECT_EQ(render("{% for c in 'h\xC3\xA9' %}[{{ c }}]{% endfor %}"), "[h][\xC3\xA9]");
    EXPECT_EQ(render("{% for x in missing %}a{% else %}none{% endfor %}"), "none");
    EXPECT_TRUE(contains(error_of("{% for x in 5 %}{% endfor %}"), "cannot loop over integer"));
}

TEST(jinja_statements, ForFilterAndElse) {
    EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
    EXPECT_EQ(render("{% for x in [1] if x > 5 %}a{% else %}filtered out{% endfor %}"), "filtered out");
    EXPECT_EQ(render("{% for a, b in [[1, 2], (3, 4)] %}{{ a * b }};{% endfor %}"), "2;12;");
    EXPECT_TRUE(contains(error_of("{% for a, b in [[1, 2, 3]] %}{% endfor %}"), "too many values to unpack"));
}

TEST(jinja_statements, BreakAndContinueDropTheirIterationsOutput) {
    // @huggingface/jinja keeps nothing of an iteration that ends in break or continue.
    EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}"), "1");
    EXPECT_EQ(render("{% for x in [1, 2, 3] %}<{{ x }}{% if x == 2 %}{% continue %}{% endif %}>{% endfor %}"),
              "<1><3>");
    // ... and an else block runs when no iteration finished.
    EXPECT_EQ(render("{% for x in [1, 2] %}{% continue %}{% else %}else{% endfor %}"), "else");
    EXPECT_EQ(render("{% for x in [1, 2] %}{% set y %}{% break %}{% endset %}{% endfor %}done"), "done");
}

TEST(jinja_statements, ScopesOfLoopsAndIfs) {
    EXPECT_EQ(render("{% set a = 1 %}{% if true %}{% set a = 2 %}{% endif %}{{ a }}"), "2");
    EXPECT_EQ(render("{% set a = 1 %}{% for x in [1, 2] %}{% set a = a + x %}{{ a }}{% endfor %}|{{ a }}"), "24|1");
    EXPECT_EQ(render("{% for x in [1] %}{% endfor %}{{ x is defined }}"), "false");
    EXPECT_EQ(render("{% set ns = namespace(total=0) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}"
                     "{% endfor %}{{ ns.total }}"),
              "6");
}

TEST(jinja_statements, IfElifElse) {
    const char *t = "{% if n == 1 %}one{% elif n == 2 %}two{% elif n == 3 %}three{% else %}many{% endif %}";
    EXPECT_EQ(render(t, {{"n", 1}}), "one");
    EXPECT_EQ(render(t, {{"n", 3}}), "three");
    EXPECT_EQ(render(t, {{"n", 9}}), "many");
}

TEST(jinja_statements, SetForms) {
    EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c, d = [3, 4] %}{{ c }}{{ d }}"), "12|34");
    EXPECT_EQ(render("{% set t %}x={{ 1 + 1 }}{% endset %}[{{ t }}]{{ t is string }}"), "[x=2]true");
    EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.b = ns.a + 1 %}{{ ns.b }}{{ ns|tojson }}"),
              "2{\"a\": 1, \"b\": 2}");
    EXPECT_EQ(render("{{ namespace({'k': 1}, j=2).k }}{{ namespace([['q', 3]]).q }}"), "13");
    EXPECT_TRUE(contains(error_of("{% set d = {} %}{% set d.x = 1 %}"), "only a namespace(...) takes attributes"));
    EXPECT_TRUE(contains(error_of("{% set a, b = [1] %}"), "too few values to unpack"));
}

TEST(jinja_statements, Macros) {
    const std::string m = "{% macro tag(name, body='', attrs=none) %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}";
    EXPECT_EQ(render(m + "{{ tag('b') }}{{ tag('i', 'x') }}{{ tag(body='y', name='u') }}"), "<b></b><i>x</i><u>y</u>");
    EXPECT_EQ(render("{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}"), "3,6");
    EXPECT_EQ(render("{% macro m(a) %}{{ varargs }}{{ kwargs|tojson }}{% endmacro %}{{ m(1, 2, 3, k='v') }}"),
              "[2, 3]{\"k\": \"v\"}");
    EXPECT_TRUE(contains(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
                         "macro 'm' takes at most 1 argument(s), 2 given"));
    EXPECT_TRUE(contains(error_of("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"), "macro 'm' has no parameter 'b'"));
    // A macro returns its output as a string, and sees the variables where it is called (@huggingface/jinja).
    EXPECT_EQ(
        render("{% macro m() %}[{{ x }}]{% endmacro %}{% for x in [1, 2] %}{{ m() }}{% endfor %}{{ m()|length }}"),
        "[1][2]2");
    EXPECT_EQ(render("{% macro r(n) %}{{ n }}{% if n > 0 %}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}"), "3210");
}

TEST(jinja_statements, CallBlocks) {
    const std::string list =
        "{% macro list(items) %}<ul>{% for i in items %}{{ caller(i) }}{% endfor %}</ul>{% endmacro %}";
    EXPECT_EQ(render(list + "{% call(item) list([1, 2]) %}<li>{{ item }}</li>{% endcall %}"),
              "<ul><li>1</li><li>2</li></ul>");
    EXPECT_EQ(
        render(
            "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% set v = 'x' %}{% call wrap() %}{{ v }}{% endcall %}"),
        "[x]");
    // caller() kept past its block has nothing left to run in.
    EXPECT_TRUE(contains(error_of("{% set ns = namespace() %}{% macro keep() %}{% set ns.c = caller %}{% endmacro %}"
                                  "{% call keep() %}body{% endcall %}{{ ns.c() }}"),
                         "caller() was called after its {% call %} block had ended"));
}

TEST(jinja_statements, FilterBlocks) {
    EXPECT_EQ(render("{% filter upper %}ab{{ 'c' }}{% endfilter %}"), "ABC");
    EXPECT_EQ(render("{% filter trim | replace('a', 'b') %}  aa  {% endfilter %}!"), "bb!");
}

TEST(jinja_statements, CommentsAndText) {
    EXPECT_EQ(render("a{# {{ not run }} #}b"), "ab");
    EXPECT_EQ(render("{{ '{{' }} literal {{ '}}' }}"), "{{ literal }}");
}
