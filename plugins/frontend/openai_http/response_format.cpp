#include "response_format.hpp"

#include <nlohmann/json.hpp>

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

void append_text_chunk(std::string &out, const response_ids &ids, int32_t index, std::string_view text) {
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
    out += chat ? "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n" : "\",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
}

std::string role_chunk(const response_ids &ids, int32_t index) {
    json j = envelope(ids, true);
    j["choices"] = json::array({json{{"index", index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
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
        if (ids.kind == endpoint::chat_completions) c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
        else c["text"] = choices[i].text;
        cs.push_back(std::move(c));
    }
    j["choices"] = std::move(cs);
    j["usage"] = usage_json(usage);
    return dump(j);
}

} // namespace strata::openai_http
