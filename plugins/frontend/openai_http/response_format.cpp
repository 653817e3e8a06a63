#include "response_format.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace strata::openai_http {

namespace {

using json = nlohmann::json;

const char *object_name(endpoint k, bool chunk) {
    if (k == endpoint::chat_completions) return chunk ? "chat.completion.chunk" : "chat.completion";
    return "text_completion";
}

json envelope(const response_ids &ids, bool chunk) {
    return json{{"id", ids.id}, {"object", object_name(ids.kind, chunk)}, {"created", ids.created}, {"model", ids.model}};
}

json usage_json(const usage_counts &u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
size_t utf8_sequence(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t need = 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) need = 3;
    else if (c >= 0xF0 && c <= 0xF4) need = 4;
    else return 0;
    if (i + need > s.size()) return 0;
    for (size_t k = 1; k < need; ++k) {
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
    }
    // Overlong forms, UTF-16 surrogates (U+D800..DFFF) and code points above U+10FFFF are not UTF-8 either.
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) {
        return 0;
    }
    return need;
}

} // namespace

void append_json_escaped(std::string &out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            const size_t n = utf8_sequence(s, i);
            if (n == 0) {
                out += "\\ufffd";
                ++i;
            } else {
                out.append(s.data() + i, n);
                i += n;
            }
            continue;
        }
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 15];
            } else {
                out += static_cast<char>(c);
            }
        }
        ++i;
    }
}

std::string sse_event(std::string_view json_text) {
    std::string out;
    out.reserve(json_text.size() + 8);
    out += "data: ";
    out += json_text;
    out += "\n\n";
    return out;
}

void append_text_chunk(std::string &out, const response_ids &ids, int32_t index, std::string_view text,
                       std::string_view logprobs_json) {
    const bool chat = ids.kind == endpoint::chat_completions;
    out += "data: {\"id\":\"";
    append_json_escaped(out, ids.id);
    out += chat ? "\",\"object\":\"chat.completion.chunk\",\"created\":" : "\",\"object\":\"text_completion\",\"created\":";
    out += std::to_string(ids.created); // small-string optimisation: no heap allocation for a timestamp
    out += ",\"model\":\"";
    append_json_escaped(out, ids.model);
    out += "\",\"choices\":[{\"index\":";
    out += std::to_string(index);
    out += chat ? ",\"delta\":{\"content\":\"" : ",\"text\":\"";
    append_json_escaped(out, text);
    out += chat ? "\"},\"logprobs\":" : "\",\"logprobs\":";
    out += logprobs_json;
    out += ",\"finish_reason\":null}]}\n\n";
}

