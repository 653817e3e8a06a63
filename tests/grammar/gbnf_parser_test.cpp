// GBNF parsing: llama.cpp's syntax (rules, alternatives, groups, repetitions, literals, classes, escapes, comments,
// newlines), the printed form round-tripping, and every refusal naming its line and column.
#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/matcher.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using strata::grammar::element_kind;
using strata::grammar::grammar;
using strata::grammar::matcher;
using strata::grammar::parse_gbnf;

// The text matches the whole grammar.
bool matches(const std::string &gbnf, const std::string &text) {
    matcher m(parse_gbnf(gbnf));
    if (!m.accepts(text)) return false;
    m.advance(text);
    return m.can_end();
}

// The error message of parsing `gbnf` (empty when it parses).
std::string parse_error(const std::string &gbnf) {
    try {
        parse_gbnf(gbnf);
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

#define EXPECT_PARSE_ERROR(gbnf, ...)                                                                                 \
    do {                                                                                                              \
        const std::string err_ = parse_error(gbnf);                                                                   \
        ASSERT_FALSE(err_.empty()) << "parsed: " << (gbnf);                                                           \
        for (const char *part_ : {__VA_ARGS__}) EXPECT_NE(err_.find(part_), std::string::npos) << err_;               \
    } while (0)

TEST(grammar_gbnf_parser, RulesAlternativesAndReferences) {
    const auto g = parse_gbnf("root ::= greeting \" \" name\n"
                              "greeting ::= \"hello\" | \"hi\"\n"
                              "name ::= [A-Z] [a-z]+\n");
    EXPECT_EQ(g->rule_name(g->root()), "root");
    EXPECT_GE(g->rule_count(), 3u);
    EXPECT_TRUE(matches("root ::= greeting \" \" name\ngreeting ::= \"hello\" | \"hi\"\nname ::= [A-Z] [a-z]+",
                        "hello World"));
    EXPECT_TRUE(matches("root ::= g \" \" n\ng ::= \"hello\" | \"hi\"\nn ::= [A-Z] [a-z]+", "hi Bob"));
    EXPECT_FALSE(matches("root ::= g \" \" n\ng ::= \"hello\" | \"hi\"\nn ::= [A-Z] [a-z]+", "hey Bob"));
    EXPECT_FALSE(matches("root ::= g \" \" n\ng ::= \"hello\" | \"hi\"\nn ::= [A-Z] [a-z]+", "hi bob"));
}

TEST(grammar_gbnf_parser, RuleNamesUseLettersDigitsAndDashes) {
    EXPECT_TRUE(matches("root ::= check-mate2\ncheck-mate2 ::= \"#\"", "#"));
    EXPECT_TRUE(matches("root ::= A-1 B\nA-1 ::= \"a\"\nB ::= \"b\"", "ab"));
}

TEST(grammar_gbnf_parser, CommentsNewlinesAndLineEndings) {
    const std::string g = "# a comment line\n"
                          "root ::= ( # comment inside a group\n"
                          "    \"a\"\n"
                          "    | \"b\" ) item | # a newline after | continues the rule\n"
                          "  \"c\" # trailing comment\n"
                          "\n"
                          "item ::= \"x\" # last\n";
    EXPECT_TRUE(matches(g, "ax"));
    EXPECT_TRUE(matches(g, "bx"));
    EXPECT_TRUE(matches(g, "c"));
    EXPECT_FALSE(matches(g, "a"));
    EXPECT_TRUE(matches("root ::= \"a\"\r\nrest ::= \"b\"\r\n", "a"));
    EXPECT_TRUE(matches("root ::= \"a\"", "a")); // no final newline
}

TEST(grammar_gbnf_parser, StringEscapes) {
    EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
    EXPECT_TRUE(matches(R"(root ::= "\n\r\t\\\"\[\]\-")", "\n\r\t\\\"[]-"));
    EXPECT_TRUE(matches("root ::= \"h\xC3\xA9llo \xE4\xB8\x96\"", "h\xC3\xA9llo \xE4\xB8\x96")); // raw UTF-8
    EXPECT_TRUE(matches(R"(root ::= "a" "" "b")", "ab"));                                        // "" matches nothing
}

TEST(grammar_gbnf_parser, CharacterClasses) {
    const std::string g = R"(root ::= [a-cx] [^0-9\n] [\]\-\\] [-z] [z-] .)";
    EXPECT_TRUE(matches(g, "b!]-z\xE2\x82\xAC"));
    EXPECT_TRUE(matches(g, "xZ\\zz."));
    EXPECT_FALSE(matches(g, "d!]-zz"));   // d not in [a-cx]
    EXPECT_FALSE(matches(g, "a5]-zz"));   // 5 is in [^0-9]'s complement
    EXPECT_FALSE(matches(g, "a\n]-zz"));  // newline excluded
    EXPECT_FALSE(matches(g, "a!a-zz"));   // a not in [\]\-\\]
    EXPECT_TRUE(matches(R"(root ::= [\x00-\x1F])", std::string(1, '\x05')));
    EXPECT_TRUE(matches(R"(root ::= [ぁ-ゟ]+)", "\xE3\x81\x82\xE3\x82\x9F"));
}

TEST(grammar_gbnf_parser, RepetitionOperators) {
    const std::string g = R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{0,2} ("gh"){1,2})";
    EXPECT_TRUE(matches(g, "bddegh"));
    EXPECT_TRUE(matches(g, "aaabbbcddeeeffghgh"));
    EXPECT_FALSE(matches(g, "ddegh"));       // b+ needs one
    EXPECT_FALSE(matches(g, "bdegh"));       // d{2}
    EXPECT_FALSE(matches(g, "bdddegh"));     // d{2}
    EXPECT_FALSE(matches(g, "bddgh"));       // e{1,}
    EXPECT_FALSE(matches(g, "bddefffgh"));   // f{0,2}
    EXPECT_FALSE(matches(g, "bddeghghgh"));  // (gh){1,2}
    EXPECT_FALSE(matches(g, "bccddegh"));    // c?
    EXPECT_TRUE(matches(R"(root ::= "ab"{3})", "ababab"));  // a multi-character literal repeats whole
    EXPECT_FALSE(matches(R"(root ::= "ab"{3})", "abbb"));
    EXPECT_TRUE(matches(R"(root ::= "x" "a"{0} "y")", "xy"));
    EXPECT_TRUE(matches(R"(root ::= ("a" "b"){2}?)", "")); // a repetition of a repetition
    EXPECT_TRUE(matches(R"(root ::= ("a" "b"){2}?)", "abab"));
    EXPECT_FALSE(matches(R"(root ::= ("a" "b"){2}?)", "ab"));
    EXPECT_TRUE(matches("root ::= [0-9]{ 1 , 3 }", "123")); // spaces inside braces
}

