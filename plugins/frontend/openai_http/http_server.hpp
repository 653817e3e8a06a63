// The HTTP/1.1 server behind the openai_http frontend: one I/O thread (Boost.Beast) for all connections, and a pool
// of worker threads that prepare a request (template, tokenizer), submit its generations to the engine and, once the
// last of them has finished, build its answer; no thread waits while a generation runs, so every request the clients
// send reaches the engine's batch. Tokens reach the client from the engine's callback through the connection's output
// buffer, flushed per token.
#pragma once

#include "metrics.hpp"
#include "tool_calls.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::openai_http {

struct server_options {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;
    std::vector<std::string> api_keys; // empty: no authentication
    uint64_t max_body_bytes = 1 << 20;
    uint32_t max_header_bytes = 16 << 10;
    int64_t header_timeout_s = 10; // to receive a request's header: from accept, or from a kept-alive one's first byte
    int64_t read_timeout_s = 30;   // to receive a request's body once its header is in, and per write
    int64_t idle_timeout_s = 60;   // for a kept-alive connection's next request to start (its first byte)
    // Open connections at most. One more closes the connection that has waited longest while idle or before its
    // header was complete; only when none is in such a state is the newcomer answered 503.
    int64_t max_connections = 256;
    // On a stop (SIGINT/SIGTERM): 0 closes every connection at once, its requests cancelled (vLLM's default); N > 0
    // stops accepting and lets the requests being served finish for up to N seconds, then cancels the rest (vLLM's
    // --shutdown-timeout). A second stop during the wait ends it at once.
    int64_t shutdown_timeout_s = 0;
    bool log_requests = false; // one info line per generation request (vLLM --enable-log-requests)
    // Model ids a request may name (--served-model-name, several allowed); the first is the one listed and used when a
    // request names none.
    std::vector<std::string> served_model_names;
    // How tool calls are read back from the model's output (vLLM's --tool-call-parser; none: tools are refused).
    tool_format tools = tool_format::none;
    // Generated special tokens that stand for a tool-call marker, and the marker's text (they have no text of
    // their own): resolved at start-up from the format's markers.
    std::vector<std::pair<int32_t, std::string>> marker_tokens;
};

class http_server {
  public:
    http_server(server_options opts, const strata_engine_api *engine, const strata_sampling_params &defaults,
                const strata_host_services *host);
    ~http_server();
    http_server(const http_server &) = delete;
    http_server &operator=(const http_server &) = delete;

    // Binds, logs "openai_http: ready on http://H:P", serves until request_stop(). Throws on bind failure.
    void run();
    void request_stop(); // thread-safe

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

} // namespace strata::openai_http
