// A model's chat prompts: its chat templates (the default one and named ones such as "tool_use"), rendered from an
// OpenAI-style chat request the way vLLM prepares it for transformers' apply_chat_template (content parts joined or
// kept, tool-call arguments given to the template as objects, chat_template_kwargs as template variables, the
// "tool_use" template when tools are given). Built once per model; render() is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"

namespace strata::chat {

// How message content reaches the template (vLLM's --chat-template-content-format).
enum class content_format {
    automatic, // "openai" when the template walks content parts, else "string"
    string,    // text parts joined with "\n" into one string
    openai,    // a list of {"type": "text", "text": ...}
};

// "auto" | "string" | "openai"; nullopt otherwise.
std::optional<content_format> content_format_from_name(std::string_view name);

struct template_source {
    std::string name;   // "default", "tool_use", ...
    std::string text;   // the Jinja source
    std::string origin; // for messages: "tokenizer.chat_template of model.gguf", a file path, "built-in chatml"
};

// The built-in templates (chatml, llama2, llama3, mistral, phi3, gemma, plain): for --chat-template NAME and for
// models that carry none.
std::optional<template_source> builtin_template(std::string_view name);
std::vector<std::string_view> builtin_template_names();

class chat_formatter {
  public:
    // Parses every template once. A template that does not parse is kept with its error: start-up goes on (a model
    // can still serve completions) and every chat request it would render is refused with that error.
    // `bos_token`/`eos_token`: the texts templates see; `adds_bos`: the prompt is tokenized with the vocabulary's
    // BOS added, so a BOS text the template wrote at the start is removed (as llama.cpp does).
    chat_formatter(std::vector<template_source> templates, std::string bos_token, std::string eos_token, bool adds_bos,
                   content_format format);
    ~chat_formatter();
    chat_formatter(chat_formatter &&) noexcept;
    chat_formatter &operator=(chat_formatter &&) noexcept;

    // `request`: {"messages": [...], "tools"?: [...], "add_generation_prompt"?: true,
    // "chat_template_kwargs"?: {...}, "chat_template"?: "a template name or text"}. Returns the prompt text.
    // Throws strata::error for a bad request or a template error (template_exception for raise_exception).
    std::string render(const nlohmann::ordered_json &request) const;

    // The source of a template ("default" when empty): for tool-call format detection and `runtime plan`.
    const template_source *find(std::string_view name = {}) const;
    content_format format_for(std::string_view name = {}) const;
    const std::vector<template_source> &templates() const;

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace strata::chat
