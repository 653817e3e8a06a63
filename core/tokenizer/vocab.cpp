#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "common/hex.hpp"
#include "tokenizer/special_tokens.hpp"

namespace strata {

namespace {

// llama.cpp's isspace() on the raw bytes, for LSTRIP/RSTRIP; only ASCII whitespace matches.
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }


} // namespace

int parse_byte_token(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_digit_value(text[3]), lo = hex_digit_value(text[4]);
    return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

vocab::vocab(vocab_data data) : d_(std::move(data)) {
    const std::string &where = d_.origin.empty() ? std::string("vocabulary") : d_.origin;
    const size_t n = d_.tokens.size();
    if (n == 0) fail("{}: the vocabulary has no tokens (tokenizer.ggml.tokens is empty)", where);
    if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail("{}: {} tokens is more than token ids can address", where, n);
    if (d_.scores.empty()) d_.scores.assign(n, 0.0f);
    if (d_.types.empty()) d_.types.assign(n, token_type::normal);
    if (d_.scores.size() != n)
        fail("{}: {} tokens but {} scores; tokenizer.ggml.scores must have one entry per token", where, n,
             d_.scores.size());
    if (d_.types.size() != n)
        fail("{}: {} tokens but {} token types; tokenizer.ggml.token_type must have one entry per token", where, n,
             d_.types.size());
    if (!d_.lstrip.empty() && d_.lstrip.size() != n)
        fail("{}: lstrip has {} entries for {} tokens (must be empty or one per token)", where, d_.lstrip.size(), n);
    if (!d_.rstrip.empty() && d_.rstrip.size() != n)
        fail("{}: rstrip has {} entries for {} tokens (must be empty or one per token)", where, d_.rstrip.size(), n);
    for (size_t i = 0; i < n; ++i) {
        const auto t = static_cast<int32_t>(d_.types[i]);
        if (t < 0 || t > static_cast<int32_t>(token_type::byte))
            fail("{}: token {} ('{}') has token type {}, valid types are 0..6", where, i, d_.tokens[i], t);
    }
    const auto check_special = [&](int32_t id, const char *name) {
        if (id < -1 || id >= static_cast<int32_t>(n))
            fail("{}: {} token id {} is out of range for a vocab of {} tokens (valid: 0..{}, or -1 for none)", where,
                 name, id, n, n - 1);
    };
    check_special(d_.bos, "BOS");
    check_special(d_.eos, "EOS");
    check_special(d_.unk, "unknown");
    check_special(d_.pad, "padding");
    check_special(d_.eot, "end-of-turn");
    check_special(d_.eom, "end-of-message");
    if (d_.add_bos && d_.bos < 0)
        fail("{}: add_bos_token is set but the vocab has no BOS token id (tokenizer.ggml.bos_token_id)", where);
    if (d_.add_eos && d_.eos < 0)
        fail("{}: add_eos_token is set but the vocab has no EOS token id (tokenizer.ggml.eos_token_id)", where);

    // Later duplicates win, as in llama.cpp (token_to_id[text] = id in id order).
    token_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) token_to_id_.insert_or_assign(d_.tokens[i], static_cast<int32_t>(i));

    is_eog_ = apply_special_token_rules(d_, [this](std::string_view text) { return find(text); });

    for (size_t i = 0; i < n; ++i) {
        const token_type t = d_.types[i];
        if ((t == token_type::control || t == token_type::user_defined || t == token_type::unknown) &&
            !d_.tokens[i].empty())
            special_tokens_.push_back(static_cast<int32_t>(i));
    }
    // Longest first, so "<|end|>" can't be cut out of "<|endoftext|>"; equal lengths keep id order.
    std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                     [&](int32_t a, int32_t b) { return d_.tokens[a].size() > d_.tokens[b].size(); });
    special_by_byte_.resize(256);
    special_first_byte_.assign(256, 0);
    for (const int32_t id : special_tokens_) {
        const std::string &t = d_.tokens[static_cast<size_t>(id)];
        const auto b0 = static_cast<uint8_t>(t[0]);
        special_first_byte_[b0] = 1;
        if (t.size() == 1)
            special_by_byte_[b0].push_back(id);
        else
            special_by_prefix_[static_cast<uint16_t>(b0 << 8 | static_cast<uint8_t>(t[1]))].push_back(id);
    }
}

