#include "grammar/gbnf_parser.hpp"

#include "common/error.hpp"
#include "common/hex.hpp"
#include "grammar/utf8_decoder.hpp"

#include <fmt/format.h>

#include <map>
#include <unordered_map>
#include <unordered_set>

namespace strata::grammar {

namespace {

constexpr size_t npos = static_cast<size_t>(-1);

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A byte of the grammar text for an error message: 'c', or its hex value when it does not print.
std::string shown_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7F) return fmt::format("byte 0x{:02X}", u);
    return fmt::format("'{}'", c);
}

using sequence = std::vector<element>;

struct rule_info {
    std::string name;      // empty for a group or repetition until the end (named after `owner` then)
    uint32_t owner = 0;    // the named rule a group or repetition appears in
    size_t defined_at = npos;
    size_t first_use = npos;
    std::vector<sequence> alternatives;
    bool synthesized = false;
};

class parser {
  public:
    explicit parser(std::string_view text) : text_(text) {}

    std::shared_ptr<const grammar> run() {
        skip_space(true);
        while (!eof()) parse_rule();
        if (rules_.empty())
            fail("GBNF grammar is empty: it has no rules; write at least one, starting with `root ::= ...`");
        for (const rule_info &r : rules_) {
            if (!r.synthesized && r.defined_at == npos)
                error_at(r.first_use, fmt::format("undefined rule '{}'; define it with a line `{} ::= ...` or fix the "
                                                  "name",
                                                  r.name, r.name));
        }
        const auto root = symbols_.find("root");
        if (root == symbols_.end())
            fail("GBNF grammar has no rule named 'root': matching starts there; add a line `root ::= ...`");
        return std::make_shared<const grammar>(build(root->second));
    }

  private:
    // --- positions and errors ---

