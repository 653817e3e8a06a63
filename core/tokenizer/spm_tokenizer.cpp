// Port of llama.cpp's SPM path (llama-vocab.cpp: tokenizer_st_partition, llm_tokenizer_spm_session,
// token_to_piece, detokenize). Where llama.cpp has a quirk that changes the ids, it is kept on purpose.
#include "tokenizer/spm_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <queue>

#include "common/error.hpp"

namespace strata {

namespace {

constexpr std::string_view k_space_marker = "\xE2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

// Texts llama.cpp treats as end of generation (and forces to CONTROL) whatever the GGUF says.
constexpr std::array<std::string_view, 12> k_eog_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};

// Byte length of a UTF-8 sequence from its first byte; stray continuation bytes count as one (llama.cpp's
// unicode_len_utf8), so invalid UTF-8 still splits into symbols and falls back to byte tokens.
size_t utf8_len(unsigned char first) {
    static constexpr std::array<uint8_t, 16> lookup = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[first >> 4];
}

// llama.cpp's isspace() on the raw bytes, for LSTRIP/RSTRIP; only ASCII whitespace matches.
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// "<0xNN>" -> NN, or -1 when the text is not spelled that way.
int parse_byte_token(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
    return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (text.substr(i, k_space_marker.size()) == k_space_marker) {
            out += ' ';
            i += k_space_marker.size();
        } else {
            out += text[i++];
        }
    }
    return out;
}

bool is_special_type(token_type t) {
    return t == token_type::control || t == token_type::user_defined || t == token_type::unknown;
}

// One piece of the input after special-token partitioning: raw text (token < 0) or one token.
struct fragment {
    int32_t token;
    size_t offset;
    size_t length;
};

// Working state of one SPM run: symbols form a linked list over the text; merged symbols grow in place.
struct spm_symbol {
    const char *text;
    size_t n;
    int prev;
    int next;
};

struct spm_bigram {
    int left;
    int right;
    float score;
    size_t size;
};

// Highest score first; on equal scores the leftmost pair (llama.cpp's llm_bigram_spm::comparator).
struct spm_bigram_order {
    bool operator()(const spm_bigram &l, const spm_bigram &r) const {
        return (l.score < r.score) || (l.score == r.score && l.left > r.left);
    }
};

} // namespace

