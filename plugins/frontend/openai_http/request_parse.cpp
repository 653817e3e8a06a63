#include "request_parse.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <limits>

namespace strata::openai_http {

namespace {

using json = nlohmann::json;

// Errors are thrown inside this file only and caught at the public functions, so each check reads as one line.
struct rejected {
    api_error error;
};

[[noreturn]] void reject(std::string message, std::string param = {}) { throw rejected{bad_request(std::move(message), std::move(param))}; }

// Deeper than any real request (a tool's parameter schema is a few levels): parsing stops there, before a deeply
// nested body costs anything (copying and walking such values later would be quadratic in the depth).
constexpr int k_max_json_depth = 128;

json parse_object(std::string_view body) {
    bool too_deep = false;
    const json::parser_callback_t depth_limit = [&](int depth, json::parse_event_t, json &) {
        if (depth > k_max_json_depth) {
            too_deep = true;
            throw std::invalid_argument("too deep"); // stops the parser at once
        }
        return true;
    };
    json j;
    try {
        j = json::parse(body.begin(), body.end(), depth_limit, false);
    } catch (const std::invalid_argument &) {
    }
    if (too_deep)
        throw rejected{bad_request("the request body nests JSON deeper than " + std::to_string(k_max_json_depth) +
                                   " levels")};
    if (j.is_discarded()) throw rejected{bad_request("malformed JSON in the request body")};
    if (!j.is_object()) reject("the request body must be a JSON object");
    return j;
}

// The field when present and not null.
const json *field(const json &j, const char *name) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
}

double number_in(const json &j, const char *name, double lo, double hi, bool lo_open = false) {
    if (!j.is_number()) reject(std::string("'") + name + "' must be a number", name);
    const double v = j.get<double>();
    if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo)) {
        reject(std::string("'") + name + "' must be in " + (lo_open ? "(" : "[") + json(lo).dump() + ", " + json(hi).dump() +
                   "], got " + j.dump(),
               name);
    }
    return v;
}

int64_t integer_in(const json &j, const char *name, int64_t lo, int64_t hi) {
    if (!j.is_number_integer()) reject(std::string("'") + name + "' must be an integer", name);
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        reject(std::string("'") + name + "' is out of range", name);
    }
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) {
        reject(std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                   std::to_string(v),
               name);
    }
    return v;
}

bool boolean(const json &j, const char *name) {
    if (!j.is_boolean()) reject(std::string("'") + name + "' must be a boolean", name);
    return j.get<bool>();
}

std::vector<int32_t> token_ids(const json &j, const char *name) {
    std::vector<int32_t> ids;
    ids.reserve(j.size());
    for (const json &t : j) {
        if (!t.is_number_integer()) reject(std::string("'") + name + "' must be a string or an array of token ids", name);
        ids.push_back(static_cast<int32_t>(integer_in(t, name, 0, std::numeric_limits<int32_t>::max())));
    }
    return ids;
}

void read_prompt(const json &body, generation_request &r) {
    const json *p = field(body, "prompt");
    if (p == nullptr) reject("'prompt' is required", "prompt");
    if (p->is_string()) {
        r.prompt_text = p->get<std::string>();
        return;
    }
    if (!p->is_array()) reject("'prompt' must be a string or an array of token ids", "prompt");
    if (p->empty()) reject("'prompt' must not be empty", "prompt");
    if (p->size() == 1 && (*p)[0].is_string()) {
        r.prompt_text = (*p)[0].get<std::string>();
        return;
    }
    if (p->size() == 1 && (*p)[0].is_array()) {
        r.prompt_tokens = token_ids((*p)[0], "prompt");
        if (r.prompt_tokens.empty()) reject("'prompt' must not be empty", "prompt");
        return;
    }
    if ((*p)[0].is_string() || (*p)[0].is_array()) reject("several prompts in one request are not supported yet; send one per request", "prompt");
    r.prompt_tokens = token_ids(*p, "prompt");
}

