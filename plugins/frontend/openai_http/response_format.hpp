// JSON bodies and Server-Sent-Events framing of completion responses, shaped exactly as OpenAI's. Pure.
#pragma once

#include "request_parse.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::openai_http {

inline constexpr std::string_view k_sse_done = "data: [DONE]\n\n";

// What every response and chunk of one request repeats.
struct response_ids {
    endpoint kind = endpoint::completions;
    std::string id; // "cmpl-..." or "chatcmpl-..."
    int64_t created = 0;
    std::string model;
};

struct choice_result {
    std::string text;
    std::string finish_reason; // "stop" | "length" | ...
};

struct usage_counts {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
};

// Appends `s` as the inside of a JSON string; invalid UTF-8 becomes U+FFFD. Allocates only when `out` grows.
void append_json_escaped(std::string &out, std::string_view s);

// One SSE event carrying a JSON object: "data: <json>\n\n".
std::string sse_event(std::string_view json);

// A streamed piece of text for choice `index`, appended to `out` as a whole SSE event.
void append_text_chunk(std::string &out, const response_ids &ids, int32_t index, std::string_view text);
// Chat only: the first chunk of a choice, announcing the assistant role.
std::string role_chunk(const response_ids &ids, int32_t index);
// The last chunk of a choice, carrying its finish_reason.
std::string finish_chunk(const response_ids &ids, int32_t index, std::string_view finish_reason);
// stream_options.include_usage: the chunk after all choices, with empty choices and the usage.
std::string usage_chunk(const response_ids &ids, const usage_counts &usage);

// The non-streaming response body.
std::string completion_body(const response_ids &ids, const std::vector<choice_result> &choices, const usage_counts &usage);

} // namespace strata::openai_http
