// SentencePiece-style (SPM) tokenizer, bit-exact with llama.cpp's llm_tokenizer_spm (tokenizer.ggml.model "llama").
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata {

// Values of GGUF tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class token_type : int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct spm_vocab {
    std::vector<std::string> tokens; // token texts, with spaces written as U+2581
    std::vector<float> scores;       // merge priority: higher merges first
    std::vector<token_type> types;
    int32_t bos = 1, eos = 2, unk = 0; // -1 means "none"
    int32_t pad = -1;
    bool add_bos = true;
    bool add_eos = false;
    bool add_space_prefix = true;
    // Per-token whitespace stripping around special tokens found in the text (llama.cpp's LSTRIP/RSTRIP
    // attributes; the GGUF loader sets them for Phi-3). Empty means "no token strips".
    std::vector<uint8_t> lstrip;
    std::vector<uint8_t> rstrip;
};

class spm_tokenizer {
  public:
    // Validates the vocab (equal sizes, ids in range, byte tokens spelled <0xNN>) and builds lookup tables once.
    explicit spm_tokenizer(spm_vocab v);

    // add_bos: llama.cpp's add_special — prepend BOS, and append EOS when the vocab's add_eos is set.
    // parse_special: when true, control token texts in `text` (e.g. "<s>") become their ids. User-defined
    // tokens are matched as whole strings either way, as llama.cpp does.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
    // Same, replacing the contents of `out` (its capacity is reused).
    void encode_into(std::string_view text, bool add_bos, bool parse_special, std::vector<int32_t> &out) const;

    // Bytes this token contributes to the output text: U+2581 -> ' ', <0xNN> -> that byte, user-defined ->
    // its text, control/unknown/unused -> "". Throws strata::error for an id out of range.
    std::string_view piece(int32_t id) const;

    // Concatenated pieces. With strip_leading_space_of_first (and the vocab's add_space_prefix), removes the
    // one space the dummy prefix put in front of the text: the leading space of the first token that
    // contributes text, when that token came from SPM (normal/byte) rather than from a user-defined match.
    // So decode(encode(s, bos)) == s for any s without special-token texts. (llama.cpp's detokenize differs
    // here: a leading BOS uses up its strip, so it returns " Once" for [BOS, ▁Once]; we return "Once".)
    std::string decode(std::span<const int32_t> ids, bool strip_leading_space_of_first = true) const;

    int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
    int32_t bos() const { return vocab_.bos; }
    int32_t eos() const { return vocab_.eos; }
    int32_t unk() const { return vocab_.unk; }
    int32_t pad() const { return vocab_.pad; }
    // End of generation: EOS, plus tokens llama.cpp treats as end-of-turn by their text (<|end|>, <|endoftext|>...);
    // like llama.cpp, the constructor also makes those tokens CONTROL, so type() reports them as such.
    bool is_eog(int32_t id) const;
    bool add_bos() const { return vocab_.add_bos; }
    bool add_eos() const { return vocab_.add_eos; }
    bool add_space_prefix() const { return vocab_.add_space_prefix; }
    const std::string &token_text(int32_t id) const;
    token_type type(int32_t id) const;
    // Id of the token whose text is exactly `text`, or -1.
    int32_t find_token(std::string_view text) const;

  private:
    struct text_hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    void check_id(int32_t id, const char *what) const;
    void tokenize_spm(std::string_view escaped, std::vector<int32_t> &out) const;
    void push_byte_tokens(std::string_view bytes, std::vector<int32_t> &out) const;

    spm_vocab vocab_;
    std::unordered_map<std::string, int32_t, text_hash, std::equal_to<>> token_to_id_;
    std::vector<std::string> pieces_;         // decoded bytes per token
    std::vector<int32_t> byte_to_token_;      // 256 entries; -1 when the vocab can't spell the byte
    std::vector<int32_t> special_tokens_;     // control/user-defined/unknown ids, longest text first
    std::vector<uint8_t> is_eog_;
};

} // namespace strata