    bool eof() const { return pos_ >= text_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

    [[noreturn]] void error_at(size_t at, const std::string &what) const {
        at = std::min(at, text_.size());
        size_t line = 1, column = 1;
        for (size_t i = 0; i < at; ++i) {
            const auto c = static_cast<unsigned char>(text_[i]);
            if (c == '\n') {
                ++line;
                column = 1;
            } else if ((c & 0xC0) != 0x80) {
                ++column; // count characters, not UTF-8 continuation bytes
            }
        }
        std::string near;
        for (size_t i = at; i < text_.size() && i < at + 40 && text_[i] != '\n' && text_[i] != '\r'; ++i) {
            const auto c = static_cast<unsigned char>(text_[i]);
            near += c < 0x20 || c == 0x7F ? '?' : static_cast<char>(c);
        }
        while (!near.empty() && (static_cast<unsigned char>(near.back()) & 0xC0) == 0x80) near.pop_back(); // cut
        while (!near.empty() && static_cast<unsigned char>(near.back()) >= 0xC0) near.pop_back();          // whole
        const std::string where = near.empty() ? (at >= text_.size() ? " (at the end of the text)" : "")
                                               : " (near '" + near + "')";
        fail("GBNF grammar, line {}, column {}: {}{}", line, column, what, where);
    }
    [[noreturn]] void error(const std::string &what) const { error_at(pos_, what); }

    std::string line_col(size_t at) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < at && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                column = 1;
            } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
                ++column;
            }
        }
        return fmt::format("line {}, column {}", line, column);
    }

    // --- lexical helpers ---

    // Spaces, tabs and comments; newlines too when `newline_ok` (inside groups, after `::=` and `|`).
    void skip_space(bool newline_ok) {
        while (!eof()) {
            const char c = peek();
            if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
                ++pos_;
            } else if (c == '#') {
                while (!eof() && peek() != '\r' && peek() != '\n') ++pos_;
            } else {
                break;
            }
        }
    }

    std::string_view parse_name() {
        const size_t start = pos_;
        while (!eof() && is_name_char(peek())) ++pos_;
        return text_.substr(start, pos_ - start);
    }

    uint32_t parse_hex(size_t digits, char escape) {
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i) {
            const char c = peek();
            const int d = hex_digit_value(c);
            if (d < 0)
                error(fmt::format("escape \\{} needs exactly {} hex digits (0-9, a-f), e.g. \\{}{}", escape, digits,
                                  escape, std::string(digits, '0')));
            v = (v << 4) | static_cast<uint32_t>(d);
            ++pos_;
        }
        return v;
    }

    // One character of a string literal or class: an escape or one UTF-8 encoded character.
    uint32_t parse_char() {
        const size_t start = pos_;
        if (peek() == '\\') {
            ++pos_;
            if (eof()) error_at(start, "a backslash at the end of the grammar starts no escape");
            const char e = peek();
            ++pos_;
            uint32_t v = 0;
            switch (e) {
            case 'x': v = parse_hex(2, 'x'); break;
            case 'u': v = parse_hex(4, 'u'); break;
            case 'U': v = parse_hex(8, 'U'); break;
            case 't': return '\t';
            case 'r': return '\r';
            case 'n': return '\n';
            case '\\':
            case '"':
            case '[':
            case ']':
            case '-': return static_cast<uint32_t>(e);
            default: {
                std::string shown(1, e);
                if (static_cast<unsigned char>(e) < 0x20 || static_cast<unsigned char>(e) >= 0x7F)
                    shown = fmt::format("\\x{:02X}", static_cast<unsigned char>(e));
                error_at(start, fmt::format("unknown escape '\\{}'; the escapes are \\n \\r \\t \\\\ \\\" \\[ \\] \\- "
                                            "\\xHH \\uHHHH \\UHHHHHHHH",
                                            shown));
            }
            }
            if (v > max_code_point)
                error_at(start, fmt::format("code point U+{:X} is beyond U+10FFFF, the last Unicode code point", v));
            return v;
        }
        utf8_decoder d;
        while (!eof()) {
            const auto r = d.feed(static_cast<uint8_t>(peek()));
            ++pos_;
            if (r == utf8_decoder::complete) return d.value;
            if (r == utf8_decoder::invalid) break;
        }
        error_at(start, "invalid UTF-8 in the grammar text (the grammar must be UTF-8 encoded)");
    }

    // --- symbols and building blocks ---

    uint32_t symbol(std::string_view name) {
        const auto it = symbols_.find(std::string(name));
        if (it != symbols_.end()) return it->second;
        const auto id = static_cast<uint32_t>(rules_.size());
        rules_.push_back(rule_info{std::string(name)});
        symbols_.emplace(std::string(name), id);
        return id;
    }

    uint32_t new_synthesized_rule() {
        const auto id = static_cast<uint32_t>(rules_.size());
        rule_info r;
        r.owner = current_rule_;
        r.synthesized = true;
        rules_.push_back(std::move(r));
        count_elements(0);
        return id;
    }

    uint32_t intern_class(std::vector<code_point_range> ranges, bool negated) {
        char_class c(std::move(ranges), negated);
        std::vector<uint32_t> key;
        key.reserve(c.ranges().size() * 2);
        for (const code_point_range &r : c.ranges()) {
            key.push_back(r.first);
            key.push_back(r.last);
        }
        const auto it = class_ids_.find(key);
        if (it != class_ids_.end()) return it->second;
        const auto id = static_cast<uint32_t>(classes_.size());
        classes_.push_back(std::move(c));
        class_ids_.emplace(std::move(key), id);
        return id;
    }

    // Every element counts against the grammar size limit, checked as the grammar grows so that a short text with
    // large repetitions cannot make the parser allocate without bound.
    void count_elements(size_t n) {
        n_elements_ += n + 1;
        if (n_elements_ > grammar_limits::max_elements)
            error(fmt::format("grammar too large: more than {} elements once repetitions are unrolled; use fewer or "
                              "smaller {{m,n}} repetitions",
                              grammar_limits::max_elements));
    }

    void add_alternative(uint32_t rule, sequence seq) {
        count_elements(seq.size());
        rules_[rule].alternatives.push_back(std::move(seq));
    }

    // --- grammar structure ---

    void parse_rule() {
        const size_t start = pos_;
        const std::string_view name = parse_name();
        if (name.empty()) {
            if (peek() == ')') error("unexpected ')' without a matching '('");
            if (peek() == '|')
                error("a line cannot start with '|': put '|' at the end of the previous line to continue a rule there, "
                      "or start a rule with `name ::= ...`");
            error("expected a rule definition `name ::= ...` (rule names use letters, digits and '-')");
        }
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=")
            error(fmt::format("expected '::=' after the rule name '{}' (a rule reads `{} ::= ...`)", name, name));
        pos_ += 3;
        const uint32_t id = symbol(name);
        rule_info &r = rules_[id];
        if (r.defined_at != npos)
            error_at(start, fmt::format("rule '{}' is defined twice (first at {}); merge the definitions with '|'",
                                        name, line_col(r.defined_at)));
        r.defined_at = start;
        current_rule_ = id;
        skip_space(true);
        parse_alternates(id, false, 0);
        if (peek() == '\r') {
            pos_ += peek(1) == '\n' ? 2 : 1;
        } else if (peek() == '\n') {
            ++pos_;
        } else if (!eof()) {
            if (peek() == ')') error("unexpected ')' without a matching '('");
            error(fmt::format("unexpected character {} in rule '{}'", shown_char(peek()), name));
        }
        skip_space(true);
    }

    void parse_alternates(uint32_t rule, bool nested, size_t depth) {
        add_alternative(rule, parse_sequence(nested, depth));
        while (peek() == '|') {
            ++pos_;
            skip_space(true);
            add_alternative(rule, parse_sequence(nested, depth));
        }
    }

    sequence parse_sequence(bool nested, size_t depth) {
        sequence seq;
        size_t last_start = npos; // where the last item (what a repetition applies to) starts in seq
        while (!eof()) {
            const size_t here = pos_;
            const char c = peek();
            if (c == '"') {
                ++pos_;
                last_start = seq.size();
                while (peek() != '"') {
                    if (eof()) error_at(here, "unterminated string literal: no closing '\"'");
                    const uint32_t cp = parse_char();
                    seq.push_back({element_kind::terminal, intern_class({{cp, cp}}, false)});
                }
                ++pos_;
            } else if (c == '[') {
                last_start = seq.size();
                seq.push_back({element_kind::terminal, parse_class()});
            } else if (c == '.') {
                ++pos_;
                last_start = seq.size();
                seq.push_back({element_kind::terminal, intern_class({{0, max_code_point}}, false)});
            } else if (c == '<' || c == '!') {
                error("llama.cpp token references (<[id]>, <token>, !<...>) are not supported: this grammar is matched "
                      "against text, without a vocabulary; write the token's text as a string literal instead");
            } else if (is_name_char(c)) {
                const std::string_view name = parse_name();
                const uint32_t id = symbol(name);
                if (rules_[id].first_use == npos) rules_[id].first_use = here;
                last_start = seq.size();
                seq.push_back({element_kind::rule_ref, id});
                if (nested) {
                    // Inside a group a newline does not end the rule, so a missing ')' shows up as the next rule.
                    const size_t save = pos_;
                    skip_space(false);
                    if (text_.substr(pos_, 3) == "::=")
                        error_at(here, fmt::format("expected ')' before the definition of rule '{}': a group is "
                                                   "still open",
                                                   name));
                    pos_ = save;
                }
            } else if (c == '(') {
                if (depth >= max_group_nesting)
                    error(fmt::format("groups nested deeper than {} levels", max_group_nesting));
                ++pos_;
                skip_space(true);
                const uint32_t sub = new_synthesized_rule();
                parse_alternates(sub, true, depth + 1);
                if (peek() != ')')
                    error(eof() ? fmt::format("expected ')' to close the '(' at {}", line_col(here))
                                : fmt::format("expected ')' to close the '(' at {}, found {}", line_col(here),
                                              shown_char(peek())));
                ++pos_;
                last_start = seq.size();
                seq.push_back({element_kind::rule_ref, sub});
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (last_start == npos || last_start == seq.size())
                    error(fmt::format("'{}' has nothing to repeat: put it after a string, class, rule name or group",
                                      c));
                uint64_t min = 0, max = UINT64_MAX;
                ++pos_;
                if (c == '+') {
                    min = 1;
                } else if (c == '?') {
                    max = 1;
                } else if (c == '{') {
                    skip_space(nested);
                    min = parse_count(here);
                    skip_space(nested);
                    if (peek() == '}') {
                        max = min;
                    } else if (peek() == ',') {
                        ++pos_;
                        skip_space(nested);
                        if (is_digit(peek())) {
                            max = parse_count(here);
                            skip_space(nested);
                        }
                        if (max < min)
                            error_at(here, fmt::format("repetition {{{},{}}} has its maximum below its minimum", min,
                                                       max));
                    }
                    if (peek() != '}') error("expected '}' to close the repetition {m}, {m,} or {m,n}");
                    ++pos_;
                }
                last_start = apply_repetition(seq, last_start, min, max);
            } else {
                break; // '|', ')', newline, or something the caller reports
            }
            skip_space(nested);
        }
        return seq;
    }

    uint64_t parse_count(size_t brace) {
        if (!is_digit(peek())) error("expected a number in the repetition {m}, {m,} or {m,n}");
        uint64_t v = 0;
        while (is_digit(peek())) {
            v = v * 10 + static_cast<uint64_t>(peek() - '0');
            ++pos_;
            if (v > grammar_limits::max_repetition)
                error_at(brace, fmt::format("repetition count above the limit of {}; a grammar cannot count that far "
                                            "(use * or + for an unbounded repetition)",
                                            grammar_limits::max_repetition));
        }
        return v;
    }

    uint32_t parse_class() {
        const size_t start = pos_;
        ++pos_; // '['
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<code_point_range> ranges;
        while (peek() != ']') {
            if (eof()) error_at(start, "unterminated character class: no closing ']'");
            const size_t item = pos_;
            const uint32_t first = parse_char();
            uint32_t last = first;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
                ++pos_;
                last = parse_char();
                if (last < first)
                    error_at(item, fmt::format("character range U+{:04X}-U+{:04X} is empty: its start comes after its "
                                               "end",
                                               first, last));
            }
            ranges.push_back({first, last});
        }
        ++pos_;
        if (ranges.empty())
            error_at(start, negated ? "empty character class [^]: to match any character use ." : "empty character "
                                                                                                  "class []");
        return intern_class(std::move(ranges), negated);
    }

    // Rewrites seq[from..] (the last item) as `min` copies followed by what allows up to `max` (UINT64_MAX: no
    // limit), the way llama.cpp does: x* -> R with R ::= x R | "";  x{2,4} -> x x R2 with R2 ::= x R1 | "" and
    // R1 ::= x | "". Returns where the rewritten item starts (a following repetition applies to all of it).
    size_t apply_repetition(sequence &seq, size_t from, uint64_t min, uint64_t max) {
        element item;
        if (seq.size() - from == 1) {
            item = seq[from];
        } else { // a multi-character literal becomes a rule, so copies are one reference each
            const uint32_t r = new_synthesized_rule();
            add_alternative(r, sequence(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end()));
            item = {element_kind::rule_ref, r};
        }
        seq.resize(from);
        count_elements(min);
        for (uint64_t i = 0; i < min; ++i) seq.push_back(item);
        if (max == UINT64_MAX) {
            const uint32_t r = new_synthesized_rule();
            add_alternative(r, {item, {element_kind::rule_ref, r}});
            add_alternative(r, {});
            seq.push_back({element_kind::rule_ref, r});
        } else if (max > min) {
            uint32_t prev = 0;
            for (uint64_t i = 0; i < max - min; ++i) {
                const uint32_t r = new_synthesized_rule();
                sequence body{item};
                if (i > 0) body.push_back({element_kind::rule_ref, prev});
                add_alternative(r, std::move(body));
                add_alternative(r, {});
                prev = r;
            }
            seq.push_back({element_kind::rule_ref, prev});
        }
        return from;
    }

    // --- the result ---

    grammar::parts build(uint32_t root) {
        // Groups and repetitions are named after the rule they appear in: root-1, root-2, ... (skipping names in use).
        std::unordered_set<std::string> taken;
        for (const rule_info &r : rules_)
            if (!r.synthesized) taken.insert(r.name);
        std::vector<uint32_t> counters(rules_.size(), 0);
        for (rule_info &r : rules_) {
            if (!r.synthesized) continue;
            const std::string &base = rules_[r.owner].name;
            do {
                r.name = fmt::format("{}-{}", base, ++counters[r.owner]);
            } while (taken.count(r.name) != 0);
            taken.insert(r.name);
        }

        grammar::parts p;
        p.root = root;
        p.classes = std::move(classes_);
        p.alt_offsets.push_back(0);
        for (rule_info &r : rules_) {
            for (sequence &alt : r.alternatives) {
                p.alt_starts.push_back(static_cast<uint32_t>(p.elements.size()));
                p.elements.insert(p.elements.end(), alt.begin(), alt.end());
                p.elements.push_back({element_kind::end, 0});
            }
            p.alt_offsets.push_back(static_cast<uint32_t>(p.alt_starts.size()));
            p.rule_names.push_back(r.name);
        }

        const std::vector<uint32_t> cycle = find_left_recursion(p);
        if (!cycle.empty()) {
            std::string path;
            for (const uint32_t r : cycle) path += (path.empty() ? "" : " -> ") + rules_[r].name;
            const rule_info &named = rules_[rules_[cycle[0]].synthesized ? rules_[cycle[0]].owner : cycle[0]];
            error_at(named.defined_at,
                     fmt::format("left recursion in rule '{}': {} can come back to itself without matching a character "
                                 "({}), which the matcher cannot follow; make each alternative match something first, "
                                 "e.g. `list ::= item (\",\" item)*` instead of `list ::= list \",\" item | item`, and "
                                 "do not repeat what can be empty, as in (x?)* or (x*)+",
                                 named.name, rules_[cycle[0]].name, path));
        }
        return p;
    }

    std::string_view text_;
    size_t pos_ = 0;
    std::vector<rule_info> rules_;
    std::unordered_map<std::string, uint32_t> symbols_;
    std::vector<char_class> classes_;
    std::map<std::vector<uint32_t>, uint32_t> class_ids_;
    uint32_t current_rule_ = 0;
    size_t n_elements_ = 0;
};

} // namespace

std::shared_ptr<const grammar> parse_gbnf(std::string_view text) { return parser(text).run(); }

} // namespace strata::grammar
