// A model's vocabulary, whatever the tokenizer algorithm: token texts, scores, types, BPE merges, the special ids,
// the rules for adding BOS/EOS, the end-of-generation set and the special-token partition of a text (the texts of
// control and user-defined tokens are cut out before the algorithm sees the rest). Loaders (GGUF today,
// tokenizer.json next) fill a vocab_data; `vocab` checks it once and indexes it; the tokenizers read it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/text_rules.hpp"

namespace strata {

// Values of GGUF tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class token_type : int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// The algorithm that turns text between special tokens into ids.
enum class vocab_model {
    spm, // SentencePiece BPE over scores (GGUF tokenizer.ggml.model "llama")
    bpe, // byte-level BPE over ranked merges after a regex pre-tokenizer (GGUF "gpt2")
};

// Whose conventions decide which tokens a file did not mark are special (special_tokens.hpp).
enum class special_token_convention {
    llama_cpp,    // GGUF: llama.cpp retypes tokens by their text (any "<|im_end|>" or "</s>" becomes CONTROL)
    hugging_face, // tokenizer.json: only added tokens are special; end of generation among them by their text
};

struct vocab_data {
    vocab_model model = vocab_model::spm;
    special_token_convention convention = special_token_convention::llama_cpp;
    std::string origin; // where it came from, for messages (the model file)
    std::vector<std::string> tokens;
    std::vector<float> scores;     // SPM: merge priority, higher first; BPE: unused
    std::vector<token_type> types;
    std::vector<std::pair<std::string, std::string>> merges; // BPE: (left, right), rank = index
    std::string pre;                 // BPE: the pre-tokenizer's name, for messages (tokenizer.ggml.pre, "tokenizer.json")
    bpe_rules bpe;                   // BPE: how text is read before the merges
    int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1; // -1: none
    bool add_bos = false;
    bool add_eos = false;
    // SPM: a space goes before the text (the dummy prefix); both: decode drops the first text piece's leading space.
    bool add_space_prefix = false;
    // Per-token whitespace stripping around special tokens found in the text (llama.cpp's LSTRIP/RSTRIP
    // attributes). Empty means "no token strips".
    std::vector<uint8_t> lstrip;
    std::vector<uint8_t> rstrip;
};

// "<0xNN>" -> NN, or -1 when the text is not spelled that way (how BYTE tokens are written).
int parse_byte_token(std::string_view text);

class vocab {
  public:
    // Checks sizes, types and ids (strata::error naming data.origin and the field), then builds the indexes and
    // applies llama.cpp's special-token rules (special_tokens.hpp: roles and end of generation by text).
    explicit vocab(vocab_data data);

    const vocab_data &data() const { return d_; }
    vocab_model model() const { return d_.model; }
    int32_t size() const { return static_cast<int32_t>(d_.tokens.size()); }
    const std::string &text(int32_t id) const;
    token_type type(int32_t id) const;
    // Id of the token whose text is exactly `text` (the last one when texts repeat), or -1.
    int32_t find(std::string_view text) const;
    // End of generation: EOS, EOT, EOM, FIM pad/repo/sep, and the tokens recognised by their text.
    bool is_eog(int32_t id) const { return id >= 0 && id < size() && is_eog_[static_cast<size_t>(id)] != 0; }
    bool is_special(int32_t id) const; // control or unknown: no text unless asked for

    // One piece of a text after special tokens are cut out: raw text (token < 0) or one token.
    struct fragment {
        int32_t token;
        size_t offset;
        size_t length;
    };
    // llama.cpp's tokenizer_st_partition: the texts of special tokens (longest first) become their ids. Without
    // parse_special only user-defined tokens are cut out; control and unknown texts stay plain text.
    void partition(std::string_view text, bool parse_special, std::vector<fragment> &out) const;

    // Throws strata::error when id is outside the vocab; `what` names the caller.
    void check_id(int32_t id, const char *what) const;

  private:
    struct text_hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    vocab_data d_;
    std::unordered_map<std::string, int32_t, text_hash, std::equal_to<>> token_to_id_;
    std::vector<int32_t> special_tokens_; // control/user-defined/unknown ids, longest text first
    // The same ids by the first two bytes of their text (one-byte texts by their byte), to find in one pass over a
    // text which special tokens occur in it at all.
    std::unordered_map<uint16_t, std::vector<int32_t>> special_by_prefix_;
    std::vector<std::vector<int32_t>> special_by_byte_;
    std::vector<uint8_t> special_first_byte_;

    void specials_in(std::string_view text, std::vector<int32_t> &present) const;
    std::vector<uint8_t> is_eog_;
};

} // namespace strata
