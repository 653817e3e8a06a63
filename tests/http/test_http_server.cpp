// End-to-end tests of the openai_http frontend: the real `runtime` serves stories260K on a free loopback port and
// the tests talk HTTP/1.1 to it with Boost.Asio (one request per connection, chunked bodies decoded).
#include "http_test_support.hpp"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <poll.h>
#include <regex>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>

namespace {

using namespace strata_http_test;
using json = nlohmann::json;

class HttpServer : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        g_port = free_port();
        log_ = fs::temp_directory_path() / ("strata_http_" + std::to_string(::getpid()) + ".log");
        pid_ = start_runtime(g_port, log_, {});
        ASSERT_NE(pid_, 0) << "server did not start:\n" << read_text(log_);
    }
    static void TearDownTestSuite() {
        if (pid_ > 0) stop_runtime(pid_, log_);
    }
    static inline pid_t pid_ = 0;
    static inline fs::path log_;
};

std::string cli_greedy_text(const std::string &prompt, int max_tokens) {
    const std::string cmd = STRATA_BINARY_DIR "/bin/runtime --model " + k_model + " --prompt \"" + prompt +
                            "\" --temperature 0 --max-tokens " + std::to_string(max_tokens) + " --output json </dev/null 2>/dev/null";
    FILE *p = ::popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    ::pclose(p);
    return json::parse(out)["text"].get<std::string>();
}

TEST_F(HttpServer, HealthNeedsNoKey) {
    http_reply r = request("GET", "/health", "", "");
    EXPECT_EQ(r.status, 200);
}

TEST_F(HttpServer, MissingOrWrongKeyIs401) {
    http_reply a = request("GET", "/v1/models", "", "");
    EXPECT_EQ(a.status, 401);
    EXPECT_EQ(json::parse(a.body)["error"]["type"], "authentication_error");
    EXPECT_EQ(request("GET", "/v1/models", "", "Bearer wrong").status, 401);
    http_reply ok = request("GET", "/v1/models");
    ASSERT_EQ(ok.status, 200);
    EXPECT_EQ(json::parse(ok.body)["data"][0]["id"], "stories260K");
}

TEST_F(HttpServer, GreedyCompletionEqualsTheCli) {
    const std::string expected = cli_greedy_text("Once upon a time", 20);
    http_reply r = request("POST", "/v1/completions", R"({"model":"stories260K","prompt":"Once upon a time","max_tokens":20,"temperature":0})");
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["text"], expected);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], 20);
    EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
}

TEST_F(HttpServer, StreamingChunksConcatenateToTheSameTextAndEndWithDone) {
    const std::string body = R"({"prompt":"Once upon a time","max_tokens":20,"temperature":0})";
    const std::string whole = json::parse(request("POST", "/v1/completions", body).body)["choices"][0]["text"];
    http_reply r = request("POST", "/v1/completions",
                           R"({"prompt":"Once upon a time","max_tokens":20,"temperature":0,"stream":true,"stream_options":{"include_usage":true}})");
    ASSERT_EQ(r.status, 200);
    EXPECT_NE(r.headers.find("text/event-stream"), std::string::npos);
    std::string text;
    size_t pos = 0, events = 0;
    bool done = false, usage = false;
    while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
        const size_t end = r.body.find("\n\n", pos);
        ASSERT_NE(end, std::string::npos);
        const std::string payload = r.body.substr(pos + 6, end - pos - 6);
        pos = end + 2;
        ++events;
        if (payload == "[DONE]") {
            done = true;
            EXPECT_EQ(pos, r.body.size()); // nothing after [DONE]
            break;
        }
        json j = json::parse(payload);
        EXPECT_EQ(j["object"], "text_completion");
        if (j.contains("usage")) {
            usage = true;
            EXPECT_EQ(j["usage"]["completion_tokens"], 20);
        } else {
            text += j["choices"][0]["text"].get<std::string>();
        }
    }
    EXPECT_TRUE(done);
    EXPECT_TRUE(usage);
    EXPECT_GT(events, 5u);
    EXPECT_EQ(text, whole);
}

TEST_F(HttpServer, StopStringEndsTheText) {
    const std::string whole = json::parse(request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":20,"temperature":0})").body)["choices"][0]["text"];
    ASSERT_NE(whole.find("Lily"), std::string::npos) << whole;
    http_reply r = request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":20,"temperature":0,"stop":"Lily"})");
    json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["text"], whole.substr(0, whole.find("Lily")));
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(HttpServer, ChatCompletionAnswersAsAssistant) {
    http_reply r = request("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"seed":3})");
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(j["usage"]["completion_tokens"], 8);
    http_reply again = request("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"seed":3})");
    EXPECT_EQ(json::parse(again.body)["choices"], j["choices"]); // same seed, same text
}