TEST(grammar_gbnf_parser, ExtremeRepetitionCountsStayCheap) {
    const auto g = parse_gbnf("root ::= [a-z]{0,10000} [0-9]{10000}");
    EXPECT_LT(g->elements().size(), 100000u);
    matcher m(g);
    m.advance(std::string(9999, 'q'));
    EXPECT_TRUE(m.accepts("z"));
    m.advance(std::string(10000, '7'));
    EXPECT_TRUE(m.can_end());
}

TEST(grammar_gbnf_parser, PrintedFormParsesToTheSameGrammar) {
    const std::string text = R"(root ::= "{" ws (pair ("," ws pair)*)? "}"
pair ::= str ws ":" ws [0-9]+ ws
str ::= "\"" ([^"\\] | "\\" ["\\nt])* "\""
ws ::= [ \t\n]{0,3}
odd ::= [\x00-\x08\x7F] | [^\U0010FFFF] | "\u00e9x" | [-\]^] | .
)";
    const auto g1 = parse_gbnf(text);
    const std::string printed = g1->to_gbnf();
    const auto g2 = parse_gbnf(printed);
    EXPECT_EQ(g2->to_gbnf(), printed);
    EXPECT_EQ(g1->rule_count(), g2->rule_count());
    EXPECT_TRUE(matches(printed, "{\"a\\n\" : 12, \"b\":3}"));
}

