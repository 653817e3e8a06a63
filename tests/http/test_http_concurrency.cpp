// The openai_http server against a stand-in engine whose generations finish only when the test says: every request
// the clients send reaches the engine at once (no server thread waits on a running generation), each gets its answer
// once its choices finish, and a stop with generations in flight cancels them and returns once they are answered.
#include "http_server.hpp"
#include "http_test_support.hpp"

#include <atomic>
#include <cstdio>
#include <functional>
#include <condition_variable>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

namespace {

using namespace strata_http_test;
using strata::openai_http::http_server;
using strata::openai_http::server_options;

// An engine that queues requests and leaves them running until `finish` (or `finish_cancelled`) is called. Tokens
// are the bytes of the text, so tokenize and detokenize are exact.
struct stand_in_engine {
    struct running {
        strata_token_callback on_token = nullptr;
        void *user = nullptr;
        bool done = false;
        bool cancelled = false;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::map<strata_request_id, running> requests;
    strata_request_id next_id = 1;
    int64_t submitted = 0;
    int64_t waited = 0;

    static stand_in_engine &self(strata_engine *e) { return *reinterpret_cast<stand_in_engine *>(e); }

    int64_t refuse_from = -1; // submits from this count on are refused BUSY (-1: never)
    bool refuse_odd_seeds = false; // submits with an odd seed are refused BUSY (choice 1 of a request with "seed": 0)
    int64_t refused = 0;

    static int32_t submit(strata_engine *e, const strata_request *req, strata_request_id *id, strata_status *st) {
        auto &s = self(e);
        std::lock_guard<std::mutex> lock(s.mu);
        if ((s.refuse_from >= 0 && s.submitted >= s.refuse_from) || (s.refuse_odd_seeds && (req->sampling.seed & 1) != 0)) {
            ++s.refused;
            st->code = STRATA_ERR_BUSY;
            std::snprintf(st->message, sizeof st->message, "the stand-in's queue is full");
            return STRATA_ERR_BUSY;
        }
        *id = s.next_id++;
        s.requests[*id] = running{req->on_token, req->user};
        ++s.submitted;
        s.cv.notify_all();
        return STRATA_OK;
    }
    static int32_t wait(strata_engine *e, strata_request_id id, strata_request_result *result, strata_status *) {
        auto &s = self(e);
        std::unique_lock<std::mutex> lock(s.mu);
        s.cv.wait(lock, [&] { return s.requests.at(id).done; });
        s.requests.erase(id);
        ++s.waited;
        if (result != nullptr) result->finish = STRATA_FINISH_LENGTH;
        return STRATA_OK;
    }
    static void cancel(strata_engine *e, strata_request_id id) {
        auto &s = self(e);
        std::lock_guard<std::mutex> lock(s.mu);
        if (auto it = s.requests.find(id); it != s.requests.end()) it->second.cancelled = true;
        s.cv.notify_all();
    }
    static void get_stats(strata_engine *, strata_engine_stats *out) {
        *out = strata_engine_stats{};
        out->struct_size = sizeof *out;
    }
    static int32_t tokenize(strata_engine *, const char *text, int32_t, int32_t *ids, int32_t cap, int32_t *n, strata_status *) {
        const auto len = static_cast<int32_t>(std::strlen(text));
        for (int32_t i = 0; i < std::min(len, cap); ++i) ids[i] = static_cast<unsigned char>(text[i]);
        *n = len;
        return STRATA_OK;
    }
    static int32_t detokenize(strata_engine *, const int32_t *ids, int32_t n_ids, char *text, int32_t cap, int32_t *n,
                              strata_status *) {
        for (int32_t i = 0; i < std::min(n_ids, cap); ++i) text[i] = static_cast<char>(ids[i]);
        *n = n_ids;
        return STRATA_OK;
    }
    static const char *model_name(strata_engine *) { return "stand-in"; }
    static int32_t max_model_len(strata_engine *) { return 4096; }

    strata_engine_api api() {
        strata_engine_api a{};
        a.struct_size = offsetof(strata_engine_api, max_model_len) + sizeof a.max_model_len;
        a.engine = reinterpret_cast<strata_engine *>(this);
        a.submit = submit;
        a.wait = wait;
        a.cancel = cancel;
        a.get_stats = get_stats;
        a.tokenize = tokenize;
        a.detokenize = detokenize;
        a.model_name = model_name;
        a.max_model_len = max_model_len;
        return a;
    }

