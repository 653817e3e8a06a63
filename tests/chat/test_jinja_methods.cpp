// Methods of strings, lists and dicts.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

TEST(jinja_methods, StringMethodsHuggingFaceJinjaHas) {
    EXPECT_EQ(render("{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'ab cd'.title() }}|{{ 'aB'.capitalize() }}"),
              "ABab|Ab Cd|AB");
    EXPECT_EQ(render("[{{ ' x '.strip() }}][{{ ' x '.lstrip() }}][{{ ' x '.rstrip() }}]|[{{ '\nx\n\n'.strip('\n') }}]"
                     "|[{{ 'xyzx'.strip('xz') }}]|[{{ 'aab'.lstrip('a') }}]"),
              "[x][x ][ x]|[x]|[y]|[b]");
    EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('bc') }}{{ "
                     "'abc'.endswith('b') }}"),
              "truetruetruefalse");
    EXPECT_EQ(
        render(
            "{{ ' a  b '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ ' a b c'.split(none, 1) }}"
            "|{{ 'a b'.split(maxsplit=0) }}"),
        "[\"a\", \"b\"]|[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b,c\"]|[\"a\", \"b c\"]|[\"a b\"]");
    EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b') }}|{{ 'aaa'.replace('a', 'b', 1) }}|{{ 'ab'.replace('', '-') }}|{{ "
                     "'ab'.length }}"),
              "bbb|baa|-a-b-|2");
    EXPECT_TRUE(contains(error_of("{{ 'a'.split('') }}"), "split(): empty separator"));
}

TEST(jinja_methods, PythonStringMethods) {
    EXPECT_EQ(
        render("{{ 'h\xC3\xA9llo'.find('l') }}{{ 'hello'.find('z') }}{{ 'hello'.rfind('l') }}{{ 'hello'.index('e') }}"
               "{{ 'a,a,a'.count('a') }}"),
        "2-1313");
    EXPECT_EQ(render("{{ '<{}|{}>'.format(1, 'x') }}|{{ '{1}{0}'.format('a', 'b') }}|{{ '{n}!'.format(n=5) }}|{{ "
                     "'{{}}'.format() }}"),
              "<1|x>|ba|5!|{}");
    EXPECT_EQ(render("{{ '-'.join(['a', 'b']) }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ 'x'.removeprefix('x') }}{{ "
                     "'ab'.removesuffix('b') }}"),
              "a-b|[\"a\", \"b\", \"c\"]|a");
    EXPECT_EQ(render("{{ '12'.isdigit() }}{{ '1a'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'ab'.islower() "
                     "}}{{ 'AB'.isupper() }}"),
              "truefalsetruetruetruetrue");
    EXPECT_TRUE(contains(error_of("{{ '{:>4}'.format(1) }}"), "format specs are not supported"));
}

TEST(jinja_methods, ListMethodsMutate) {
    EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% set _ = ns.l.append(1) %}{% set _ = ns.l.append(2) %}"
                     "{% set _ = ns.l.insert(0, 0) %}{% set _ = ns.l.extend([3, 4]) %}{{ ns.l }}|{{ ns.l.pop() }}{{ "
                     "ns.l.pop(0) }}"
                     "|{{ ns.l }}|{{ ns.l.index(2) }}{{ ns.l.count(2) }}"),
              "[0, 1, 2, 3, 4]|40|[1, 2, 3]|11");
    EXPECT_EQ(render("{{ [1, 2].length }}|{% set l = [1, 2] %}{% set _ = l.extend(l) %}{{ l }}|{{ l + l }}"),
              "2|[1, 2, 1, 2]|[1, 2, 1, 2, 1, 2, 1, 2]");
    EXPECT_TRUE(contains(error_of("{{ [].pop() }}"), "pop() from an empty list"));
}

TEST(jinja_methods, DictMethods) {
    const json ctx = {{"d", {{"a", 1}, {"items", "a key called items"}}}};
    EXPECT_EQ(
        render("{{ d.get('a') }}|{{ d.get('z') is none }}|{{ d.get('z', 5) }}|{{ d.keys() }}|{{ d.values()|length }}",
               ctx),
        "1|true|5|[\"a\", \"items\"]|2");
    // A key shadows the method of the same name for d.items, but d.items() still calls the method (as in Python).
    EXPECT_EQ(render("{{ d.items }}|{{ d.items()|length }}|{{ d['items'] }}", ctx),
              "a key called items|2|a key called items");
    EXPECT_EQ(render("{% set x = {'a': 1} %}{% set _ = x.update({'b': 2}, c=3) %}{{ x }}"),
              "{\"a\": 1, \"b\": 2, \"c\": 3}");
}
