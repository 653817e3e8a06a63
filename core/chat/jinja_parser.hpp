// Jinja tokens -> syntax tree. The grammar and operator precedence are @huggingface/jinja's, which differ from Python
// Jinja2's in places that change output (`~` binds as tightly as `+`; a sign binds tighter than a filter: -x|abs is
// (-x)|abs), plus what Python Jinja2 has and it lacks: test arguments (`is divisibleby(3)`), {% raw %}, member access
// and calls on a filter's result.
#pragma once

#include "chat/chat_template.hpp"
#include "chat/jinja_ast.hpp"

#include <memory>
#include <string_view>

namespace strata::chat::jinja {

// Throws strata::error "origin:line:col: what" with the line and a caret.
std::shared_ptr<const program> parse_program(std::string_view source, std::string_view origin,
                                             const parse_limits &limits);

} // namespace strata::chat::jinja