// The messages as the chat template gets them, checked field by field (OpenAI's shapes): role, content as a string,
// null or text parts, an assistant's tool_calls, a tool result's tool_call_id. "developer" is OpenAI's newer name
// for the system role, which templates know as "system".
json read_messages(const json &body) {
    const json *ms = field(body, "messages");
    if (ms == nullptr) reject("'messages' is required", "messages");
    if (!ms->is_array() || ms->empty()) reject("'messages' must be a non-empty array", "messages");
    json out = json::array();
    for (size_t i = 0; i < ms->size(); ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        json m = (*ms)[i];
        if (!m.is_object()) reject("'" + at + "' must be an object", "messages");
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) reject("'" + at + ".role' must be a string", "messages");
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer")
            reject("'" + at + ".role' must be system, user, assistant, tool or developer, got '" + r + "'", "messages");
        if (r == "developer") *role = "system";
        const auto content = m.find("content");
        const bool has_calls = m.contains("tool_calls") && !m.at("tool_calls").is_null();
        if (content == m.end() || content->is_null()) {
            if (!(r == "assistant" && has_calls)) reject("'" + at + ".content' is required", "messages");
        } else if (content->is_array()) {
            for (const json &part : *content)
                if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
                    reject("'" + at + ".content' parts must be {\"type\": \"text\", \"text\": \"...\"}; images and "
                           "audio are not supported",
                           "messages");
        } else if (!content->is_string()) {
            reject("'" + at + ".content' must be a string or an array of text parts", "messages");
        }
        if (has_calls) {
            const json &calls = m.at("tool_calls");
            if (r != "assistant" || !calls.is_array()) reject("'" + at + ".tool_calls' must be an array on an assistant message", "messages");
            for (const json &c : calls) {
                const json *fn = c.is_object() ? field(c, "function") : nullptr;
                if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !fn->at("name").is_string() ||
                    (fn->contains("arguments") && !fn->at("arguments").is_string() && !fn->at("arguments").is_object()))
                    reject("'" + at + ".tool_calls' entries must be {\"type\": \"function\", \"function\": {\"name\": "
                           "..., \"arguments\": \"...\"}}",
                           "messages");
            }
        }
        if (r == "tool" && m.contains("tool_call_id") && !m.at("tool_call_id").is_string())
            reject("'" + at + ".tool_call_id' must be a string", "messages");
        out.push_back(std::move(m));
    }
    return out;
}

// The fields the chat template sees besides the messages: tools and vLLM's chat_template, chat_template_kwargs and
// add_generation_prompt.
json read_chat_fields(const json &body, json messages) {
    json req = {{"messages", std::move(messages)}};
    if (const json *t = field(body, "tools")) {
        if (!t->is_array()) reject("'tools' must be an array", "tools");
        for (const json &tool : *t) {
            const json *fn = tool.is_object() ? field(tool, "function") : nullptr;
            if (tool.value("type", "") != "function" || fn == nullptr || !fn->is_object() || !fn->contains("name") ||
                !fn->at("name").is_string())
                reject("'tools' entries must be {\"type\": \"function\", \"function\": {\"name\": ..., "
                       "\"parameters\": {...}}}",
                       "tools");
        }
        if (!t->empty()) req["tools"] = *t;
    }
    if (const json *v = field(body, "add_generation_prompt")) req["add_generation_prompt"] = boolean(*v, "add_generation_prompt");
    if (const json *v = field(body, "chat_template_kwargs")) {
        if (!v->is_object()) reject("'chat_template_kwargs' must be an object", "chat_template_kwargs");
        req["chat_template_kwargs"] = *v;
    }
    if (const json *v = field(body, "chat_template")) {
        if (!v->is_string()) reject("'chat_template' must be a string", "chat_template");
        req["chat_template"] = *v;
    }
    if (const json *v = field(body, "continue_final_message"); v != nullptr && boolean(*v, "continue_final_message"))
        reject("'continue_final_message' is not supported yet", "continue_final_message");
    return req;
}