void vocab::check_id(int32_t id, const char *what) const {
    if (id < 0 || id >= size())
        fail("tokenizer: {} got token id {}, outside the vocab (0..{})", what, id, size() - 1);
}

int32_t vocab::find(std::string_view text) const {
    const auto it = token_to_id_.find(text);
    return it == token_to_id_.end() ? -1 : it->second;
}

const std::string &vocab::text(int32_t id) const {
    check_id(id, "token_text");
    return d_.tokens[static_cast<size_t>(id)];
}

token_type vocab::type(int32_t id) const {
    check_id(id, "type");
    return d_.types[static_cast<size_t>(id)];
}

bool vocab::is_special(int32_t id) const {
    const token_type t = type(id);
    return t == token_type::control || t == token_type::unknown;
}

void vocab::specials_in(std::string_view text, std::vector<int32_t> &present) const {
    present.clear();
    const size_t n = text.size();
    for (size_t i = 0; i < n; ++i) {
        const auto b0 = static_cast<uint8_t>(text[i]);
        if (!special_first_byte_[b0]) continue;
        for (const int32_t id : special_by_byte_[b0]) present.push_back(id);
        if (i + 1 == n) break;
        const auto it = special_by_prefix_.find(static_cast<uint16_t>(b0 << 8 | static_cast<uint8_t>(text[i + 1])));
        if (it == special_by_prefix_.end()) continue;
        for (const int32_t id : it->second)
            if (text.compare(i, d_.tokens[static_cast<size_t>(id)].size(), d_.tokens[static_cast<size_t>(id)]) == 0)
                present.push_back(id);
    }
    std::sort(present.begin(), present.end());
    present.erase(std::unique(present.begin(), present.end()), present.end());
}

void vocab::partition(std::string_view text, bool parse_special, std::vector<fragment> &out) const {
    out.clear();
    if (!text.empty()) out.push_back({-1, 0, text.size()});
    // Most special tokens appear nowhere in a given text: find the ones that do in one pass.
    std::vector<int32_t> present;
    specials_in(text, present);
    if (present.empty()) return;
    std::vector<fragment> next;
    for (const int32_t id : special_tokens_) {
        if (!std::binary_search(present.begin(), present.end(), id)) continue;
        const token_type t = d_.types[static_cast<size_t>(id)];
        if (!parse_special && (t == token_type::control || t == token_type::unknown)) continue;
        const std::string &special = d_.tokens[static_cast<size_t>(id)];
        const bool lstrip = !d_.lstrip.empty() && d_.lstrip[static_cast<size_t>(id)];
        const bool rstrip = !d_.rstrip.empty() && d_.rstrip[static_cast<size_t>(id)];
        next.clear();
        for (const fragment &f : out) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            size_t offset = f.offset, length = f.length;
            while (length > 0) {
                const size_t match = text.substr(0, offset + length).find(special, offset);
                if (match == std::string_view::npos) {
                    next.push_back({-1, offset, length});
                    break;
                }
                size_t left_length = match - offset;
                if (lstrip)
                    while (left_length > 0 && is_ascii_space(text[offset + left_length - 1])) --left_length;
                if (left_length > 0) next.push_back({-1, offset, left_length});
                next.push_back({id, 0, 0});
                const size_t end = offset + length;
                offset = match + special.size();
                if (rstrip)
                    while (offset < end && is_ascii_space(text[offset])) ++offset;
                length = end - offset;
            }
        }
        out.swap(next);
    }
}

} // namespace strata
