// llama.cpp's rules for tokens a converter did not mark (llama_vocab::impl::load): end-of-turn, end-of-message and
// fill-in-the-middle tokens found by their text become CONTROL, and the end-of-generation set is built from texts
// (<|eot_id|>, <|im_end|>, ...) plus EOS/EOT/EOM and FIM pad/repo/sep, with its model-specific exceptions
// (gpt-oss's <|end|>, Gemma 4's </s>). Kept in one place because they change ids and when generation stops.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace strata {

// Retypes tokens of `d` as its convention says and returns the end-of-generation flag of every token. With
// Hugging Face's convention nothing is retyped: the end-of-generation set is EOS/EOT/EOM plus the special (added)
// tokens with one of llama.cpp's end-of-generation texts, so a plain "</s>" in a BPE vocab stays text.
std::vector<uint8_t> apply_special_token_rules(vocab_data &d, const std::function<int32_t(std::string_view)> &find);

} // namespace strata
