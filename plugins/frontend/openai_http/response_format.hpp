// JSON bodies and Server-Sent-Events framing of completion responses, shaped exactly as OpenAI's. Pure.
#pragma once

#include "request_parse.hpp"
#include "tool_calls.hpp"

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

// The logprobs of one choice's tokens as they arrive, flat so that appending allocates only when a buffer grows.
class logprob_log {
  public:
    void reserve(size_t tokens, int32_t n_top);
    // One generated token: its bytes (as they appear in the text) and logprob; then add_alternative() n_top times.
    void add_token(std::string_view piece, float logprob);
    void add_alternative(std::string_view token_text, float logprob);
    size_t size() const { return logprob_.size(); }
    int32_t n_top() const { return n_top_; }

    // OpenAI's `logprobs` object for tokens [begin, end): completions {tokens, token_logprobs, top_logprobs,
    // text_offset}; chat {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
    std::string to_json(endpoint kind, size_t begin, size_t end) const;

  private:
    int32_t n_top_ = 0;
    std::string text_;               // the tokens' bytes back to back
    std::vector<uint32_t> text_end_; // end of each token in text_
    std::vector<float> logprob_;
    std::string alt_text_;           // the alternatives' bytes back to back, n_top_ per token
    std::vector<uint32_t> alt_end_;
    std::vector<float> alt_logprob_;
};

struct choice_result {
    std::string text;
    std::string finish_reason; // "stop" | "length" | "tool_calls" | ...
    std::string logprobs_json; // empty: null
    std::vector<tool_call> tool_calls; // chat: the calls read back from the text (tool_calls.hpp)
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
// `logprobs_json` is the choice's logprobs object for the tokens of this chunk (from logprob_log::to_json).
void append_text_chunk(std::string &out, const response_ids &ids, int32_t index, std::string_view text,
                       std::string_view logprobs_json = "null");
// Chat only: the first chunk of a choice, announcing the assistant role.
std::string role_chunk(const response_ids &ids, int32_t index);
// Chat only: the tool calls of choice `index`, each whole (name and arguments in one delta), as OpenAI streams them.
std::string tool_calls_chunk(const response_ids &ids, int32_t index, const std::vector<tool_call> &calls);
// The last chunk of a choice, carrying its finish_reason.
std::string finish_chunk(const response_ids &ids, int32_t index, std::string_view finish_reason);
// stream_options.include_usage: the chunk after all choices, with empty choices and the usage.
std::string usage_chunk(const response_ids &ids, const usage_counts &usage);

// The non-streaming response body.
std::string completion_body(const response_ids &ids, const std::vector<choice_result> &choices, const usage_counts &usage);

} // namespace strata::openai_http