    // Waits (a minute at most) until `n` requests have been submitted in all; returns how many were.
    int64_t await_submitted(int64_t n) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::seconds(60), [&] { return submitted >= n; });
        return submitted;
    }
    // Gives every running request the token `text` (one event per byte) and a final LENGTH event, as the engine's
    // thread does, outside the lock.
    void finish_all(const std::string &text) {
        std::vector<std::pair<strata_request_id, running>> now;
        {
            std::lock_guard<std::mutex> lock(mu);
            for (auto &[id, r] : requests)
                if (!r.done) now.emplace_back(id, r);
        }
        for (auto &[id, r] : now) {
            for (char ch : text) emit(id, r, ch, STRATA_FINISH_NONE);
            emit(id, r, -1, STRATA_FINISH_LENGTH);
            std::lock_guard<std::mutex> lock(mu);
            requests.at(id).done = true;
            cv.notify_all();
        }
    }
    // Plays the engine until done() (or a minute has passed): every running request gets `text` and a LENGTH
    // event, a cancelled one a CANCELLED event.
    void finish_until(const std::function<bool()> &done, const std::string &text) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!done() && std::chrono::steady_clock::now() < until) {
            finish_cancelled(0);
            finish_all(text);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    // Ends each cancelled request with a CANCELLED event, until `n` have been ended or a minute has passed (one
    // sweep when n is 0).
    int64_t finish_cancelled(int64_t n) {
        int64_t ended = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        bool once = n == 0;
        while ((ended < n || once) && std::chrono::steady_clock::now() < until) {
            once = false;
            std::vector<std::pair<strata_request_id, running>> now;
            {
                std::unique_lock<std::mutex> lock(mu);
                if (n > 0) cv.wait_for(lock, std::chrono::milliseconds(50));
                for (auto &[id, r] : requests)
                    if (r.cancelled && !r.done) now.emplace_back(id, r);
            }
            for (auto &[id, r] : now) {
                emit(id, r, -1, STRATA_FINISH_CANCELLED);
                std::lock_guard<std::mutex> lock(mu);
                requests.at(id).done = true;
                ++ended;
                cv.notify_all();
            }
        }
        return ended;
    }
    static void emit(strata_request_id id, const running &r, int ch, int32_t finish) {
        const char piece = static_cast<char>(ch);
        strata_token_event ev{};
        ev.struct_size = sizeof ev;
        ev.id = id;
        ev.token = ch < 0 ? -1 : ch;
        ev.piece = ch < 0 ? "" : &piece;
        ev.piece_len = ch < 0 ? 0 : 1;
        ev.finish = finish;
        r.on_token(r.user, &ev);
    }
};

struct captured_log {
    std::mutex mu;
    std::string text;
    static void log(void *ctx, int32_t, const char *, const char *message) {
        auto &c = *static_cast<captured_log *>(ctx);
        std::lock_guard<std::mutex> lock(c.mu);
        c.text += message;
        c.text += '\n';
    }
    std::string get() {
        std::lock_guard<std::mutex> lock(mu);
        return text;
    }
};

// A server on a free loopback port, run on its own thread until the test stops it.
struct served {
    stand_in_engine engine;
    strata_engine_api api = engine.api();
    captured_log log;
    strata_host_services host{};
    strata_sampling_params defaults{};
    std::unique_ptr<http_server> server;
    std::thread runner;
    uint16_t port = 0;

