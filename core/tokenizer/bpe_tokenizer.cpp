// Port of llama.cpp's BPE path (llama-vocab.cpp: llm_tokenizer_bpe_session::tokenize, llama_decode_text) and of the
// parts of Hugging Face tokenizers' BPE model that differ (byte_fallback, unk, fuse_unk). Symbols carry interned
// ids, so a merge is one hash lookup of two integers instead of a pair of strings; the order of merges and every
// fallback are the same.
#include "tokenizer/bpe_tokenizer.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "common/error.hpp"
#include "common/log.hpp"
#include "tokenizer/unicode.hpp"

namespace strata {

namespace {

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

// Lowest rank first; on equal ranks the leftmost pair (llama.cpp's llm_bigram_bpe::comparator, and the order of
// Hugging Face's merge heap).
struct bpe_bigram_order {
    bool operator()(const bpe_bigram &l, const bpe_bigram &r) const {
        return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
};

constexpr char k_hex[] = "0123456789ABCDEF";

} // namespace

bpe_tokenizer::bpe_tokenizer(class vocab v)
    : tokenizer(std::move(v)), rules_(vocab().data().bpe),
      pre_(rules_.splits, vocab().data().pre.empty() ? vocab().data().origin : vocab().data().pre) {
    // llama.cpp's token_to_piece for BPE (special=false), or Hugging Face's ByteLevel / Replace+ByteFallback
    // decoders: GPT-2's byte characters back to bytes, then the replacements that spell spaces undone.
    set_pieces(pieces_by_type(vocab(), [this](const std::string &text) {
        std::string p = rules_.byte_level ? decode_byte_text(text) : text;
        for (auto it = rules_.replacements.rbegin(); it != rules_.replacements.rend(); ++it)
            if (it->first == " ") p = replace_all(p, it->second, it->first);
        return p;
    }));
    const int32_t n = n_vocab();
    piece_ids_.reserve(static_cast<size_t>(n) * 2);
    for (int32_t i = 0; i < n; ++i) piece_ids_.emplace(token_text(i), find_token(token_text(i)));
    next_piece_id_ = n;

    const auto &pairs = vocab().data().merges;
    if (pairs.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail("{}: {} merges is more than ranks can address", vocab().data().origin, pairs.size());
    merges_.reserve(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
        const auto &[left, right] = pairs[i];
        if (left.empty() || right.empty()) continue; // no symbol is empty: it can never apply
        const int32_t l = intern(left), r = intern(right);
        const int32_t result = intern(left + right);
        merges_.emplace(pair_key(l, r), merge{static_cast<int32_t>(i), result}); // the first rank of a pair wins
    }

    byte_piece_.assign(256, -1);
    byte_token_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
        if (rules_.byte_level) {
            const auto it = piece_ids_.find(unicode::byte_to_text(static_cast<uint8_t>(b)));
            byte_piece_[b] = it == piece_ids_.end() ? -1 : it->second;
        }
        if (rules_.unknown == unknown_symbol::single_bytes) {
            byte_token_[b] = find_token(std::string(1, static_cast<char>(b)));
        } else {
            const char spelled[] = {'<', '0', 'x', k_hex[b >> 4], k_hex[b & 15], '>'};
            byte_token_[b] = find_token(std::string_view(spelled, sizeof spelled));
        }
    }
    // A symbol no token spells becomes the unknown token, unless byte fallback spells its bytes: a vocabulary that
    // may need one must name it (Hugging Face would drop the text silently).
    const bool bytes_spell_everything =
        std::all_of(byte_token_.begin(), byte_token_.end(), [](int32_t id) { return id >= 0; });
    const bool may_need_unknown = rules_.unknown == unknown_symbol::unknown_token ||
                                  (rules_.unknown == unknown_symbol::byte_fallback && !bytes_spell_everything);
    if (may_need_unknown && vocab().data().unk < 0)
        fail("{}: the BPE model stands an unknown token for symbols no token spells{}, but names none "
             "(set model.unk_token)",
             vocab().data().origin,
             rules_.unknown == unknown_symbol::byte_fallback ? " (byte_fallback lacks some <0xNN> tokens)" : "");
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

void bpe_tokenizer::encode_text(std::string_view text, bool, bool at_start, std::vector<int32_t> &out) const {
    // Normalization (tokenizer.json's normalizer and Metaspace, llama.cpp's escaped spaces).
    std::string normalized;
    const bool normalize = rules_.nfc || !rules_.replacements.empty() || !rules_.prepend.empty();
    if (normalize) {
        normalized = rules_.nfc ? unicode::nfc(text) : std::string(text);
        for (const auto &[from, to] : rules_.replacements) normalized = replace_all(normalized, from, to);
        if (!rules_.prepend.empty() && !normalized.empty() &&
            (rules_.prepend_where == prepend_scheme::every_stretch || at_start) &&
            !(rules_.prepend_unless_present && normalized.starts_with(rules_.prepend)))
            normalized.insert(0, rules_.prepend);
        text = normalized;
    }

    pre_split_result words;
    pre_.split(text, words);
    std::string utf8;
    size_t begin = 0;
    for (const size_t length : words.lengths) {
        utf8.clear();
        for (size_t i = begin; i < begin + length; ++i) unicode::append_utf8(utf8, words.cpts[i]);
        begin += length;
        if (!utf8.empty()) encode_word(utf8, out);
    }
}

void bpe_tokenizer::encode_word(std::string_view utf8, std::vector<int32_t> &out) const {
    // The word in the symbols' alphabet (GPT-2's byte characters, or the raw UTF-8).
    std::string enc;
    if (rules_.byte_level) {
        enc.reserve(utf8.size() * 2);
        for (const char c : utf8) enc += unicode::byte_to_text(static_cast<uint8_t>(c));
    } else {
        enc = utf8;
    }
    // A word that is a whole token is that token, whatever the merges would make of it (ignore_merges; and
    // Gemma 4's runs of newlines, as llama.cpp special-cases them).
    if (rules_.ignore_merges || (rules_.newline_words_whole && enc.find_first_not_of('\n') == std::string::npos)) {
        const int32_t whole = find_token(enc);
        if (whole >= 0) {
            out.push_back(whole);
            return;
        }
    }

    // One symbol per character.
    std::vector<bpe_symbol> symbols;
    symbols.reserve(enc.size());
    if (rules_.byte_level) {
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

    std::priority_queue<bpe_bigram, std::vector<bpe_bigram>, bpe_bigram_order> queue;
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

    const int32_t unk = vocab().data().unk;
    bool previous_unknown = false;
    for (int32_t i = 0; i != -1; i = symbols[i].next) {
        const bpe_symbol &s = symbols[i];
        if (s.piece >= 0 && s.piece < n_vocab()) {
            out.push_back(s.piece);
            previous_unknown = false;
            continue;
        }
        // No token spells this symbol.
        const std::string_view text = std::string_view(enc).substr(s.offset, s.n);
        switch (rules_.unknown) {
        case unknown_symbol::single_bytes:
        case unknown_symbol::byte_tokens:
            // Each byte on its own, when the vocab has a token for it (llama.cpp drops the others).
            for (const char c : text)
                if (const int32_t id = byte_token_[static_cast<uint8_t>(c)]; id >= 0) out.push_back(id);
            break;
        case unknown_symbol::byte_fallback:
            if (std::all_of(text.begin(), text.end(), [&](char c) { return byte_token_[static_cast<uint8_t>(c)] >= 0; })) {
                for (const char c : text) out.push_back(byte_token_[static_cast<uint8_t>(c)]);
                previous_unknown = false;
                continue;
            }
            [[fallthrough]];
        case unknown_symbol::unknown_token:
            if (!(rules_.fuse_unknown && previous_unknown)) out.push_back(unk);
            previous_unknown = true;
            continue;
        }
        previous_unknown = false;
    }
}

} // namespace strata
