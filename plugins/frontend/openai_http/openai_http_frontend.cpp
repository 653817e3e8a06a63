// The OpenAI-compatible HTTP frontend: the plugin descriptor, its [openai_http] keys, and the glue between the
// frontend ABI (create/run/request_stop/destroy) and http_server. It talks to the engine only through
// strata_engine_api.
#include "http_server.hpp"

#include <strata/plugin.hpp>

#include <fstream>
#include <memory>
#include <string>

namespace {

using strata::plugin::fail;
using namespace strata::openai_http;

std::vector<std::string> string_list(const strata_config_view *v, const char *key) {
    std::vector<std::string> out;
    if (v == nullptr || v->get_list_size == nullptr || v->get_list_item == nullptr) return out;
    const int32_t n = v->get_list_size(v->ctx, key);
    for (int32_t i = 0; i < n; ++i) {
        if (const char *s = v->get_list_item(v->ctx, key, i); s != nullptr && *s != '\0') out.emplace_back(s);
    }
    return out;
}

// One key per line; blank lines and lines starting with '#' are skipped. Read once at start-up (never per request).
// A file that cannot be read to its end (a directory opens, then fails its first read) or that holds no key is an
// error: serving with fewer keys than the operator wrote, or with no authentication at all, must not pass silently.
bool read_key_file(const std::string &path, std::vector<std::string> &keys, strata_status *st) {
    std::ifstream in(path);
    std::string line;
    size_t found = 0;
    while (std::getline(in, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        if (!line.empty() && line.front() != '#') {
            keys.push_back(line);
            ++found;
        }
    }
    if (!in.is_open() || in.bad()) {
        fail(st, STRATA_ERR_IO, "openai_http: cannot read api_key_file '%s'; check the path and its permissions", path.c_str());
        return false;
    }
    if (found == 0) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT,
             "openai_http: api_key_file '%s' holds no API key (one per line; '#' starts a comment); add one or drop the key",
             path.c_str());
        return false;
    }
    return true;
}

strata_frontend *http_create(const strata_frontend_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_frontend>(st, [&]() -> strata_frontend * {
        if (args == nullptr || args->engine == nullptr) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT, "openai_http: no engine");
            return nullptr;
        }
        const strata_engine_api *api = args->engine;
        strata::plugin::config cfg(args->config);
        server_options o;
        o.host = cfg.get_string("host").value_or(o.host);
        o.port = static_cast<uint16_t>(cfg.get_int("port").value_or(o.port));
        o.api_keys = string_list(args->config, "api_keys");
        if (auto f = cfg.get_string("api_key_file"); f && !f->empty() && !read_key_file(*f, o.api_keys, st)) return nullptr;
        o.max_body_bytes = static_cast<uint64_t>(cfg.get_int("max_body_bytes").value_or(static_cast<int64_t>(o.max_body_bytes)));
        o.max_header_bytes = static_cast<uint32_t>(cfg.get_int("max_header_bytes").value_or(o.max_header_bytes));
        o.header_timeout_s = cfg.get_int("header_timeout_s").value_or(o.header_timeout_s);
        o.read_timeout_s = cfg.get_int("read_timeout_s").value_or(o.read_timeout_s);
        o.idle_timeout_s = cfg.get_int("idle_timeout_s").value_or(o.idle_timeout_s);
        o.max_connections = cfg.get_int("max_connections").value_or(o.max_connections);
        o.shutdown_timeout_s = cfg.get_int("shutdown_timeout_s").value_or(o.shutdown_timeout_s);
        o.log_requests = cfg.get_bool("log_requests").value_or(false);
        // vLLM's default: the model's own name and the model argument as the user wrote it (what its curl examples
        // send); --served-model-name replaces both with its names.
        o.served_model_names = string_list(args->config, "served_model_name");
        if (o.served_model_names.empty()) {
            o.served_model_names.emplace_back(api->model_name(api->engine));
            const char *arg = STRATA_STRUCT_HAS(api, model_argument) ? api->model_argument(api->engine) : nullptr;
            if (arg != nullptr && *arg != '\0' && o.served_model_names.front() != arg) o.served_model_names.emplace_back(arg);
        }
        // Tool calls: the format vLLM's --tool-call-parser names, or the one the model's chat template asks for.
        const std::string parser = cfg.get_string("tool_call_parser").value_or("auto");
        if (parser == "auto") {
            const char *tmpl = STRATA_STRUCT_HAS(api, chat_template_source) ? api->chat_template_source(api->engine, "tool_use")
                                                                            : nullptr;
            if (tmpl == nullptr && STRATA_STRUCT_HAS(api, chat_template_source))
                tmpl = api->chat_template_source(api->engine, "");
            o.tools = tmpl ? detect_tool_format(tmpl) : tool_format::none;
        } else if (auto f = tool_format_from_name(parser)) {
            o.tools = *f;
        } else {
            fail(st, STRATA_ERR_INVALID_ARGUMENT,
                 "openai_http: tool_call_parser '%s' is unknown; use auto, hermes, llama3_json, mistral, deepseek_v3 "
                 "or none",
                 parser.c_str());
            return nullptr;
        }
        if (!cfg.get_bool("enable_auto_tool_choice").value_or(true)) o.tools = tool_format::none;
        for (const std::string_view marker : tool_markers(o.tools)) {
            // A marker that is one special token of this vocabulary: its id, so the generated token shows as text.
            const std::string text(marker);
            int32_t ids[4];
            int32_t n = 0;
            strata_status ts{};
            if (api->tokenize(api->engine, text.c_str(), 0, ids, 4, &n, &ts) == STRATA_OK && n == 1)
                o.marker_tokens.emplace_back(ids[0], text);
        }
        strata::plugin::log(args->host, STRATA_LOG_INFO, "openai_http", "tool calls: %s%s", tool_format_name(o.tools),
                            parser == "auto" ? " (from the chat template)" : "");
        strata_sampling_params defaults{};
        defaults.struct_size = sizeof defaults;
        defaults.temperature = 1.0f;
        defaults.top_p = 1.0f;
        defaults.repetition_penalty = 1.0f;
        if (args->default_sampling != nullptr) defaults = *args->default_sampling;
        auto *server = new http_server(std::move(o), api, defaults, args->host);
        return reinterpret_cast<strata_frontend *>(server);
    });
}