std::string role_chunk(const response_ids &ids, int32_t index) {
    json j = envelope(ids, true);
    j["choices"] = json::array({json{{"index", index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    return sse_event(dump(j));
}

namespace {

// OpenAI's tool_calls array; ids are "call_<response id>_<choice>_<n>", unique within the server's life.
json tool_calls_json(const response_ids &ids, int32_t index, const std::vector<tool_call> &calls, bool with_index) {
    json out = json::array();
    for (size_t k = 0; k < calls.size(); ++k) {
        json c = {{"id", "call_" + ids.id + "_" + std::to_string(index) + "_" + std::to_string(k)},
                  {"type", "function"},
                  {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
        if (with_index) c["index"] = k;
        out.push_back(std::move(c));
    }
    return out;
}

} // namespace

std::string tool_calls_chunk(const response_ids &ids, int32_t index, const std::vector<tool_call> &calls) {
    json j = envelope(ids, true);
    j["choices"] = json::array({json{{"index", index},
                                     {"delta", {{"tool_calls", tool_calls_json(ids, index, calls, true)}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    return sse_event(dump(j));
}

std::string finish_chunk(const response_ids &ids, int32_t index, std::string_view finish_reason) {
    json j = envelope(ids, true);
    json c = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (ids.kind == endpoint::chat_completions) c["delta"] = json::object();
    else c["text"] = "";
    j["choices"] = json::array({c});
    return sse_event(dump(j));
}

void logprob_log::reserve(size_t tokens, int32_t n_top) {
    n_top_ = n_top;
    text_end_.reserve(tokens);
    logprob_.reserve(tokens);
    text_.reserve(tokens * 4);
    const size_t alts = tokens * static_cast<size_t>(n_top);
    alt_end_.reserve(alts);
    alt_logprob_.reserve(alts);
    alt_text_.reserve(alts * 4);
}

void logprob_log::add_token(std::string_view piece, float logprob) {
    text_.append(piece);
    text_end_.push_back(static_cast<uint32_t>(text_.size()));
    logprob_.push_back(logprob);
}

void logprob_log::add_alternative(std::string_view token_text, float logprob) {
    alt_text_.append(token_text);
    alt_end_.push_back(static_cast<uint32_t>(alt_text_.size()));
    alt_logprob_.push_back(logprob);
}

namespace {

// -inf (a token the model rules out) is not JSON; OpenAI clients expect a number, vLLM sends -9999.0.
double finite_logprob(float v) { return std::isfinite(v) ? static_cast<double>(v) : -9999.0; }

json utf8_bytes(std::string_view s) {
    json b = json::array();
    for (const char c : s) b.push_back(static_cast<unsigned char>(c));
    return b;
}

} // namespace

std::string logprob_log::to_json(endpoint kind, size_t begin, size_t end) const {
    end = std::min(end, size());
    auto token = [&](size_t i) {
        const uint32_t from = i == 0 ? 0 : text_end_[i - 1];
        return std::string_view(text_).substr(from, text_end_[i] - from);
    };
    auto alternative = [&](size_t k) {
        const uint32_t from = k == 0 ? 0 : alt_end_[k - 1];
        return std::string_view(alt_text_).substr(from, alt_end_[k] - from);
    };
    const auto n_top = static_cast<size_t>(n_top_);
    if (kind == endpoint::chat_completions) {
        json content = json::array();
        for (size_t i = begin; i < end; ++i) {
            json tops = json::array();
            for (size_t k = i * n_top; k < (i + 1) * n_top; ++k) {
                tops.push_back({{"token", alternative(k)}, {"logprob", finite_logprob(alt_logprob_[k])},
                                {"bytes", utf8_bytes(alternative(k))}});
            }
            content.push_back({{"token", token(i)}, {"logprob", finite_logprob(logprob_[i])},
                               {"bytes", utf8_bytes(token(i))}, {"top_logprobs", std::move(tops)}});
        }
        return dump(json{{"content", std::move(content)}});
    }
    json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
    for (size_t i = begin; i < end; ++i) {
        tokens.push_back(token(i));
        token_logprobs.push_back(finite_logprob(logprob_[i]));
        json tops = json::object();
        // logprobs = 0 reports the chosen token alone, as vLLM does.
        if (n_top == 0) tops[std::string(token(i))] = finite_logprob(logprob_[i]);
        for (size_t k = i * n_top; k < (i + 1) * n_top; ++k) tops[std::string(alternative(k))] = finite_logprob(alt_logprob_[k]);
        top_logprobs.push_back(std::move(tops));
        offsets.push_back(i == 0 ? 0u : text_end_[i - 1]);
    }
    return dump(json{{"tokens", std::move(tokens)}, {"token_logprobs", std::move(token_logprobs)},
                     {"top_logprobs", std::move(top_logprobs)}, {"text_offset", std::move(offsets)}});
}

std::string usage_chunk(const response_ids &ids, const usage_counts &usage) {
    json j = envelope(ids, true);
    j["choices"] = json::array();
    j["usage"] = usage_json(usage);
    return sse_event(dump(j));
}

std::string completion_body(const response_ids &ids, const std::vector<choice_result> &choices, const usage_counts &usage) {
    json j = envelope(ids, false);
    json cs = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        json c = {{"index", i}, {"logprobs", nullptr}, {"finish_reason", choices[i].finish_reason}};
        if (!choices[i].logprobs_json.empty()) c["logprobs"] = json::parse(choices[i].logprobs_json);
        if (ids.kind == endpoint::chat_completions) {
            c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
            if (!choices[i].tool_calls.empty()) {
                // OpenAI: content is null when the answer is only calls.
                if (choices[i].text.empty()) c["message"]["content"] = nullptr;
                c["message"]["tool_calls"] = tool_calls_json(ids, static_cast<int32_t>(i), choices[i].tool_calls, false);
            }
        }
        else c["text"] = choices[i].text;
        cs.push_back(std::move(c));
    }
    j["choices"] = std::move(cs);
    j["usage"] = usage_json(usage);
    return dump(j);
}

} // namespace strata::openai_http