// Every field a request may carry; anything else is refused by name rather than ignored.
void check_fields(const json &body, endpoint kind) {
    static const std::vector<std::string> common = {
        "model", "n", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed", "presence_penalty",
        "frequency_penalty", "logprobs", "stop", "stream", "stream_options", "user", "max_tokens", "logit_bias",
        "ignore_eos", "echo", "best_of", "max_completion_tokens", "top_logprobs", "response_format", "grammar",
        "json_schema", "guided_json", "guided_grammar", "guided_choice", "guided_regex"};
    static const std::vector<std::string> completions = {"prompt", "suffix"};
    static const std::vector<std::string> chat = {
        "messages", "tools", "tool_choice", "parallel_tool_calls",
        "chat_template", "chat_template_kwargs", "add_generation_prompt", "continue_final_message"};
    for (const auto &item : body.items()) {
        const std::string &key = item.key();
        const auto known = [&](const std::vector<std::string> &names) {
            return std::find(names.begin(), names.end(), key) != names.end();
        };
        if (known(common) || known(kind == endpoint::completions ? completions : chat)) continue;
        reject("'" + key + "' is not a field Strata supports on " +
                   (kind == endpoint::completions ? "/v1/completions" : "/v1/chat/completions") +
                   "; remove it (fields are never ignored silently)",
               key);
    }
    if (const json *v = field(body, "logit_bias"); v != nullptr && !(v->is_object() && v->empty()))
        reject("'logit_bias' is not supported yet", "logit_bias");
    if (const json *v = field(body, "suffix"); v != nullptr && !(v->is_string() && v->get<std::string>().empty()))
        reject("'suffix' (fill-in-the-middle) is not supported yet", "suffix");
}

// One constraint per request, whichever field asks for it.
void set_constraint(generation_request &r, int32_t kind, std::string text, const char *field_name) {
    if (r.constraint_kind != STRATA_CONSTRAINT_NONE)
        reject(std::string("'") + field_name + "' asks for a second output constraint; send one of response_format, "
               "tool_choice (required or a function), grammar, json_schema, guided_json, guided_grammar, guided_choice, "
               "guided_regex",
               field_name);
    r.constraint_kind = kind;
    r.constraint = std::move(text);
}

// tool_choice: "auto" (the default when tools are given) parses the model's tool calls back; "none" leaves its output
// as text; "required" and a named function constrain the output to calls as vLLM does (a JSON array of
// {"name", "parameters"} objects, or the function's arguments object).
void read_tool_choice(const json &body, const json &chat, generation_request &r) {
    const bool tools = chat.contains("tools");
    std::string choice = tools ? "auto" : "none";
    if (const json *v = field(body, "tool_choice")) {
        if (v->is_string() && (*v == "auto" || *v == "none" || *v == "required")) {
            choice = v->get<std::string>();
        } else if (v->is_object() && v->value("type", "") == "function" && v->contains("function") &&
                   v->at("function").is_object() && v->at("function").contains("name") &&
                   v->at("function").at("name").is_string()) {
            choice = "named";
            r.forced_name = v->at("function").at("name").get<std::string>();
        } else {
            reject("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                   "\"function\": {\"name\": ...}}",
                   "tool_choice");
        }
    }
    if ((choice == "required" || choice == "named") && !tools)
        reject("'tool_choice' " + choice + " needs 'tools'", "tool_choice");
    r.tools_given = tools && choice == "auto";
    if (const json *v = field(body, "parallel_tool_calls")) r.parallel_tool_calls = boolean(*v, "parallel_tool_calls");
    if (choice == "named") {
        const json *params = nullptr;
        for (const json &t : chat.at("tools"))
            if (t.at("function").at("name") == r.forced_name) params = field(t.at("function"), "parameters");
        bool found = false;
        for (const json &t : chat.at("tools")) found = found || t.at("function").at("name") == r.forced_name;
        if (!found) reject("'tool_choice' names '" + r.forced_name + "', which is not in 'tools'", "tool_choice");
        r.forced = generation_request::forced_tools::named;
        set_constraint(r, STRATA_CONSTRAINT_JSON_SCHEMA, params ? params->dump() : R"({"type": "object"})", "tool_choice");
    } else if (choice == "required") {
        json any_of = json::array();
        for (const json &t : chat.at("tools")) {
            const json *params = field(t.at("function"), "parameters");
            any_of.push_back({{"type", "object"},
                              {"properties", {{"name", {{"type", "string"}, {"enum", {t.at("function").at("name")}}}},
                                              {"parameters", params ? *params : json{{"type", "object"}}}}},
                              {"required", {"name", "parameters"}}});
        }
        json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any_of}}}};
        if (!r.parallel_tool_calls) schema["maxItems"] = 1;
        r.forced = generation_request::forced_tools::required;
        set_constraint(r, STRATA_CONSTRAINT_JSON_SCHEMA, schema.dump(), "tool_choice");
    }
}