TEST_F(HttpServer, CompletionLogprobsGiveThreeAlternativesPerToken) {
    http_reply r = request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":8,"temperature":0,"logprobs":3})");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    const json &lp = j["choices"][0]["logprobs"];
    ASSERT_TRUE(lp.is_object()) << r.body;
    ASSERT_EQ(lp["tokens"].size(), 8u);
    ASSERT_EQ(lp["token_logprobs"].size(), 8u);
    ASSERT_EQ(lp["top_logprobs"].size(), 8u);
    ASSERT_EQ(lp["text_offset"].size(), 8u);
    std::string joined;
    for (size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(lp["text_offset"][i], joined.size());
        joined += lp["tokens"][i].get<std::string>();
        EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
        EXPECT_EQ(lp["top_logprobs"][i].size(), 3u) << lp["top_logprobs"][i].dump();
        double best = -1e9;
        for (const auto &[tok, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
        EXPECT_NEAR(best, lp["token_logprobs"][i].get<double>(), 1e-6); // greedy takes the most likely token
    }
    EXPECT_EQ(joined, j["choices"][0]["text"]);
    // Without logprobs the field stays null and the text is the same.
    const json plain = json::parse(request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":8,"temperature":0})").body);
    EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(plain["choices"][0]["text"], j["choices"][0]["text"]);
}

