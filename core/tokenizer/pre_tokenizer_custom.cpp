// Hand-written splitters for the regexes llama.cpp does not run through a regex engine
// (unicode_regex_split_custom_*). Each walks the codepoints of a piece with the category flags; the result is what
// llama.cpp produces, including its choices where a splitter and the regex it replaces could differ. They are
// also much faster than a regex on the common pre-tokenizers (GPT-2, Llama 3, Qwen2).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace strata {

namespace {

constexpr uint32_t k_out_of_range = 0xFFFFFFFF;

// One piece [begin, end) of the codepoints, with llama.cpp's accessors: outside the piece a codepoint reads as
// k_out_of_range and its flags as 0.
class piece_walker {
  public:
    piece_walker(std::span<const uint32_t> cpts, size_t begin, size_t end, std::vector<size_t> &out)
        : cpts_(cpts), begin_(begin), end_(end), prev_end_(begin), out_(out) {}

    uint32_t cpt(size_t pos) const { return pos >= begin_ && pos < end_ ? cpts_[pos] : k_out_of_range; }
    uint16_t flags(size_t pos) const { return pos >= begin_ && pos < end_ ? unicode::flags(cpts_[pos]) : uint16_t{0}; }
    bool in(size_t pos) const { return pos < end_; }
    size_t end() const { return end_; }
    size_t begin() const { return begin_; }

    // Ends the current word at `end` (nothing for an empty word); returns its length.
    size_t add(size_t end) {
        const size_t len = end - prev_end_;
        if (len > 0) out_.push_back(len);
        prev_end_ = end;
        return len;
    }

