// libFuzzer target for the byte-level BPE path: the first byte picks one of llama.cpp's pre-tokenizers (every
// tokenizer.ggml.pre name), the rest is the text. The vocab is synthetic: the 256 byte characters plus merges that
// build a few words, so every regex and splitter runs. Ids must be in range, and for valid UTF-8 without U+2581
// (the escaped space of SentencePiece-style names) decode(encode(text)) must give the text back; only strata::error may come out (the regexes' match limit).
#include "common/error.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

const strata::tokenizer &tokenizer_for(size_t index) {
    static const auto names = strata::pre_tokenizer_names();
    static std::map<size_t, std::unique_ptr<strata::tokenizer>> cache;
    auto &slot = cache[index % names.size()];
    if (!slot) {
        const auto spec = *strata::find_pre_tokenizer(names[index % names.size()]);
        strata::vocab_data v;
        v.model = strata::vocab_model::bpe;
        v.origin = "fuzz";
        v.pre = std::string(spec.name);
        v.bpe = strata::rules_for(spec);
        for (int b = 0; b < 256; ++b) v.tokens.emplace_back(strata::unicode::byte_to_text(static_cast<uint8_t>(b)));
        if (!v.bpe.byte_level) // raw-byte pre-tokenizers fall back to <0xNN> tokens
            for (int b = 0; b < 256; ++b) v.tokens.push_back(fmt::format("<0x{:02X}>", b));
        for (const auto &[l, r] : {std::pair{"h", "e"}, {"he", "l"}, {"hel", "l"}, {"hell", "o"}, {"\xC4\xA0", "t"},
                                   {"\xC4\xA0t", "h"}, {"1", "2"}, {"12", "3"}}) {
            v.merges.emplace_back(l, r);
            v.tokens.push_back(std::string(l) + r);
        }
        v.tokens.emplace_back("\xE2\x96\x81"); // U+2581, the escaped space of SentencePiece-style names
        v.tokens.emplace_back("<|endoftext|>");
        v.eos = static_cast<int32_t>(v.tokens.size() - 1);
        v.types.assign(v.tokens.size(), strata::token_type::normal);
        v.types.back() = strata::token_type::control;
        if (!v.bpe.byte_level)
            for (size_t i = 256; i < 512; ++i) v.types[i] = strata::token_type::byte;
        slot = strata::make_tokenizer(std::move(v));
    }
    return *slot;
}

bool valid_utf8(std::string_view s) {
    std::vector<uint32_t> cpts;
    strata::unicode::decode_utf8(s, cpts);
    std::string back;
    for (const uint32_t c : cpts) strata::unicode::append_utf8(back, c);
    return back == s && s.find("\xEF\xBF\xBD") == std::string_view::npos;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const strata::tokenizer &tok = tokenizer_for(data[0]);
    const std::string_view text(reinterpret_cast<const char *>(data + 1), size - 1);
    try {
        const auto ids = tok.encode(text, false, false);
        for (const int32_t id : ids) check(id >= 0 && id < tok.n_vocab());
        if (valid_utf8(text) && text.find("\xE2\x96\x81") == std::string_view::npos &&
            text.find("<|endoftext|>") == std::string_view::npos)
            check(tok.decode(ids) == text);
    } catch (const strata::error &) {
    }
    return 0;
}