int32_t http_run(strata_frontend *f, strata_status *st) {
    const int32_t rc = strata::plugin::guarded(st, [&]() -> int32_t {
        reinterpret_cast<http_server *>(f)->run();
        return STRATA_OK;
    });
    return rc == STRATA_OK ? 0 : 1;
}

void http_request_stop(strata_frontend *f) { reinterpret_cast<http_server *>(f)->request_stop(); }

void http_destroy(strata_frontend *f) { delete reinterpret_cast<http_server *>(f); }

const strata_frontend_desc k_http_desc = {
    strata::plugin::make_header<strata_frontend_desc>(STRATA_KIND_FRONTEND, "openai_http", sizeof(strata_frontend_desc)),
    http_create,
    http_run,
    http_request_stop,
    http_destroy,
};

const strata_descriptor_header *const k_descriptors[] = {&k_http_desc.header};

const strata_config_key k_keys[] = {
    {"host", STRATA_CONFIG_STRING, "\"127.0.0.1\"", 0, 0, "IP address to listen on (0.0.0.0 for every interface)", "--host",
     nullptr},
    {"port", STRATA_CONFIG_INT, "8000", 0, 65535, "TCP port to listen on (0 = any free port; the log says which)", "--port",
     nullptr},
    {"api_keys", STRATA_CONFIG_STRING_LIST, "[]",
     0, 0, "accepted API keys (Authorization: Bearer KEY on every route but /health); empty = no authentication",
     "--api-key", nullptr},
    {"api_key_file", STRATA_CONFIG_STRING, nullptr, 0, 0, "file with more API keys, one per line ('#' comments)", nullptr,
     nullptr},
    {"max_body_bytes", STRATA_CONFIG_BYTES, "\"1MiB\"", 1, 1073741824.0, "largest request body; bigger ones get 413",
     nullptr, nullptr},
    {"max_header_bytes", STRATA_CONFIG_BYTES, "\"16KiB\"", 256, 16777216.0, "largest request header block; bigger get 431",
     nullptr, nullptr},
    {"header_timeout_s", STRATA_CONFIG_INT, "10", 1, 86400,
     "seconds to receive a request's header, from accept (or from a kept-alive connection's first byte of it)",
     "--header-timeout", nullptr},
    {"read_timeout_s", STRATA_CONFIG_INT, "30", 1, 86400,
     "seconds to receive a request's body once its header is in (and to write each response piece)", nullptr, nullptr},
    {"idle_timeout_s", STRATA_CONFIG_INT, "60", 1, 86400,
     "seconds a kept-alive connection may wait for its next request to start", nullptr, nullptr},
    {"max_connections", STRATA_CONFIG_INT, "256", 1, 65536,
     "open connections at most; one more closes the longest idle or header-pending one, or gets 503 when none is",
     nullptr, nullptr},
    {"shutdown_timeout_s", STRATA_CONFIG_INT, "0", 0, 86400,
     "seconds a stop (SIGINT/SIGTERM) lets the requests being served finish, accepting no new ones; 0 cancels them at "
     "once (vLLM's --shutdown-timeout); a second signal ends the wait",
     "--shutdown-timeout", nullptr},
    {"log_requests", STRATA_CONFIG_BOOL, "false", 0, 0,
     "log one line per generation request: id, endpoint, model, prompt tokens, max_tokens (vLLM's default is off too)",
     "--enable-log-requests|!--disable-log-requests", nullptr},
    {"served_model_name", STRATA_CONFIG_STRING_LIST, "[]", 0, 0,
     "model ids a request may name, the first listed by /v1/models (default: the GGUF's general.name and the model "
     "argument as given, as vLLM does)", "--served-model-name", nullptr},
    {"tool_call_parser", STRATA_CONFIG_STRING, "\"auto\"", 0, 0,
     "how tool calls are read back from the output (vLLM --tool-call-parser): auto = the format the model's chat "
     "template asks for; none refuses requests with tools", "--tool-call-parser",
     "auto|hermes|llama3_json|llama4_json|mistral|deepseek_v3|deepseek_v31|none"},
    {"enable_auto_tool_choice", STRATA_CONFIG_BOOL, "true", 0, 0,
     "answer tool_choice \"auto\" with parsed tool calls (vLLM --enable-auto-tool-choice; on by default here)",
     "--enable-auto-tool-choice", nullptr},
};

const strata_plugin_info k_info = strata::plugin::make_info(
    "openai_http", "0.1.0", "MIT",
    "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics",
    k_descriptors, k_keys);

} // namespace

STRATA_PLUGIN_DEFINE(k_info)