TEST_F(HttpServer, ChatLogprobsGiveContentEntriesAlsoWhenStreamed) {
    const std::string body = R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":2)";
    http_reply r = request("POST", "/v1/chat/completions", body + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    const json &content = j["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 6u) << r.body;
    for (const json &e : content) {
        EXPECT_TRUE(e["token"].is_string());
        EXPECT_LE(e["logprob"].get<double>(), 0.0);
        EXPECT_EQ(e["bytes"].size(), e["token"].get<std::string>().size());
        EXPECT_EQ(e["top_logprobs"].size(), 2u);
    }
    http_reply s = request("POST", "/v1/chat/completions", body + R"(,"stream":true})");
    ASSERT_EQ(s.status, 200);
    size_t pos = 0, streamed = 0;
    while ((pos = s.body.find("data: {", pos)) != std::string::npos) {
        const size_t end = s.body.find("\n\n", pos);
        const json ev = json::parse(s.body.substr(pos + 6, end - pos - 6));
        pos = end;
        const json &lp = ev["choices"][0]["logprobs"];
        if (lp.is_object()) streamed += lp["content"].size();
    }
    EXPECT_EQ(streamed, 6u) << s.body;
}

TEST_F(HttpServer, PresencePenaltyIsAcceptedAndChangesGreedyText) {
    const std::string base = R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0)";
    http_reply plain = request("POST", "/v1/completions", base + "}");
    http_reply penalised = request("POST", "/v1/completions", base + R"(,"presence_penalty":2,"frequency_penalty":1})");
    ASSERT_EQ(penalised.status, 200) << penalised.body;
    EXPECT_NE(json::parse(penalised.body)["choices"][0]["text"], json::parse(plain.body)["choices"][0]["text"]);
    EXPECT_EQ(request("POST", "/v1/completions", base + R"(,"presence_penalty":3})").status, 400);
}

TEST_F(HttpServer, ErrorsHaveOpenAiShapeAndStatus) {
    http_reply bad = request("POST", "/v1/completions", "{\"prompt\": ");
    EXPECT_EQ(bad.status, 400);
    EXPECT_TRUE(json::parse(bad.body)["error"].contains("message"));
    EXPECT_EQ(request("POST", "/v1/completions", R"({"prompt":"x","temperature":-1})").status, 400);
    http_reply model = request("POST", "/v1/completions", R"({"prompt":"x","model":"gpt-9"})");
    EXPECT_EQ(model.status, 404);
    EXPECT_EQ(json::parse(model.body)["error"]["code"], "model_not_found");
    http_reply big = request("POST", "/v1/completions", std::string(2 << 20, 'a'));
    EXPECT_EQ(big.status, 413);
    json tokens = json::array();
    for (int i = 0; i < 600; ++i) tokens.push_back(300);
    http_reply longp = request("POST", "/v1/completions", json{{"prompt", tokens}}.dump());
    EXPECT_EQ(longp.status, 400);
    const std::string msg = json::parse(longp.body)["error"]["message"];
    EXPECT_NE(msg.find("512"), std::string::npos) << msg;
    EXPECT_NE(msg.find("600"), std::string::npos) << msg;
    EXPECT_EQ(request("GET", "/v1/nothing").status, 404);
    http_reply vocab = request("POST", "/v1/completions", R"({"prompt":[1,99999],"stream":true})");
    EXPECT_EQ(vocab.status, 400) << vocab.body;
}

TEST_F(HttpServer, MetricsNameTheVllmSeries) {
    // A prompt of more than one 16-token block, so its full blocks are looked up in the prefix cache.
    request("POST", "/v1/completions",
            R"({"prompt":"Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends and her dog.","max_tokens":3})");
    http_reply r = request("GET", "/metrics");
    ASSERT_EQ(r.status, 200);
    for (const char *name : {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:prompt_tokens_total",
                             "vllm:generation_tokens_total", "vllm:request_success_total",
                             "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_count"}) {
        EXPECT_NE(r.body.find(name), std::string::npos) << name;
    }
    // Every sample line parses as `name{labels} number`; the KV series of the ABI 1.5 stats tail are all there, with
    // the engine's real figures (checked below).
    const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$)");
    std::map<std::string, double> samples; // "name{labels}" -> value
    std::istringstream lines(r.body);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, sample)) << line;
        size_t used = 0;
        const double v = std::stod(m[3].str(), &used);
        EXPECT_EQ(used, m[3].str().size()) << line;
        EXPECT_TRUE(std::isfinite(v)) << line;
        samples[m[1].str() + "{" + m[2].str() + "}"] = v;
    }
    const std::string model = "model_name=\"stories260K\"";
    for (const char *name : {"vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc"}) {
        const auto it = samples.find(std::string(name) + "{" + model + "}");
        ASSERT_NE(it, samples.end()) << name << "\n" << r.body;
        EXPECT_GE(it->second, 0.0);
        EXPECT_LE(it->second, 1.0);
    }
    for (const char *name : {"vllm:num_preemptions_total", "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total",
                             "strata_kv_block_size"}) {
        EXPECT_TRUE(samples.count(std::string(name) + "{" + model + "}")) << name << "\n" << r.body;
    }
    for (const char *tier : {"device", "host", "nvme"}) {
        for (const char *state : {"total", "used", "cached"}) {
            const std::string key = "strata_kv_blocks{" + model + ",tier=\"" + tier + "\",state=\"" + state + "\"}";
            EXPECT_TRUE(samples.count(key)) << key << "\n" << r.body;
        }
        const std::string hits = "strata_prefix_cache_hits_total{" + model + ",tier=\"" + tier + "\"}";
        EXPECT_TRUE(samples.count(hits)) << hits;
    }
    for (const char *mode : {"swap", "recompute"}) {
        EXPECT_TRUE(samples.count("strata_kv_preemptions_total{" + model + ",mode=\"" + mode + "\"}")) << mode;
    }
    for (const char *direction : {"out", "in"}) {
        EXPECT_TRUE(samples.count("strata_kv_swapped_bytes_total{" + model + ",direction=\"" + direction + "\"}")) << direction;
    }
    // Real figures: the device pool has blocks, the finished request left its full prompt/output blocks cached and
    // none held, and its prompt was looked up in the prefix cache.
    auto kv = [&](const char *tier, const char *state) {
        return samples["strata_kv_blocks{" + model + ",tier=\"" + tier + "\",state=\"" + state + "\"}"];
    };
    EXPECT_GT(kv("device", "total"), 0.0);
    EXPECT_EQ(kv("device", "used"), kv("device", "cached")) << "no block held by a sequence once idle";
    EXPECT_EQ(samples["strata_kv_block_size{" + model + "}"], 16.0);
    EXPECT_GT(samples["vllm:gpu_prefix_cache_queries_total{" + model + "}"], 0.0) << r.body;
}

