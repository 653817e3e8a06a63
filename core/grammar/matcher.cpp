#include "grammar/matcher.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace strata::grammar {

namespace {

using detail::empty_stack;
using detail::stack_engine;

// Printable form of bytes for messages: JSON-like escapes, at most about 60 characters.
std::string quoted_bytes(std::string_view bytes) {
    std::string out = "\"";
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (out.size() > 60) {
            out += "...";
            break;
        }
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c >= 0x7F) {
            out += fmt::format("\\x{:02X}", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

// Runs the bytes through the engine from `heads`; returns the byte index that is refused, or bytes.size().
size_t run(stack_engine &eng, std::vector<uint32_t> &heads, utf8_decoder &dec, std::string_view bytes) {
    std::vector<uint32_t> next;
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto r = dec.feed(static_cast<uint8_t>(bytes[i]));
        if (r == utf8_decoder::invalid) return i;
        if (r == utf8_decoder::partial) continue;
        eng.step(heads, dec.value, next);
        if (next.empty()) return i;
        heads.swap(next);
    }
    if (dec.in_character()) { // some head must accept some completion of the partial character
        uint32_t first = 0, last = 0;
        dec.completion_range(first, last);
        const bool viable = std::any_of(heads.begin(), heads.end(), [&](uint32_t h) {
            return h != empty_stack && eng.top_class(h).relation_to(first, last) != char_class::none;
        });
        if (!viable) return bytes.size() - 1;
    }
    return bytes.size();
}

std::string expected_text(const stack_engine &eng, const std::vector<uint32_t> &heads) {
    std::vector<std::string> items;
    bool end = false;
    for (const uint32_t h : heads) {
        if (h == empty_stack) {
            end = true;
            continue;
        }
        std::string t = eng.grammar_ref().element_text(eng.top_position(h));
        if (std::find(items.begin(), items.end(), t) == items.end()) items.push_back(std::move(t));
    }
    std::string out;
    for (size_t i = 0; i < items.size() && i < 12; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > 12) out += fmt::format(" (and {} more)", items.size() - 12);
    if (end) out += out.empty() ? "the end" : ", or the end";
    return out.empty() ? "nothing" : out;
}

} // namespace

matcher::matcher(std::shared_ptr<const grammar> g) : g_(std::move(g)) {
    if (!g_) fail("grammar matcher: no grammar given (null pointer)");
    stack_engine eng(*g_);
    std::vector<uint32_t> heads;
    eng.start(heads);
    eng.save(heads, {}, state_);
}

bool matcher::accepts(std::string_view bytes) const {
    if (bytes.empty()) return true;
    stack_engine eng(*g_);
    eng.load(state_);
    std::vector<uint32_t> heads = state_.heads;
    utf8_decoder dec = state_.partial;
    return run(eng, heads, dec, bytes) == bytes.size();
}

void matcher::advance(std::string_view bytes) {
    if (bytes.empty()) return;
    stack_engine eng(*g_);
    eng.load(state_);
    std::vector<uint32_t> heads = state_.heads;
    utf8_decoder dec = state_.partial;
    const size_t refused = run(eng, heads, dec, bytes);
    if (refused != bytes.size()) {
        // Say what was expected where the text went wrong.
        std::vector<uint32_t> before = state_.heads;
        utf8_decoder d = state_.partial;
        stack_engine again(*g_);
        again.load(state_);
        size_t start_of_char = 0;
        for (size_t i = 0; i < refused; ++i) {
            if (!d.in_character()) start_of_char = i;
            if (d.feed(static_cast<uint8_t>(bytes[i])) == utf8_decoder::complete) {
                std::vector<uint32_t> next;
                again.step(before, d.value, next);
                before.swap(next);
            }
        }
        if (!d.in_character()) start_of_char = refused;
        fail("grammar does not accept {} here: the text goes wrong at byte {} ({}); expected {}", quoted_bytes(bytes),
             start_of_char, quoted_bytes(bytes.substr(start_of_char, refused - start_of_char + 1)),
             expected_text(again, before));
    }
    eng.save(heads, dec, state_);
}

bool matcher::can_end() const {
    return !state_.partial.in_character() && !state_.heads.empty() && state_.heads.front() == empty_stack;
}

bool matcher::done() const {
    if (!can_end()) return false;
    for (size_t i = 1; i < state_.heads.size(); ++i) {
        const uint32_t pos = state_.nodes[state_.heads[i]].pos;
        if (!g_->char_class_at(g_->elements()[pos].value).empty()) return false;
    }
    return true;
}

std::string matcher::expected() const {
    stack_engine eng(*g_);
    eng.load(state_);
    return expected_text(eng, state_.heads);
}

} // namespace strata::grammar
