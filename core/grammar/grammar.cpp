#include "grammar/grammar.hpp"

#include "common/error.hpp"
#include "grammar/utf8_decoder.hpp"

#include <fmt/format.h>

namespace strata::grammar {

grammar::grammar(parts p) : p_(std::move(p)) {
    const size_t n_rules = p_.rule_names.size();
    if (n_rules == 0 || p_.alt_offsets.size() != n_rules + 1 || p_.root >= n_rules)
        fail("internal grammar error: {} rules with {} alternative offsets and root {}", n_rules, p_.alt_offsets.size(),
             p_.root);
    if (p_.elements.size() > grammar_limits::max_elements)
        fail("grammar too large: {} elements after unrolling repetitions, the limit is {}; use fewer or smaller "
             "{{m,n}} repetitions",
             p_.elements.size(), grammar_limits::max_elements);
    for (size_t r = 0; r < n_rules; ++r) {
        if (p_.alt_offsets[r] > p_.alt_offsets[r + 1] || p_.alt_offsets[r + 1] > p_.alt_starts.size())
            fail("internal grammar error: bad alternative offsets for rule '{}'", p_.rule_names[r]);
        if (p_.alt_offsets[r] == p_.alt_offsets[r + 1])
            fail("internal grammar error: rule '{}' has no alternatives", p_.rule_names[r]);
    }
    for (const uint32_t start : p_.alt_starts) {
        size_t i = start;
        while (i < p_.elements.size() && p_.elements[i].kind != element_kind::end) ++i;
        if (i == p_.elements.size()) fail("internal grammar error: an alternative at position {} has no end", start);
    }
    for (const element &e : p_.elements) {
        if (e.kind == element_kind::rule_ref && e.value >= n_rules)
            fail("internal grammar error: reference to rule {} of {}", e.value, n_rules);
        if (e.kind == element_kind::terminal && e.value >= p_.classes.size())
            fail("internal grammar error: reference to character class {} of {}", e.value, p_.classes.size());
    }
}

namespace {

bool printable_literal_char(uint32_t c) { return c >= 0x20 && c != 0x7F && !(c >= 0xD800 && c <= 0xDFFF); }

void append_literal_char(std::string &out, uint32_t c) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else append_utf8(out, c);
}

// The single code point of a one-character class, or -1.
int64_t single_char(const char_class &c) {
    const auto &r = c.ranges();
    if (r.size() == 1 && r[0].first == r[0].last) return r[0].first;
    return -1;
}

} // namespace

std::string grammar::element_text(uint32_t position) const {
    const element &e = p_.elements.at(position);
    switch (e.kind) {
    case element_kind::end: return "<end>";
    case element_kind::rule_ref: return p_.rule_names[e.value];
    case element_kind::terminal: {
        const char_class &c = p_.classes[e.value];
        const int64_t ch = single_char(c);
        if (ch >= 0 && printable_literal_char(static_cast<uint32_t>(ch))) {
            std::string out = "\"";
            append_literal_char(out, static_cast<uint32_t>(ch));
            return out + "\"";
        }
        return c.to_gbnf();
    }
    }
    return "?";
}

std::string grammar::to_gbnf() const {
    // Rules in the order a reader first meets their names (root first), so parsing the text numbers them the same
    // way and printing it again gives the same text.
    std::vector<uint32_t> order{root()};
    std::vector<uint8_t> listed(rule_count(), 0);
    listed[root()] = 1;
    size_t k = 0;
    for (uint32_t next_unlisted = 0;;) {
        for (; k < order.size(); ++k) {
            for (const uint32_t start : alternatives(order[k])) {
                for (uint32_t i = start; p_.elements[i].kind != element_kind::end; ++i) {
                    const element &e = p_.elements[i];
                    if (e.kind == element_kind::rule_ref && !listed[e.value]) {
                        listed[e.value] = 1;
                        order.push_back(e.value);
                    }
                }
            }
        }
        while (next_unlisted < rule_count() && listed[next_unlisted]) ++next_unlisted;
        if (next_unlisted == rule_count()) break;
        listed[next_unlisted] = 1; // a rule nothing reaches from root
        order.push_back(next_unlisted);
    }
    std::string out;
    for (const uint32_t r : order) {
        out += p_.rule_names[r];
        out += " ::=";
        bool first_alt = true;
        for (const uint32_t start : alternatives(r)) {
            if (!first_alt) out += " |";
            first_alt = false;
            if (p_.elements[start].kind == element_kind::end) {
                out += " \"\"";
                continue;
            }
            std::string literal; // consecutive printable single characters print as one string
            const auto flush = [&] {
                if (literal.empty()) return;
                out += " \"" + literal + "\"";
                literal.clear();
            };
            for (uint32_t i = start; p_.elements[i].kind != element_kind::end; ++i) {
                const element &e = p_.elements[i];
                if (e.kind == element_kind::terminal) {
                    const int64_t ch = single_char(p_.classes[e.value]);
                    if (ch >= 0 && printable_literal_char(static_cast<uint32_t>(ch))) {
                        append_literal_char(literal, static_cast<uint32_t>(ch));
                        continue;
                    }
                }
                flush();
                out += ' ';
                out += e.kind == element_kind::terminal ? p_.classes[e.value].to_gbnf() : p_.rule_names[e.value];
            }
            flush();
        }
        out += '\n';
    }
    return out;
}