    served() {
        host.struct_size = sizeof host;
        host.host_abi_major = STRATA_ABI_MAJOR;
        host.host_abi_minor = STRATA_ABI_MINOR;
        host.ctx = &log;
        host.log = captured_log::log;
        defaults.struct_size = sizeof defaults;
        defaults.temperature = 1.0f;
        defaults.top_p = 1.0f;
        defaults.repetition_penalty = 1.0f;
        server_options o;
        port = free_port();
        o.port = port;
        o.served_model_names = {"stand-in"};
        o.max_connections = 1024;
        server = std::make_unique<http_server>(o, &api, defaults, &host);
        runner = std::thread([this] { server->run(); });
        for (int i = 0; i < 600 && log.get().find("ready on") == std::string::npos; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        g_port = port;
    }
    void stop() {
        if (!server) return;
        server->request_stop();
        if (runner.joinable()) runner.join();
    }
    ~served() {
        // A test that failed early: end whatever is still running so the server can stop.
        engine.finish_all("");
        stop();
    }
};

std::string completion_body(bool stream) {
    return std::string(R"({"prompt":"hi","max_tokens":8,"stream":)") + (stream ? "true" : "false") + "}";
}

TEST(HttpConcurrency, EveryRequestReachesTheEngineAtOnceAndEachGetsItsAnswer) {
    served srv;
    ASSERT_NE(srv.log.get().find("ready on"), std::string::npos) << srv.log.get();
    // More requests than the server has worker threads (16): a server whose threads wait on their generations would
    // queue the rest, and the engine would see 16.
    constexpr int k_requests = 40;
    std::vector<http_reply> replies(k_requests);
    std::vector<std::thread> clients;
    std::atomic<int> answered{0};
    for (int i = 0; i < k_requests; ++i) {
        clients.emplace_back([&, i] {
            replies[i] = request("POST", "/v1/completions", completion_body(i % 2 == 1), "");
            ++answered;
        });
    }
    EXPECT_EQ(srv.engine.await_submitted(k_requests), k_requests) << "requests in the engine at once";
    // Then the engine finishes what it holds until every client is answered (a server that queued requests behind
    // its threads submits the rest as earlier ones finish).
    srv.engine.finish_until([&] { return answered.load() == k_requests; }, "ok");
    for (auto &t : clients) t.join();
    for (int i = 0; i < k_requests; ++i) {
        SCOPED_TRACE(i);
        ASSERT_EQ(replies[i].status, 200) << replies[i].body;
        if (i % 2 == 1) {
            EXPECT_NE(replies[i].body.find(R"("text":"o")"), std::string::npos) << replies[i].body;
            EXPECT_NE(replies[i].body.find(R"("finish_reason":"length")"), std::string::npos) << replies[i].body;
            EXPECT_NE(replies[i].body.find("data: [DONE]"), std::string::npos) << replies[i].body;
        } else {
            const auto j = nlohmann::json::parse(replies[i].body);
            EXPECT_EQ(j["choices"][0]["text"], "ok");
            EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
            EXPECT_EQ(j["usage"]["completion_tokens"], 2);
        }
    }
    std::lock_guard<std::mutex> lock(srv.engine.mu);
    EXPECT_EQ(srv.engine.waited, k_requests) << "each generation is waited once, so the engine forgets it";
}

TEST(HttpConcurrency, AStopWithGenerationsInFlightCancelsThemAndReturnsOnceTheyAreAnswered) {
    served srv;
    ASSERT_NE(srv.log.get().find("ready on"), std::string::npos) << srv.log.get();
    constexpr int k_requests = 20;
    std::vector<std::thread> clients;
    for (int i = 0; i < k_requests; ++i) {
        clients.emplace_back([i] { request("POST", "/v1/completions", completion_body(i % 2 == 1), ""); });
    }
    EXPECT_EQ(srv.engine.await_submitted(k_requests), k_requests);
    std::thread stopper([&] { srv.stop(); });
    // The stop closes the connections, which cancels their generations; the server's run() returns only after
    // their final events have been answered.
    EXPECT_EQ(srv.engine.finish_cancelled(k_requests), k_requests);
    srv.engine.finish_all(""); // a generation the stop failed to cancel would hold run() forever
    stopper.join();
    // A connection whose last write was in flight at the stop is closed when the server goes away (as the process
    // exits after run() returns).
    srv.server.reset();
    for (auto &t : clients) t.join();
    std::lock_guard<std::mutex> lock(srv.engine.mu);
    EXPECT_EQ(srv.engine.waited, k_requests);
    EXPECT_TRUE(srv.engine.requests.empty());
}

TEST(HttpConcurrency, EveryChoiceOfARequestIsAnsweredAndARefusalOnALaterChoiceCancelsTheQueuedOnes) {
    served srv;
    ASSERT_NE(srv.log.get().find("ready on"), std::string::npos) << srv.log.get();
    std::atomic<bool> stop_engine{false};
    std::thread engine([&] { srv.engine.finish_until([&] { return stop_engine.load(); }, "ok"); });

    // n = 3: three generations, each answered once all three have finished.
    const http_reply three = request("POST", "/v1/completions", R"({"prompt":"hi","max_tokens":8,"n":3})", "");
    EXPECT_EQ(three.status, 200) << three.body;
    if (three.status == 200) {
        const auto j = nlohmann::json::parse(three.body);
        ASSERT_EQ(j["choices"].size(), 3u);
        for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(j["choices"][i]["index"], i);
            EXPECT_EQ(j["choices"][i]["text"], "ok");
        }
        EXPECT_EQ(j["usage"]["completion_tokens"], 6);
    }