TEST(grammar_gbnf_parser, CompiledFormIsCompact) {
    const auto g = parse_gbnf("root ::= \"ab\" | [a-z] x\nx ::= \"a\"");
    // Every alternative ends with an end element; literals share their classes.
    size_t ends = 0;
    for (const auto &e : g->elements()) ends += e.kind == element_kind::end;
    EXPECT_EQ(ends, 3u);
    EXPECT_EQ(g->char_class_count(), 3u); // a, b, [a-z]
}

TEST(grammar_gbnf_errors, EmptyGrammar) {
    EXPECT_PARSE_ERROR("", "GBNF grammar is empty");
    EXPECT_PARSE_ERROR("  # only a comment\n\n", "GBNF grammar is empty");
}

TEST(grammar_gbnf_errors, NoRootRule) { EXPECT_PARSE_ERROR("start ::= \"a\"", "no rule named 'root'"); }

TEST(grammar_gbnf_errors, UndefinedRuleNamesItsFirstUse) {
    EXPECT_PARSE_ERROR("root ::= \"{\" valeu \"}\"\nvalue ::= \"1\"", "line 1, column 14", "undefined rule 'valeu'",
                       "valeu ::= ...");
    EXPECT_PARSE_ERROR("root ::= a\na ::= \"x\"\n  # c\nb ::= a c", "line 4, column 9", "undefined rule 'c'");
}

TEST(grammar_gbnf_errors, DuplicateRule) {
    EXPECT_PARSE_ERROR("root ::= a\na ::= \"x\"\na ::= \"y\"", "line 3, column 1", "rule 'a' is defined twice",
                       "first at line 2, column 1");
}

TEST(grammar_gbnf_errors, UnbalancedParentheses) {
    EXPECT_PARSE_ERROR("root ::= (\"a\" | \"b\"", "line 1, column 20", "expected ')' to close the '(' at line 1, "
                                                                      "column 10");
    EXPECT_PARSE_ERROR("root ::= \"a\")", "line 1, column 13", "unexpected ')' without a matching '('");
    EXPECT_PARSE_ERROR("root ::= ( \"a\"\nnext ::= \"b\"", "line 2, column 1", "expected ')' before the definition "
                                                                             "of rule 'next'");
    EXPECT_PARSE_ERROR("root ::= (\"a\" ]", "expected ')'", "found ']'");
}

TEST(grammar_gbnf_errors, BadEscapes) {
    EXPECT_PARSE_ERROR(R"(root ::= "a\qb")", "line 1, column 12", "unknown escape '\\q'");
    EXPECT_PARSE_ERROR(R"(root ::= "\x4")", "line 1, column 14", "exactly 2 hex digits");
    EXPECT_PARSE_ERROR(R"(root ::= [\u12G4])", "exactly 4 hex digits");
    EXPECT_PARSE_ERROR(R"(root ::= "\U00110000")", "line 1, column 11", "beyond U+10FFFF");
}

TEST(grammar_gbnf_errors, LiteralsAndClasses) {
    EXPECT_PARSE_ERROR("root ::= \"abc", "line 1, column 10", "unterminated string literal");
    EXPECT_PARSE_ERROR("root ::= [abc", "line 1, column 10", "unterminated character class");
    EXPECT_PARSE_ERROR("root ::= []", "empty character class []");
    EXPECT_PARSE_ERROR("root ::= [^]", "empty character class [^]");
    EXPECT_PARSE_ERROR("root ::= [z-a]", "line 1, column 11", "start comes after its end");
    EXPECT_PARSE_ERROR("root ::= \"\xC3(\"", "line 1, column 11", "invalid UTF-8");
    EXPECT_PARSE_ERROR("root ::= \"\xED\xA0\x80\"", "invalid UTF-8"); // an encoded surrogate
}

