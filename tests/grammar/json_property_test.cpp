// Property tests of the built-in JSON grammars against nlohmann's parser: random JSON values (with the bounded
// whitespace the grammar allows between tokens, fed in random token splits, cut inside UTF-8 characters) are
// accepted; every text the matcher fully accepts parses as JSON; random byte mutations are judged like nlohmann's
// parser judges them in the vast majority of cases; and every prefix the matcher accepts can be completed (found by a
// breadth-first search over matcher states) into a text that parses as JSON.
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/matcher.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

using strata::grammar::json_object_gbnf;
using strata::grammar::json_value_gbnf;
using strata::grammar::matcher;
using strata::grammar::parse_gbnf;

class json_writer {
  public:
    explicit json_writer(uint32_t seed) : rng_(seed) {}

    std::string value(int depth) {
        const int kind = static_cast<int>(pick(depth >= 4 ? 5 : 7));
        switch (kind) {
        case 0: return "null";
        case 1: return pick(2) ? "true" : "false";
        case 2: return number();
        case 3:
        case 4: return string();
        case 5: return array(depth);
        default: return object(depth);
        }
    }

    std::string object(int depth) {
        std::string out = "{" + ws();
        const size_t n = pick(4);
        for (size_t i = 0; i < n; ++i) {
            if (i) out += "," + ws();
            out += string() + ws() + ":" + ws() + value(depth + 1) + ws();
        }
        return out + "}";
    }

  private:
    size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

    // What the grammar's space rule allows: nothing, one space, or 1-2 newlines and up to 20 spaces/tabs.
    std::string ws() {
        switch (pick(6)) {
        case 0: return " ";
        case 1: return "\n" + std::string(pick(21), ' ');
        case 2: return "\n\n\t\t";
        default: return "";
        }
    }

    std::string digits(size_t min, size_t max) {
        std::string d;
        const size_t n = min + pick(max - min + 1);
        for (size_t i = 0; i < n; ++i) d += static_cast<char>('0' + pick(10));
        return d;
    }

    std::string integral() {
        return pick(4) == 0 ? "0" : std::string(1, static_cast<char>('1' + pick(9))) + digits(0, 8);
    }

    std::string number() {
        std::string n = (pick(3) == 0 ? "-" : "") + integral();
        if (pick(2)) n += "." + digits(1, 6);
        if (pick(4) == 0) // exponents of at most two digits, as the grammar allows (no double overflow)
            n += std::string(1, "eE"[pick(2)]) + (pick(2) ? std::string(1, "+-"[pick(2)]) : "") + digits(1, 2);
        return n;
    }

    std::string string() {
        static const std::vector<std::string> pieces = {"a", "Z", " ", "key", "\xC3\xA9", "\xE4\xB8\xAD",
                                                        "\xF0\x9F\x98\x80", "\\n", "\\\"", "\\\\", "\\/", "\\u00e9",
                                                        "\\ud83d\\ude00", "\\t", "'", "{", "]", ":", ","};
        std::string s = "\"";
        const size_t n = pick(6);
        for (size_t i = 0; i < n; ++i) s += pieces[pick(pieces.size())];
        return s + "\"";
    }

    std::string array(int depth) {
        std::string out = "[" + ws();
        const size_t n = pick(4);
        for (size_t i = 0; i < n; ++i) {
            if (i) out += "," + ws();
            out += value(depth + 1) + ws();
        }
        return out + "]";
    }

    std::mt19937 rng_;
};

bool full_match(const matcher &start, const std::string &text) {
    matcher m = start;
    if (!m.accepts(text)) return false;
    m.advance(text);
    return m.can_end();
}

// Feeds the text in random chunks (cutting UTF-8 characters too); true when it all matches and may end.
bool chunked_match(const matcher &start, const std::string &text, std::mt19937 &rng) {
    matcher m = start;
    for (size_t i = 0; i < text.size();) {
        const size_t n = std::min(text.size() - i, size_t{1} + rng() % 7);
        const std::string chunk = text.substr(i, n);
        if (!m.accepts(chunk)) return false;
        m.advance(chunk);
        i += n;
    }
    return m.can_end();
}

// The matcher state as text, the same for equal sets of parse stacks whatever their node numbering.
std::string state_key(const matcher &m) {
    const auto &st = m.state();
    std::vector<std::string> stacks;
    for (uint32_t h : st.heads) {
        std::string s;
        for (; h != 0; h = st.nodes[h].parent) s += std::to_string(st.nodes[h].pos) + ",";
        stacks.push_back(s);
    }
    std::sort(stacks.begin(), stacks.end());
    std::string key = st.partial.in_character()
                          ? std::to_string(st.partial.value) + "/" + std::to_string(st.partial.remaining) + "|"
                          : "|";
    for (const std::string &s : stacks) key += s + ";";
    return key;
}