spm_tokenizer::spm_tokenizer(spm_vocab v) : vocab_(std::move(v)) {
    const size_t n = vocab_.tokens.size();
    if (n == 0) fail("SPM vocab: no tokens (tokenizer.ggml.tokens is empty); the model file needs a vocabulary");
    if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail("SPM vocab: {} tokens is more than token ids can address", n);
    if (vocab_.scores.size() != n)
        fail("SPM vocab: {} tokens but {} scores; tokenizer.ggml.scores must have one entry per token", n,
             vocab_.scores.size());
    if (vocab_.types.size() != n)
        fail("SPM vocab: {} tokens but {} token types; tokenizer.ggml.token_type must have one entry per token", n,
             vocab_.types.size());
    if (!vocab_.lstrip.empty() && vocab_.lstrip.size() != n)
        fail("SPM vocab: lstrip has {} entries for {} tokens (must be empty or one per token)", vocab_.lstrip.size(), n);
    if (!vocab_.rstrip.empty() && vocab_.rstrip.size() != n)
        fail("SPM vocab: rstrip has {} entries for {} tokens (must be empty or one per token)", vocab_.rstrip.size(), n);
    for (size_t i = 0; i < n; ++i) {
        const auto t = static_cast<int32_t>(vocab_.types[i]);
        if (t < 0 || t > static_cast<int32_t>(token_type::byte))
            fail("SPM vocab: token {} ('{}') has token type {}, valid types are 0..6", i, vocab_.tokens[i], t);
    }
    const auto check_special = [&](int32_t id, const char *name) {
        if (id < -1 || id >= static_cast<int32_t>(n))
            fail("SPM vocab: {} token id {} is out of range for a vocab of {} tokens (valid: 0..{}, or -1 for none)",
                 name, id, n, n - 1);
    };
    check_special(vocab_.bos, "BOS");
    check_special(vocab_.eos, "EOS");
    check_special(vocab_.unk, "unknown");
    check_special(vocab_.pad, "padding");
    if (vocab_.add_bos && vocab_.bos < 0) fail("SPM vocab: add_bos is set but there is no BOS token id");
    if (vocab_.add_eos && vocab_.eos < 0) fail("SPM vocab: add_eos is set but there is no EOS token id");

    // Later duplicates win, as in llama.cpp (token_to_id[text] = id in id order).
    token_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) token_to_id_.insert_or_assign(vocab_.tokens[i], static_cast<int32_t>(i));

    is_eog_.assign(n, 0);
    if (vocab_.eos >= 0) is_eog_[vocab_.eos] = 1;
    for (std::string_view text : k_eog_texts) {
        const int32_t id = find_token(text);
        if (id < 0) continue;
        is_eog_[id] = 1;
        vocab_.types[id] = token_type::control; // llama.cpp does the same, so it is never matched as plain text
    }

    pieces_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const std::string &text = vocab_.tokens[i];
        switch (vocab_.types[i]) {
        case token_type::normal: pieces_[i] = unescape_spaces(text); break;
        case token_type::user_defined: pieces_[i] = text; break;
        case token_type::byte: {
            const int b = parse_byte_token(text);
            if (b < 0)
                fail("SPM vocab: token {} has type BYTE but its text '{}' is not of the form <0xNN>", i, text);
            pieces_[i] = std::string(1, static_cast<char>(b));
            break;
        }
        default: break; // control, unknown, unused, undefined: no text (llama.cpp with special=false)
        }
    }

    byte_to_token_.assign(256, -1);
    static constexpr char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const char spelled[] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t id = find_token(std::string_view(spelled, sizeof spelled));
        if (id < 0) id = find_token(std::string(1, static_cast<char>(b))); // llama.cpp's fallback: the raw byte
        byte_to_token_[b] = id;
    }

    for (size_t i = 0; i < n; ++i)
        if (is_special_type(vocab_.types[i]) && !vocab_.tokens[i].empty())
            special_tokens_.push_back(static_cast<int32_t>(i));
    // Longest first, so "<|end|>" can't be cut out of "<|endoftext|>"; equal lengths keep id order.
    std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](int32_t a, int32_t b) {
        return vocab_.tokens[a].size() > vocab_.tokens[b].size();
    });
}

void spm_tokenizer::check_id(int32_t id, const char *what) const {
    if (id < 0 || id >= n_vocab())
        fail("tokenizer: {} got token id {}, outside the vocab (0..{})", what, id, n_vocab() - 1);
}

int32_t spm_tokenizer::find_token(std::string_view text) const {
    const auto it = token_to_id_.find(text);
    return it == token_to_id_.end() ? -1 : it->second;
}

const std::string &spm_tokenizer::token_text(int32_t id) const {
    check_id(id, "token_text");
    return vocab_.tokens[id];
}

token_type spm_tokenizer::type(int32_t id) const {
    check_id(id, "type");
    return vocab_.types[id];
}

bool spm_tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && is_eog_[id] != 0; }

std::string_view spm_tokenizer::piece(int32_t id) const {
    check_id(id, "piece");
    return pieces_[id];
}

std::vector<int32_t> spm_tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
    std::vector<int32_t> out;
    encode_into(text, add_bos, parse_special, out);
    return out;
}