TEST_F(HttpServer, EchoPutsThePromptFirstAlsoWhenStreamed) {
    const std::string base = R"({"prompt":"Once upon a time","max_tokens":12,"temperature":0)";
    const std::string plain = json::parse(request("POST", "/v1/completions", base + "}").body)["choices"][0]["text"];
    http_reply r = request("POST", "/v1/completions", base + R"(,"echo":true})");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["text"], "Once upon a time" + plain);
    EXPECT_EQ(j["usage"]["completion_tokens"], 12);
    EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
    // Streamed, the prompt is the choice's first text chunk and the rest follows unchanged.
    http_reply st = request("POST", "/v1/completions", base + R"(,"echo":true,"stream":true})");
    ASSERT_EQ(st.status, 200);
    std::vector<std::string> texts;
    size_t pos = 0;
    while ((pos = st.body.find("data: {", pos)) != std::string::npos) {
        const size_t end = st.body.find("\n\n", pos);
        ASSERT_NE(end, std::string::npos);
        const json ev = json::parse(st.body.substr(pos + 6, end - pos - 6));
        pos = end;
        if (!ev["choices"].empty() && !ev["choices"][0]["text"].get<std::string>().empty()) texts.push_back(ev["choices"][0]["text"]);
    }
    ASSERT_FALSE(texts.empty()) << st.body;
    EXPECT_EQ(texts.front(), "Once upon a time");
    std::string joined;
    for (const std::string &t : texts) joined += t;
    EXPECT_EQ(joined, "Once upon a time" + plain);
    // A token-id prompt echoes as its ids decode; echo with logprobs is refused with the reason.
    http_reply ids = request("POST", "/v1/completions", R"({"prompt":[403,407,261,378],"max_tokens":3,"temperature":0,"echo":true})");
    ASSERT_EQ(ids.status, 200) << ids.body;
    EXPECT_EQ(json::parse(ids.body)["choices"][0]["text"].get<std::string>().rfind("Once upon a time", 0), 0u) << ids.body;
    http_reply lp = request("POST", "/v1/completions", base + R"(,"echo":true,"logprobs":1})");
    EXPECT_EQ(lp.status, 400);
    EXPECT_NE(json::parse(lp.body)["error"]["message"].get<std::string>().find("not supported yet"), std::string::npos) << lp.body;
}

TEST_F(HttpServer, TokenizeAndDetokenizeRoundTrip) {
    http_reply t = request("POST", "/tokenize", R"({"prompt":"Once upon a time"})");
    ASSERT_EQ(t.status, 200);
    json j = json::parse(t.body);
    EXPECT_EQ(j["tokens"], json({1, 403, 407, 261, 378}));
    http_reply d = request("POST", "/detokenize", json{{"tokens", json({403, 407, 261, 378})}}.dump());
    ASSERT_EQ(d.status, 200);
    EXPECT_NE(json::parse(d.body)["prompt"].get<std::string>().find("Once upon a time"), std::string::npos);
}

TEST_F(HttpServer, ClientDisconnectMidStreamLeavesTheServerServing) {
    {
        net::io_context ioc;
        tcp::socket sock(ioc);
        sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
        const std::string body = R"({"prompt":"Lily","max_tokens":400,"stream":true})";
        const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + k_key +
                                "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        net::write(sock, net::buffer(req));
        std::array<char, 64> buf{};
        const size_t n = sock.read_some(net::buffer(buf));
        EXPECT_GT(n, 0u);
        sock.close(); // mid-stream
    }
    http_reply r = request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":5,"temperature":0})");
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 5);
}

TEST(HttpServerLimits, ConnectionsOverMaxConnectionsGet503) {
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_limit_" + std::to_string(::getpid()) + ".log");
    const pid_t pid = start_runtime(g_port, log, {"--set", "openai_http.max_connections=1"});
    ASSERT_NE(pid, 0) << read_text(log);
    {
        // The one slot is held by a connection in the middle of its body: doing work, so it is not closed for the
        // newcomer (an idle or header-pending one would be).
        net::io_context ioc;
        tcp::socket held(ioc);
        held.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
        net::write(held, net::buffer(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                                                 "Expect: 100-continue\r\n\r\n")));
        std::string got; // the go-ahead: the server has read the header and waits for the body
        std::array<char, 256> buf{};
        while (got.find("\r\n\r\n") == std::string::npos) got.append(buf.data(), held.read_some(net::buffer(buf)));
        ASSERT_EQ(got.rfind("HTTP/1.1 100", 0), 0u) << got;
        net::write(held, net::buffer(std::string("{")));
        http_reply r = request("GET", "/health", "", "");
        EXPECT_EQ(r.status, 503);
        EXPECT_NE(r.body.find("max_connections"), std::string::npos) << r.body;
        EXPECT_NE(r.headers.find("Retry-After: 1"), std::string::npos) << r.headers;
    }
    stop_runtime(pid, log);
}

