// SentencePiece-style (SPM) tokenizer, bit-exact with llama.cpp's llm_tokenizer_spm (tokenizer.ggml.model "llama"):
// spaces become U+2581, a dummy-prefix space goes before the text, and adjacent symbols merge best score first;
// characters no token spells become byte tokens <0xNN>.
#pragma once

#include "tokenizer/tokenizer.hpp"

namespace strata {

class spm_tokenizer final : public tokenizer {
  public:
    // Checks that BYTE tokens are spelled <0xNN>; builds the byte table once.
    explicit spm_tokenizer(class vocab v);

  private:
    void encode_text(std::string_view text, bool after_special, bool at_start,
                     std::vector<int32_t> &out) const override;
    void push_byte_tokens(std::string_view bytes, std::vector<int32_t> &out) const;

    std::vector<int32_t> byte_to_token_; // 256 entries; -1 when the vocab can't spell the byte
};

} // namespace strata
