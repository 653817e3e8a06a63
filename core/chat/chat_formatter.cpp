#include "chat/chat_formatter.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <variant>

#include "common/error.hpp"

namespace strata::chat {

namespace {

using json = nlohmann::ordered_json;

// The built-in families, as Jinja: each the shape of its family's own template (BOS where the family writes it).
struct builtin {
    std::string_view name;
    std::string_view text;
};
constexpr std::array<builtin, 7> k_builtins{{
    {"plain",
     "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor -%}\n"
     "{%- if add_generation_prompt %}assistant:{% endif %}"},
    {"chatml",
     "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor -%}\n"
     "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"},
    {"llama3",
     "{{- bos_token }}{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
     "{{ m.content | trim }}<|eot_id|>{% endfor -%}\n"
     "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"},
    {"llama2",
     "{{- bos_token }}{%- set ns = namespace(system='', first=true) -%}\n"
     "{%- for m in messages -%}\n"
     "{%- if m.role == 'system' %}{% set ns.system = ns.system + m.content %}\n"
     "{%- elif m.role == 'assistant' %} {{ m.content }} {{ eos_token }}{{ bos_token }}\n"
     "{%- else %}[INST] {% if ns.first and ns.system %}<<SYS>>\n{{ ns.system }}\n<</SYS>>\n\n{% endif %}"
     "{%- set ns.first = false %}{{ m.content }} [/INST]{% endif -%}\n"
     "{%- endfor %}"},
    {"mistral",
     "{{- bos_token }}{%- set ns = namespace(system='') -%}\n"
     "{%- for m in messages -%}\n"
     "{%- if m.role == 'system' %}{% set ns.system = ns.system + m.content + '\\n\\n' %}\n"
     "{%- elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}\n"
     "{%- else %}[INST] {{ ns.system }}{{ m.content }} [/INST]{% set ns.system = '' %}{% endif -%}\n"
     "{%- endfor %}"},
    {"phi3",
     "{{- bos_token }}{%- for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor -%}\n"
     "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"},
    {"gemma",
     "{{- bos_token }}{%- set ns = namespace(system='') -%}\n"
     "{%- for m in messages -%}\n"
     "{%- if m.role == 'system' %}{% set ns.system = ns.system + m.content + '\\n\\n' %}\n"
     "{%- elif m.role == 'assistant' %}<start_of_turn>model\n{{ m.content }}<end_of_turn>{{ '\\n' }}\n"
     "{%- else %}<start_of_turn>user\n{{ ns.system }}{{ m.content }}<end_of_turn>\n{% set ns.system = '' %}{% endif -%}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt %}<start_of_turn>model\n{% endif %}"},
}};

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// vLLM's detection of templates that walk content parts (_detect_content_format), by scanning the source: a loop
// `for x in m['content']` / `in m.content`, a type test `content is string|iterable|sequence|mapping` (also with
// `not`), or an index `content[0]`. (A scan, not a regex: a template comes from a model file and may be long.)
bool walks_content_parts(std::string_view text) {
    const auto skip_spaces_back = [&](size_t i) {
        while (i > 0 && std::isspace(static_cast<unsigned char>(text[i - 1]))) --i;
        return i;
    };
    for (size_t at = text.find("content"); at != std::string_view::npos; at = text.find("content", at + 1)) {
        size_t end = at + 7;
        if (end < text.size() && is_ident_char(text[end])) continue;
        // What comes after: an optional closing quote and bracket, then "is [not] KIND" or "[0]".
        size_t after = end;
        if (after < text.size() && (text[after] == '\'' || text[after] == '"')) ++after;
        if (after < text.size() && text[after] == ']') ++after;
        std::string_view rest = text.substr(after);
        const size_t lead = rest.find_first_not_of(" \t\r\n");
        rest = lead == std::string_view::npos ? std::string_view() : rest.substr(lead);
        if (rest.starts_with("[0]")) return true;
        if (rest.starts_with("is ")) {
            rest.remove_prefix(3);
            rest = rest.substr(std::min(rest.size(), rest.find_first_not_of(' ')));
            if (rest.starts_with("not ")) rest = rest.substr(std::min(rest.size(), rest.find_first_not_of(' ', 4)));
            for (const std::string_view kind : {"string", "iterable", "sequence", "mapping"})
                if (rest.starts_with(kind)) return true;
        }
        // What comes before: "in IDENT." or "in IDENT['" / "in IDENT[\"".
        size_t i = at;
        if (i > 0 && text[i - 1] == '.') {
            --i;
        } else if (i > 1 && (text[i - 1] == '\'' || text[i - 1] == '"') && text[i - 2] == '[') {
            i -= 2;
        } else {
            continue;
        }
        while (i > 0 && is_ident_char(text[i - 1])) --i;
        i = skip_spaces_back(i);
        if (i >= 3 && text.substr(i - 2, 2) == "in" && std::isspace(static_cast<unsigned char>(text[i - 3]))) return true;
    }
    return false;
}

struct parsed_template {
    template_source source;
    std::variant<template_program, std::string> program; // or the parse error
    content_format format = content_format::string;
};

parsed_template parse_one(template_source s, content_format requested) {
    parsed_template p{std::move(s), std::string(), requested};
    try {
        p.program = template_program::parse(p.source.text, p.source.origin);
    } catch (const error &e) {
        p.program = std::string(e.what());
    }
    if (requested == content_format::automatic)
        p.format = walks_content_parts(p.source.text) ? content_format::openai : content_format::string;
    return p;
}

[[noreturn]] void bad_request(const std::string &what) { fail("chat request: {}", what); }

// The messages as the template sees them.
json template_messages(const json &messages, content_format format) {
    if (!messages.is_array() || messages.empty()) bad_request("'messages' must be a non-empty array");
    json out = json::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        const json &m = messages[i];
        const std::string at = fmt::format("messages[{}]", i);
        if (!m.is_object()) bad_request(fmt::format("'{}' must be an object", at));
        json copy = m;
        if (auto it = copy.find("content"); it != copy.end() && it->is_array()) {
            std::string joined;
            json parts = json::array();
            for (size_t k = 0; k < it->size(); ++k) {
                const json &part = (*it)[k];
                const auto type = part.is_object() ? part.find("type") : part.end();
                if (!part.is_object() || type == part.end() || !type->is_string() || *type != "text" ||
                    !part.contains("text") || !part.at("text").is_string())
                    bad_request(fmt::format("'{}.content[{}]' is not a text part ({{\"type\": \"text\", \"text\": "
                                            "...}}); images and audio are not supported",
                                            at, k));
                const std::string &text = part.at("text").get_ref<const std::string &>();
                joined += (k ? "\n" : "") + text;
                parts.push_back({{"type", "text"}, {"text", text}});
            }
            *it = format == content_format::openai ? parts : json(joined);
        }
        // Tool-call arguments reach templates as objects (vLLM parses the JSON text OpenAI clients send).
        if (auto calls = copy.find("tool_calls"); calls != copy.end() && calls->is_array()) {
            for (json &call : *calls) {
                if (!call.is_object() || !call.contains("function") || !call.at("function").is_object()) continue;
                json &fn = call.at("function");
                if (auto args = fn.find("arguments"); args != fn.end() && args->is_string()) {
                    json parsed = json::parse(args->get_ref<const std::string &>(), nullptr, false);
                    if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
                }
            }
        }
        out.push_back(std::move(copy));
    }
    return out;
}

} // namespace