TEST(HttpServerLimits, StopsCleanlyWithKeptAliveConnectionsOpen) {
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_stop_" + std::to_string(::getpid()) + ".log");
    const pid_t pid = start_runtime(g_port, log, {});
    ASSERT_NE(pid, 0) << read_text(log);
    net::io_context ioc;
    std::vector<tcp::socket> open;
    for (int i = 0; i < 8; ++i) {
        tcp::socket sock(ioc);
        sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
        net::write(sock, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
        std::string got;
        std::array<char, 256> buf{};
        while (got.find("\r\n\r\n") == std::string::npos) got.append(buf.data(), sock.read_some(net::buffer(buf)));
        EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
        open.push_back(std::move(sock)); // kept alive: the server holds a session for each
    }
    stop_runtime(pid, log);
}

TEST(HttpServerLimits, ClientDisconnectCancelsItsGeneration) {
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_cancel_" + std::to_string(::getpid()) + ".log");
    // A long context (what the test servers' 16 MiB KV cache holds) so an uncancelled request would run for twelve
    // thousand tokens.
    const pid_t pid = start_runtime(g_port, log, {"--max-model-len", "12288"});
    ASSERT_NE(pid, 0) << read_text(log);
    {
        net::io_context ioc;
        tcp::socket sock(ioc);
        sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
        const std::string body = R"({"prompt":"Lily","max_tokens":12000,"stream":true})";
        const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + k_key +
                                "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        net::write(sock, net::buffer(req));
        std::string got;
        std::array<char, 256> buf{};
        while (got.find("\"text\"") == std::string::npos) got.append(buf.data(), sock.read_some(net::buffer(buf)));
        sock.close(); // after the first token
    }
    // Another request is served meanwhile (continuous batching); the hang-up is seen at the server's next write, so
    // wait (generously) for the cancelled request to be counted before reading the counters.
    http_reply r = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":3})");
    ASSERT_EQ(r.status, 200) << r.body;
    std::string metrics;
    for (int i = 0; i < 200; ++i) {
        metrics = request("GET", "/metrics").body;
        if (metric_value(metrics, "strata:request_failure_total") >= 1) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_LT(metric_value(metrics, "vllm:generation_tokens_total"), 12000) << metrics;
    EXPECT_EQ(metric_value(metrics, "strata:request_failure_total"), 1) << metrics;
    EXPECT_EQ(metric_value(metrics, "vllm:request_success_total"), 1) << metrics;
    stop_runtime(pid, log);
}

// Sends `head` at once, then `slow` one byte every 200 ms until the server closes the connection; returns whether it
// did before the last byte, and leaves anything it sent in `received`.
bool closed_while_trickling(const std::string &head, const std::string &slow, std::string &received) {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
    if (!head.empty()) net::write(sock, net::buffer(head));
    for (size_t sent = 0; sent < slow.size(); ++sent) {
        boost::system::error_code ec;
        sock.write_some(net::buffer(slow.data() + sent, 1), ec);
        if (ec) return true; // the server closed already and the kernel refused the byte
        if (wait_for_close(sock, std::chrono::milliseconds(200), &received)) return sent + 1 < slow.size();
    }
    return false;
}

TEST(HttpServerLimits, HeadersOverMaxHeaderBytesGet431AndShortTimeoutsCloseSlowOrIdleClients) {
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_slow_" + std::to_string(::getpid()) + ".log");
    // A header may take 1 s, a body 1 s after its header; a kept-alive connection may wait 600 s for its next one.
    const pid_t pid = start_runtime(g_port, log, {"--set", "openai_http.max_header_bytes=1024", "--header-timeout", "1",
                                                  "--set", "openai_http.read_timeout_s=1", "--set",
                                                  "openai_http.idle_timeout_s=600"});
    ASSERT_NE(pid, 0) << read_text(log);

    // Headers of 4 KiB against a 1 KiB limit: 431 with the limit named; a request just under it is served.
    http_reply big = request("GET", "/v1/models", "", "Bearer " + k_key + "\r\nX-Pad: " + std::string(4096, 'a'));
    EXPECT_EQ(big.status, 431) << big.headers;
    EXPECT_NE(big.body.find("max_header_bytes (1024 bytes)"), std::string::npos) << big.body;
    EXPECT_EQ(request("GET", "/v1/models", "", "Bearer " + k_key + "\r\nX-Pad: " + std::string(700, 'a')).status, 200);

    // A client that sends its header (or, after a whole header, its body) one byte every 200 ms never completes it
    // within 1 s: the server hangs up without answering, while the client still has bytes to send.
    std::string received;
    EXPECT_TRUE(closed_while_trickling("", "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + std::string(200, 'b') + "\r\n\r\n",
                                       received))
        << "the slow client was still connected after sending its whole header";
    EXPECT_TRUE(received.empty()) << received;
    const std::string body = R"({"prompt":")" + std::string(200, 'c') + R"(","max_tokens":1})";
    EXPECT_TRUE(closed_while_trickling("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + k_key +
                                           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n",
                                       body, received))
        << "the slow client was still connected after sending its whole body";
    EXPECT_TRUE(received.empty()) << received;

    // The server still serves a client that sends its request at once.
    EXPECT_EQ(request("GET", "/health", "", "").status, 200);
    stop_runtime(pid, log);
}

TEST(HttpServerLimits, AnIdleKeptAliveConnectionIsClosedAfterTheIdleTimeout) {
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_idle_" + std::to_string(::getpid()) + ".log");
    // Idle connections may wait 1 s for their next request; reading one may take 600 s, so a close within the
    // 30 s this test waits is the idle limit at work.
    const pid_t pid = start_runtime(g_port, log, {"--set", "openai_http.idle_timeout_s=1", "--set", "openai_http.read_timeout_s=600"});
    ASSERT_NE(pid, 0) << read_text(log);
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
    // Two requests on the connection: it is kept alive between them, then closed once idle.
    for (int i = 0; i < 2; ++i) {
        net::write(sock, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
        std::string got;
        std::array<char, 256> buf{};
        while (got.find("\r\n\r\n") == std::string::npos) got.append(buf.data(), sock.read_some(net::buffer(buf)));
        EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
        EXPECT_EQ(got.find("Connection: close"), std::string::npos) << got;
    }
    std::string extra;
    EXPECT_TRUE(wait_for_close(sock, std::chrono::seconds(30), &extra)) << "an idle kept-alive connection stayed open";
    EXPECT_TRUE(extra.empty()) << extra;
    stop_runtime(pid, log);
}

// --- [openai_http] keys from a config file ------------------------------------------------------------------------

// Runs `runtime --frontend openai_http` with `extra` to its end (it is expected to fail at start-up); returns its exit
// code, or -1 if it started serving, was still running after a minute, or was killed; leaves its stderr in `log`.
int runtime_exit_code(const fs::path &log, const std::vector<std::string> &extra) {
    const pid_t pid = spawn_runtime("0", log, extra);
    if (pid == 0) return -1;
    int status = 0;
    pid_t done = 0;
    bool serving = false; // it started after all: stop it rather than wait
    for (int i = 0; i < 600 && done == 0 && !serving; ++i) { // a hang detector: a failed start takes well under a second
        done = ::waitpid(pid, &status, WNOHANG);
        serving = done == 0 && read_text(log).find("ready on http://") != std::string::npos;
        if (done == 0 && !serving) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (done == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A server configured through an [openai_http] table (not flags): extra API keys from api_key_file, a served model
// name other than the GGUF's, a 4 KiB body limit (the default is 1 MiB) and the chatml chat format forced on a model
// that has no chat template (plain otherwise). The fixture's --api-key stays accepted too.
class HttpServerConfigured : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        const std::string stem = "strata_http_cfg_" + std::to_string(::getpid());
        key_file_ = fs::temp_directory_path() / (stem + ".keys");
        // A comment, a blank line, trailing blanks and a CRLF line end: only the two keys count.
        std::ofstream(key_file_) << "# keys for the test clients\n\nsk-from-file  \r\n# sk-commented-out\nsk-second\n";
        config_ = fs::temp_directory_path() / (stem + ".toml");
        std::ofstream(config_) << "[model]\nchat_template = \"chatml\"\n[openai_http]\napi_key_file = \"" << key_file_.string()
                               << "\"\nserved_model_name = [\"tiny-stories\", \"tiny\"]\nmax_body_bytes = \"4KiB\"\n";
        g_port = free_port();
        log_ = fs::temp_directory_path() / (stem + ".log");
        pid_ = start_runtime(g_port, log_, {"--config", config_.string()});
        ASSERT_NE(pid_, 0) << "server did not start:\n" << read_text(log_);
    }
    static void TearDownTestSuite() {
        if (pid_ > 0) stop_runtime(pid_, log_);
        fs::remove(key_file_);
        fs::remove(config_);
    }
    static inline pid_t pid_ = 0;
    static inline fs::path log_, key_file_, config_;
};

TEST_F(HttpServerConfigured, ApiKeyFileKeysAreAcceptedAndOthersAre401) {
    EXPECT_EQ(request("GET", "/v1/models", "", "Bearer sk-from-file").status, 200);
    EXPECT_EQ(request("GET", "/v1/models", "", "Bearer sk-second").status, 200);
    EXPECT_EQ(request("GET", "/v1/models").status, 200) << "the --api-key key still counts";
    http_reply wrong = request("GET", "/v1/models", "", "Bearer sk-not-in-the-file");
    EXPECT_EQ(wrong.status, 401);
    EXPECT_EQ(json::parse(wrong.body)["error"]["code"], "invalid_api_key") << wrong.body;
    EXPECT_EQ(request("GET", "/v1/models", "", "Bearer # sk-commented-out").status, 401);
    EXPECT_EQ(request("GET", "/v1/models", "", "Bearer sk-commented-out").status, 401);
    http_reply gen = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":2})", "Bearer sk-from-file");
    EXPECT_EQ(gen.status, 200) << gen.body;
}

TEST_F(HttpServerConfigured, ServedModelNameIsTheModelIdEverywhereAndTheGgufNameIsUnknown) {
    http_reply models = request("GET", "/v1/models");
    ASSERT_EQ(models.status, 200);
    const json list = json::parse(models.body)["data"];
    ASSERT_EQ(list.size(), 2u) << models.body; // every served name is listed, the first as the root
    EXPECT_EQ(list[0]["id"], "tiny-stories");
    EXPECT_EQ(list[1]["id"], "tiny");
    EXPECT_EQ(list[1]["root"], "tiny-stories");
    http_reply second = request("POST", "/v1/completions", R"({"model":"tiny","prompt":"Lily","max_tokens":3})");
    ASSERT_EQ(second.status, 200) << second.body;
    EXPECT_EQ(json::parse(second.body)["model"], "tiny"); // the name the request used, as vLLM answers
    http_reply named = request("POST", "/v1/completions", R"({"model":"tiny-stories","prompt":"Lily","max_tokens":3})");
    ASSERT_EQ(named.status, 200) << named.body;
    EXPECT_EQ(json::parse(named.body)["model"], "tiny-stories");
    http_reply unnamed = request("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3})");
    ASSERT_EQ(unnamed.status, 200) << unnamed.body;
    EXPECT_EQ(json::parse(unnamed.body)["model"], "tiny-stories");
    http_reply streamed = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":3,"stream":true})");
    ASSERT_EQ(streamed.status, 200);
    EXPECT_NE(streamed.body.find(R"("model":"tiny-stories")"), std::string::npos) << streamed.body;
    EXPECT_EQ(streamed.body.find("stories260K"), std::string::npos) << streamed.body;
    // The GGUF's own name is now another model: the same 404 as any unknown model.
    http_reply other = request("POST", "/v1/completions", R"({"model":"stories260K","prompt":"Lily","max_tokens":3})");
    EXPECT_EQ(other.status, 404) << other.body;
    const json err = json::parse(other.body)["error"];
    EXPECT_EQ(err["code"], "model_not_found");
    EXPECT_EQ(err["param"], "model");
    EXPECT_NE(err["message"].get<std::string>().find("'stories260K'"), std::string::npos) << other.body;
    EXPECT_NE(request("GET", "/metrics").body.find("model_name=\"tiny-stories\""), std::string::npos);
}

TEST_F(HttpServerConfigured, BodiesOverMaxBodyBytesGet413NamingTheLimit) {
    // The same valid request, padded with JSON whitespace to just under and to over 4 KiB (both far under the 1 MiB
    // default).
    const std::string head = R"({"prompt":"Once upon a time","max_tokens":2)";
    const std::string under = head + std::string(4000 - head.size(), ' ') + "}";
    const std::string over = head + std::string(6000, ' ') + "}";
    http_reply ok = request("POST", "/v1/completions", under);
    EXPECT_EQ(ok.status, 200) << ok.body;
    http_reply big = request("POST", "/v1/completions", over);
    EXPECT_EQ(big.status, 413) << big.body;
    EXPECT_NE(big.body.find("max_body_bytes (4096 bytes)"), std::string::npos) << big.body;
    // The server goes on serving.
    EXPECT_EQ(request("POST", "/v1/completions", under).status, 200);
}

TEST_F(HttpServerConfigured, ForcedChatTemplateRendersTheChatPrompt) {
    const std::string messages = R"("messages":[{"role":"user","content":"Hello"}])";
    const std::string chatml = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    const std::string plain = "user: Hello\nassistant:";
    auto tokens_of = [](const std::string &body) {
        http_reply r = request("POST", "/tokenize", body);
        EXPECT_EQ(r.status, 200) << r.body;
        return r.status == 200 ? json::parse(r.body)["tokens"] : json::array();
    };
    const json rendered = tokens_of("{" + messages + "}");
    ASSERT_FALSE(rendered.empty());
    EXPECT_EQ(rendered, tokens_of(json{{"prompt", chatml}}.dump()));
    EXPECT_NE(rendered, tokens_of(json{{"prompt", plain}}.dump()));
    // /v1/chat/completions generates from that prompt: its prompt_tokens and greedy text are those of a completion
    // of the chatml text.
    http_reply chat = request("POST", "/v1/chat/completions", "{" + messages + R"(,"max_tokens":10,"temperature":0})");
    ASSERT_EQ(chat.status, 200) << chat.body;
    const json c = json::parse(chat.body);
    EXPECT_EQ(c["usage"]["prompt_tokens"], rendered.size());
    http_reply text = request("POST", "/v1/completions", json{{"prompt", chatml}, {"max_tokens", 10}, {"temperature", 0}}.dump());
    ASSERT_EQ(text.status, 200) << text.body;
    EXPECT_EQ(c["choices"][0]["message"]["content"], json::parse(text.body)["choices"][0]["text"]);
}

// The flags for the same keys: --served-model-name and --chat-template.
TEST(HttpServerFlags, ServedModelNameAndChatTemplateFlagsSetTheirKeys) {
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_flags_" + std::to_string(::getpid()) + ".log");
    const pid_t pid = start_runtime(g_port, log, {"--served-model-name", "flag-name", "--chat-template", "phi3"});
    ASSERT_NE(pid, 0) << read_text(log);
    EXPECT_EQ(json::parse(request("GET", "/v1/models").body)["data"][0]["id"], "flag-name");
    auto tokens_of = [](const std::string &body) { return json::parse(request("POST", "/tokenize", body).body)["tokens"]; };
    EXPECT_EQ(tokens_of(R"({"messages":[{"role":"user","content":"Hello"}]})"),
              tokens_of(json{{"prompt", "<|user|>\nHello<|end|>\n<|assistant|>\n"}}.dump()));
    stop_runtime(pid, log);
}

// A key file that cannot be read stops the start with an error naming the path, rather than serving with fewer keys
// (or, without --api-key, with no authentication at all).
TEST(HttpServerFlags, AnUnreadableApiKeyFileIsAStartUpErrorNamingThePath) {
    const std::string stem = "strata_http_keyfile_" + std::to_string(::getpid());
    const fs::path log = fs::temp_directory_path() / (stem + ".log");
    const fs::path missing = fs::temp_directory_path() / (stem + "_missing" ) / "keys.txt";
    const fs::path dir = fs::temp_directory_path() / (stem + "_dir");
    const fs::path empty = fs::temp_directory_path() / (stem + "_empty.txt");
    fs::create_directories(dir);
    std::ofstream(empty) << "# no keys yet\n\n";
    for (const fs::path &p : {missing, dir, empty}) {
        SCOPED_TRACE(p.string());
        const int code = runtime_exit_code(log, {"--set", "openai_http.api_key_file=" + p.string()});
        const std::string err = read_text(log);
        EXPECT_GT(code, 0) << err;
        EXPECT_NE(err.find("api_key_file '" + p.string() + "'"), std::string::npos) << err;
        EXPECT_EQ(err.find("ready on"), std::string::npos) << err;
    }
    if (::geteuid() != 0) { // root reads a mode-000 file regardless
        const fs::path locked = fs::temp_directory_path() / (stem + "_locked.txt");
        std::ofstream(locked) << "sk-locked\n";
        fs::permissions(locked, fs::perms::none);
        EXPECT_GT(runtime_exit_code(log, {"--set", "openai_http.api_key_file=" + locked.string()}), 0);
        EXPECT_NE(read_text(log).find("api_key_file '" + locked.string() + "'"), std::string::npos) << read_text(log);
        fs::remove(locked);
    }
    fs::remove(dir);
    fs::remove(empty);
    fs::remove(log);
}

} // namespace
