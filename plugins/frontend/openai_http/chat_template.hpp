// Chat messages -> one prompt string. The engine API does not expose the GGUF's tokenizer.chat_template (and a
// Jinja interpreter is out of scope), so the frontend offers built-in renderers of the common model families, chosen
// by [openai_http] chat_template; "plain" is the fallback for models without a known format. The BOS token is not
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

// Renders the conversation and the opening of the assistant's turn (the model continues from there).
std::string render_chat(chat_template t, const std::vector<chat_message> &messages);

} // namespace strata::openai_http