// The shortest continuation (over a small alphabet) after which the matcher may end, or nullopt when none is found
// within the search bound.
std::optional<std::string> complete(const matcher &start) {
    static const std::vector<std::string> alphabet = {"\"", "}", "]", "0", ",", ":", "1", ".", "e", "a", "l", "n", "u",
                                                      "r",  "t", "f", "s", "{", "[", "\\", " ", "-", "d", "c"};
    static const std::vector<std::string> continuation = {"\x80", "\x90", "\xA0", "\xBF"};
    std::deque<std::pair<matcher, std::string>> queue;
    std::unordered_set<std::string> seen{state_key(start)};
    queue.emplace_back(start, "");
    while (!queue.empty() && seen.size() < 20000) {
        auto [m, suffix] = std::move(queue.front());
        queue.pop_front();
        if (m.can_end()) return suffix;
        for (const std::string &c : m.state().partial.in_character() ? continuation : alphabet) {
            if (!m.accepts(c)) continue;
            matcher next = m;
            next.advance(c);
            if (seen.insert(state_key(next)).second) queue.emplace_back(std::move(next), suffix + c);
        }
    }
    return std::nullopt;
}

TEST(grammar_json_property, RandomValuesAreAcceptedInAnySplit) {
    const matcher value(parse_gbnf(json_value_gbnf()));
    const matcher object(parse_gbnf(json_object_gbnf()));
    json_writer w(1234);
    std::mt19937 rng(99);
    for (int i = 0; i < 400; ++i) {
        const std::string v = w.value(0);
        ASSERT_TRUE(nlohmann::json::accept(v)) << "generator bug: " << v;
        EXPECT_TRUE(full_match(value, v)) << v;
        EXPECT_TRUE(chunked_match(value, v, rng)) << v;
        const std::string o = w.object(0);
        EXPECT_TRUE(full_match(object, o)) << o;
        EXPECT_TRUE(chunked_match(object, o, rng)) << o;
        EXPECT_EQ(full_match(object, v), v[0] == '{') << v;
    }
}

TEST(grammar_json_property, MutationsAreJudgedLikeNlohmann) {
    const matcher value(parse_gbnf(json_value_gbnf()));
    json_writer w(777);
    std::mt19937 rng(4242);
    static const std::string noise = "{}[]\":,.-+eE0123456789 \n\\tfnu\xC3\xA9\xFF\x80";
    size_t agree = 0, total = 0, completions_checked = 0;
    for (int i = 0; i < 4000; ++i) {
        std::string s = w.value(0);
        const size_t edits = 1 + rng() % 2;
        for (size_t e = 0; e < edits; ++e) {
            const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
            const char c = noise[rng() % noise.size()];
            switch (rng() % 3) {
            case 0: s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c); break;
            case 1:
                if (at < s.size()) s.erase(at, 1);
                break;
            default:
                if (at < s.size()) s[at] = c;
            }
        }
        const bool grammar_ok = full_match(value, s);
        const bool json_ok = nlohmann::json::accept(s);
        // Soundness: what the grammar accepts is always JSON.
        EXPECT_TRUE(!grammar_ok || json_ok) << "grammar accepted invalid JSON: " << s;
        agree += grammar_ok == json_ok;
        ++total;

        // The longest prefix the matcher accepts can be completed into JSON.
        if (!grammar_ok && completions_checked < 400) {
            matcher m = value;
            size_t n = 0;
            while (n < s.size() && m.accepts(s.substr(n, 1))) m.advance(s.substr(n++, 1));
            const auto tail = complete(m);
            ASSERT_TRUE(tail.has_value()) << "no completion for accepted prefix: " << s.substr(0, n);
            EXPECT_TRUE(nlohmann::json::accept(s.substr(0, n) + *tail)) << s.substr(0, n) << " + " << *tail;
            ++completions_checked;
        }
    }
    // The grammar is a strict subset of JSON (bounded whitespace and digits, no whitespace around the value), so a
    // mutation may yield JSON it refuses; that must stay rare.
    EXPECT_GT(static_cast<double>(agree) / static_cast<double>(total), 0.9) << agree << " of " << total;
    EXPECT_EQ(completions_checked, 400u);
    std::printf("grammar and nlohmann agree on %zu of %zu mutated texts\n", agree, total);
}

TEST(grammar_json_property, RandomBytesAcceptedOnlyWhenJson) {
    const matcher value(parse_gbnf(json_value_gbnf()));
    std::mt19937 rng(5);
    static const std::string alphabet = "{}[]\":,0123456789.-eEtrufalsn \\";
    size_t accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string s;
        const size_t n = 1 + rng() % 8;
        for (size_t k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
        if (full_match(value, s)) {
            ++accepted;
            EXPECT_TRUE(nlohmann::json::accept(s)) << s;
        }
    }
    EXPECT_GT(accepted, 50u); // short numbers, [], {}, "..." strings
}

TEST(grammar_json_property, EveryPrefixOfValidJsonIsAcceptedAndCompletable) {
    const matcher value(parse_gbnf(json_value_gbnf()));
    json_writer w(31337);
    for (int i = 0; i < 40; ++i) {
        const std::string v = w.value(1);
        matcher m = value;
        for (size_t k = 0; k < v.size(); ++k) {
            ASSERT_TRUE(m.accepts(v.substr(k, 1))) << v << " at " << k;
            m.advance(v.substr(k, 1));
            if (k % 5 == 0) {
                const auto tail = complete(m);
                ASSERT_TRUE(tail.has_value()) << v.substr(0, k + 1);
                EXPECT_TRUE(nlohmann::json::accept(v.substr(0, k + 1) + *tail)) << v.substr(0, k + 1) << " + " << *tail;
            }
        }
        EXPECT_TRUE(m.can_end());
    }
}

} // namespace
