// libFuzzer target for the Jinja chat-template engine: the bytes up to the first NUL are a template, the bytes after
// it a JSON context (a conversation with tools when absent or not JSON). Parse and render under small limits; only
// strata::error may come out (a syntax error, a runtime error, a limit reached). A crash, a sanitizer report, another
// exception or a render that takes seconds is a finding.
#include "chat/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

volatile size_t sink;

const nlohmann::ordered_json &default_context() {
    static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Zürich?"}]},
        {"role": "assistant", "content": null, "reasoning_content": "<think>x</think>",
         "tool_calls": [{"id": "Ab12Cd34E", "type": "function",
                         "function": {"name": "get_weather",
                                      "arguments": {"city": "Zürich", "days": 3, "x": [1.5, true, null]}}}]},
        {"role": "tool", "tool_call_id": "Ab12Cd34E", "name": "get_weather", "content": "{\"t\": 21.5}"},
        {"role": "assistant", "content": "<think>\nok\n</think>\n\n21.5 °C"},
        {"role": "user", "content": "Thanks"}
      ],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                   "days": {"type": "integer", "enum": [1, 2]}, "x": {"type": "array", "items": {"type": "number"}}},
                   "required": ["city"]}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
    })");
    return context;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view input(reinterpret_cast<const char *>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);
    nlohmann::ordered_json context = default_context();
    if (nul != std::string_view::npos) {
        auto parsed = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, false);
        if (!parsed.is_discarded()) context = std::move(parsed);
    }
    strata::chat::parse_limits parse_limits;
    parse_limits.max_nesting = 64;
    strata::chat::render_options options;
    options.limits.max_steps = 200000;
    options.limits.max_output_bytes = 1 << 16;
    options.limits.max_memory_bytes = 8 << 20;
    options.limits.max_depth = 128;
    options.now = [] {
        std::tm t{};
        t.tm_year = 126;
        t.tm_mday = 2;
        return t;
    };
    try {
        const auto program = strata::chat::template_program::parse(source, "fuzz.jinja", parse_limits);
        sink = sink + program.render(context, options).size();
    } catch (const strata::error &) {
    }
    return 0;
}
