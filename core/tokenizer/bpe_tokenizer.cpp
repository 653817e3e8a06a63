// Port of llama.cpp's BPE path (llama-vocab.cpp: llm_tokenizer_bpe_session::tokenize, llama_decode_text). Symbols
// carry interned ids, so a merge is one hash lookup of two integers instead of llama.cpp's pair of strings; the
// order of merges and every fallback are the same.
#include "tokenizer/bpe_tokenizer.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "common/error.hpp"
#include "common/log.hpp"
#include "tokenizer/unicode.hpp"

namespace strata {

namespace {

constexpr std::string_view k_space_marker = "\xE2\x96\x81"; // U+2581, SentencePiece-style BPE's space

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// llama.cpp's llama_decode_text: every character of a normal token stands for one byte; a character outside the
// byte alphabet is written as [UNK_BYTE_0x..<token text>], as llama.cpp writes it.
std::string decode_byte_text(std::string_view text) {
    std::vector<uint32_t> cpts;
    unicode::decode_utf8(text, cpts);
    std::string out;
    for (const uint32_t c : cpts) {
        const int b = unicode::text_to_byte(c);
        if (b >= 0) {
            out += static_cast<char>(b);
            continue;
        }
        std::string utf8;
        unicode::append_utf8(utf8, c);
        out += "[UNK_BYTE_0x";
        for (const char u : utf8) out += fmt::format("{:02x}", static_cast<unsigned char>(u));
        out += text;
        out += "]";
    }
    return out;
}

std::string unescape_spaces(std::string_view text) {
    std::string out;
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

// llama.cpp's token_to_piece for BPE vocabs (special=false).
std::vector<std::string> bpe_pieces(const vocab &v, bool raw_bytes, bool escape_whitespace) {
    std::vector<std::string> pieces(static_cast<size_t>(v.size()));
    for (int32_t i = 0; i < v.size(); ++i) {
        const std::string &text = v.text(i);
        switch (v.type(i)) {
        case token_type::normal:
            pieces[i] = escape_whitespace ? unescape_spaces(text) : raw_bytes ? text : decode_byte_text(text);
            break;
        case token_type::user_defined: pieces[i] = text; break;
        case token_type::byte: {
            const int b = parse_byte_token(text);
            if (b < 0)
                fail("{}: token {} has type BYTE but its text '{}' is not of the form <0xNN>", v.data().origin, i, text);
            pieces[i] = std::string(1, static_cast<char>(b));
            break;
        }
        default: break;
        }
    }
    return pieces;
}

struct bpe_symbol {
    uint32_t offset; // in the word's encoded text
    uint32_t n;      // bytes; 0 once merged into its left neighbour
    int32_t piece;   // interned id of its text, -1 when no merge can involve it
    int32_t prev;
    int32_t next;
};

struct bpe_bigram {
    int32_t left;
    int32_t right;
    int32_t rank;
    uint32_t size;
};

// Lowest rank first; on equal ranks the leftmost pair (llama.cpp's llm_bigram_bpe::comparator).
struct bpe_bigram_order {
    bool operator()(const bpe_bigram &l, const bpe_bigram &r) const {
        return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
};

pre_tokenizer_spec spec_for(const vocab &v) {
    const auto spec = find_pre_tokenizer(v.data().pre);
    if (!spec) {
        std::string known;
        for (const std::string_view name : pre_tokenizer_names()) known += fmt::format("{}{}", known.empty() ? "" : ", ", name);
        fail("{}: unknown pre-tokenizer tokenizer.ggml.pre = \"{}\"; Strata knows the same names as llama.cpp: {}. "
             "Convert the model with a llama.cpp that knows its tokenizer, or set the key to the pre-tokenizer it "
             "was trained with",
             v.data().origin, v.data().pre, known);
    }
    return *spec;
}

} // namespace

bpe_tokenizer::bpe_tokenizer(class vocab v) : tokenizer(std::move(v)), pre_(spec_for(vocab())) {
    const pre_tokenizer_spec spec = spec_for(vocab());
    ignore_merges_ = (spec.flags & pre_ignore_merges) != 0;
    newline_words_whole_ = (spec.flags & pre_newline_words_whole) != 0;
    escape_whitespace_ = (spec.flags & pre_escape_whitespace) != 0;
    raw_bytes_ = (spec.flags & pre_raw_bytes) != 0;
    set_pieces(bpe_pieces(vocab(), raw_bytes_, escape_whitespace_));

    const int32_t n = n_vocab();
    piece_ids_.reserve(static_cast<size_t>(n) * 2);
    for (int32_t i = 0; i < n; ++i) piece_ids_.emplace(token_text(i), find_token(token_text(i)));
    next_piece_id_ = n;

    const std::vector<std::string> &lines = vocab().data().merges;
    if (lines.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail("{}: {} merges is more than ranks can address", vocab().data().origin, lines.size());
    merges_.reserve(lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
        // llama.cpp splits at the first space after the first byte; a line without one is the pair ("", "").
        const std::string_view line = lines[i];
        const size_t space = line.find(' ', 1);
        const std::string_view left = space == std::string_view::npos ? std::string_view() : line.substr(0, space);
        const std::string_view right = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
        if (left.empty() || right.empty()) {
            log::warn("tokenizer", "{}: tokenizer.ggml.merges[{}] = \"{}\" is not two symbols separated by a space; "
                                   "it can never apply (as in llama.cpp)",
                      vocab().data().origin, i, line);
            continue;
        }
        const int32_t l = intern(left), r = intern(right);
        std::string joined;
        joined.reserve(left.size() + right.size());
        joined.append(left).append(right);
        const int32_t result = intern(joined);
        merges_.emplace(pair_key(l, r), merge{static_cast<int32_t>(i), result}); // the first rank of a pair wins
    }

    byte_piece_.assign(256, -1);
    byte_fallback_.assign(256, -1);
    static constexpr char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        if (!raw_bytes_) {
            const auto it = piece_ids_.find(unicode::byte_to_text(static_cast<uint8_t>(b)));
            byte_piece_[b] = it == piece_ids_.end() ? -1 : it->second;
            byte_fallback_[b] = find_token(std::string(1, static_cast<char>(b)));
        } else {
            const char spelled[] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            byte_fallback_[b] = find_token(std::string_view(spelled, sizeof spelled));
        }
    }
}

int32_t bpe_tokenizer::intern(std::string_view text) {
    const auto [it, inserted] = piece_ids_.emplace(std::string(text), next_piece_id_);
    if (inserted) ++next_piece_id_;
    return it->second;
}

const bpe_tokenizer::merge *bpe_tokenizer::find_merge(int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return nullptr;
    const auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
}

void bpe_tokenizer::encode_text(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::string escaped;
    if (escape_whitespace_) {
        for (const char c : text) {
            if (c == ' ')
                escaped += k_space_marker;
            else
                escaped += c;
        }
        text = escaped;
    }
    pre_split_result words;
    pre_.split(text, words);

    std::string utf8, enc;
    std::vector<bpe_symbol> symbols;
    std::vector<bpe_bigram> heap_storage;
    std::priority_queue<bpe_bigram, std::vector<bpe_bigram>, bpe_bigram_order> queue(bpe_bigram_order{},
                                                                                     std::move(heap_storage));
    size_t begin = 0;
    for (const size_t length : words.lengths) {
        utf8.clear();
        for (size_t i = begin; i < begin + length; ++i) unicode::append_utf8(utf8, words.cpts[i]);
        begin += length;
        if (utf8.empty()) continue;

        // The word in the symbols' alphabet (GPT-2's byte characters, or the raw UTF-8).
        enc.clear();
        if (raw_bytes_) {
            enc = utf8;
        } else {
            for (const char c : utf8) enc += unicode::byte_to_text(static_cast<uint8_t>(c));
        }
        // A word that is a whole token is that token, whatever the merges would make of it (ignore_merges; and
        // Gemma 4's runs of newlines, as llama.cpp special-cases them).
        if (ignore_merges_ || (newline_words_whole_ && enc.find_first_not_of('\n') == std::string::npos)) {
            const int32_t whole = find_token(enc);
            if (whole >= 0) {
                out.push_back(whole);
                continue;
            }
        }
        // One symbol per character.
        symbols.clear();
        if (!raw_bytes_) {
            uint32_t off = 0;
            for (const char c : utf8) {
                const auto b = static_cast<uint8_t>(c);
                const auto len = static_cast<uint32_t>(unicode::byte_to_text(b).size());
                const auto index = static_cast<int32_t>(symbols.size());
                symbols.push_back({off, len, byte_piece_[b], index - 1, index + 1});
                off += len;
            }
        } else {
            for (size_t off = 0; off < enc.size();) {
                const size_t n = std::min(unicode::utf8_length(static_cast<unsigned char>(enc[off])), enc.size() - off);
                const auto it = piece_ids_.find(std::string_view(enc).substr(off, n));
                const auto index = static_cast<int32_t>(symbols.size());
                symbols.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(n),
                                   it == piece_ids_.end() ? -1 : it->second, index - 1, index + 1});
                off += n;
            }
        }
        symbols.back().next = -1;

        const auto add_bigram = [&](int32_t left, int32_t right) {
            if (left < 0 || right < 0) return;
            const merge *m = find_merge(symbols[left].piece, symbols[right].piece);
            if (m == nullptr) return;
            queue.push({left, right, m->rank, symbols[left].n + symbols[right].n});
        };
        for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) add_bigram(i - 1, i);
        while (!queue.empty()) {
            const bpe_bigram bigram = queue.top();
            queue.pop();
            bpe_symbol &left = symbols[bigram.left];
            bpe_symbol &right = symbols[bigram.right];
            // Stale: a side was merged away, or grew (then the pair's text is no longer the one queued).
            if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
            left.piece = find_merge(left.piece, right.piece)->result;
            left.n += right.n;
            right.n = 0;
            left.next = right.next;
            if (right.next >= 0) symbols[right.next].prev = bigram.left;
            add_bigram(left.prev, bigram.left);
            add_bigram(bigram.left, left.next);
        }

        for (int32_t i = 0; i != -1; i = symbols[i].next) {
            const bpe_symbol &s = symbols[i];
            if (s.piece >= 0 && s.piece < n_vocab()) {
                out.push_back(s.piece);
                continue;
            }
            // No token spells this symbol: each byte of its text on its own, when the vocab has a token for it.
            for (uint32_t k = 0; k < s.n; ++k) {
                const int32_t id = byte_fallback_[static_cast<uint8_t>(enc[s.offset + k])];
                if (id >= 0) out.push_back(id);
            }
        }
    }
}

} // namespace strata
