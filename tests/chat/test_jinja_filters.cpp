// Filters, each with the behaviour @huggingface/jinja has (or Python Jinja2's where it has none).
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

namespace {
const json people = {{"people", json::array({{{"name", "Bo"}, {"age", 30}, {"role", "user"}},
                                             {{"name", "al"}, {"age", 25}, {"role", "assistant"}},
                                             {{"name", "Cy"}, {"age", 35}}})}};
}

TEST(jinja_filters, Tojson) {
    EXPECT_EQ(render("{{ {'a': [1, 2.5, true, none], 'b': 'x\"y'}|tojson }}"),
              "{\"a\": [1, 2.5, true, null], \"b\": \"x\\\"y\"}");
    EXPECT_EQ(render("{{ {'a': [1, {}], 'b': []}|tojson(indent=2) }}"),
              "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
    EXPECT_EQ(render("{{ 'caf\xC3\xA9'|tojson }}|{{ 'caf\xC3\xA9'|tojson(ensure_ascii=true) }}"),
              "\"caf\xC3\xA9\"|\"caf\\u00e9\"");
    EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}"), "{\"a\":2,\"b\":1}");
    EXPECT_EQ(render("{{ missing|tojson }}|{{ 1.0|tojson }}|{{ (1 / 0)|tojson }}"), "null|1|null");
    EXPECT_TRUE(contains(error_of("{{ range|tojson }}"), "cannot convert <function range> to JSON"));
}

TEST(jinja_filters, TextFilters) {
    EXPECT_EQ(
        render("{{ 'hello wORLD'|upper }}|{{ 'HeLLo'|lower }}|{{ 'hello wORLD'|title }}|{{ 'hELLO'|capitalize }}"),
        "HELLO WORLD|hello|Hello WORLD|HELLO");
    EXPECT_EQ(render("[{{ '  a b \n'|trim }}]|[{{ 'xxaxx'|trim('x') }}]|{{ 'aaa'|replace('a', 'b', 2) }}"),
              "[a b]|[a]|bba");
    EXPECT_EQ(render("{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(1, blank=true) }}"),
              "a\n    b\n\n    c|  a\n  b|a\n \n b");
    EXPECT_EQ(render("{{ '<a href=\"x\">&\\'</a>'|escape }}|{{ 'x'|e }}|{{ '<b>'|safe }}"),
              "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;|x|<b>");
    EXPECT_EQ(render("{{ 5|upper }}|[{{ missing|trim }}]"), "5|[]");
}

TEST(jinja_filters, NumberFilters) {
    EXPECT_EQ(render("{{ '42'|int }}|{{ ' 7x'|int }}|{{ 'x'|int }}|{{ 'x'|int(9) }}|{{ 3.9|int }}|{{ -3.9|int }}|{{ "
                     "true|int }}"),
              "42|7|0|9|3|-4|1");
    // As @huggingface/jinja: with an argument, int() and float() return numbers unchanged.
    EXPECT_EQ(render("{{ 3.9|int(0) }}|{{ 3|float(0) }}|{{ 3|float }}|{{ '2.5e1x'|float }}|{{ 'q'|float }}"),
              "3.9|3|3.0|25.0|0.0");
    EXPECT_EQ(render("{{ -3|abs }}|{{ (-2.5)|abs }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 3.14159|round(2) }}|{{ "
                     "2.1|round(0, 'ceil') }}"),
              "3|2.5|2.0|4.0|3.14|3.0");
    EXPECT_EQ(render("{{ [1, 2.5, 3]|sum }}|{{ [1, 2]|sum(start=10) }}|{{ people|sum(attribute='age') }}", people),
              "6.5|13|90");
}

TEST(jinja_filters, Default) {
    EXPECT_EQ(
        render("{{ missing|default('d') }}|{{ none|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}"
               "|{{ 0|d(5, true) }}|[{{ missing|default }}]"),
        "d|||d|5|[]");
    EXPECT_TRUE(contains(error_of("{{ 1|default(2, 'yes') }}"), "must be true or false"));
}

