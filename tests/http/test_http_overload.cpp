// Overload and slow clients against the real `runtime`: the header deadline, connections closed to make room at
// max_connections, the engine's waiting-queue limit answered 503 with Retry-After, and a stop while connections
// keep arriving.
#include "http_test_support.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <thread>
#include <vector>

namespace {

using namespace strata_http_test;
using json = nlohmann::json;

const std::string k_half_header = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le";

fs::path log_path(const std::string &what) {
    return fs::temp_directory_path() / ("strata_http_" + what + "_" + std::to_string(::getpid()) + ".log");
}

tcp::socket connect_to_server(net::io_context &ioc) {
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
    return sock;
}

// True when the peer has closed `sock` or sent something (a read would not block); false while it waits quietly.
bool readable_now(tcp::socket &sock) {
    pollfd p{sock.native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

std::string read_head(tcp::socket &sock) {
    std::string got;
    std::array<char, 256> buf{};
    boost::system::error_code ec;
    while (got.find("\r\n\r\n") == std::string::npos && !ec) got.append(buf.data(), sock.read_some(net::buffer(buf), ec));
    return got;
}

std::string completion_request(const std::string &body) {
    return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + k_key + "\r\nContent-Type: application/json\r\n"
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(HttpOverload, AHalfSentHeaderIsClosedAfterTheHeaderTimeoutButAnIdleConnectionWaitsForItsIdleTimeout) {
    g_port = free_port();
    const fs::path log = log_path("header_timeout");
    // 1 s for a header; 600 s for a body and between kept-alive requests, so a close within this test's waits is the
    // header deadline at work.
    const pid_t pid = start_runtime(g_port, log, {"--header-timeout", "1", "--set", "openai_http.read_timeout_s=600", "--set",
                                                  "openai_http.idle_timeout_s=600"});
    ASSERT_NE(pid, 0) << read_text(log);
    net::io_context ioc;
    {
        tcp::socket sock = connect_to_server(ioc);
        net::write(sock, net::buffer(k_half_header));
        std::string received;
        EXPECT_TRUE(wait_for_close(sock, std::chrono::seconds(30), &received)) << "a half-sent header stayed open";
        EXPECT_TRUE(received.empty()) << received;
    }
    {
        // Kept alive after a request, a connection is idle: the header deadline starts only with the next request's
        // first byte, so a request sent after more than the header timeout is still served on it.
        tcp::socket sock = connect_to_server(ioc);
        for (int i = 0; i < 2; ++i) {
            if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
            net::write(sock, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
            const std::string got = read_head(sock);
            EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << "request " << i << ": " << got;
        }
    }
    stop_runtime(pid, log);
}

TEST(HttpOverload, AtMaxConnectionsTheOldestHalfOpenConnectionMakesRoomForAWholeRequest) {
    g_port = free_port();
    const fs::path log = log_path("evict");
    const pid_t pid = start_runtime(g_port, log, {"--set", "openai_http.max_connections=8"});
    ASSERT_NE(pid, 0) << read_text(log);
    net::io_context ioc;
    std::vector<tcp::socket> half_open; // accepted in this order (the listen queue is FIFO): [0] is the oldest
    for (int i = 0; i < 8; ++i) {
        half_open.push_back(connect_to_server(ioc));
        net::write(half_open.back(), net::buffer(k_half_header));
    }
    // Held a while: a connection just accepted is not closed for a newcomer (it is about to send), one that has sat
    // on a half header for a second is.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    http_reply r = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":4,"temperature":0})");
    EXPECT_EQ(r.status, 200) << r.headers << "\n" << r.body;
    std::string received;
    EXPECT_TRUE(wait_for_close(half_open[0], std::chrono::seconds(30), &received)) << "the oldest half-open connection stayed open";
    EXPECT_TRUE(received.empty()) << received;
    for (size_t i = 1; i < half_open.size(); ++i) EXPECT_FALSE(readable_now(half_open[i])) << "connection " << i << " was closed";
    half_open.clear();
    std::string metrics;
    for (int i = 0; i < 100 && metric_value(metrics, "strata:http_connections_evicted_total") < 1; ++i) {
        metrics = request("GET", "/metrics").body;
    }
    EXPECT_GE(metric_value(metrics, "strata:http_connections_evicted_total"), 1) << metrics;
    EXPECT_EQ(metric_value(metrics, "strata:http_connections_refused_total"), 0) << metrics;
    stop_runtime(pid, log);
}

// One sequence runs at a time and one may wait: while a long generation holds the sequence, a burst of requests gets
// at most two queued (the queue's count lags by one step's intake) and 503 with Retry-After for the rest; a request
// with n = 3 is refused as a whole and its queued choice cancelled; afterwards the server serves as before.
TEST(HttpOverload, OverTheWaitingQueueLimitRequestsGet503WithRetryAfterAndTheServerRecovers) {
    g_port = free_port();
    const fs::path log = log_path("busy");
    const pid_t pid = start_runtime(g_port, log, {"--max-num-seqs", "1", "--max-waiting-requests", "1", "--max-model-len", "8192",
                                                  "--ignore-eos"});
    ASSERT_NE(pid, 0) << read_text(log);
    net::io_context ioc;
    tcp::socket hog = connect_to_server(ioc);
    net::write(hog, net::buffer(completion_request(R"({"prompt":"Lily","max_tokens":8000,"stream":true})")));
    {
        std::string got;
        std::array<char, 256> buf{};
        while (got.find("\"text\"") == std::string::npos) got.append(buf.data(), hog.read_some(net::buffer(buf)));
    }

    http_reply n3 = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":4,"n":3})");
    EXPECT_EQ(n3.status, 503) << n3.body;

    constexpr int k_burst = 8;
    std::vector<http_reply> replies(k_burst);
    std::atomic<int> done{0};
    std::vector<std::thread> burst;
    for (int i = 0; i < k_burst; ++i) {
        burst.emplace_back([&, i] {
            replies[static_cast<size_t>(i)] = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":4})");
            done.fetch_add(1);
        });
    }
    // The refused return at once; the queued wait for the long generation, which ends when its client hangs up.
    for (int i = 0; i < 600 && done.load() < k_burst - 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    hog.close();
    for (auto &t : burst) t.join();

    int ok = 0, busy = 0;
    for (const http_reply &r : replies) {
        if (r.status == 200) {
            ++ok;
            continue;
        }
        ASSERT_EQ(r.status, 503) << r.headers << "\n" << r.body;
        ++busy;
        EXPECT_NE(r.headers.find("Retry-After: 1"), std::string::npos) << r.headers;
        const json e = json::parse(r.body)["error"];
        EXPECT_EQ(e["type"], "server_busy") << r.body;
        EXPECT_NE(e["message"].get<std::string>().find("max_waiting_requests = 1"), std::string::npos) << r.body;
    }
    EXPECT_GE(ok, 1);
    EXPECT_LE(ok, 2);
    EXPECT_GE(busy, 1);

    // Nothing is left queued or running (the hog and the n = 3 request's queued choice were cancelled), and the
    // server serves normally.
    std::string metrics;
    for (int i = 0; i < 200; ++i) {
        metrics = request("GET", "/metrics").body;
        if (metric_value(metrics, "vllm:num_requests_waiting") == 0 && metric_value(metrics, "vllm:num_requests_running") == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(metric_value(metrics, "vllm:num_requests_waiting"), 0) << metrics;
    EXPECT_EQ(metric_value(metrics, "vllm:num_requests_running"), 0) << metrics;
    EXPECT_EQ(metric_value(metrics, "strata:requests_refused_busy_total"), busy + 1) << metrics;
    http_reply after = request("POST", "/v1/completions", R"({"prompt":"Lily","max_tokens":4,"stream":true})");
    EXPECT_EQ(after.status, 200) << after.body;
    EXPECT_NE(after.body.find("data: [DONE]"), std::string::npos) << after.body;
    stop_runtime(pid, log);
}

// request_stop runs (SIGINT) while the I/O thread keeps accepting: every session is registered only once built, so
// the stop neither races a session under construction nor misses one; the server exits 0.
TEST(HttpOverload, StopsCleanlyWhileNewConnectionsKeepArriving) {
    g_port = free_port();
    const fs::path log = log_path("stop_race");
    const pid_t pid = start_runtime(g_port, log, {});
    ASSERT_NE(pid, 0) << read_text(log);
    std::atomic<bool> refused{false};
    std::atomic<int> connected{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
        clients.emplace_back([&, t] {
            net::io_context ioc;
            // Until the server has gone (a bounded number, should it never go).
            for (int i = 0; i < 20000 && !refused.load(); ++i) {
                tcp::socket sock(ioc);
                boost::system::error_code ec;
                sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port), ec);
                if (ec) {
                    refused = true;
                    break;
                }
                connected.fetch_add(1);
                const std::string bytes = t % 2 == 0 ? std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n") : k_half_header;
                net::write(sock, net::buffer(bytes), ec);
            }
        });
    }
    for (int i = 0; i < 600 && connected.load() < 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stop_runtime(pid, log);
    refused = true;
    for (auto &c : clients) c.join();
}

} // namespace
