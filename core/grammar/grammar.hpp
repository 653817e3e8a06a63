// The compiled form of a grammar: immutable, shared by every request that uses it (parse once, match many times).
// Like llama.cpp's llama_grammar rules, every rule is a list of alternatives and every alternative a sequence of
// elements that ends with an `end` element; an element is a terminal (a character class) or a reference to a rule.
// Groups and repetitions of the source text have become rules of their own (named after the rule they appear in).
// Positions (indices into elements()) are what the matcher's parse stacks hold.
#pragma once

#include "grammar/char_class.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::grammar {

// The bounds that keep every grammar's work finite, whatever the grammar or the text.
struct grammar_limits {
    // Most elements of a compiled grammar (repetitions {m,n} are unrolled, so they count n times).
    static constexpr size_t max_elements = 1u << 20;
    // Most times a repetition {m,n} may name (m, or n when given).
    static constexpr uint64_t max_repetition = 10000;
    // Deepest parse stack (rule nesting at one point of the text, e.g. JSON brackets open). A continuation that would
    // go deeper is not accepted, so generation is steered to close what it opened.
    static constexpr uint32_t max_stack_depth = 1024;
    // Most parse stacks alive at once (alternatives still possible after some text): more means an ambiguous grammar.
    static constexpr size_t max_stacks = 4096;
    // Most expansion steps for one character (following rule references to the next terminals).
    static constexpr size_t max_steps_per_char = 1u << 16;
};

enum class element_kind : uint8_t { end, rule_ref, terminal };

struct element {
    element_kind kind;
    uint32_t value; // rule id (rule_ref) or character class id (terminal); 0 for end
};

class grammar {
  public:
    // What a grammar is made of; gbnf_parser builds one, grammar's constructor checks it.
    struct parts {
        std::vector<element> elements;
        std::vector<uint32_t> alt_offsets; // rule r's alternatives: alt_starts[alt_offsets[r] .. alt_offsets[r + 1])
        std::vector<uint32_t> alt_starts;  // position of each alternative's first element (an `end` if it is empty)
        std::vector<char_class> classes;
        std::vector<std::string> rule_names;
        uint32_t root = 0;
    };
    // Throws strata::error when the parts are inconsistent (a dangling reference, an alternative without `end`).
    explicit grammar(parts p);

    const std::vector<element> &elements() const { return p_.elements; }
    uint32_t rule_count() const { return static_cast<uint32_t>(p_.rule_names.size()); }
    std::span<const uint32_t> alternatives(uint32_t rule) const {
        return {p_.alt_starts.data() + p_.alt_offsets[rule], p_.alt_offsets[rule + 1] - p_.alt_offsets[rule]};
    }
    const char_class &char_class_at(uint32_t id) const { return p_.classes[id]; }
    size_t char_class_count() const { return p_.classes.size(); }
    const std::string &rule_name(uint32_t rule) const { return p_.rule_names[rule]; }
    uint32_t root() const { return p_.root; }

    // The grammar as GBNF, one rule per line (groups and repetitions appear as the rules they became); parsing it
    // again gives an equivalent grammar.
    std::string to_gbnf() const;
    // One element as GBNF (a class, or a rule name).
    std::string element_text(uint32_t position) const;

  private:
    parts p_;
};

// Rules that can start with themselves without consuming a character (left recursion), which a top-down matcher
// cannot follow: the first such cycle found, as rule ids from a rule back to itself, or empty when there is none.
std::vector<uint32_t> find_left_recursion(const grammar::parts &p);

} // namespace strata::grammar
