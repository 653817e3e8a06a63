// Jinja source -> tokens, the way @huggingface/jinja reads a template: a single trailing newline dropped,
// lstrip_blocks and trim_blocks on (as transformers' apply_chat_template sets them), {% generation %} tags removed,
// then text and tags split with {%- -%} {{- -}} {#- -#} whitespace control. Also {% raw %}...{% endraw %}, which
// @huggingface/jinja lacks. Every token keeps its byte offset in the original source for messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::chat::jinja {

// A syntax error and where it is (a byte offset into the source); the caller adds line, column and an excerpt.
struct syntax_error {
    std::string message;
    uint32_t offset;
};

enum class token_kind : uint8_t {
    text,     // template text between tags
    raw_text, // the body of {% raw %}...{% endraw %}
    comment,  // {# ... #}
    number,   // 12, 1.5, -3 (a sign right after an operator or bracket belongs to the number)
    string,   // 'text' or "text", escapes resolved
    identifier,
    equals, // =
    open_paren,
    close_paren,
    open_statement,   // {%
    close_statement,  // %}
    open_expression,  // {{
    close_expression, // }}
    open_bracket,
    close_bracket,
    open_brace,
    close_brace,
    comma,
    dot,
    colon,
    pipe,
    additive,       // + - ~
    multiplicative, // * / // %
    power,          // **
    comparison,     // == != < > <= >=
    unary,          // a + or - that is a sign, not an operator
};

struct token {
    token_kind kind;
    std::string text;
    uint32_t offset; // where the token starts in the original source
};

// `source` must be valid UTF-8. Throws syntax_error.
std::vector<token> tokenize(std::string_view source);

const char *token_kind_name(token_kind kind);

} // namespace strata::chat::jinja