std::vector<uint32_t> find_left_recursion(const grammar::parts &p) {
    const size_t n_rules = p.rule_names.size();
    const size_t n_alts = p.alt_starts.size();
    std::vector<uint32_t> alt_rule(n_alts);
    for (uint32_t r = 0; r < n_rules; ++r)
        for (uint32_t a = p.alt_offsets[r]; a < p.alt_offsets[r + 1]; ++a) alt_rule[a] = r;

    // Which rules can match the empty string: an alternative is nullable once every element is a nullable rule.
    std::vector<uint8_t> nullable(n_rules, 0);
    std::vector<uint32_t> pending(n_alts, 0);    // references not yet known nullable
    std::vector<uint8_t> has_terminal(n_alts, 0);
    std::vector<std::vector<uint32_t>> uses(n_rules); // alternatives that reference a rule, once per reference
    std::vector<uint32_t> work;
    for (uint32_t a = 0; a < n_alts; ++a) {
        for (size_t i = p.alt_starts[a]; p.elements[i].kind != element_kind::end; ++i) {
            if (p.elements[i].kind == element_kind::terminal) {
                has_terminal[a] = 1;
            } else {
                ++pending[a];
                uses[p.elements[i].value].push_back(a);
            }
        }
        if (!has_terminal[a] && pending[a] == 0 && !nullable[alt_rule[a]]) {
            nullable[alt_rule[a]] = 1;
            work.push_back(alt_rule[a]);
        }
    }
    while (!work.empty()) {
        const uint32_t r = work.back();
        work.pop_back();
        for (const uint32_t a : uses[r]) {
            if (--pending[a] == 0 && !has_terminal[a] && !nullable[alt_rule[a]]) {
                nullable[alt_rule[a]] = 1;
                work.push_back(alt_rule[a]);
            }
        }
    }

    // Edges A -> B where B can be the first thing A matches (after nullable rules only).
    std::vector<std::vector<uint32_t>> left(n_rules);
    for (uint32_t a = 0; a < n_alts; ++a) {
        for (size_t i = p.alt_starts[a]; p.elements[i].kind == element_kind::rule_ref; ++i) {
            left[alt_rule[a]].push_back(p.elements[i].value);
            if (!nullable[p.elements[i].value]) break;
        }
    }

    // Iterative depth-first search for a cycle.
    enum : uint8_t { unvisited, on_path, finished };
    std::vector<uint8_t> state(n_rules, unvisited);
    struct frame {
        uint32_t rule;
        size_t next_edge;
    };
    std::vector<frame> path;
    for (uint32_t start = 0; start < n_rules; ++start) {
        if (state[start] != unvisited) continue;
        path.push_back({start, 0});
        state[start] = on_path;
        while (!path.empty()) {
            frame &f = path.back();
            if (f.next_edge == left[f.rule].size()) {
                state[f.rule] = finished;
                path.pop_back();
                continue;
            }
            const uint32_t to = left[f.rule][f.next_edge++];
            if (state[to] == on_path) {
                std::vector<uint32_t> cycle;
                size_t k = path.size();
                while (k > 0 && path[k - 1].rule != to) --k;
                for (size_t j = k - 1; j < path.size(); ++j) cycle.push_back(path[j].rule);
                cycle.push_back(to);
                return cycle;
            }
            if (state[to] == unvisited) {
                state[to] = on_path;
                path.push_back({to, 0});
            }
        }
    }
    return {};
}

} // namespace strata::grammar
