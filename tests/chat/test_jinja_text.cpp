// The text and number rules the engine shares with JavaScript: number printing, parsing, UTF-8 and UTF-16 views,
// whitespace and case mapping.
#include "chat/jinja_text.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace strata::chat::jinja;

TEST(jinja_text, NumbersPrintAsJavaScriptDoes) {
    EXPECT_EQ(js_number_text(1), "1");
    EXPECT_EQ(js_number_text(-0.0), "0");
    EXPECT_EQ(js_number_text(0.1), "0.1");
    EXPECT_EQ(js_number_text(0.1 + 0.2), "0.30000000000000004");
    EXPECT_EQ(js_number_text(1e21), "1e+21");
    EXPECT_EQ(js_number_text(1e20), "100000000000000000000");
    EXPECT_EQ(js_number_text(123e-20), "1.23e-18");
    EXPECT_EQ(js_number_text(0.000001), "0.000001");
    EXPECT_EQ(js_number_text(0.0000001), "1e-7");
    EXPECT_EQ(js_number_text(-1.5), "-1.5");
    EXPECT_EQ(js_number_text(NAN), "NaN");
    EXPECT_EQ(js_number_text(-INFINITY), "-Infinity");
    EXPECT_EQ(js_number_text(9007199254740993.0), "9007199254740992");
}

TEST(jinja_text, FloatsKeepTheirPointWhenWhole) {
    EXPECT_EQ(float_text(1), "1.0");
    EXPECT_EQ(float_text(-0.0), "-0.0");
    EXPECT_EQ(float_text(2.5), "2.5");
    EXPECT_EQ(float_text(1e20), "100000000000000000000.0");
    EXPECT_EQ(float_text(1e21), "1e+21");
    EXPECT_EQ(float_text(INFINITY), "Infinity");
}

TEST(jinja_text, ParsesNumbersLikeParseIntParseFloatAndNumber) {
    EXPECT_EQ(js_parse_int("  42abc"), 42);
    EXPECT_EQ(js_parse_int("-7.9"), -7);
    EXPECT_FALSE(js_parse_int("abc"));
    EXPECT_FALSE(js_parse_int(""));
    EXPECT_EQ(js_parse_float("1e3x"), 1000);
    EXPECT_EQ(js_parse_float(" .5"), 0.5);
    EXPECT_EQ(js_parse_float("-Infinity"), -INFINITY);
    EXPECT_FALSE(js_parse_float("e5"));
    EXPECT_EQ(js_string_to_number(" 12 "), 12);
    EXPECT_EQ(js_string_to_number(""), 0);
    EXPECT_EQ(js_string_to_number("0x1F"), 31);
    EXPECT_TRUE(std::isnan(js_string_to_number("12abc")));
    EXPECT_TRUE(std::isnan(js_string_to_number("+0x1")));
}

TEST(jinja_text, InvalidUtf8BecomesReplacementCharacters) {
    EXPECT_EQ(sanitize_utf8("ok"), "ok");
    EXPECT_EQ(sanitize_utf8("a\xff"
                            "b"),
              "a\xEF\xBF\xBD"
              "b");
    // A truncated 3-byte sequence is one replacement; the byte after it stays.
    EXPECT_EQ(sanitize_utf8("\xE2\x82"
                            "x"),
              "\xEF\xBF\xBD"
              "x");
    // Surrogates encoded in UTF-8 (ED A0 80) are ill-formed: one replacement per byte.
    EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_TRUE(is_valid_utf8("\xF0\x9F\x98\x80"));
    EXPECT_FALSE(is_valid_utf8("\xF0\x9F\x98"));
}

TEST(jinja_text, LengthsAndIndexesCountUtf16Units) {
    EXPECT_EQ(utf16_length("a\xC3\xA9"), 2u);        // aé
    EXPECT_EQ(utf16_length("\xF0\x9F\x98\x80"), 2u); // one emoji, a surrogate pair
    EXPECT_EQ(utf16_unit_at("a\xC3\xA9", 1), "\xC3\xA9");
    EXPECT_EQ(utf16_unit_at("a\xC3\xA9", -2), "a");
    EXPECT_EQ(utf16_unit_at("\xF0\x9F\x98\x80", 0), "\xEF\xBF\xBD"); // half a pair
    EXPECT_FALSE(utf16_unit_at("ab", 2));
    EXPECT_GT(compare_utf16("\xEF\xBF\xBF", "\xF0\x9F\x98\x80"), 0); // U+FFFF after U+1F600 (unit 0xD83D)
    EXPECT_LT(compare_utf16("a", "b"), 0);
}

TEST(jinja_text, WhitespaceIsJavaScriptsSet) {
    EXPECT_EQ(js_trim("\t\n x \xC2\xA0\xE3\x80\x80"), "x"); // NBSP and ideographic space too
    EXPECT_EQ(js_trim_start("  x "), "x ");
    EXPECT_EQ(js_trim_end("  x "), "  x");
    EXPECT_FALSE(is_js_space(0x85)); // Python's whitespace, not JavaScript's
    EXPECT_TRUE(is_js_space(0xFEFF));
}

TEST(jinja_text, CaseMappingIsUnicodes) {
    EXPECT_EQ(to_upper("stra\xC3\x9F"
                       "e"),
              "STRASSE");
    EXPECT_EQ(to_lower("\xC3\x84\xC3\x96"), "\xC3\xA4\xC3\xB6");
    EXPECT_EQ(to_lower("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"), "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82"); // final sigma
    EXPECT_EQ(title_case("hello wORLD don't"), "Hello WORLD Don'T");
    EXPECT_EQ(capitalize_first("hELLO"), "HELLO");
    EXPECT_EQ(capitalize_first("\xC3\x9F"
                               "a"),
              "SSa");
}

TEST(jinja_text, JsonStringsAsJsonStringifyWritesThem) {
    std::string out;
    append_json_string(out, "a\"b\\c\n\x01/\xC3\xA9", false);
    EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001/\xC3\xA9\"");
    out.clear();
    append_json_string(out, "\x7F\xC3\xA9\xF0\x9F\x98\x80", true);
    EXPECT_EQ(out, "\"\\u007f\\u00e9\\ud83d\\ude00\"");
}
