#include "grammar/regex_grammar.hpp"

#include "common/error.hpp"
#include "common/hex.hpp"
#include "grammar/char_class.hpp"
#include "grammar/grammar.hpp"
#include "grammar/utf8_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace strata::grammar {

namespace {

constexpr uint64_t no_limit = UINT64_MAX;

struct node {
    enum kind_t : uint8_t { chars, group, repeat, line_start, line_end } kind = chars;
    std::vector<code_point_range> set;              // chars: sorted, disjoint
    std::vector<std::vector<node>> alternatives;    // group; repeat: alternatives[0][0] is what repeats
    uint64_t min = 0, max = 0;                      // repeat
};

std::vector<code_point_range> ranges_of(std::vector<code_point_range> r, bool negated = false) {
    return char_class(std::move(r), negated).ranges();
}

const std::vector<code_point_range> &space_set() {
    static const std::vector<code_point_range> s = ranges_of({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680},
                                                              {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                                              {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
    return s;
}

class regex_parser {
  public:
    explicit regex_parser(std::string_view pattern) : p_(pattern) {}

    std::vector<std::vector<node>> run() {
        if (p_.size() > max_regex_length)
            fail("regular expression of {} bytes is longer than the {} supported", p_.size(), max_regex_length);
        auto alts = alternation();
        if (pos_ < p_.size()) error(pos_, "unbalanced ')'");
        return alts;
    }

  private:
    [[noreturn]] void error(size_t at, const std::string &what) const {
        std::string shown(p_.substr(0, 80));
        fail("regular expression \"{}{}\": {} at offset {}", shown, p_.size() > 80 ? "..." : "", what, at);
    }

    bool eof() const { return pos_ >= p_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

    uint32_t next_code_point() {
        const size_t at = pos_;
        utf8_decoder d;
        while (!eof()) {
            const auto r = d.feed(static_cast<uint8_t>(p_[pos_++]));
            if (r == utf8_decoder::complete) return d.value;
            if (r == utf8_decoder::invalid) break;
        }
        error(at, "invalid UTF-8");
    }

    std::vector<std::vector<node>> alternation() {
        std::vector<std::vector<node>> alts;
        alts.push_back(sequence());
        while (peek() == '|') {
            ++pos_;
            alts.push_back(sequence());
        }
        return alts;
    }

    std::vector<node> sequence() {
        std::vector<node> seq;
        while (!eof() && peek() != '|' && peek() != ')') {
            node n = atom();
            if (quantifier_ahead()) {
                uint64_t min = 0, max = 0;
                const size_t q = pos_;
                quantifier(min, max);
                if (n.kind == node::line_start || n.kind == node::line_end) error(q, "an anchor cannot repeat");
                node r;
                r.kind = node::repeat;
                r.min = min;
                r.max = max;
                r.alternatives.push_back({std::move(n)});
                n = std::move(r);
                if (quantifier_ahead()) error(pos_, "nothing to repeat (a quantifier after a quantifier)");
            }
            seq.push_back(std::move(n));
        }
        return seq;
    }

    // A quantifier starts here: * + ? or {n}, {n,}, {n,m} (a '{' that is not one is a literal).
    bool quantifier_ahead() const {
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') return true;
        if (c != '{') return false;
        size_t i = pos_ + 1;
        const size_t digits_start = i;
        while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
        if (i == digits_start) return false;
        if (i < p_.size() && p_[i] == ',') {
            ++i;
            while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
        }
        return i < p_.size() && p_[i] == '}';
    }

    uint64_t count() {
        uint64_t v = 0;
        const size_t at = pos_;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + static_cast<uint64_t>(peek() - '0');
            ++pos_;
            if (v > grammar_limits::max_repetition)
                error(at, fmt::format("repetition count above the {} a grammar can count to",
                                      grammar_limits::max_repetition));
        }
        return v;
    }

    void quantifier(uint64_t &min, uint64_t &max) {
        const size_t at = pos_;
        const char c = p_[pos_++];
        if (c == '*') {
            min = 0;
            max = no_limit;
        } else if (c == '+') {
            min = 1;
            max = no_limit;
        } else if (c == '?') {
            min = 0;
            max = 1;
        } else { // {n}, {n,}, {n,m}
            min = max = count();
            if (peek() == ',') {
                ++pos_;
                max = peek() == '}' ? no_limit : count();
            }
            ++pos_; // '}'
            if (max < min) error(at, "a repetition {n,m} with m below n");
        }
        if (peek() == '?') ++pos_; // lazy: the same strings
    }

    node chars(std::vector<code_point_range> set) {
        node n;
        n.kind = node::chars;
        n.set = ranges_of(std::move(set));
        return n;
    }

    node atom() {
        const size_t at = pos_;
        const char c = peek();
        switch (c) {
        case '(': return group();
        case '[': return char_class_atom();
        case '.':
            ++pos_;
            return chars(ranges_of({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true));
        case '^':
        case '$': {
            ++pos_;
            if (depth_ > 0)
                error(at, "anchors inside groups are not supported; put ^ and $ at the ends of the pattern");
            node n;
            n.kind = c == '^' ? node::line_start : node::line_end;
            return n;
        }
        case '*':
        case '+':
        case '?': error(at, fmt::format("nothing to repeat before '{}'", c));
        case '\\': {
            ++pos_;
            bool is_set = false;
            std::vector<code_point_range> set;
            const uint32_t cp = escape(false, is_set, set);
            return is_set ? chars(std::move(set)) : chars({{cp, cp}});
        }
        default: {
            if (c == '{' && quantifier_ahead()) error(at, "nothing to repeat before '{'");
            const uint32_t cp = next_code_point();
            return chars({{cp, cp}});
        }
        }
    }

    node group() {
        const size_t open = pos_++;
        if (peek() == '?') {
            if (peek(1) == ':') {
                pos_ += 2;
            } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') { // (?<name>...)
                const size_t close = p_.find('>', pos_);
                if (close == std::string_view::npos) error(open, "unterminated group name");
                pos_ = close + 1;
            } else if (peek(1) == '=' || peek(1) == '!' || peek(1) == '<') {
                error(open, "lookahead and lookbehind are not supported");
            } else {
                error(open, "inline flags and other (?...) groups are not supported");
            }
        }
        if (++depth_ > max_regex_nesting) error(open, fmt::format("groups nested deeper than {}", max_regex_nesting));
        node n;
        n.kind = node::group;
        n.alternatives = alternation();
        --depth_;
        if (peek() != ')') error(open, "unterminated group: no closing ')'");
        ++pos_;
        return n;
    }

    uint32_t hex(size_t digits, size_t at) {
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i) {
            const char c = peek();
            const int d = hex_digit_value(c);
            if (d < 0) error(at, fmt::format("escape needs {} hex digits", digits));
            v = (v << 4) | static_cast<uint32_t>(d);
            ++pos_;
        }
        return v;
    }

    // After a backslash: a code point, or (is_set) a class such as \d.
    uint32_t escape(bool in_class, bool &is_set, std::vector<code_point_range> &set) {
        const size_t at = pos_ - 1;
        if (eof()) error(at, "a backslash at the end of the pattern");
        const char c = peek();
        ++pos_;
        is_set = true;
        switch (c) {
        case 'd': set = {{'0', '9'}}; return 0;
        case 'D': set = ranges_of({{'0', '9'}}, true); return 0;
        case 'w': set = ranges_of({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}}); return 0;
        case 'W': set = ranges_of({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}}, true); return 0;
        case 's': set = space_set(); return 0;
        case 'S': set = ranges_of(space_set(), true); return 0;
        default: break;
        }
        is_set = false;
        switch (c) {
        case 't': return '\t';
        case 'n': return '\n';
        case 'r': return '\r';
        case 'f': return '\f';
        case 'v': return '\v';
        case '0':
            if (peek() >= '0' && peek() <= '9') error(at, "octal escapes and backreferences are not supported");
            return 0;
        case 'x': return hex(2, at);
        case 'u': {
            if (peek() == '{') {
                ++pos_;
                uint32_t v = 0;
                size_t n = 0;
                while (peek() != '}') {
                    if (++n > 6) error(at, "\\u{...} with more than 6 hex digits");
                    v = (v << 4) | hex(1, at);
                }
                ++pos_;
                if (n == 0 || v > max_code_point) error(at, "\\u{...} is not a code point");
                return v;
            }
            uint32_t v = hex(4, at);
            if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') { // a surrogate pair
                const size_t save = pos_;
                pos_ += 2;
                const uint32_t low = hex(4, at);
                if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                pos_ = save;
            }
            return v;
        }
        case 'c':
            if ((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z'))
                return static_cast<uint32_t>(p_[pos_++]) % 32;
            error(at, "\\c must be followed by a letter");
        case 'b':
            if (in_class) return 0x08;
            error(at, "word boundaries (\\b) are not supported");
        case 'B': error(at, "word boundaries (\\B) are not supported");
        case 'k': error(at, "backreferences are not supported");
        case 'p':
        case 'P': error(at, "Unicode property escapes (\\p{...}) are not supported; list the characters in a class");
        default: break;
        }
        if (c >= '1' && c <= '9') error(at, "backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            error(at, fmt::format("unknown escape '\\{}'", c));
        --pos_;
        return next_code_point(); // an escaped punctuation or other character stands for itself
    }

    node char_class_atom() {
        const size_t open = pos_++;
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<code_point_range> set;
        while (peek() != ']') {
            if (eof()) error(open, "unterminated character class: no closing ']'");
            bool lo_set = false;
            std::vector<code_point_range> lo_ranges;
            const size_t item = pos_;
            const uint32_t lo = class_atom(lo_set, lo_ranges);
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < p_.size() && !lo_set) {
                ++pos_;
                bool hi_set = false;
                std::vector<code_point_range> hi_ranges;
                const uint32_t hi = class_atom(hi_set, hi_ranges);
                if (hi_set) error(item, "a range cannot end in a class escape like \\d");
                if (hi < lo) error(item, "a range whose start comes after its end");
                set.push_back({lo, hi});
            } else if (lo_set) {
                set.insert(set.end(), lo_ranges.begin(), lo_ranges.end());
            } else {
                set.push_back({lo, lo});
            }
        }
        ++pos_;
        return chars(ranges_of(std::move(set), negated));
    }

    uint32_t class_atom(bool &is_set, std::vector<code_point_range> &set) {
        is_set = false;
        if (peek() == '\\') {
            ++pos_;
            return escape(true, is_set, set);
        }
        return next_code_point();
    }

    std::string_view p_;
    size_t pos_ = 0;
    size_t depth_ = 0;
};

// --- the empty string inside repetitions ---

bool nullable(const node &n) {
    switch (n.kind) {
    case node::chars: return false;
    case node::group:
        for (const auto &seq : n.alternatives)
            if (std::all_of(seq.begin(), seq.end(), [](const node &x) { return nullable(x); })) return true;
        return false;
    case node::repeat: return n.min == 0 || nullable(n.alternatives[0][0]);
    default: return true; // anchors
    }
}

// The non-empty strings of n, as a group (with no alternatives when n matches only the empty string). A grammar
// cannot repeat something that matches the empty string (that is left recursion), but (x)* equals (x minus "")*.
class non_empty_builder {
  public:
    node of(const node &n) {
        node g;
        g.kind = node::group;
        if (++work_ > 200000) fail("regular expression too complex: repetitions of optional parts nest too much");
        switch (n.kind) {
        case node::chars: g.alternatives.push_back({n}); break;
        case node::group:
            for (const auto &seq : n.alternatives) add_sequence(seq, g);
            break;
        case node::repeat: {
            if (!nullable(n)) {
                g.alternatives.push_back({n});
                break;
            }
            node first = of(n.alternatives[0][0]);
            if (first.alternatives.empty()) break;
            std::vector<node> seq{std::move(first)};
            if (n.max == no_limit || n.max > 1) {
                node rest = n;
                rest.min = n.min > 1 ? n.min - 1 : 0;
                rest.max = n.max == no_limit ? no_limit : n.max - 1;
                seq.push_back(std::move(rest));
            }
            g.alternatives.push_back(std::move(seq));
            break;
        }
        default: break; // anchors match only the empty string
        }
        return g;
    }

  private:
    void add_sequence(const std::vector<node> &seq, node &g) {
        if (!std::all_of(seq.begin(), seq.end(), [](const node &x) { return nullable(x); })) {
            g.alternatives.push_back(seq);
            return;
        }
        // The first part that is not empty, then anything the rest allows.
        for (size_t i = 0; i < seq.size(); ++i) {
            node first = of(seq[i]);
            if (first.alternatives.empty()) continue;
            std::vector<node> alt{std::move(first)};
            alt.insert(alt.end(), seq.begin() + static_cast<std::ptrdiff_t>(i) + 1, seq.end());
            work_ += alt.size();
            g.alternatives.push_back(std::move(alt));
        }
    }

    size_t work_ = 0;
};

// --- GBNF output ---

std::string class_char(uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
        return std::string(1, static_cast<char>(cp));
    if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
    if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
    return fmt::format("\\U{:08X}", cp);
}

std::string class_text(const std::vector<code_point_range> &set) {
    if (set.empty()) return "[^\\x00-\\U0010FFFF]"; // matches nothing
    std::string out = "[";
    for (const code_point_range &r : set) {
        out += class_char(r.first);
        if (r.last != r.first) out += "-" + class_char(r.last);
    }
    return out + "]";
}

bool literal_char(uint32_t cp) {
    return cp >= 0x20 && cp != '"' && cp != '\\' && cp != 0x7F && !(cp >= 0xD800 && cp <= 0xDFFF);
}

class emitter {
  public:
    explicit emitter(bool json) : json_(json) {}

    std::string alternation(const std::vector<std::vector<node>> &alts) {
        std::string out;
        for (const auto &seq : alts) out += (out.empty() ? "" : " | ") + sequence(seq);
        return "( " + out + " )";
    }

    std::string sequence(const std::vector<node> &seq) {
        std::string out, literal;
        const auto flush = [&] {
            if (literal.empty()) return;
            out += (out.empty() ? "\"" : " \"") + literal + "\"";
            literal.clear();
        };
        for (const node &n : seq) {
            if (n.kind == node::line_start || n.kind == node::line_end) continue;
            if (n.kind == node::chars && n.set.size() == 1 && n.set[0].first == n.set[0].last &&
                literal_char(n.set[0].first)) {
                append_utf8(literal, n.set[0].first);
                continue;
            }
            flush();
            out += (out.empty() ? "" : " ") + item(n);
        }
        flush();
        return out.empty() ? "\"\"" : out;
    }

  private:
    // One GBNF item (a class, literal or parenthesized group), so a quantifier can follow it.
    std::string item(const node &n) {
        switch (n.kind) {
        case node::chars: return chars(n.set);
        case node::group: return alternation(n.alternatives);
        case node::repeat: {
            const node &what = n.alternatives[0][0];
            if ((n.max == no_limit || n.max > 1) && nullable(what)) { // (x)* is (x minus "")*
                const node ne = non_empty_.of(what);
                if (ne.alternatives.empty()) return "\"\"";
                node r = n;
                r.min = 0;
                r.alternatives[0][0] = ne;
                return item(r);
            }
            const std::string x = item(what);
            if (n.max == no_limit) {
                if (n.min == 0) return x + "*";
                if (n.min == 1) return x + "+";
                return fmt::format("{}{{{},}}", x, n.min);
            }
            if (n.min == 0 && n.max == 1) return x + "?";
            if (n.min == n.max) return fmt::format("{}{{{}}}", x, n.min);
            return fmt::format("{}{{{},{}}}", x, n.min, n.max);
        }
        default: return "\"\"";
        }
    }

    std::string chars(const std::vector<code_point_range> &set) {
        if (set.size() == 1 && set[0].first == set[0].last && literal_char(set[0].first)) {
            std::string s = "\"";
            append_utf8(s, set[0].first);
            return s + "\"";
        }
        if (!json_) return class_text(set);
        // In a JSON string: what may appear raw, then the escapes for the rest.
        const char_class all(set, false);
        std::vector<std::string> alts;
        const auto raw = ranges_of({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}}, true);
        std::vector<code_point_range> plain;
        for (const code_point_range &r : set) {
            for (const code_point_range &ok : raw) {
                const uint32_t a = std::max(r.first, ok.first), b = std::min(r.last, ok.last);
                if (a <= b) plain.push_back({a, b});
            }
        }
        if (!plain.empty()) alts.push_back(class_text(ranges_of(plain)));
        if (all.contains('"')) alts.push_back("\"\\\\\\\"\"");
        if (all.contains('\\')) alts.push_back("\"\\\\\\\\\"");
        static const std::pair<uint32_t, const char *> short_forms[] = {
            {'\b', "\"\\\\b\""}, {'\t', "\"\\\\t\""}, {'\n', "\"\\\\n\""}, {'\f', "\"\\\\f\""}, {'\r', "\"\\\\r\""}};
        for (const auto &[cp, text] : short_forms)
            if (all.contains(cp)) alts.push_back(text);
        if (all.relation_to(0, 0x1F) == char_class::all) {
            alts.push_back("\"\\\\u00\" [01] [0-9a-fA-F]");
        } else {
            for (uint32_t cp = 0; cp < 0x20; ++cp)
                if (all.contains(cp) && cp != '\b' && cp != '\t' && cp != '\n' && cp != '\f' && cp != '\r')
                    alts.push_back(fmt::format("\"\\\\u{:04x}\"", cp));
        }
        if (all.contains(0x7F)) alts.push_back("\"\\\\u007f\"");
        if (alts.empty()) return class_text({});
        if (alts.size() == 1) return alts[0];
        std::string out;
        for (const std::string &a : alts) out += (out.empty() ? "" : " | ") + a;
        return "( " + out + " )";
    }

    bool json_;
    non_empty_builder non_empty_;
};

} // namespace

