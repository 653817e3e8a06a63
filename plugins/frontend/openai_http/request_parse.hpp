// Turns the JSON body of POST /v1/completions or /v1/chat/completions into a validated generation request, or into
// the OpenAI-shaped error the client should get. Pure: no sockets, no engine, no files (tested on its own).
#pragma once

#include "api_error.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata::openai_http {

enum class endpoint { completions, chat_completions };

struct generation_request {
    endpoint kind = endpoint::completions;
    std::string prompt_text;                 // completions with a string prompt
    std::vector<int32_t> prompt_tokens;      // completions with a token-id prompt (used when non-empty)
    // chat: what the engine's chat template renders (apply_chat_template's request JSON: messages, tools,
    // add_generation_prompt, chat_template_kwargs, chat_template), checked here so a bad field is a 400 naming it
    std::string chat_request;
    bool tools_given = false;        // chat: a non-empty 'tools' and tool_choice not "none": parse tool calls back
    bool parallel_tool_calls = true; // false: only the first call is returned
    // tool_choice "required" or a named function: the output is constrained to calls (vLLM's way: a JSON array of
    // {"name", "parameters"}, or the named function's arguments object) and read back as such.
    enum class forced_tools { none, named, required } forced = forced_tools::none;
    std::string forced_name;
    // Constrained decoding (strata_request.constraint_kind / constraint): response_format, tool_choice, and
    // llama.cpp's and vLLM's fields for the same (grammar, json_schema, guided_json, guided_grammar, guided_choice,
    // guided_regex).
    int32_t constraint_kind = STRATA_CONSTRAINT_NONE;
    std::string constraint;
    strata_sampling_params sampling{};       // defaults merged with the request's fields
    bool max_tokens_given = false;           // false: the endpoint's default applies (see server)
    bool seed_given = false;
    int32_t n = 1;
    bool stream = false;
    bool include_usage = false;
    bool echo = false;                       // completions: the prompt text comes first (streaming: its own first chunk)
    float presence_penalty = 0.f;  // OpenAI's, [-2, 2]; carried by strata_request since ABI 1.4
    float frequency_penalty = 0.f;
    int32_t logprobs = 0;          // strata_request.logprobs: 0 none, -1 the chosen token's only, n: also top n
    std::vector<std::string> stop;
    std::string model; // as the client wrote it (the served name when it was omitted)
};

struct parse_context {
    std::vector<std::string> served_model_names; // ids a request may name; the first is the default
    strata_sampling_params defaults{};
    // The engine reads penalties and logprobs only from ABI 1.4 on; before that they stay "not supported yet".
    bool penalties_and_logprobs = true;
};

// Either the request or the error (status 400 for bad JSON/types/ranges, 404 for an unknown model).
using parse_result = std::variant<generation_request, api_error>;

parse_result parse_generation_request(std::string_view body, endpoint kind, const parse_context &ctx);

// POST /tokenize: {"prompt": "...", "add_special_tokens": true} or vLLM's chat form {"messages": [...], "tools",
// "add_generation_prompt", "chat_template_kwargs", "chat_template"}, which gives the ids /v1/chat/completions feeds
// the model for the same fields.
struct tokenize_request {
    std::string prompt;
    std::string chat_request; // the chat form's apply_chat_template request when non-empty
    bool add_special_tokens = true;
};
std::variant<tokenize_request, api_error> parse_tokenize_request(std::string_view body);

// POST /detokenize: {"tokens": [ids]}.
std::variant<std::vector<int32_t>, api_error> parse_detokenize_request(std::string_view body);

} // namespace strata::openai_http
