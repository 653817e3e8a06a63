#include "request_parse.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace strata::openai_http {

namespace {

using json = nlohmann::json;

// Errors are thrown inside this file only and caught at the public functions, so each check reads as one line.
struct rejected {
    api_error error;
};

[[noreturn]] void reject(std::string message, std::string param = {}) { throw rejected{bad_request(std::move(message), std::move(param))}; }

json parse_object(std::string_view body) {
    json j = json::parse(body.begin(), body.end(), nullptr, false);
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

std::string message_content(const json &m, size_t index) {
    const std::string where = "messages[" + std::to_string(index) + "].content";
    auto it = m.find("content");
    if (it == m.end() || it->is_null()) return {};
    if (it->is_string()) return it->get<std::string>();
    if (!it->is_array()) reject("'" + where + "' must be a string or an array of text parts", "messages");
    std::string text;
    for (const json &part : *it) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
            reject("'" + where + "' parts must be {\"type\": \"text\", \"text\": \"...\"}; other part types are not supported",
                   "messages");
        }
        text += part["text"].get<std::string>();
    }
    return text;
}

std::vector<chat_message> read_messages(const json &body) {
    const json *ms = field(body, "messages");
    if (ms == nullptr) reject("'messages' is required", "messages");
    if (!ms->is_array() || ms->empty()) reject("'messages' must be a non-empty array", "messages");
    std::vector<chat_message> out;
    for (size_t i = 0; i < ms->size(); ++i) {
        const json &m = (*ms)[i];
        if (!m.is_object()) reject("'messages[" + std::to_string(i) + "]' must be an object", "messages");
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) reject("'messages[" + std::to_string(i) + "].role' must be a string", "messages");
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer") {
            reject("'messages[" + std::to_string(i) + "].role' must be system, user, assistant, tool or developer, got '" + r + "'",
                   "messages");
        }
        out.push_back({r == "developer" ? "system" : r, message_content(m, i)});
    }
    return out;
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
        if (kind == endpoint::completions) read_prompt(j, r);
        else r.messages = read_messages(j);
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
        if (field(j, "messages") != nullptr) {
            r.messages = read_messages(j);
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
