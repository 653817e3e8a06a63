// The command-line frontend. It talks to the engine only through strata_engine_api.
#include <strata/plugin.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using strata::plugin::fail;

struct cli_frontend {
    const strata_engine_api *api = nullptr;
    const strata_host_services *host = nullptr;
    strata_sampling_params sampling{};
    std::optional<std::string> prompt;
    std::string output = "text";
    std::atomic<bool> stop{false};
    std::atomic<strata_request_id> current{0};
};

// Collects generated tokens and streams their text to stdout in text mode.
struct generation {
    bool stream = true;
    std::vector<int32_t> tokens;
    std::string text;
};

void on_token(void *user, const strata_token_event *ev) {
    auto *g = static_cast<generation *>(user);
    if (ev->token < 0) return; // final event: the result comes from wait()
    g->tokens.push_back(ev->token);
    g->text.append(ev->piece, static_cast<size_t>(ev->piece_len));
    if (g->stream && ev->piece_len > 0) {
        std::fwrite(ev->piece, 1, static_cast<size_t>(ev->piece_len), stdout);
        std::fflush(stdout); // the user watches tokens arrive
    }
}

const char *finish_name(int32_t f) {
    switch (f) {
    case STRATA_FINISH_STOP: return "stop";
    case STRATA_FINISH_LENGTH: return "length";
    case STRATA_FINISH_CANCELLED: return "cancelled";
    default: return "error";
    }
}

// Runs one prompt; prints text as it streams (text mode) or one JSON object at the end (json mode).
int32_t generate_once(cli_frontend &fe, const std::string &prompt, bool json, strata_status *st) {
    const strata_engine_api *api = fe.api;
    int32_t n = 0;
    if (api->tokenize(api->engine, prompt.c_str(), 1, nullptr, 0, &n, st) != STRATA_OK) return st->code;
    std::vector<int32_t> prompt_ids(static_cast<size_t>(n));
    if (api->tokenize(api->engine, prompt.c_str(), 1, prompt_ids.data(), n, &n, st) != STRATA_OK) return st->code;

    generation g;
    g.stream = !json;
    strata_request req{};
    req.struct_size = sizeof req;
    req.prompt_tokens = prompt_ids.data();
    req.n_prompt_tokens = n;
    req.sampling = fe.sampling;
    req.on_token = on_token;
    req.user = &g;
    strata_request_id id = 0;
    if (api->submit(api->engine, &req, &id, st) != STRATA_OK) {
        if (st->code == STRATA_ERR_BUSY) {
            // Not expected with one prompt at a time, but if the queue is full say so plainly (it names the limit).
            const std::string why = st->message;
            std::snprintf(st->message, sizeof st->message, "cli: the engine is busy, the prompt was not run: %s", why.c_str());
        }
        return st->code;
    }
    fe.current = id;
    strata_request_result res{};
    res.struct_size = sizeof res;
    const int32_t rc = api->wait(api->engine, id, &res, st);
    fe.current = 0;
    if (rc != STRATA_OK) return rc;
    if (json) {
        nlohmann::json j;
        j["prompt_tokens"] = prompt_ids;
        j["completion_tokens"] = g.tokens;
        j["text"] = nlohmann::json(g.text);
        j["finish_reason"] = finish_name(res.finish);
        j["timings"] = {
            {"prompt_n", res.n_prompt_tokens},
            {"predicted_n", res.n_completion_tokens},
            {"prefill_seconds", res.prefill_seconds},
            {"decode_seconds", res.decode_seconds},
            {"prefill_tokens_per_second", res.prefill_seconds > 0 ? res.n_prompt_tokens / res.prefill_seconds : 0.0},
            {"decode_tokens_per_second",
             res.decode_seconds > 0 ? res.n_completion_tokens / res.decode_seconds : 0.0},
        };
        // Invalid UTF-8 (a generation cut inside a character) is replaced rather than failing the whole output.
        std::string out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::fputc('\n', stdout);
    } else {
        std::fputc('\n', stdout);
    }
    std::fflush(stdout);
    strata::plugin::log(fe.host, STRATA_LOG_INFO, "cli",
                        "%d prompt tokens (%.1f tok/s), %d generated (%.1f tok/s), finish: %s", res.n_prompt_tokens,
                        res.prefill_seconds > 0 ? res.n_prompt_tokens / res.prefill_seconds : 0.0,
                        res.n_completion_tokens,
                        res.decode_seconds > 0 ? res.n_completion_tokens / res.decode_seconds : 0.0,
                        finish_name(res.finish));
    return STRATA_OK;
}

strata_frontend *cli_create(const strata_frontend_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_frontend>(st, [&]() -> strata_frontend * {
        if (args == nullptr || args->engine == nullptr) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT, "cli: no engine");
            return nullptr;
        }
        auto fe = std::make_unique<cli_frontend>();
        fe->api = args->engine;
        fe->host = args->host;
        if (args->default_sampling) fe->sampling = *args->default_sampling;
        strata::plugin::config cfg(args->config);
        fe->prompt = cfg.get_string("prompt");
        fe->output = cfg.get_string("output").value_or("text");
        return reinterpret_cast<strata_frontend *>(fe.release());
    });
}

int32_t cli_run(strata_frontend *f, strata_status *st) {
    return strata::plugin::guarded(st, [&]() -> int32_t {
        auto &fe = *reinterpret_cast<cli_frontend *>(f);
        const bool json = fe.output == "json";
        if (fe.prompt || !isatty(STDIN_FILENO)) {
            // One-shot: the given prompt, or the empty prompt (BOS only) when stdin is not a terminal.
            return generate_once(fe, fe.prompt.value_or(""), json, st) == STRATA_OK ? 0 : 1;
        }
        std::fprintf(stderr, "Interactive mode: type a prompt and press Enter; Ctrl-D to quit.\n");
        std::string line;
        while (!fe.stop) {
            std::fprintf(stderr, "> ");
            std::fflush(stderr);
            if (!std::getline(std::cin, line)) break;
            if (generate_once(fe, line, json, st) != STRATA_OK) {
                std::fprintf(stderr, "error: %s\n", st->message);
            }
        }
        return 0;
    });
}

void cli_request_stop(strata_frontend *f) {
    auto &fe = *reinterpret_cast<cli_frontend *>(f);
    fe.stop = true;
    if (strata_request_id id = fe.current.load()) fe.api->cancel(fe.api->engine, id);
}

void cli_destroy(strata_frontend *f) { delete reinterpret_cast<cli_frontend *>(f); }

const strata_frontend_desc k_cli_desc = {
    strata::plugin::make_header<strata_frontend_desc>(STRATA_KIND_FRONTEND, "cli", sizeof(strata_frontend_desc)),
    cli_create,
    cli_run,
    cli_request_stop,
    cli_destroy,
};

const strata_descriptor_header *const k_descriptors[] = {&k_cli_desc.header};

const strata_config_key k_keys[] = {
    {"prompt", STRATA_CONFIG_STRING, nullptr, 0, 0,
     "prompt text; without it the CLI runs an interactive loop on a terminal, or the empty prompt otherwise",
     "--prompt|-p", nullptr},
    {"output", STRATA_CONFIG_STRING, "\"text\"", 0, 0,
     "text: print the continuation as it streams; json: one object with token ids, text, finish_reason, timings",
     "--output", "text|json"},
};

const strata_plugin_info k_info = strata::plugin::make_info(
    "cli", "0.1.0", "MIT", "command-line frontend: one-shot text/JSON generation or an interactive loop",
    k_descriptors, k_keys);

} // namespace

STRATA_PLUGIN_DEFINE(k_info)