TEST(jinja_filters, ListFilters) {
    EXPECT_EQ(render("{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}"
                     "|{{ [3, 1, 2]|sort(reverse=true) }}"),
              "[1, 2, 3]|[\"A\", \"a\", \"b\"]|[\"A\", \"a\", \"b\"]|[3, 2, 1]");
    EXPECT_EQ(render("{{ people|sort(attribute='age')|map(attribute='name')|join(',') }}", people), "al,Bo,Cy");
    EXPECT_EQ(
        render("{{ [1, 2]|first }}{{ [1, 2]|last }}|{{ []|first is undefined }}|{{ 'abc'|first }}|{{ [1, 2]|reverse }}"
               "|{{ 'ab\xC3\xA9'|reverse }}"),
        "12|true|a|[2, 1]|\xC3\xA9"
        "ba");
    // unique keeps the first of each value, case-sensitively (as @huggingface/jinja).
    EXPECT_EQ(
        render("{{ ['a', 'A', 'a', 1, 1.0]|unique }}|{{ [1, 2]|length }}|{{ 'abc'|count }}|{{ {'a': 1}|length }}"),
        "[\"a\", \"A\", 1]|2|3|1");
    EXPECT_EQ(render("{{ [1, 'a', none, 2.0, [3, 4]]|join('-') }}|{{ 'abc'|join(',') }}|{{ people|join(', ', "
                     "attribute='name') }}",
                     people),
              "1-a--2-3,4|a,b,c|Bo, al, Cy");
    EXPECT_EQ(render("{{ 'ab'|list }}|{{ {'k': 1, 'j': 2}|list }}|{{ [4, 5]|min }}|{{ ['b', 'A']|max }}|{{ "
                     "people|max(attribute='age') }}",
                     people),
              "[\"a\", \"b\"]|[\"k\", \"j\"]|4|b|{\"name\": \"Cy\", \"age\": 35}");
    EXPECT_TRUE(contains(error_of("{{ [1, 'a']|sort }}"), "cannot compare"));
}

TEST(jinja_filters, SelectAndMap) {
    EXPECT_EQ(render("{{ people|selectattr('role', 'equalto', 'user')|map(attribute='name')|list }}"
                     "|{{ people|rejectattr('role')|map(attribute='name')|list }}"
                     "|{{ people|selectattr('role', 'defined')|list|length }}",
                     people),
              "[\"Bo\"]|[\"Cy\"]|2");
    EXPECT_EQ(
        render("{{ [1, 2, 3, 4]|select('even')|list }}|{{ [1, 2, 3]|reject('odd')|list }}|{{ [0, 1, '']|select|list }}"
               "|{{ [1, 5, 9]|select('gt', 4)|list }}"),
        "[2, 4]|[2]|[1]|[5, 9]");
    EXPECT_EQ(render("{{ ['a', 'b']|map('upper')|join }}|{{ people|map(attribute='role', default='none')|join(',') }}"
                     "|{{ [{'a': {'b': [7]}}]|map(attribute='a.b.0')|first }}",
                     people),
              "AB|user,assistant,none|7");
    EXPECT_TRUE(contains(error_of("{{ [1]|selectattr('x')|list }}"), "selectattr takes a list of dicts"));
}

TEST(jinja_filters, DictFilters) {
    const json ctx = {{"d", {{"b", 2}, {"A", 3}, {"a", 1}}}};
    EXPECT_EQ(
        render("{{ d|items }}|{{ d|dictsort }}|{{ d|dictsort(true) }}|{{ d|dictsort(by='value', reverse=true) }}", ctx),
        "[[\"b\", 2], [\"A\", 3], [\"a\", 1]]|[[\"A\", 3], [\"a\", 1], [\"b\", 2]]|[[\"A\", 3], [\"a\", 1], [\"b\", 2]]"
        "|[[\"A\", 3], [\"b\", 2], [\"a\", 1]]");
    EXPECT_EQ(render("{{ d|keys }}|{{ d|values }}|{{ d|attr('a') }}", ctx), "[\"b\", \"A\", \"a\"]|[2, 3, 1]|1");
    EXPECT_EQ(render("{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}", ctx), "A3a1b2");
}

TEST(jinja_filters, StringFilterPrintsAsOutputDoes) {
    EXPECT_EQ(
        render("{{ 1.0|string }}|{{ true|string }}|{{ [1, 'a']|string }}|[{{ none|string }}]|{{ 12|string|length }}"),
        "1.0|true|[1, \"a\"]|[]|2");
}

TEST(jinja_filters, FromJson) {
    EXPECT_EQ(render("{% set a = s|from_json %}{{ a.city }}|{{ a.n + 1 }}|{{ a.tags|join }}",
                     {{"s", "{\"city\": \"Paris\", \"n\": 2, \"tags\": [\"x\", \"y\"]}"}}),
              "Paris|3|xy");
    EXPECT_TRUE(contains(error_of("{{ '{bad'|from_json }}"), "from_json: the text is not valid JSON"));
}