void spm_tokenizer::encode_into(std::string_view text, bool add_bos, bool parse_special,
                                std::vector<int32_t> &out) const {
    out.clear();

    // Cut special-token texts out of the input, longest token first (llama.cpp's tokenizer_st_partition).
    // Without parse_special only control and unknown tokens stay plain text; user-defined ones are still cut.
    std::vector<fragment> fragments, next;
    if (!text.empty()) fragments.push_back({-1, 0, text.size()});
    for (const int32_t id : special_tokens_) {
        const token_type t = vocab_.types[id];
        if (!parse_special && (t == token_type::control || t == token_type::unknown)) continue;
        const std::string &special = vocab_.tokens[id];
        const bool lstrip = !vocab_.lstrip.empty() && vocab_.lstrip[id];
        const bool rstrip = !vocab_.rstrip.empty() && vocab_.rstrip[id];
        next.clear();
        for (const fragment &f : fragments) {
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
        fragments.swap(next);
    }

    if (add_bos) {
        if (vocab_.bos < 0) fail("tokenizer: asked to add BOS but the vocab has no BOS token");
        out.push_back(vocab_.bos);
    }
    // The dummy prefix goes before the first text and before text that follows a special token.
    bool is_prev_special = true;
    std::string escaped;
    for (const fragment &f : fragments) {
        if (f.token >= 0) {
            out.push_back(f.token);
            is_prev_special = true;
            continue;
        }
        escaped.clear();
        if (vocab_.add_space_prefix && is_prev_special) escaped += k_space_marker;
        for (const char c : text.substr(f.offset, f.length)) {
            if (c == ' ')
                escaped += k_space_marker;
            else
                escaped += c;
        }
        tokenize_spm(escaped, out);
        is_prev_special = false;
    }
    if (add_bos && vocab_.add_eos) out.push_back(vocab_.eos);
}

void spm_tokenizer::push_byte_tokens(std::string_view bytes, std::vector<int32_t> &out) const {
    for (const char c : bytes) {
        int32_t id = byte_to_token_[static_cast<unsigned char>(c)];
        if (id < 0) id = vocab_.unk;
        if (id < 0)
            fail("tokenizer: byte 0x{:02X} is not in the vocab (no <0x{:02X}> token) and the vocab has no unknown "
                 "token to stand for it",
                 static_cast<unsigned char>(c), static_cast<unsigned char>(c));
        out.push_back(id);
    }
}

void spm_tokenizer::tokenize_spm(std::string_view escaped, std::vector<int32_t> &out) const {
    std::vector<spm_symbol> symbols;
    symbols.reserve(escaped.size());
    for (size_t offset = 0; offset < escaped.size();) {
        const size_t n = std::min(utf8_len(static_cast<unsigned char>(escaped[offset])), escaped.size() - offset);
        const int index = static_cast<int>(symbols.size());
        offset += n;
        symbols.push_back({escaped.data() + offset - n, n, index - 1, offset == escaped.size() ? -1 : index + 1});
    }
    if (symbols.empty()) return;

    std::priority_queue<spm_bigram, std::vector<spm_bigram>, spm_bigram_order> queue;
    const auto try_add_bigram = [&](int left, int right) {
        if (left == -1 || right == -1) return;
        const std::string_view merged(symbols[left].text, symbols[left].n + symbols[right].n);
        const int32_t id = find_token(merged);
        if (id < 0) return;
        queue.push({left, right, vocab_.scores[id], merged.size()});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue.empty()) {
        const spm_bigram bigram = queue.top();
        queue.pop();
        spm_symbol &left = symbols[bigram.left];
        spm_symbol &right = symbols[bigram.right];
        // Stale entry: one side was merged away or grew since this pair was queued.
        if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = bigram.left;
        try_add_bigram(left.prev, bigram.left);
        try_add_bigram(bigram.left, left.next);
    }

    // Every merged symbol is a token by construction; single characters that aren't become byte tokens.
    // (llama.cpp's rev_merge lookup can only hit merged symbols, so it never changes the result here.)
    for (int i = 0; i != -1; i = symbols[i].next) {
        const std::string_view sym(symbols[i].text, symbols[i].n);
        const int32_t id = find_token(sym);
        if (id >= 0)
            out.push_back(id);
        else
            push_byte_tokens(sym, out);
    }
}

std::string spm_tokenizer::decode(std::span<const int32_t> ids, bool strip_leading_space_of_first) const {
    std::string out;
    bool strip = strip_leading_space_of_first && vocab_.add_space_prefix;
    for (const int32_t id : ids) {
        check_id(id, "decode");
        std::string_view p = pieces_[id];
        if (strip && !p.empty()) {
            const token_type t = vocab_.types[id];
            if ((t == token_type::normal || t == token_type::byte) && p.front() == ' ') p.remove_prefix(1);
            strip = false;
        }
        out += p;
    }
    return out;
}

} // namespace strata
