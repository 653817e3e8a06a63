// Helpers shared by the openai_http end-to-end suites: a real `runtime` serving stories260K on a loopback port
// (spawned, waited for, stopped with SIGINT), one-shot HTTP/1.1 requests with chunked bodies decoded, and waits on
// sockets the server should close.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <vector>

extern char **environ;

namespace strata_http_test {

namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace fs = std::filesystem;

inline const std::string k_model = std::string(STRATA_SHARED_DIR) + "/models/stories260K-f32.gguf";
inline const std::string k_key = "sk-test-key";

struct http_reply {
    int status = 0;
    std::string headers;
    std::string body; // de-chunked
};

inline std::string dechunk(const std::string &raw) {
    std::string out;
    size_t pos = 0;
    while (pos < raw.size()) {
        const size_t eol = raw.find("\r\n", pos);
        if (eol == std::string::npos) break;
        const size_t n = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
        if (n == 0) break;
        out += raw.substr(eol + 2, n);
        pos = eol + 2 + n + 2;
    }
    return out;
}

inline uint16_t g_port = 0; // the server request() talks to

inline http_reply request(const std::string &method, const std::string &path, const std::string &body = {},
                   const std::string &auth = "Bearer " + k_key) {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), g_port));
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    if (!auth.empty()) req += "Authorization: " + auth + "\r\n";
    if (!body.empty() || method == "POST") req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    boost::system::error_code ec;
    net::write(sock, net::buffer(req), ec);
    std::string raw;
    std::array<char, 65536> buf{};
    for (;;) {
        const size_t n = sock.read_some(net::buffer(buf), ec);
        raw.append(buf.data(), n);
        if (ec) break;
    }
    http_reply r;
    const size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) return r;
    r.status = std::stoi(raw.substr(9, 3));
    r.headers = raw.substr(0, head_end);
    r.body = raw.substr(head_end + 4);
    if (r.headers.find("chunked") != std::string::npos) r.body = dechunk(r.body);
    return r;
}

inline uint16_t free_port() {
    net::io_context ioc;
    tcp::acceptor a(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    return a.local_endpoint().port();
}

inline std::string read_text(const fs::path &p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Spawns `runtime --model <stories> --frontend openai_http --port <port> ARGS` with stdin from /dev/null and stderr
// to `log`; returns its pid, or 0 when it could not be started.
// Spawns `args` (args[0] the program's path), stderr to `log`, stdin /dev/null; returns its pid (0 when it could not
// start).
inline pid_t spawn_argv(const fs::path &log, std::vector<std::string> args) {
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : 0;
}

// Spawns `runtime ARGS` as given, stderr to `log`; returns its pid (0 when it could not start).
inline pid_t spawn_runtime_argv(const fs::path &log, std::vector<std::string> args) {
    args.insert(args.begin(), STRATA_BINARY_DIR "/bin/runtime");
    return spawn_argv(log, std::move(args));
}

// The KV cache is 16 MiB (13k tokens of stories260K, 25 sequences of the full 512) and swap 32 MiB, not the CPU
// defaults of 1 GiB and 4 GiB: the server touches its KV memory and writes the blocks' tables at start-up, which costs
// seconds per server under ThreadSanitizer (about 4 s for 128 MiB).
inline pid_t spawn_runtime(const std::string &port, const fs::path &log, std::vector<std::string> args) {
    args.insert(args.begin(), {"--model", k_model, "--frontend", "openai_http", "--port", port, "--kv-cache-memory",
                               "16MiB", "--swap-space", "0.03125"});
    return spawn_runtime_argv(log, std::move(args));
}

// Waits until `pid` logs that it serves on `port`; 0 (and the process killed) after a minute or when it exits.
inline pid_t await_ready(pid_t pid, uint16_t port, const fs::path &log) {
    if (pid == 0) return 0;
    const std::string port_text = std::to_string(port);
    for (int i = 0; i < 600; ++i) {
        if (read_text(log).find("ready on http://127.0.0.1:" + port_text) != std::string::npos) return pid;
        if (::waitpid(pid, nullptr, WNOHANG) == pid) return 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 0;
}

// Starts `runtime --frontend openai_http` on `port` with stderr to `log`; returns its pid once it logs "ready" (or
// 0 after a minute).
inline pid_t start_runtime(uint16_t port, const fs::path &log, const std::vector<std::string> &extra) {
    const std::string port_text = std::to_string(port);
    std::vector<std::string> args = {"--api-key", k_key};
    args.insert(args.end(), extra.begin(), extra.end());
    return await_ready(spawn_runtime(port_text, log, args), port, log);
}

// SIGINT, as a user's Ctrl-C: the server must stop and exit 0.
inline void stop_runtime(pid_t pid, const fs::path &log) {
    ::kill(pid, SIGINT);
    int status = 0;
    // A hang detector, not a speed check: a clean stop takes milliseconds.
    pid_t done = 0;
    for (int i = 0; i < 600 && done == 0; ++i) {
        done = ::waitpid(pid, &status, WNOHANG);
        if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (done == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "the server did not stop within a minute of SIGINT:\n" << read_text(log);
    } else {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
    }
    fs::remove(log);
}

// Waits until the server closes `sock` (a read returns end-of-file or an error), reading and keeping any bytes it
// sends first. False if it is still open after `limit` (a generous bound: this checks behaviour, not speed).
inline bool wait_for_close(tcp::socket &sock, std::chrono::milliseconds limit, std::string *received = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::array<char, 4096> buf{};
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{sock.native_handle(), POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const ssize_t n = ::recv(sock.native_handle(), buf.data(), buf.size(), 0);
        if (n <= 0) return true;
        if (received) received->append(buf.data(), static_cast<size_t>(n));
    }
    return false;
}

// The value of the one sample of `name` in a Prometheus text, or -1.
inline double metric_value(const std::string &text, const std::string &name) {
    const size_t at = text.find("\n" + name + "{");
    if (at == std::string::npos) return -1;
    const size_t eol = text.find('\n', at + 1);
    const size_t space = text.rfind(' ', eol);
    return std::stod(text.substr(space + 1, eol - space - 1));
}

} // namespace strata_http_test