  private:
    std::span<const uint32_t> cpts_;
    size_t begin_, end_, prev_end_;
    std::vector<size_t> &out_;
};

bool has(uint16_t f, uint16_t bits) { return (f & bits) != 0; }

// ASCII lower case, which is all the contraction letters need (every codepoint whose simple lowercase is one of
// s t m d r e v l is that letter's ASCII capital).
uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// The length of a contraction ('s 't 'm 'd 're 've 'll, either case) at pos, or 0.
size_t contraction_at(const piece_walker &w, size_t pos) {
    if (w.cpt(pos) != '\'' || !w.in(pos + 1)) return 0;
    const uint32_t a = ascii_lower(w.cpt(pos + 1));
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (!w.in(pos + 2)) return 0;
    const uint32_t b = ascii_lower(w.cpt(pos + 2));
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

template <class Body> void for_each_piece(std::span<const uint32_t> cpts, std::span<const size_t> pieces,
                                          std::vector<size_t> &out, Body body) {
    size_t start = 0;
    for (const size_t length : pieces) {
        piece_walker w(cpts, start, start + length, out);
        body(w);
        start += length;
    }
}

// The whitespace tail every splitter shares: \s*[\r\n]+ (when `newline_runs`), \s+(?!\S), \s+, else one codepoint.
void whitespace_or_single(piece_walker &w, size_t &pos, bool newline_runs) {
    size_t n = 0, last_newline_end = 0;
    while (has(w.flags(pos + n), unicode::whitespace)) {
        const uint32_t c = w.cpt(pos + n);
        if (newline_runs && (c == '\r' || c == '\n')) last_newline_end = pos + n + 1;
        ++n;
    }
    if (last_newline_end > 0) {
        pos = last_newline_end;
        w.add(pos);
        return;
    }
    if (n > 1 && w.cpt(pos + n) != k_out_of_range) { // \s+(?!\S): leave the last one for the next word
        pos += n - 1;
        w.add(pos);
        return;
    }
    if (n > 0) {
        pos += n;
        w.add(pos);
        return;
    }
    w.add(++pos);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
void split_gpt2(std::span<const uint32_t> cpts, std::span<const size_t> pieces, std::vector<size_t> &out) {
    for_each_piece(cpts, pieces, out, [](piece_walker &w) {
        for (size_t pos = w.begin(); pos < w.end();) {
            const uint32_t c = w.cpt(pos);
            // llama.cpp's GPT-2 splitter matches the contractions in lower case only.
            if (c == '\'' && w.in(pos + 1)) {
                const uint32_t a = w.cpt(pos + 1);
                if (a == 's' || a == 't' || a == 'm' || a == 'd') {
                    pos += w.add(pos + 2);
                    continue;
                }
                if (w.in(pos + 2)) {
                    const uint32_t b = w.cpt(pos + 2);
                    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
                        pos += w.add(pos + 3);
                        continue;
                    }
                }
            }
            uint16_t f2 = c == ' ' ? w.flags(pos + 1) : w.flags(pos);
            if (has(f2, unicode::letter)) {
                pos += c == ' ';
                while (has(f2, unicode::letter)) f2 = w.flags(++pos);
                w.add(pos);
                continue;
            }
            if (has(f2, unicode::number)) {
                pos += c == ' ';
                while (has(f2, unicode::number)) f2 = w.flags(++pos);
                w.add(pos);
                continue;
            }
            const auto other = [](uint16_t f) {
                return !has(f, unicode::whitespace | unicode::letter | unicode::number) && f != 0;
            };
            if (other(f2)) {
                pos += c == ' ';
                while (other(f2)) f2 = w.flags(++pos);
                w.add(pos);
                continue;
            }
            whitespace_or_single(w, pos, false);
        }
    });
}

// The Llama 3 regex and its Qwen relatives:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2 takes one digit at a time (\p{N}); Qwen3.5 counts marks with letters ([\p{L}\p{M}]+).
template <size_t MaxDigits, bool Marks>
void split_llama3_like(std::span<const uint32_t> cpts, std::span<const size_t> pieces, std::vector<size_t> &out) {
    constexpr uint16_t word = Marks ? (unicode::letter | unicode::mark) : unicode::letter;
    for_each_piece(cpts, pieces, out, [](piece_walker &w) {
        for (size_t pos = w.begin(); pos < w.end();) {
            const uint32_t c = w.cpt(pos);
            const uint16_t f = w.flags(pos);
            if (const size_t n = contraction_at(w, pos)) {
                pos += w.add(pos + n);
                continue;
            }
            if (!(c == '\r' || c == '\n' || has(f, unicode::number))) {
                if (has(f, word) || has(w.flags(pos + 1), word)) {
                    ++pos;
                    while (has(w.flags(pos), word)) ++pos;
                    w.add(pos);
                    continue;
                }
            }
            if (has(f, unicode::number)) {
                size_t first = pos;
                while (has(w.flags(pos), unicode::number)) {
                    if (++pos - first >= MaxDigits) {
                        w.add(pos);
                        first = pos;
                    }
                }
                w.add(pos);
                continue;
            }
            uint16_t f2 = c == ' ' ? w.flags(pos + 1) : f;
            const auto other = [](uint16_t g) { return !has(g, unicode::whitespace | word | unicode::number); };
            // (llama.cpp tests the first codepoint's own flags here, then the next one's in the loop.)
            if (other(f2) && f != 0) {
                pos += c == ' ';
                while (other(f2) && f2 != 0) f2 = w.flags(++pos);
                for (uint32_t c2 = w.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = w.cpt(++pos)) {
                }
                w.add(pos);
                continue;
            }
            whitespace_or_single(w, pos, true);
        }
    });
}

// Kimi K2: \p{Han}+, then the GPT-4o-style word rules with Han excluded from letters, \p{N}{1,3}, and the tail.
void split_kimi_k2(std::span<const uint32_t> cpts, std::span<const size_t> pieces, std::vector<size_t> &out) {
    for_each_piece(cpts, pieces, out, [](piece_walker &w) {
        const auto letter = [&](size_t p) { return has(w.flags(p), unicode::letter) && !unicode::is_han(w.cpt(p)); };
        for (size_t pos = w.begin(); pos < w.end();) {
            const uint32_t c = w.cpt(pos);
            const uint16_t f = w.flags(pos);
            if (unicode::is_han(c)) {
                while (unicode::is_han(w.cpt(pos))) ++pos;
                w.add(pos);
                continue;
            }
            const bool lead = !(c == '\r' || c == '\n' || has(f, unicode::letter | unicode::number));
            if (letter(pos) || (lead && letter(pos + 1))) {
                if (lead) ++pos;
                while (letter(pos)) ++pos;
                pos += contraction_at(w, pos);
                w.add(pos);
                continue;
            }
            if (has(f, unicode::number)) {
                size_t first = pos;
                while (has(w.flags(pos), unicode::number)) {
                    if (++pos - first >= 3) {
                        w.add(pos);
                        first = pos;
                    }
                }
                w.add(pos);
                continue;
            }
            uint16_t f2 = c == ' ' ? w.flags(pos + 1) : f;
            const auto other = [](uint16_t g) {
                return !has(g, unicode::whitespace | unicode::letter | unicode::number) && g != 0;
            };
            if (other(f2)) {
                pos += c == ' ';
                while (other(f2)) f2 = w.flags(++pos);
                for (uint32_t c2 = w.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = w.cpt(++pos)) {
                }
                w.add(pos);
                continue;
            }
            whitespace_or_single(w, pos, true);
        }
    });
}

// AFMoE's \p{AFMoE_digits} (also llama.cpp's stand-in for Tiny Aya's \d{1,3}(?=(?:\d{3})*\b)): a run of digits is
// cut into groups of three from the right. As in llama.cpp, the text before a run stays joined to the run's first
// group ("ab12345" gives "ab12", "345"); the later regexes of both pre-tokenizers cut it off again.
void split_digit_groups(std::span<const uint32_t> cpts, std::span<const size_t> pieces, std::vector<size_t> &out) {
    for_each_piece(cpts, pieces, out, [](piece_walker &w) {
        for (size_t pos = w.begin(); pos < w.end();) {
            if (!has(w.flags(pos), unicode::number)) {
                ++pos;
                continue;
            }
            const size_t first = pos;
            while (pos < w.end() && has(w.flags(pos), unicode::number)) ++pos;
            size_t at = first + (pos - first) % 3;
            if (at > first) w.add(at);
            for (; at < pos; at += 3) w.add(at + 3);
        }
        w.add(w.end());
    });
}

// [^\n]+|[\n]+ : runs of newlines and runs of everything else.
void split_newline_runs(std::span<const uint32_t> cpts, std::span<const size_t> pieces, std::vector<size_t> &out) {
    size_t start = 0;
    for (const size_t length : pieces) {
        for (size_t pos = start, end = start + length; pos < end;) {
            const bool newline = cpts[pos] == '\n';
            const size_t run = pos;
            while (pos < end && (cpts[pos] == '\n') == newline) ++pos;
            out.push_back(pos - run);
        }
        start += length;
    }
}

} // namespace

pre_custom_splitter find_custom_splitter(std::string_view regex) {
    struct entry {
        std::string_view regex;
        pre_custom_splitter splitter;
    };
    static const entry k_entries[] = {
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", split_gpt2},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
         "\\s+(?!\\S)|\\s+",
         split_llama3_like<3, false>},
        {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
         split_llama3_like<3, false>},
        {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
         split_llama3_like<1, false>},
        {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
         "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
         split_llama3_like<1, true>},
        {"\\p{Han}+", split_kimi_k2},
        {"\\p{AFMoE_digits}", split_digit_groups},
        {"\\d{1,3}(?=(?:\\d{3})*\\b)", split_digit_groups},
        {"[^\\n]+|[\\n]+", split_newline_runs},
    };
    for (const entry &e : k_entries)
        if (e.regex == regex) return e.splitter;
    return nullptr;
}

} // namespace strata
