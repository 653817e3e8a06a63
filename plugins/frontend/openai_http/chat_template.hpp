// Chat messages -> one prompt string, by built-in renderers of the common model families (a Jinja interpreter is out
// of scope). With [openai_http] chat_template = "auto" (the default) the family is recognised from the GGUF's
// tokenizer.chat_template by the special markers each family's template writes (see chat_template_from_jinja);
// a name forces one; "plain" is the fallback for models without a template or with an unrecognised one. The BOS token is not
// part of the text: the prompt is tokenized with add_bos.
#pragma once

#include "request_parse.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::openai_http {

enum class chat_template { plain, llama2, llama3, chatml, mistral, phi3, gemma };

// nullopt for a name that is not one of "plain|llama2|llama3|chatml|mistral|phi3|gemma".
std::optional<chat_template> chat_template_from_name(std::string_view name);

// The family whose markers a Jinja chat template (GGUF tokenizer.chat_template) writes; nullopt when none matches.
// Llama 3 <|start_header_id|>, ChatML <|im_start|>, Gemma <start_of_turn>, Phi-3 <|user|> with <|end|>,
// [INST] with <<SYS>> Llama 2, [INST] alone Mistral.
std::optional<chat_template> chat_template_from_jinja(std::string_view jinja);

// Renders the conversation and the opening of the assistant's turn (the model continues from there).
std::string render_chat(chat_template t, const std::vector<chat_message> &messages);

} // namespace strata::openai_http
