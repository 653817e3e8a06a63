#include "tool_calls.hpp"

#include <nlohmann/json.hpp>

namespace strata::openai_http {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view k_hermes_open = "<tool_call>";
constexpr std::string_view k_hermes_close = "</tool_call>";
constexpr std::string_view k_python_tag = "<|python_tag|>";
constexpr std::string_view k_mistral = "[TOOL_CALLS]";
constexpr std::string_view k_mistral_args = "[ARGS]";
// DeepSeek V3's markers: fullwidth vertical bars and U+2581 between the words.
constexpr std::string_view k_ds_calls_begin = "<\xEF\xBD\x9C" "tool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>";
constexpr std::string_view k_ds_calls_end = "<\xEF\xBD\x9C" "tool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>";
constexpr std::string_view k_ds_call_begin = "<\xEF\xBD\x9C" "tool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>";
constexpr std::string_view k_ds_call_end = "<\xEF\xBD\x9C" "tool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>";
constexpr std::string_view k_ds_sep = "<\xEF\xBD\x9C" "tool\xE2\x96\x81" "sep\xEF\xBD\x9C>";

std::string_view trim(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return {};
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

// Where `marker` starts in `text`, or where a beginning of it ends the text (it may still be arriving).
size_t marker_or_partial(std::string_view text, std::string_view marker) {
    const size_t at = text.find(marker);
    if (at != std::string_view::npos) return at;
    for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
        if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
    return text.size();
}

// A call from a JSON object with "name" and "arguments" (or Llama's "parameters"); arguments become JSON text.
std::optional<tool_call> call_from(const json &j) {
    if (!j.is_object() || !j.contains("name") || !j.at("name").is_string()) return std::nullopt;
    const json *args = j.contains("arguments") ? &j.at("arguments") : j.contains("parameters") ? &j.at("parameters") : nullptr;
    tool_call c{j.at("name").get<std::string>(), "{}"};
    if (args != nullptr) c.arguments = args->is_string() ? args->get<std::string>() : args->dump();
    return c;
}

parsed_output parse_hermes(std::string_view text) {
    parsed_output out;
    const size_t first = text.find(k_hermes_open);
    if (first == std::string_view::npos) return {std::string(text), {}};
    out.content = std::string(trim(text.substr(0, first)));
    for (size_t at = first; at != std::string_view::npos; at = text.find(k_hermes_open, at)) {
        const size_t body = at + k_hermes_open.size();
        size_t end = text.find(k_hermes_close, body);
        const std::string_view inner = text.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body);
        const auto call = call_from(json::parse(trim(inner), nullptr, false));
        if (!call) return {std::string(text), {}}; // a malformed call: the model's text as it is
        out.calls.push_back(*call);
        at = end == std::string_view::npos ? std::string_view::npos : end + k_hermes_close.size();
    }
    return out;
}

parsed_output parse_llama3_json(std::string_view text) {
    std::string_view body = trim(text);
    if (body.starts_with(k_python_tag)) body = trim(body.substr(k_python_tag.size()));
    if (!body.starts_with("{")) return {std::string(text), {}};
    // One call, or several separated by ';' (vLLM's llama3_json).
    parsed_output out;
    json whole = json::parse(body, nullptr, false);
    if (!whole.is_discarded()) {
        const auto call = call_from(whole);
        if (!call) return {std::string(text), {}};
        out.calls.push_back(*call);
        return out;
    }
    size_t start = 0;
    while (start < body.size()) {
        size_t end = body.find(';', start);
        // A ';' inside a string would cut a call: grow the piece until it parses.
        json j;
        for (;;) {
            j = json::parse(body.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start),
                            nullptr, false);
            if (!j.is_discarded() || end == std::string_view::npos) break;
            end = body.find(';', end + 1);
        }
        const auto call = j.is_discarded() ? std::nullopt : call_from(j);
        if (!call) return {std::string(text), {}};
        out.calls.push_back(*call);
        if (end == std::string_view::npos) break;
        start = end + 1;
        while (start < body.size() && (body[start] == ' ' || body[start] == '\n')) ++start;
    }
    return out;
}

parsed_output parse_mistral(std::string_view text) {
    const size_t at = text.find(k_mistral);
    if (at == std::string_view::npos) return {std::string(text), {}};
    parsed_output out;
    out.content = std::string(trim(text.substr(0, at)));
    std::string_view rest = trim(text.substr(at + k_mistral.size()));
    if (rest.starts_with("[")) {
        // Tokenizer v3: a JSON array of {"name", "arguments"}.
        const json arr = json::parse(rest, nullptr, false);
        if (!arr.is_array()) return {std::string(text), {}};
        for (const json &j : arr) {
            const auto call = call_from(j);
            if (!call) return {std::string(text), {}};
            out.calls.push_back(*call);
        }
        return out;
    }
    // Tokenizer v11+: NAME[ARGS]{...}, repeated after further [TOOL_CALLS] markers.
    for (;;) {
        const size_t args = rest.find(k_mistral_args);
        if (args == std::string_view::npos) return {std::string(text), {}};
        const std::string name(trim(rest.substr(0, args)));
        std::string_view tail = rest.substr(args + k_mistral_args.size());
        const size_t next = tail.find(k_mistral);
        const json a = json::parse(trim(tail.substr(0, next)), nullptr, false);
        if (name.empty() || a.is_discarded()) return {std::string(text), {}};
        out.calls.push_back({name, a.dump()});
        if (next == std::string_view::npos) return out;
        rest = trim(tail.substr(next + k_mistral.size()));
    }
}