TEST(grammar_gbnf_errors, RuleSyntax) {
    EXPECT_PARSE_ERROR("root = \"a\"", "line 1, column 6", "expected '::=' after the rule name 'root'");
    EXPECT_PARSE_ERROR("root ::= \"a\"\n| \"b\"", "line 2, column 1", "cannot start with '|'");
    EXPECT_PARSE_ERROR("root ::= \"a\" @", "line 1, column 14", "unexpected character '@'");
    EXPECT_PARSE_ERROR("root_x ::= \"a\"", "expected '::='"); // '_' is not a name character in GBNF
}

TEST(grammar_gbnf_errors, Repetitions) {
    EXPECT_PARSE_ERROR("root ::= * \"a\"", "line 1, column 10", "'*' has nothing to repeat");
    EXPECT_PARSE_ERROR("root ::= \"\"+", "'+' has nothing to repeat");
    EXPECT_PARSE_ERROR("root ::= \"a\"{5,2}", "line 1, column 13", "maximum below its minimum");
    EXPECT_PARSE_ERROR("root ::= \"a\"{x}", "expected a number in the repetition");
    EXPECT_PARSE_ERROR("root ::= \"a\"{2,3", "expected '}'");
    EXPECT_PARSE_ERROR("root ::= \"a\"{10001}", "above the limit of 10000");
    EXPECT_PARSE_ERROR("root ::= \"a\"{1,99999999999999999999999}", "above the limit of 10000");
}

TEST(grammar_gbnf_errors, TokenReferencesAreRefused) {
    EXPECT_PARSE_ERROR("root ::= <[1000]> \"a\"", "line 1, column 10", "token references");
    EXPECT_PARSE_ERROR("root ::= !<think>", "token references");
}

TEST(grammar_gbnf_errors, LeftRecursion) {
    EXPECT_PARSE_ERROR("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]", "line 2, column 1",
                       "left recursion in rule 'expr'", "expr -> expr");
    EXPECT_PARSE_ERROR("root ::= a\na ::= b \"x\"\nb ::= c\nc ::= a | \"y\"", "left recursion", "a -> b -> c -> a");
    // Through a rule that can be empty.
    EXPECT_PARSE_ERROR("root ::= opt root \"x\" | \"y\"\nopt ::= \"o\"?", "line 1, column 1",
                       "left recursion in rule 'root'");
    // A repetition of something that can be empty loops the same way.
    EXPECT_PARSE_ERROR("root ::= (\"a\"?)*", "left recursion in rule 'root'", "(x?)*");
    EXPECT_PARSE_ERROR("root ::= (\"a\"*)+", "left recursion");
}

TEST(grammar_gbnf_errors, GrammarSizeIsBounded) {
    std::string big = "root ::= x\nx ::=";
    for (int i = 0; i < 200; ++i) big += " [a-z]{0,9000}";
    EXPECT_PARSE_ERROR(big, "grammar too large");
}

TEST(grammar_gbnf_errors, DeepGroupsAreRefusedNotRecursedInto) {
    const std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
    EXPECT_PARSE_ERROR(deep, "groups nested deeper than 200 levels");
    const std::string ok = "root ::= " + std::string(150, '(') + "\"a\"" + std::string(150, ')');
    EXPECT_TRUE(matches(ok, "a"));
}

TEST(grammar_gbnf_errors, ColumnsCountCharactersNotBytes) {
    EXPECT_PARSE_ERROR("root ::= \"\xC3\xA9\xC3\xA9\" x", "line 1, column 15", "undefined rule 'x'");
}

} // namespace