std::string regex_to_gbnf_expression(std::string_view pattern, regex_match mode, bool json_string) {
    const std::vector<std::vector<node>> alts = regex_parser(pattern).run();
    emitter out(json_string);
    const std::string any = json_string ? "char*" : ".*";
    std::string result;
    for (const std::vector<node> &seq : alts) {
        bool starts = false, ends = false;
        for (size_t i = 0; i < seq.size(); ++i) {
            if (seq[i].kind == node::line_start && i != 0)
                fail("regular expression \"{}\": ^ is only supported at the start of the pattern (or of a top-level "
                     "alternative)",
                     pattern);
            if (seq[i].kind == node::line_end && i + 1 != seq.size())
                fail("regular expression \"{}\": $ is only supported at the end of the pattern (or of a top-level "
                     "alternative)",
                     pattern);
            starts = starts || seq[i].kind == node::line_start;
            ends = ends || seq[i].kind == node::line_end;
        }
        std::string body = out.sequence(seq);
        if (mode == regex_match::search) {
            if (!starts) body = any + " " + body;
            if (!ends) body += " " + any;
        }
        result += (result.empty() ? "" : " | ") + body;
    }
    return "( " + result + " )";
}

std::string regex_to_gbnf(std::string_view pattern) {
    return "root ::= " + regex_to_gbnf_expression(pattern, regex_match::full, false) + "\n";
}

} // namespace strata::grammar
