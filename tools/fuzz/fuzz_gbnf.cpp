// libFuzzer target for grammar-constrained decoding. Input: a mode byte, then a grammar up to the first NUL, then a
// text. Mode byte % 3 == 0: the grammar is GBNF; 1: it is a JSON schema, converted to GBNF (json_schema_to_gbnf);
// 2: it is a regular expression (regex_to_gbnf). The text (or, without one, a few built-in strings) then drives a
// matcher in chunks of varying size, with its invariants checked: accepts() and advance() agree, a refused advance
// leaves the state as it was, done() implies can_end(), and the token filter's mask over a small vocabulary equals
// accepts() on every piece. Only strata::error may come out; a crash, a sanitizer report, another exception or a
// broken invariant is a finding.
#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/regex_grammar.hpp"
#include "grammar/token_filter.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

volatile size_t sink;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

const std::vector<std::string> &pieces() {
    static const std::vector<std::string> p = [] {
        std::vector<std::string> v;
        for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
        for (const char *s : {"", "{\"", "\":", "\": ", "\",", "true", "false", "null", " \"", "\n  ", "},", "]}",
                              "12", ".5", "e+", "\\u00", "\\n", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
                              "\xE4\xB8", "\xB8\xAD", "ab", "abc", "name", "\"name\"", "[{", "  "})
            v.emplace_back(s);
        return v;
    }();
    return p;
}

const strata::grammar::token_filter &filter() {
    static const strata::grammar::token_filter f(pieces());
    return f;
}

void check_mask(const strata::grammar::matcher &m) {
    std::vector<uint8_t> mask;
    filter().allowed(m, mask);
    check(mask.size() == pieces().size());
    for (size_t i = 0; i < pieces().size(); ++i)
        check((mask[i] != 0) == (!pieces()[i].empty() && m.accepts(pieces()[i])));
}

// Feeds `text` in chunks of 1..7 bytes (sizes from the text itself), checking the invariants at each step.
void drive(const std::shared_ptr<const strata::grammar::grammar> &g, std::string_view text) {
    strata::grammar::matcher m(g);
    check_mask(m);
    size_t step = 0;
    for (size_t i = 0; i < text.size() && step < 64; ++step) {
        const size_t n = std::min(text.size() - i, size_t{1} + static_cast<unsigned char>(text[i]) % 7);
        const std::string chunk(text.substr(i, n));
        const bool ok = m.accepts(chunk);
        const strata::grammar::matcher before = m;
        try {
            m.advance(chunk);
            check(ok);
        } catch (const strata::error &) {
            check(!ok);
            // A refused advance changes nothing: the same answers as a copy taken before.
            check(m.can_end() == before.can_end() && m.accepts(chunk) == before.accepts(chunk));
            sink = sink + m.expected().size();
            break;
        }
        check(!m.done() || m.can_end());
        if (step % 4 == 0) check_mask(m);
        i += n;
    }
    sink = sink + m.can_end() + m.done();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const int mode = data[0] % 3;
    const std::string_view rest(reinterpret_cast<const char *>(data) + 1, size - 1);
    const size_t nul = rest.find('\0');
    const std::string_view source = rest.substr(0, nul);
    const std::string_view text = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
    try {
        std::string gbnf(source);
        if (mode == 1) {
            const auto schema = nlohmann::ordered_json::parse(source, nullptr, /*allow_exceptions=*/false);
            if (schema.is_discarded()) return 0;
            gbnf = strata::grammar::json_schema_to_gbnf(schema);
        } else if (mode == 2) {
            gbnf = strata::grammar::regex_to_gbnf(source);
        }
        const auto g = strata::grammar::parse_gbnf(gbnf);
        sink = sink + g->to_gbnf().size();
        if (!text.empty()) {
            drive(g, text);
        } else {
            for (const char *t : {"{\"a\": 1}", "[1, \"x\", null]", "\"caf\xC3\xA9\"", "abc", "-12.5e3", "true"})
                drive(g, t);
        }
    } catch (const strata::error &) {
    }
    return 0;
}
