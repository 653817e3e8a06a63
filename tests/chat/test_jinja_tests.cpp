// `is` tests, with @huggingface/jinja's meanings where it has the test.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

TEST(jinja_tests, Kinds) {
    const json ctx = {{"d", {{"k", 1}}}, {"l", {1}}, {"s", "x"}, {"i", 3}, {"f", 2.5}, {"b", true}, {"n", nullptr}};
    EXPECT_EQ(
        render("{{ d is mapping }}{{ l is mapping }}{{ namespace() is mapping }}|{{ s is string }}{{ i is string }}"
               "|{{ i is number }}{{ f is number }}{{ b is number }}|{{ i is integer }}{{ f is integer }}"
               "|{{ f is float }}{{ i is float }}|{{ b is boolean }}{{ i is boolean }}|{{ n is none }}{{ x is none }}",
               ctx),
        "truefalsefalse|truefalse|truetruefalse|truefalse|truefalse|truefalse|truefalse");
    // @huggingface/jinja: iterable is a list or a string (not a dict, not a tuple); a sequence also a dict.
    EXPECT_EQ(
        render("{{ l is iterable }}{{ s is iterable }}{{ d is iterable }}{{ (1, 2) is iterable }}{{ x is iterable }}"
               "|{{ l is sequence }}{{ d is sequence }}{{ s is sequence }}{{ i is sequence }}",
               ctx),
        "truetruefalsefalsefalse|truetruetruefalse");
    EXPECT_EQ(
        render(
            "{{ x is defined }}{{ x is undefined }}{{ s is defined }}|{{ range is callable }}{{ s.upper is callable }}"
            "{{ s is callable }}",
            ctx),
        "falsetruetrue|truetruefalse");
}

TEST(jinja_tests, Values) {
    EXPECT_EQ(
        render("{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}|{{ 3 is odd }}{{ 4 is even }}"
               "{{ 4 is odd }}|{{ 'abc' is lower }}{{ 'aBc' is lower }}{{ 'ABC' is upper }}{{ 5 is upper }}"),
        "truefalsetruefalse|truetruefalse|truefalsetruefalse");
    EXPECT_EQ(
        render(
            "{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}|{{ 2 is eq 2.0 }}{{ 2 is equalto '2' }}{{ 2 is ne 3 }}"
            "|{{ 1 is lt 2 }}{{ 2 is le 2 }}{{ 3 is gt 4 }}{{ 4 is ge 4 }}|{{ 2 is in [1, 2] }}{{ 'a' is in 'bcd' }}"),
        "truefalse|truefalsetrue|truetruefalsetrue|truefalse");
    EXPECT_EQ(render("{{ x is not defined }}{{ 1 is not odd }}"), "truefalse");
    EXPECT_TRUE(contains(error_of("{{ 'a' is odd }}"), "the odd test needs a number"));
}