// OpenAI's response_format, and the same asked the ways llama.cpp's server (grammar, json_schema) and vLLM (guided_*)
// spell it.
void read_constraints(const json &body, generation_request &r) {
    if (const json *v = field(body, "response_format")) {
        if (!v->is_object() || !v->contains("type") || !v->at("type").is_string())
            reject("'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}",
                   "response_format");
        const std::string type = v->at("type").get<std::string>();
        if (type == "json_object") {
            set_constraint(r, STRATA_CONSTRAINT_ANY_JSON_OBJECT, "", "response_format");
        } else if (type == "json_schema") {
            const json *js = field(*v, "json_schema");
            const json *schema = js != nullptr && js->is_object() ? field(*js, "schema") : nullptr;
            if (schema == nullptr || !schema->is_object())
                reject("'response_format.json_schema.schema' (a JSON Schema object) is required", "response_format");
            set_constraint(r, STRATA_CONSTRAINT_JSON_SCHEMA, schema->dump(), "response_format");
        } else if (type != "text") {
            reject("'response_format.type' must be text, json_object or json_schema, got '" + type + "'",
                   "response_format");
        }
    }
    for (const char *name : {"json_schema", "guided_json"}) {
        if (const json *v = field(body, name)) {
            if (v->is_string()) {
                const json parsed = json::parse(v->get<std::string>(), nullptr, false);
                if (!parsed.is_object()) reject(std::string("'") + name + "' must be a JSON Schema object", name);
                set_constraint(r, STRATA_CONSTRAINT_JSON_SCHEMA, parsed.dump(), name);
            } else if (v->is_object()) {
                set_constraint(r, STRATA_CONSTRAINT_JSON_SCHEMA, v->dump(), name);
            } else {
                reject(std::string("'") + name + "' must be a JSON Schema object", name);
            }
        }
    }
    for (const char *name : {"grammar", "guided_grammar"}) {
        if (const json *v = field(body, name)) {
            if (!v->is_string()) reject(std::string("'") + name + "' must be a GBNF grammar (a string)", name);
            set_constraint(r, STRATA_CONSTRAINT_GBNF, v->get<std::string>(), name);
        }
    }
    if (const json *v = field(body, "guided_regex")) {
        if (!v->is_string()) reject("'guided_regex' must be a regular expression (a string)", "guided_regex");
        set_constraint(r, STRATA_CONSTRAINT_REGEX, v->get<std::string>(), "guided_regex");
    }
    if (const json *v = field(body, "guided_choice")) {
        if (!v->is_array() || v->empty()) reject("'guided_choice' must be a non-empty array of strings", "guided_choice");
        std::string gbnf = "root ::=";
        for (size_t i = 0; i < v->size(); ++i) {
            if (!(*v)[i].is_string()) reject("'guided_choice' must be a non-empty array of strings", "guided_choice");
            gbnf += (i ? " | " : " ") + json((*v)[i]).dump(); // a JSON string is a GBNF literal with the same escapes
        }
        set_constraint(r, STRATA_CONSTRAINT_GBNF, gbnf, "guided_choice");
    }
}

void read_stop(const json &body, generation_request &r) {
    const json *s = field(body, "stop");
    if (s == nullptr) return;
    if (s->is_string()) {
        if (!s->get<std::string>().empty()) r.stop.push_back(s->get<std::string>());
        return;
    }
    if (!s->is_array()) reject("'stop' must be a string or an array of strings", "stop");
    if (s->size() > 16) reject("'stop' may hold at most 16 strings", "stop");
    for (const json &x : *s) {
        if (!x.is_string()) reject("'stop' must be a string or an array of strings", "stop");
        if (!x.get<std::string>().empty()) r.stop.push_back(x.get<std::string>());
    }
}