    // The engine refuses the second choice of the next request: the first (queued) is cancelled and waited for,
    // and the request as a whole gets 503 with Retry-After; then the server answers as before.
    {
        std::lock_guard<std::mutex> lock(srv.engine.mu);
        srv.engine.refuse_from = srv.engine.submitted + 1;
    }
    const http_reply busy = request("POST", "/v1/completions", R"({"prompt":"hi","max_tokens":8,"n":2,"stream":true})", "");
    EXPECT_EQ(busy.status, 503) << busy.body;
    EXPECT_NE(busy.headers.find("Retry-After: 1"), std::string::npos) << busy.headers;
    EXPECT_EQ(busy.body.find("data:"), std::string::npos) << "nothing of the stream was sent: " << busy.body;
    {
        std::lock_guard<std::mutex> lock(srv.engine.mu);
        srv.engine.refuse_from = -1;
    }
    const http_reply after = request("POST", "/v1/completions", completion_body(false), "");
    EXPECT_EQ(after.status, 200) << after.body;

    stop_engine = true;
    engine.join();
    std::lock_guard<std::mutex> lock(srv.engine.mu);
    EXPECT_EQ(srv.engine.refused, 1);
    EXPECT_EQ(srv.engine.submitted, 3 + 1 + 1);
    EXPECT_EQ(srv.engine.waited, srv.engine.submitted) << "every queued choice is waited once, the refused one too";
    EXPECT_TRUE(srv.engine.requests.empty());
}

TEST(HttpConcurrency, RequestsRefusedOnALaterChoiceHoldNoThreadWhileTheEngineCancelsTheFirst) {
    served srv;
    ASSERT_NE(srv.log.get().find("ready on"), std::string::npos) << srv.log.get();
    {
        std::lock_guard<std::mutex> lock(srv.engine.mu);
        srv.engine.refuse_odd_seeds = true;
    }
    // Each request's first choice is queued and its second refused; the engine ends the cancelled first choices only
    // when told. More requests than the server has worker threads (16): a server whose threads waited there for the
    // cancel to land would never submit the rest.
    constexpr int k_requests = 24;
    std::vector<http_reply> replies(k_requests);
    std::vector<std::thread> clients;
    for (int i = 0; i < k_requests; ++i) {
        clients.emplace_back([&, i] {
            replies[i] = request("POST", "/v1/completions",
                                 std::string(R"({"prompt":"hi","max_tokens":8,"n":2,"seed":0,"stream":)") +
                                     (i % 2 == 1 ? "true" : "false") + "}",
                                 "");
        });
    }
    EXPECT_EQ(srv.engine.await_submitted(k_requests), k_requests) << "first choices in the engine at once";
    EXPECT_EQ(srv.engine.finish_cancelled(k_requests), k_requests) << "each queued first choice was cancelled";
    for (auto &t : clients) t.join();
    for (int i = 0; i < k_requests; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(replies[i].status, 503) << replies[i].body;
        EXPECT_NE(replies[i].headers.find("Retry-After: 1"), std::string::npos) << replies[i].headers;
        EXPECT_EQ(replies[i].body.find("data:"), std::string::npos) << "nothing of a stream was sent";
    }
    std::lock_guard<std::mutex> lock(srv.engine.mu);
    EXPECT_EQ(srv.engine.refused, k_requests);
    EXPECT_EQ(srv.engine.waited, k_requests) << "every queued choice is waited once, so the engine forgets it";
    EXPECT_TRUE(srv.engine.requests.empty());
}

} // namespace
