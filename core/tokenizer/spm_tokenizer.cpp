// Port of llama.cpp's SPM path (llama-vocab.cpp: llm_tokenizer_spm_session, token_to_piece). Where llama.cpp has a
// quirk that changes the ids, it is kept on purpose.
#include "tokenizer/spm_tokenizer.hpp"

#include <algorithm>
#include <queue>

#include "common/error.hpp"
#include "tokenizer/unicode.hpp"

namespace strata {

namespace {

constexpr std::string_view k_space_marker = "\xE2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

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

spm_tokenizer::spm_tokenizer(class vocab v) : tokenizer(std::move(v)) {
    // U+2581 is a space; <0xNN> a byte; user-defined tokens are their text.
    set_pieces(pieces_by_type(vocab(), [](const std::string &t) { return replace_all(t, k_space_marker, " "); }));
    byte_to_token_.assign(256, -1);
    static constexpr char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const char spelled[] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t id = find_token(std::string_view(spelled, sizeof spelled));
        if (id < 0) id = find_token(std::string(1, static_cast<char>(b))); // llama.cpp's fallback: the raw byte
        byte_to_token_[b] = id;
    }
}

void spm_tokenizer::push_byte_tokens(std::string_view bytes, std::vector<int32_t> &out) const {
    for (const char c : bytes) {
        int32_t id = byte_to_token_[static_cast<unsigned char>(c)];
        if (id < 0) id = vocab().data().unk;
        if (id < 0)
            fail("tokenizer: byte 0x{:02X} is not in the vocab (no <0x{:02X}> token) and the vocab has no unknown "
                 "token to stand for it",
                 static_cast<unsigned char>(c), static_cast<unsigned char>(c));
        out.push_back(id);
    }
}

void spm_tokenizer::encode_text(std::string_view text, bool after_special, bool, std::vector<int32_t> &out) const {
    std::string escaped;
    escaped.reserve(text.size() + k_space_marker.size() * 2);
    if (vocab().data().add_space_prefix && after_special) escaped += k_space_marker;
    for (const char c : text) {
        if (c == ' ')
            escaped += k_space_marker;
        else
            escaped += c;
    }

    std::vector<spm_symbol> symbols;
    symbols.reserve(escaped.size());
    for (size_t offset = 0; offset < escaped.size();) {
        const size_t n =
            std::min(unicode::utf8_length(static_cast<unsigned char>(escaped[offset])), escaped.size() - offset);
        const int index = static_cast<int>(symbols.size());
        offset += n;
        symbols.push_back({escaped.data() + offset - n, n, index - 1, offset == escaped.size() ? -1 : index + 1});
    }
    if (symbols.empty()) return;

    const std::vector<float> &scores = vocab().data().scores;
    std::priority_queue<spm_bigram, std::vector<spm_bigram>, spm_bigram_order> queue;
    const auto try_add_bigram = [&](int left, int right) {
        if (left == -1 || right == -1) return;
        const std::string_view merged(symbols[left].text, symbols[left].n + symbols[right].n);
        const int32_t id = find_token(merged);
        if (id < 0) return;
        queue.push({left, right, scores[static_cast<size_t>(id)], merged.size()});
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

} // namespace strata