// OpenAI's presence/frequency penalties and logprobs. Completions take `logprobs` as the number of alternatives
// (0..20; 0 still reports the chosen tokens' logprobs); chat takes a boolean `logprobs` plus `top_logprobs` 0..20.
void read_penalties_and_logprobs(const json &body, generation_request &r, bool supported) {
    for (const char *name : {"presence_penalty", "frequency_penalty"}) {
        if (const json *v = field(body, name)) {
            const auto p = static_cast<float>(number_in(*v, name, -2, 2));
            // An engine before ABI 1.4 cannot carry them; the neutral value still works for clients that always send 0.
            if (!supported && p != 0.f) reject(std::string("'") + name + "' is not supported yet (use repetition_penalty)", name);
            (std::string_view(name) == "presence_penalty" ? r.presence_penalty : r.frequency_penalty) = p;
        }
    }
    int32_t logprobs = 0;
    if (r.kind == endpoint::completions) {
        if (const json *v = field(body, "logprobs")) {
            if (!v->is_boolean() || v->get<bool>()) {
                logprobs = static_cast<int32_t>(integer_in(*v, "logprobs", 0, 20));
                if (logprobs == 0) logprobs = -1;
            }
        }
        if (field(body, "top_logprobs") != nullptr) reject("'top_logprobs' belongs to chat completions; use 'logprobs' (0..20)", "top_logprobs");
    } else {
        const bool wanted = field(body, "logprobs") != nullptr && boolean(*field(body, "logprobs"), "logprobs");
        int32_t top = 0;
        if (const json *v = field(body, "top_logprobs")) {
            top = static_cast<int32_t>(integer_in(*v, "top_logprobs", 0, 20));
            if (!wanted && top > 0) reject("'top_logprobs' requires 'logprobs': true", "top_logprobs");
        }
        if (wanted) logprobs = top > 0 ? top : -1;
    }
    if (logprobs != 0 && !supported) reject("'logprobs' is not supported yet", "logprobs");
    r.logprobs = logprobs;
}

