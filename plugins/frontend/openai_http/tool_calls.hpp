// Tool calls in a model's output, parsed back into OpenAI's tool_calls the way vLLM's tool parsers read them: each
// model family writes calls in its own format (Hermes/Qwen <tool_call>{...}</tool_call>, Llama 3.x bare JSON after
// an optional <|python_tag|>, Mistral [TOOL_CALLS][...], DeepSeek V3's <｜tool▁calls▁begin｜> blocks). The format is
// vLLM's --tool-call-parser name, or recognised from the chat template. Pure; no engine, no sockets.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::openai_http {

enum class tool_format { none, hermes, llama3_json, mistral, deepseek_v3 };

// vLLM's --tool-call-parser names ("hermes", "llama3_json", "mistral", "deepseek_v3"; "none"); nullopt otherwise.
std::optional<tool_format> tool_format_from_name(std::string_view name);
const char *tool_format_name(tool_format f);
// The format a chat template's tool-use instructions ask for, by the markers it writes; none when unrecognised.
tool_format detect_tool_format(std::string_view chat_template);
// The marker texts of a format that are special tokens in the models using it: the frontend shows a generated
// marker token as this text, since special tokens have no text of their own.
std::vector<std::string_view> tool_markers(tool_format f);

struct tool_call {
    std::string name;
    std::string arguments; // JSON text, as OpenAI sends it
};

struct parsed_output {
    std::string content; // the text that is not a call
    std::vector<tool_call> calls;
};

// The whole generated text split into content and calls. A call that does not parse stays in the content (as in
// vLLM, the client then sees what the model wrote).
parsed_output parse_tool_calls(tool_format f, std::string_view text);

// While streaming: how many leading bytes of the text so far are certainly content (no call can begin in them),
// so they can be sent; the rest waits for the end of the generation.
size_t tool_content_prefix(tool_format f, std::string_view text);

} // namespace strata::openai_http