std::optional<content_format> content_format_from_name(std::string_view name) {
    if (name == "auto") return content_format::automatic;
    if (name == "string") return content_format::string;
    if (name == "openai") return content_format::openai;
    return std::nullopt;
}

std::optional<template_source> builtin_template(std::string_view name) {
    for (const builtin &b : k_builtins)
        if (b.name == name) return template_source{"default", std::string(b.text), "built-in " + std::string(b.name)};
    return std::nullopt;
}

std::vector<std::string_view> builtin_template_names() {
    std::vector<std::string_view> names;
    for (const builtin &b : k_builtins) names.push_back(b.name);
    return names;
}

struct chat_formatter::impl {
    std::vector<template_source> sources;
    std::vector<parsed_template> templates;
    std::string bos, eos;
    bool adds_bos = false;
    content_format format = content_format::automatic;

    const parsed_template *find(std::string_view name) const {
        if (name.empty()) name = "default";
        for (const parsed_template &t : templates)
            if (t.source.name == name) return &t;
        return nullptr;
    }
};

chat_formatter::chat_formatter(std::vector<template_source> templates, std::string bos_token, std::string eos_token,
                               bool adds_bos, content_format format)
    : impl_(std::make_unique<impl>()) {
    impl_->sources = templates;
    impl_->bos = std::move(bos_token);
    impl_->eos = std::move(eos_token);
    impl_->adds_bos = adds_bos;
    impl_->format = format;
    for (template_source &s : templates) impl_->templates.push_back(parse_one(std::move(s), format));
}

