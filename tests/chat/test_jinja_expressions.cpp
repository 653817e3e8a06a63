// Expressions and how values print: arithmetic with JavaScript numbers, equality, `in`, concatenation, slicing,
// undefined and none, and the JSON-like printing of lists and dicts.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

TEST(jinja_expressions, NumbersPrintAsHuggingFaceJinjaPrintsThem) {
    EXPECT_EQ(render("{{ 1 }}|{{ 1.0 }}|{{ 1.5 }}|{{ -0.0 }}|{{ 0.1 + 0.2 }}|{{ 10 ** 21 }}|{{ 10.0 ** 21 }}"),
              "1|1.0|1.5|-0.0|0.30000000000000004|1e+21|1e+21");
    EXPECT_EQ(render("{{ 1 / 10000000 }}|{{ 100.0 }}|{{ 2 ** 53 + 1 }}|{{ [1.0, 2.5] }}|{{ 'x' ~ 1.0 }}"),
              "1e-7|100.0|9007199254740992|[1, 2.5]|x1");
    // Whole numbers from JSON are integers, as JavaScript cannot tell 1.0 from 1.
    EXPECT_EQ(
        render("{{ a }}|{{ b }}|{{ a is integer }}|{{ c }}", {{"a", 1.0}, {"b", 2.5}, {"c", 12345678901234567890ull}}),
        "1|2.5|true|12345678901234567000");
}

TEST(jinja_expressions, Arithmetic) {
    EXPECT_EQ(render("{{ 7 / 2 }}|{{ 6 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}"),
              "3.5|3.0|3|-4|1|-1|1.5");
    EXPECT_EQ(render("{{ 2 ** -1 }}|{{ 2 ** 0.5 }}|{{ true + 1 if false else 2 * 3.0 }}|{{ 1 / 0 }}|{{ 5 % 0 }}"),
              "0.5|1.4142135623730951|6.0|Infinity|NaN");
    EXPECT_EQ(render("{{ 'ab' * 2 }}|{{ 2 * 'c' }}"), "abab|cc");
    EXPECT_TRUE(contains(error_of("{{ 0 ** -1 }}"), "0 cannot be raised to a negative power"));
    EXPECT_TRUE(contains(error_of("{{ 'a' - 1 }}"), "cannot apply '-' to string and integer"));
}

TEST(jinja_expressions, ConcatenationUsesJavaScriptText) {
    EXPECT_EQ(render("{{ 'a' ~ 1 ~ true ~ [1, 'b'] ~ {'k': 1} }}"), "a1true1,b[object Map]");
    EXPECT_EQ(render("{{ 'a' + 1 }}|{{ 1 + 'a' }}|{{ [1] + [2] }}"), "a1|1a|[1, 2]");
    // Undefined and none concatenate as Python prints them ("" and "None"); @huggingface/jinja refuses.
    EXPECT_EQ(render("{{ 'a' ~ missing ~ 'b' }}|{{ 'a' ~ none }}"), "ab|aNone");
    EXPECT_TRUE(contains(error_of("{{ 'a' + none }}"), "cannot apply '+' to none"));
}

TEST(jinja_expressions, EqualityIsJavaScriptsLooseEquality) {
    EXPECT_EQ(
        render("{{ 1 == 1.0 }}|{{ '1' == 1 }}|{{ 1 == true }}|{{ '' == 0 }}|{{ missing == none }}|{{ none == false }}"),
        "true|true|true|true|true|false");
    // Lists and dicts compare by identity.
    EXPECT_EQ(render("{{ [1] == [1] }}|{% set a = [1] %}{{ a == a }}|{{ m[0] == m[0] }}|{{ m[0] == m[1] }}",
                     {{"m", json::array({{{"c", 1}}, {{"c", 1}}})}}),
              "false|true|true|false");
}

TEST(jinja_expressions, Membership) {
    EXPECT_EQ(
        render("{{ 'b' in 'abc' }}|{{ 'k' in {'k': 1} }}|{{ 2 in [1, 2] }}|{{ '2' in [1, 2] }}|{{ 3 not in [1] }}"),
        "true|true|true|false|true");
    EXPECT_EQ(render("{{ 'x' in missing }}|{{ 'x' not in missing }}"), "false|true");
}