parsed_output parse_deepseek_v3(std::string_view text) {
    const size_t at = text.find(k_ds_calls_begin);
    if (at == std::string_view::npos) return {std::string(text), {}};
    parsed_output out;
    out.content = std::string(trim(text.substr(0, at)));
    for (size_t c = text.find(k_ds_call_begin, at); c != std::string_view::npos; c = text.find(k_ds_call_begin, c)) {
        const size_t body = c + k_ds_call_begin.size();
        const size_t end = text.find(k_ds_call_end, body);
        std::string_view call = text.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body);
        const size_t sep = call.find(k_ds_sep);
        if (sep == std::string_view::npos) return {std::string(text), {}};
        std::string_view name = trim(call.substr(0, sep));
        std::string_view args = call.substr(sep + k_ds_sep.size());
        if (name == "function") {
            // V3: function<sep>NAME\n```json\n{...}\n```
            const size_t nl = args.find('\n');
            name = trim(args.substr(0, nl));
            args = nl == std::string_view::npos ? std::string_view() : args.substr(nl + 1);
            args = trim(args);
            if (args.starts_with("```json")) args.remove_prefix(7);
            else if (args.starts_with("```")) args.remove_prefix(3);
            if (args.ends_with("```")) args.remove_suffix(3);
        }
        const json a = json::parse(trim(args), nullptr, false);
        if (name.empty() || a.is_discarded()) return {std::string(text), {}};
        out.calls.push_back({std::string(name), a.dump()});
        c = end == std::string_view::npos ? std::string_view::npos : end + k_ds_call_end.size();
    }
    return out;
}

} // namespace

std::optional<tool_format> tool_format_from_name(std::string_view name) {
    if (name == "none") return tool_format::none;
    if (name == "hermes") return tool_format::hermes;
    if (name == "llama3_json" || name == "llama4_json") return tool_format::llama3_json;
    if (name == "mistral") return tool_format::mistral;
    if (name == "deepseek_v3" || name == "deepseek_v31") return tool_format::deepseek_v3;
    return std::nullopt;
}

const char *tool_format_name(tool_format f) {
    switch (f) {
    case tool_format::hermes: return "hermes";
    case tool_format::llama3_json: return "llama3_json";
    case tool_format::mistral: return "mistral";
    case tool_format::deepseek_v3: return "deepseek_v3";
    case tool_format::none: break;
    }
    return "none";
}

tool_format detect_tool_format(std::string_view t) {
    const auto has = [&](std::string_view m) { return t.find(m) != std::string_view::npos; };
    if (has(k_hermes_open)) return tool_format::hermes;
    if (has(k_mistral)) return tool_format::mistral;
    if (has("tool\xE2\x96\x81" "calls\xE2\x96\x81" "begin")) return tool_format::deepseek_v3;
    // Llama 3.1+: tools described in a header-id template; the model answers with JSON (or <|python_tag|>).
    if (has(k_python_tag) || (has("<|start_header_id|>") && has("tools"))) return tool_format::llama3_json;
    return tool_format::none;
}

std::vector<std::string_view> tool_markers(tool_format f) {
    switch (f) {
    case tool_format::hermes: return {k_hermes_open, k_hermes_close};
    case tool_format::llama3_json: return {k_python_tag};
    case tool_format::mistral: return {k_mistral, k_mistral_args};
    case tool_format::deepseek_v3: return {k_ds_calls_begin, k_ds_calls_end, k_ds_call_begin, k_ds_call_end, k_ds_sep};
    case tool_format::none: break;
    }
    return {};
}

parsed_output parse_tool_calls(tool_format f, std::string_view text) {
    switch (f) {
    case tool_format::hermes: return parse_hermes(text);
    case tool_format::llama3_json: return parse_llama3_json(text);
    case tool_format::mistral: return parse_mistral(text);
    case tool_format::deepseek_v3: return parse_deepseek_v3(text);
    case tool_format::none: break;
    }
    return {std::string(text), {}};
}

size_t tool_content_prefix(tool_format f, std::string_view text) {
    switch (f) {
    case tool_format::hermes: return marker_or_partial(text, k_hermes_open);
    case tool_format::mistral: return marker_or_partial(text, k_mistral);
    case tool_format::deepseek_v3: return marker_or_partial(text, k_ds_calls_begin);
    case tool_format::llama3_json: {
        // A call is the whole answer: hold everything until the text shows it is not JSON or a python tag.
        const std::string_view t = trim(text);
        if (t.empty() || t.starts_with("{") || t.starts_with(k_python_tag) ||
            std::string_view(k_python_tag).starts_with(t))
            return 0;
        return text.size();
    }
    case tool_format::none: break;
    }
    return text.size();
}

} // namespace strata::openai_http
