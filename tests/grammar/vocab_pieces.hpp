// The byte strings of a byte-level BPE vocabulary (GPT-2 style, e.g. Llama 3) read straight from a llama.cpp vocab
// GGUF, for the token filter's tests and benchmark without the tokenizer library. Each character of a token's text
// stands for one byte: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF as themselves, the other 68 bytes as U+0100 + their
// rank in byte order. Control tokens (tokenizer.ggml.token_type 3) get an empty piece: the grammar never allows them.
#pragma once

#include "gguf/gguf_file.hpp"

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::grammar::testing {

inline std::string gpt2_text_to_bytes(std::string_view text) {
    static const std::array<int32_t, 0x144> byte_of = [] {
        std::array<int32_t, 0x144> t{};
        t.fill(-1);
        uint32_t next = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            t[self ? b : next++] = static_cast<int32_t>(b);
        }
        return t;
    }();
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        uint32_t cp = c;
        size_t n = 1;
        if (c >= 0xC0 && c < 0xE0 && i + 1 < text.size()) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
            n = 2;
        } else if (c >= 0x80) {
            throw std::runtime_error("byte-level token text with a character above U+07FF: " + std::string(text));
        }
        if (cp >= byte_of.size() || byte_of[cp] < 0)
            throw std::runtime_error("byte-level token text with an unmapped character: " + std::string(text));
        out += static_cast<char>(byte_of[cp]);
        i += n;
    }
    return out;
}

struct vocab_pieces {
    std::vector<std::string> pieces;
    size_t n_control = 0;
    size_t n_user_defined = 0;
};

inline vocab_pieces load_byte_level_pieces(const std::string &path) {
    const gguf::file f = gguf::file::open(path);
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (!tokens) throw std::runtime_error(path + " has no tokenizer.ggml.tokens");
    const auto types = f.get_int_array("tokenizer.ggml.token_type").value_or(std::vector<int64_t>{});
    vocab_pieces v;
    v.pieces.reserve(tokens->size());
    for (size_t i = 0; i < tokens->size(); ++i) {
        const int64_t type = i < types.size() ? types[i] : 1;
        if (type == 3) { // control: <|begin_of_text|>, <|eot_id|>, reserved ones
            v.pieces.emplace_back();
            ++v.n_control;
        } else if (type == 4) { // user-defined: plain text, not byte-encoded
            v.pieces.emplace_back((*tokens)[i]);
            ++v.n_user_defined;
        } else {
            v.pieces.push_back(gpt2_text_to_bytes((*tokens)[i]));
        }
    }
    return v;
}

} // namespace strata::grammar::testing
