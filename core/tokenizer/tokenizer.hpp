// The one tokenizer interface the engine and the frontends use. A tokenizer owns a vocab and turns text into ids
// the way llama.cpp's llama_tokenize does (special tokens cut out first, BOS/EOS as the vocab asks), and ids back
// into text. SentencePiece (spm_tokenizer) and byte-level BPE (bpe_tokenizer) implement the part between special
// tokens; make_tokenizer picks one from the vocab.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace strata {

class tokenizer {
  public:
    virtual ~tokenizer() = default;
    tokenizer(const tokenizer &) = delete;
    tokenizer &operator=(const tokenizer &) = delete;

    // add_special: llama.cpp's add_special: BOS when the vocab's add_bos is set, EOS when add_eos is set.
    // parse_special: control-token texts in `text` (e.g. "<|im_start|>") become their ids; user-defined tokens
    // are matched as whole strings either way, as llama.cpp does.
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;
    // Same, replacing the contents of `out` (its capacity is reused).
    void encode_into(std::string_view text, bool add_special, bool parse_special, std::vector<int32_t> &out) const;

    // Bytes this token contributes to the output text (may be part of a UTF-8 character): control, unknown and
    // unused tokens give "". Throws strata::error for an id out of range.
    std::string_view piece(int32_t id) const;

    // The text of a sequence of ids: the pieces in order, without the one space SentencePiece's dummy prefix put
    // in front of the first text (when the vocab adds one). So decode(encode(s)) == s for any s without
    // special-token texts. Spaces are never rewritten (no clean-up pass): this equals the streamed text.
    std::string decode(std::span<const int32_t> ids) const;

    // True when the first text piece of a sequence carries the dummy-prefix space that decode drops.
    bool drops_leading_space() const { return vocab_.data().add_space_prefix; }

    const class vocab &vocab() const { return vocab_; }
    int32_t n_vocab() const { return vocab_.size(); }
    int32_t bos() const { return vocab_.data().bos; }
    int32_t eos() const { return vocab_.data().eos; }
    bool add_bos() const { return vocab_.data().add_bos; }
    bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
    token_type type(int32_t id) const { return vocab_.type(id); }
    const std::string &token_text(int32_t id) const { return vocab_.text(id); }
    int32_t find_token(std::string_view text) const { return vocab_.find(text); }

  protected:
    explicit tokenizer(class vocab v);
    // The decoded bytes of every token (see piece()); the derived constructor sets them once, usually from
    // pieces_by_type: a normal token's text through `normal_text`, a user-defined token's text as it is, a BYTE
    // token's <0xNN> as that byte (a BYTE token spelled otherwise is a strata::error), and "" for the rest.
    void set_pieces(std::vector<std::string> pieces) { pieces_ = std::move(pieces); }
    static std::vector<std::string> pieces_by_type(const class vocab &v,
                                                   const std::function<std::string(const std::string &)> &normal_text);

    // Ids for one stretch of text between special tokens; `after_special` is true for the first stretch and for
    // one that follows a special token (SentencePiece puts its dummy prefix there); `at_start`: the stretch begins
    // the input.
    virtual void encode_text(std::string_view text, bool after_special, bool at_start,
                             std::vector<int32_t> &out) const = 0;

  private:
    class vocab vocab_;
    std::vector<std::string> pieces_;
};

// Every occurrence of `from` (non-empty) in `text` replaced by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

// The tokenizer for a vocabulary (its model says which); throws strata::error when the vocab is inconsistent or
// its pre-tokenizer is unknown.
std::unique_ptr<tokenizer> make_tokenizer(vocab_data data);

// The text of generated tokens as they come, one piece per token (piece() bytes, possibly part of a UTF-8
// character: the engine API passes pieces on as they are). It owns the dummy-prefix rule: while only control
// tokens (e.g. BOS) came before, the first piece with text drops its leading space, as decode() does.
class token_text_stream {
  public:
    token_text_stream() = default;
    // `prompt`: the ids that came before the generated ones.
    token_text_stream(const tokenizer &t, std::span<const int32_t> prompt);
    std::string_view next(int32_t id);

  private:
    const tokenizer *tok_ = nullptr;
    bool text_started_ = true;
};

} // namespace strata
