// Helpers for the Jinja engine's tests: render a template text with a JSON context, or get the error it gives.
#pragma once

#include "chat/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace strata::chat::test_support {

using json = nlohmann::ordered_json;

inline std::string render(std::string_view source, const json &context = json::object(),
                          const render_options &options = {}) {
    return template_program::parse(source, "test.jinja").render(context, options);
}

// The message of the strata::error that parsing or rendering gives, or "(rendered: ...)" when it succeeds.
inline std::string error_of(std::string_view source, const json &context = json::object(),
                            const render_options &options = {}) {
    try {
        return "(rendered: " + render(source, context, options) + ")";
    } catch (const error &e) {
        return e.what();
    }
}

inline bool contains(const std::string &text, std::string_view part) { return text.find(part) != std::string::npos; }

} // namespace strata::chat::test_support