void read_sampling(const json &body, generation_request &r, const parse_context &ctx) {
    strata_sampling_params &sp = r.sampling;
    const char *mt_name = field(body, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
    if (const json *mt = field(body, mt_name)) {
        sp.max_tokens = static_cast<int32_t>(integer_in(*mt, mt_name, 1, 1 << 24));
        r.max_tokens_given = true;
    }
    if (const json *v = field(body, "temperature")) sp.temperature = static_cast<float>(number_in(*v, "temperature", 0, 2));
    if (const json *v = field(body, "top_p")) sp.top_p = static_cast<float>(number_in(*v, "top_p", 0, 1, true));
    if (const json *v = field(body, "top_k")) {
        const int64_t k = integer_in(*v, "top_k", -1, 1 << 24);
        sp.top_k = k <= 0 ? 0 : static_cast<int32_t>(k); // -1 and 0 both mean "off"
    }
    if (const json *v = field(body, "min_p")) sp.min_p = static_cast<float>(number_in(*v, "min_p", 0, 1));
    if (const json *v = field(body, "repetition_penalty")) {
        sp.repetition_penalty = static_cast<float>(number_in(*v, "repetition_penalty", 0, 10, true));
    }
    if (const json *v = field(body, "seed")) {
        sp.seed = static_cast<uint64_t>(integer_in(*v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
        r.seed_given = true;
    }
    read_penalties_and_logprobs(body, r, ctx.penalties_and_logprobs);
    if (const json *v = field(body, "echo")) {
        r.echo = boolean(*v, "echo");
        if (r.echo && r.kind != endpoint::completions) reject("'echo' belongs to /v1/completions", "echo");
        // Echo with logprobs means logprobs for the prompt's tokens too, which the engine does not compute.
        if (r.echo && r.logprobs != 0) {
            reject("'echo' together with 'logprobs' needs the prompt tokens' logprobs, which are not supported yet; "
                   "drop one of them",
                   "echo");
        }
    }
    if (const json *v = field(body, "best_of")) {
        if (integer_in(*v, "best_of", 1, 16) != r.n) reject("'best_of' other than n is not supported yet", "best_of");
    }
}

api_error unknown_model(const std::string &asked) {
    api_error e;
    e.status = 404;
    e.message = "The model '" + asked + "' does not exist";
    e.param = "model";
    e.code = "model_not_found";
    return e;
}

} // namespace

parse_result parse_generation_request(std::string_view body, endpoint kind, const parse_context &ctx) {
    try {
        const json j = parse_object(body);
        generation_request r;
        r.kind = kind;
        r.sampling = ctx.defaults;
        r.sampling.struct_size = sizeof r.sampling;
        r.model = ctx.served_model_names.empty() ? std::string() : ctx.served_model_names.front();
        if (const json *m = field(j, "model")) {
            if (!m->is_string()) reject("'model' must be a string", "model");
            r.model = m->get<std::string>();
            if (std::find(ctx.served_model_names.begin(), ctx.served_model_names.end(), r.model) ==
                ctx.served_model_names.end())
                return unknown_model(r.model);
        }
        check_fields(j, kind);
        if (kind == endpoint::completions) {
            read_prompt(j, r);
        } else {
            json chat = read_chat_fields(j, read_messages(j));
            read_tool_choice(j, chat, r);
            r.chat_request = chat.dump();
        }
        read_constraints(j, r);
        if (const json *v = field(j, "ignore_eos")) r.sampling.ignore_eos = boolean(*v, "ignore_eos") ? 1 : 0;
        if (const json *v = field(j, "n")) r.n = static_cast<int32_t>(integer_in(*v, "n", 1, 16));
        read_sampling(j, r, ctx);
        read_stop(j, r);
        if (const json *v = field(j, "stream")) r.stream = boolean(*v, "stream");
        if (const json *v = field(j, "stream_options")) {
            if (!v->is_object()) reject("'stream_options' must be an object", "stream_options");
            if (const json *u = field(*v, "include_usage")) r.include_usage = boolean(*u, "stream_options.include_usage");
        }
        if (const json *v = field(j, "user"); v != nullptr && !v->is_string()) reject("'user' must be a string", "user");
        return r;
    } catch (const rejected &e) {
        return e.error;
    }
}

std::variant<tokenize_request, api_error> parse_tokenize_request(std::string_view body) {
    try {
        const json j = parse_object(body);
        tokenize_request r;
        for (const auto &[key, value] : j.items()) {
            static const std::vector<std::string> known = {"model", "prompt", "add_special_tokens", "messages", "tools",
                                                           "add_generation_prompt", "chat_template_kwargs",
                                                           "chat_template", "continue_final_message"};
            if (std::find(known.begin(), known.end(), key) == known.end())
                reject("'" + key + "' is not a field of /tokenize", key);
        }
        if (field(j, "messages") != nullptr) {
            if (field(j, "add_special_tokens") != nullptr)
                reject("'add_special_tokens' belongs to the prompt form; the chat form gives the ids "
                       "/v1/chat/completions feeds the model",
                       "add_special_tokens");
            r.chat_request = read_chat_fields(j, read_messages(j)).dump();
        } else {
            const json *p = field(j, "prompt");
            if (p == nullptr || !p->is_string()) reject("'prompt' (a string) or 'messages' is required", "prompt");
            r.prompt = p->get<std::string>();
        }
        if (const json *v = field(j, "add_special_tokens")) r.add_special_tokens = boolean(*v, "add_special_tokens");
        return r;
    } catch (const rejected &e) {
        return e.error;
    }
}

std::variant<std::vector<int32_t>, api_error> parse_detokenize_request(std::string_view body) {
    try {
        const json j = parse_object(body);
        const json *t = field(j, "tokens");
        if (t == nullptr || !t->is_array()) reject("'tokens' (an array of token ids) is required", "tokens");
        return token_ids(*t, "tokens");
    } catch (const rejected &e) {
        return e.error;
    }
}

} // namespace strata::openai_http