TEST(jinja_expressions, Comparisons) {
    EXPECT_EQ(render("{{ 1 < 2 }}|{{ 2.5 >= 2 }}|{{ 'abc' < 'abd' }}|{{ true > 0 }}"), "true|true|true|true");
    EXPECT_TRUE(contains(error_of("{{ [1] < [2] }}"), "cannot apply '<' to list and list"));
}

TEST(jinja_expressions, LogicReturnsOperands) {
    EXPECT_EQ(render("{{ 1 and 2 }}|{{ 0 and 2 }}|{{ '' or 'x' }}|{{ none or [] }}|{{ not [] }}|{{ not {} }}"),
              "2|0|x|[]|true|true");
    EXPECT_EQ(render("{{ 'y' if namespace() else 'n' }}|{{ 'y' if 0.0 else 'n' }}|{{ 'y' if ' ' else 'n' }}"), "y|n|y");
    EXPECT_EQ(render("[{{ 'a' if false }}]"), "[]");
}

TEST(jinja_expressions, IndexingAndSlicing) {
    const json ctx = {{"xs", {1, 2, 3, 4, 5}}, {"s", "h\xC3\xA9llo\xF0\x9F\x98\x80"}};
    EXPECT_EQ(
        render("{{ xs[0] }}{{ xs[-1] }}{{ xs[9] }}|{{ xs[1:3] }}|{{ xs[::-1] }}|{{ xs[-2:] }}|{{ xs[::2] }}", ctx),
        "15|[2, 3]|[5, 4, 3, 2, 1]|[4, 5]|[1, 3, 5]");
    // @huggingface/jinja's slice with a negative step clamps stop -1 to the start: xs[3:-1:-1] is xs[3::-1].
    EXPECT_EQ(render("{{ xs[3:-1:-1] }}|{{ xs[::0] }}|{{ xs[10:] }}", ctx), "[4, 3, 2, 1]|[]|[]");
    // Strings index by UTF-16 unit, slice by character, and have a length in UTF-16 units.
    EXPECT_EQ(render("{{ s[1] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s|length }}|{{ s.length }}", ctx),
              "\xC3\xA9|\xEF\xBF\xBD|\xC3\xA9l|\xF0\x9F\x98\x80oll\xC3\xA9h|7|7");
    EXPECT_EQ(render("{{ xs.0 }}{{ xs.-1 }}|{{ {'a': 1}['a'] }}|{{ {'a': 1}[0] }}", ctx), "15|1|");
    EXPECT_TRUE(contains(error_of("{{ xs[1.5:] }}", ctx), "a slice start must be an integer"));
    EXPECT_TRUE(contains(error_of("{{ 5[0:1] }}"), "cannot slice a integer"));
}

TEST(jinja_expressions, UndefinedIsEmptyFalsyAndForgiving) {
    EXPECT_EQ(
        render("[{{ missing }}]|{{ missing is defined }}|{{ missing.attr.deeper }}|{{ missing['k'] is undefined }}"),
        "[]|false||true");
    EXPECT_EQ(
        render("{% if missing %}y{% else %}n{% endif %}|{{ missing|default('d') }}|{{ none }}|{{ none is none }}"),
        "n|d||true");
    EXPECT_TRUE(contains(error_of("{{ missing[0] }}"), "cannot index undefined with a integer"));
    EXPECT_TRUE(contains(error_of("{{ missing() }}"), "'missing' is undefined, so it cannot be called"));
    EXPECT_TRUE(contains(error_of("{{ 'abc'.nope() }}"), "'.nope' is undefined, so it cannot be called"));
    EXPECT_TRUE(contains(error_of("{{ 1 + missing }}"), "cannot apply '+' to an undefined value"));
}

TEST(jinja_expressions, ListsAndDictsPrintAsJson) {
    EXPECT_EQ(render("{{ [1, 'a', none, true, [2]] }}|{{ {'k': 'v', 'n': none} }}|{{ (1, 'x') }}"),
              "[1, \"a\", null, true, [2]]|{\"k\": \"v\", \"n\": null}|[1, \"x\"]");
    EXPECT_EQ(render("{{ [missing] }}|{{ {'u': missing} }}"), "[undefined]|{\"u\": undefined}");
    // Dicts keep the order of their keys.
    EXPECT_EQ(render("{{ d }}|{{ d|tojson }}", {{"d", {{"z", 1}, {"a", 2}, {"m", 3}}}}),
              "{\"z\": 1, \"a\": 2, \"m\": 3}|{\"z\": 1, \"a\": 2, \"m\": 3}");
}
