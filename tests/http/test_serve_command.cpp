// The seeds' server command lines as users of vLLM and llama.cpp type them: `runtime serve MODEL` with vLLM's flags,
// and llama.cpp's server flags, each answering the seeds' curl request (whose "model" is the path given to serve).
#include "http_test_support.hpp"
#include "made_model.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <thread>

using namespace strata_http_test;
using json = nlohmann::json;

namespace {

// greedy "Once upon a time": run.c's reference continuation of stories260K (../shared/models/README.md).
const std::string k_reference = ", there was a little girl named Lily";

struct server {
    pid_t pid = 0;
    fs::path log;
    server(const std::string &name, std::vector<std::string> args) {
        g_port = free_port();
        log = fs::temp_directory_path() / ("strata_serve_" + name + "_" + std::to_string(::getpid()) + ".log");
        args.insert(args.end(), {"--port", std::to_string(g_port), "--api-key", k_key});
        pid = await_ready(spawn_runtime_argv(log, args), g_port, log);
    }
    ~server() {
        if (pid > 0) stop_runtime(pid, log);
        fs::remove(log);
    }
};

std::string completion_text(const std::string &model) {
    http_reply r = request("POST", "/v1/completions",
                           json{{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["choices"][0]["text"].get<std::string>() : "";
}

} // namespace

TEST(ServeCommand, VllmServeLineAnswersTheSeedsCurlUnderEitherModelName) {
    // vLLM's line as the seeds write it, on the CPU device (no GPU here): every layer fits under 16 GiB of offload.
    server s("vllm", {"serve", k_model, "--cpu-offload-gb", "16", "--gpu-memory-utilization", "0.9",
                      "--max-model-len", "4096", "--device", "cpu", "--disable-log-requests"});
    ASSERT_NE(s.pid, 0) << read_text(s.log);
    EXPECT_NE(read_text(s.log).find("Using CPU offload with"), std::string::npos) << read_text(s.log);
    // vLLM's default served names: the model's own and the argument as given (what the seeds' curl sends).
    http_reply models = request("GET", "/v1/models");
    ASSERT_EQ(models.status, 200);
    const json data = json::parse(models.body)["data"];
    ASSERT_EQ(data.size(), 2u) << models.body;
    EXPECT_EQ(data[0]["id"], "stories260K");
    EXPECT_EQ(data[1]["id"], k_model);
    EXPECT_EQ(data[0]["max_model_len"], 4096);
    EXPECT_EQ(completion_text(k_model).rfind(k_reference, 0), 0u);
    EXPECT_EQ(completion_text("stories260K").rfind(k_reference, 0), 0u);
    EXPECT_EQ(request("POST", "/v1/completions", R"({"model":"other","prompt":"x"})").status, 404);
    EXPECT_EQ(read_text(s.log).find("openai_http: request "), std::string::npos) << "--disable-log-requests logged";
}

TEST(ServeCommand, LlamaCppServerFlagsMeanWhatTheyMeanThere) {
    // llama-server -m MODEL -ngl 2 -c 256 -t 1 -np 4 -b 512 -ub 128 -fa on: 2 of 5 layers on the device, a 256-token
    // context, one thread, four slots; the request log on.
    server s("llamacpp", {"--frontend", "openai_http", "-m", k_model, "-ngl", "2", "-c", "256", "-t", "1", "-np", "4",
                          "-b", "512", "-ub", "128", "-fa", "on", "--enable-log-requests"});
    ASSERT_NE(s.pid, 0) << read_text(s.log);
    const std::string log = read_text(s.log);
    EXPECT_NE(log.find("layers 2-4"), std::string::npos) << log; // n_layer 5 - ngl 2 = 3 layers offloaded
    EXPECT_NE(log.find("--flash-attn on"), std::string::npos) << log;
    EXPECT_NE(log.find("device 'cpu' with 1 threads; up to 4 sequences and 512 tokens per step"), std::string::npos) << log;
    http_reply models = request("GET", "/v1/models");
    EXPECT_EQ(json::parse(models.body)["data"][0]["max_model_len"], 256);
    EXPECT_EQ(completion_text(k_model).rfind(k_reference, 0), 0u); // placement changes no greedy token
    EXPECT_NE(read_text(s.log).find("openai_http: request cmpl-"), std::string::npos) << read_text(s.log);
}

TEST(ServeCommand, ServedModelNamesReplaceTheDefaultsAndMayBeSeveralWords) {
    server s("names", {"serve", k_model, "--served-model-name", "first", "second"}); // vLLM's nargs spelling
    ASSERT_NE(s.pid, 0) << read_text(s.log);
    const json data = json::parse(request("GET", "/v1/models").body)["data"];
    ASSERT_EQ(data.size(), 2u) << data.dump();
    EXPECT_EQ(data[0]["id"], "first");
    EXPECT_EQ(data[1]["id"], "second");
    EXPECT_EQ(completion_text("second").rfind(k_reference, 0), 0u);
    EXPECT_EQ(request("POST", "/v1/completions", json{{"model", k_model}, {"prompt", "x"}}.dump()).status, 404);
}

TEST(ServeCommand, ServeWithoutAModelOrWithTwoSaysHow) {
    const fs::path log = fs::temp_directory_path() / ("strata_serve_bad_" + std::to_string(::getpid()) + ".log");
    for (const auto &args : {std::vector<std::string>{"serve"}, std::vector<std::string>{"serve", "a.gguf", "b.gguf"}}) {
        const pid_t pid = spawn_runtime_argv(log, args);
        ASSERT_NE(pid, 0);
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << read_text(log);
        EXPECT_NE(read_text(log).find("serve"), std::string::npos) << read_text(log);
    }
    fs::remove(log);
}

// vLLM's --data-parallel-size: two replicas in the one server, each on one of the two threads. Requests sent at once
// are answered as one engine answers each alone — half of them with a stop string, which the frontend acts on by
// cancelling the id its token events carry (so a replica's events must carry the id the frontend holds) — and
// /metrics counts both replicas' work.
TEST(ServeCommand, DataParallelReplicasAnswerConcurrentRequestsAsOneEngineAndMetricsSumThem) {
    const std::vector<std::string> prompts = {"Once upon a time", "Lily went to", "The cat", "Tom had a big",
                                              "One day, a bird", "Sue and Ben"};
    std::vector<std::string> stops(prompts.size()); // "" = none
    std::atomic<int64_t> completion_tokens = 0, prompt_tokens = 0;
    auto completion = [&](size_t i) {
        json body{{"model", k_model}, {"prompt", prompts[i]}, {"max_tokens", 24}, {"temperature", 0}};
        if (!stops[i].empty()) body["stop"] = json::array({stops[i]});
        http_reply r = request("POST", "/v1/completions", body.dump());
        if (r.status != 200) return "HTTP " + r.body;
        const json answer = json::parse(r.body);
        completion_tokens += answer["usage"]["completion_tokens"].get<int64_t>();
        prompt_tokens += answer["usage"]["prompt_tokens"].get<int64_t>();
        return answer["choices"][0]["text"].get<std::string>() + " [" +
               answer["choices"][0]["finish_reason"].get<std::string>() + "]";
    };
    std::vector<std::string> alone(prompts.size());
    {
        server one("dp1", {"serve", k_model, "--device", "cpu", "-t", "2"});
        ASSERT_NE(one.pid, 0) << read_text(one.log);
        // Every other request stops at a piece from the middle of its own greedy text.
        for (size_t i = 0; i < prompts.size(); i += 2) {
            const std::string text = completion(i);
            ASSERT_GT(text.size(), 16u) << text;
            stops[i] = text.substr(text.size() / 2 - 4, 4);
        }
        for (size_t i = 0; i < prompts.size(); ++i) alone[i] = completion(i);
    }
    for (size_t i = 0; i < prompts.size(); i += 2) EXPECT_NE(alone[i].find("[stop]"), std::string::npos) << alone[i];
    server two("dp2", {"serve", k_model, "--device", "cpu", "-t", "2", "--data-parallel-size", "2"});
    ASSERT_NE(two.pid, 0) << read_text(two.log);
    const std::string log = read_text(two.log);
    EXPECT_NE(log.find("instance 1 of 2 (data-parallel replicas x tensor-parallel ranks): 1 thread,"), std::string::npos)
        << log;
    completion_tokens = 0;
    prompt_tokens = 0;
    std::vector<std::string> got(prompts.size());
    {
        std::vector<std::thread> clients;
        for (size_t i = 0; i < prompts.size(); ++i) clients.emplace_back([&, i] { got[i] = completion(i); });
        for (auto &t : clients) t.join();
    }
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], alone[i]) << prompts[i];
    const http_reply metrics = request("GET", "/metrics");
    ASSERT_EQ(metrics.status, 200);
    // The engine counters are the replicas' sums: every prompt token, and at least every token answered (a request
    // that stops at a string may have generated a token or two past it before its cancel took effect).
    EXPECT_GT(prompt_tokens.load(), 0);
    EXPECT_EQ(metric_value(metrics.body, "vllm:prompt_tokens_total"), static_cast<double>(prompt_tokens.load()))
        << metrics.body;
    EXPECT_GE(metric_value(metrics.body, "vllm:generation_tokens_total"), static_cast<double>(completion_tokens.load()))
        << metrics.body;
    EXPECT_EQ(metric_value(metrics.body, "vllm:num_requests_running"), 0.0);
}

// vLLM's --shutdown-timeout: a stop (SIGTERM) lets the requests being served finish for up to that many seconds,
// accepting nothing new, then cancels the rest; a second signal ends the wait; 0 (the default) cancels at once. A
// model slow enough that a long request is surely still generating when the signal comes (2,000 tokens), and a short
// one that finishes within the wait.
TEST(ServeCommand, ShutdownTimeoutLetsRequestsInFlightFinishThenCancelsTheRest) {
    const std::string slow = strata::testing::made_model(
        "serve-shutdown-f32.gguf", std::string("--dim 384 --layers 8 --heads 6 --kv-heads 6 --ff 1024 --ctx 2048 "
                                               "--type f32 --seed 3 --vocab-from ") + k_model);
    ASSERT_FALSE(slow.empty()) << "make-model failed";
    struct outcome {
        http_reply reply;
        int status = -1; // the server's wait status
        std::string log;
    };
    // Serves `slow` with `flags`, sends a request of `max_tokens` and, once it runs, sends `signals` SIGTERMs.
    auto stop_during = [&](const std::string &name, const std::vector<std::string> &flags, int max_tokens, int signals) {
        outcome o;
        g_port = free_port();
        const fs::path log = fs::temp_directory_path() / ("strata_shutdown_" + name + "_" + std::to_string(::getpid()) + ".log");
        std::vector<std::string> args = {"serve", slow, "--device", "cpu", "-t", "1", "--kv-cache-memory", "64MiB",
                                         "--port", std::to_string(g_port), "--api-key", k_key};
        args.insert(args.end(), flags.begin(), flags.end());
        const pid_t pid = await_ready(spawn_runtime_argv(log, args), g_port, log);
        if (pid == 0) {
            ADD_FAILURE() << read_text(log);
            return o;
        }
        const std::string body = json{{"model", slow}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens},
                                      {"temperature", 0}, {"ignore_eos", true}}.dump();
        std::thread client([&] { o.reply = request("POST", "/v1/completions", body); });
        bool running = false;
        for (int i = 0; i < 600 && !running; ++i) {
            running = metric_value(request("GET", "/metrics").body, "vllm:num_requests_running") == 1.0;
            if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        EXPECT_TRUE(running) << "the request never ran";
        for (int i = 0; i < signals; ++i) {
            ::kill(pid, SIGTERM);
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        for (int i = 0; i < 1200; ++i) { // a hang detector (2 minutes), not a speed check
            if (::waitpid(pid, &o.status, WNOHANG) == pid) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (i == 1199) ::kill(pid, SIGKILL), ::waitpid(pid, &o.status, 0), o.status = -1;
        }
        client.join();
        o.log = read_text(log);
        fs::remove(log);
        return o;
    };
    // Within the wait: the request finishes whole, and the server then ends cleanly.
    const outcome drained = stop_during("drain", {"--shutdown-timeout", "600"}, 48, 1);
    EXPECT_EQ(drained.reply.status, 200) << drained.reply.body << drained.log;
    if (drained.reply.status == 200) {
        const json answer = json::parse(drained.reply.body);
        EXPECT_EQ(answer["usage"]["completion_tokens"], 48);
        EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");
    }
    EXPECT_TRUE(WIFEXITED(drained.status) && WEXITSTATUS(drained.status) == 0) << drained.log;
    EXPECT_NE(drained.log.find("1 connection(s) serving a request may finish within 600 s"), std::string::npos) << drained.log;
    // Past the wait (1 s against 2,000 tokens): the request is cancelled and its connection closed, the stop clean.
    const outcome cut = stop_during("cut", {"--shutdown-timeout", "1"}, 2000, 1);
    EXPECT_NE(cut.reply.status, 200) << cut.reply.body;
    EXPECT_TRUE(WIFEXITED(cut.status) && WEXITSTATUS(cut.status) == 0) << cut.log;
    EXPECT_NE(cut.log.find("stopping with 1 connection(s) still serving a request: their requests are cancelled"), std::string::npos)
        << cut.log;
    // A second signal ends a long wait at once.
    const outcome again = stop_during("again", {"--shutdown-timeout", "600"}, 2000, 2);
    EXPECT_NE(again.reply.status, 200) << again.reply.body;
    EXPECT_TRUE(WIFEXITED(again.status) && WEXITSTATUS(again.status) == 0) << again.log;
    EXPECT_NE(again.log.find("stopped again: not waiting for the requests in flight"), std::string::npos) << again.log;
    // The default, 0: cancelled at once, no wait announced.
    const outcome now = stop_during("now", {}, 2000, 1);
    EXPECT_NE(now.reply.status, 200) << now.reply.body;
    EXPECT_TRUE(WIFEXITED(now.status) && WEXITSTATUS(now.status) == 0) << now.log;
    EXPECT_EQ(now.log.find("may finish within"), std::string::npos) << now.log;
}