chat_formatter::~chat_formatter() = default;
chat_formatter::chat_formatter(chat_formatter &&) noexcept = default;
chat_formatter &chat_formatter::operator=(chat_formatter &&) noexcept = default;

const template_source *chat_formatter::find(std::string_view name) const {
    const parsed_template *t = impl_->find(name);
    return t ? &t->source : nullptr;
}

content_format chat_formatter::format_for(std::string_view name) const {
    const parsed_template *t = impl_->find(name);
    return t ? t->format : content_format::string;
}

const std::vector<template_source> &chat_formatter::templates() const { return impl_->sources; }

std::string chat_formatter::render(const json &request) const {
    if (!request.is_object()) bad_request("the request must be a JSON object");
    const json empty = json::object();
    const auto get = [&](const char *key) -> const json & {
        const auto it = request.find(key);
        return it == request.end() ? empty : *it;
    };
    const json &tools = get("tools");
    if (!tools.is_null() && tools != empty && !tools.is_array()) bad_request("'tools' must be an array");
    const bool has_tools = tools.is_array() && !tools.empty();

    // Which template: the request's (a name, or a template text parsed for this request), else "tool_use" when
    // tools are given and the model has one, else the default.
    std::optional<parsed_template> own;
    const parsed_template *t = nullptr;
    if (const json &ct = get("chat_template"); ct.is_string()) {
        t = impl_->find(ct.get_ref<const std::string &>());
        if (t == nullptr) {
            own = parse_one({"request", ct.get<std::string>(), "the request's chat_template"}, impl_->format);
            t = &*own;
        }
    } else if (ct != empty && !ct.is_null()) {
        bad_request("'chat_template' must be a string");
    }
    if (t == nullptr && has_tools) t = impl_->find("tool_use");
    if (t == nullptr) t = impl_->find("default");
    if (t == nullptr) bad_request("the model has no chat template; start the server with --chat-template NAME|FILE");
    if (const auto *err = std::get_if<std::string>(&t->program)) fail("{}", *err);

    json context = json::object();
    context["messages"] = template_messages(get("messages"), t->format);
    if (has_tools) context["tools"] = tools;
    const json &agp = get("add_generation_prompt");
    if (!agp.is_boolean() && agp != empty && !agp.is_null()) bad_request("'add_generation_prompt' must be true or false");
    context["add_generation_prompt"] = agp.is_boolean() ? agp.get<bool>() : true;
    context["bos_token"] = impl_->bos;
    context["eos_token"] = impl_->eos;
    if (const json &kw = get("chat_template_kwargs"); kw.is_object()) {
        for (const auto &[key, value] : kw.items()) {
            if (key == "messages" || key == "tools" || key == "add_generation_prompt" || key == "bos_token" ||
                key == "eos_token")
                bad_request(fmt::format("chat_template_kwargs may not set '{}'; it is a field of the request", key));
            context[key] = value;
        }
    } else if (kw != empty && !kw.is_null()) {
        bad_request("'chat_template_kwargs' must be an object");
    }

    std::string text = std::get<template_program>(t->program).render(context);
    if (impl_->adds_bos && !impl_->bos.empty() && text.starts_with(impl_->bos)) text.erase(0, impl_->bos.size());
    return text;
}

} // namespace strata::chat
