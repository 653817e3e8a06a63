// Chat templates: the Jinja programs in tokenizer_config.json / GGUF tokenizer.chat_template that turn a conversation
// into the prompt text. A template is parsed once and rendered many times; rendering follows Hugging Face's
// JavaScript engine (@huggingface/jinja) byte for byte where that engine renders, and Python Jinja2 where it lacks a
// feature. Templates and contexts are untrusted (a model file, an HTTP request), so every parse and render runs under
// limits and fails only with strata::error.
#pragma once

#include "common/error.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace strata::chat {

namespace jinja {
struct program;
}

struct parse_limits {
    size_t max_source_bytes = size_t{1} << 20; // real chat templates are 0.5-15 KiB
    int max_nesting = 128;                     // blocks in blocks plus expression depth (parentheses, operator chains)
};

struct render_limits {
    uint64_t max_steps = 5'000'000;              // evaluation steps: nodes, elements handled, 64-byte chunks of text
    size_t max_output_bytes = size_t{16} << 20;  // the rendered text, and any one string built on the way
    size_t max_memory_bytes = size_t{128} << 20; // live bytes of the render's strings, lists and dicts
    int max_depth = 512;                         // nested evaluation (expressions, blocks, macro calls) and values
    // The defaults need well under 1 MiB of stack (2 MiB with AddressSanitizer); lower max_depth on smaller stacks.
};

struct render_options {
    render_limits limits;
    // The local time strftime_now() formats; empty: the system clock in the process's time zone.
    std::function<std::tm()> now;
};

// A template's own refusal, raised with raise_exception(message) (e.g. "Conversation roles must alternate"):
// what() has the location, message() just the template's text, fit to return to the client that sent the request.
class template_exception : public error {
  public:
    template_exception(const std::string &what, std::string message) : error(what), message_(std::move(message)) {}
    const std::string &message() const { return message_; }

  private:
    std::string message_;
};

class template_program {
  public:
    // `origin` names the template in messages, e.g. "tokenizer.chat_template of model.gguf". A syntax error is a
    // strata::error "origin:line:col: what", followed by the line and a caret.
    static template_program parse(std::string_view source, std::string_view origin, const parse_limits &limits = {});

    // The context is what apply_chat_template passes: messages, tools, add_generation_prompt, bos_token, eos_token
    // and any extra keyword arguments; dicts keep their key order. Thread-safe: many renders may run at once.
    std::string render(const nlohmann::ordered_json &context, const render_options &options = {}) const;

    const std::string &origin() const;

  private:
    explicit template_program(std::shared_ptr<const jinja::program> program);
    std::shared_ptr<const jinja::program> program_;
};

} // namespace strata::chat
