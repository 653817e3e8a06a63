#include "http_server.hpp"

#include "api_error.hpp"
#include "request_parse.hpp"
#include "response_format.hpp"
#include "text_stream.hpp"

#include <strata/plugin.hpp>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

namespace strata::openai_http {

namespace {

// A chat request's prompt text, rendered by the engine's chat template (ABI 1.9). False with the client's error
// (the template's own message, or what is wrong with the request) when it cannot be rendered.
bool render_chat(const strata_engine_api *api, const std::string &request, std::string &text, api_error &error) {
    if (!STRATA_STRUCT_HAS(api, apply_chat_template)) {
        error = bad_request("this engine cannot render chat templates (it predates plugin ABI 1.9)", "messages");
        error.status = 501;
        return false;
    }
    text.resize(8192);
    for (;;) {
        int32_t n = 0;
        strata_status st{};
        if (api->apply_chat_template(api->engine, request.c_str(), text.data(), static_cast<int32_t>(text.size()), &n,
                                     &st) != STRATA_OK) {
            error = bad_request(st.message, "messages");
            return false;
        }
        if (static_cast<size_t>(n) <= text.size()) {
            text.resize(static_cast<size_t>(n));
            return true;
        }
        text.resize(static_cast<size_t>(n)); // rendered again into a buffer that fits
    }
}

// tool_choice required/named: the constrained output read back as calls (vLLM's forms).
parsed_output forced_tool_calls(const generation_request &req, const std::string &text) {
    parsed_output out;
    if (req.forced == generation_request::forced_tools::named) {
        const nlohmann::json args = nlohmann::json::parse(text, nullptr, false);
        if (args.is_discarded()) return {text, {}};
        out.calls.push_back({req.forced_name, args.dump()});
        return out;
    }
    const nlohmann::json calls = nlohmann::json::parse(text, nullptr, false);
    if (!calls.is_array()) return {text, {}};
    for (const nlohmann::json &c : calls) {
        if (!c.is_object() || !c.contains("name") || !c.at("name").is_string()) return {text, {}};
        out.calls.push_back({c.at("name").get<std::string>(), c.contains("parameters") ? c.at("parameters").dump() : "{}"});
    }
    return out;
}

} // namespace

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

class session;

// Where a connection is in its request cycle. Idle and header-pending connections (and ones lingering after a final
// reply) do no work for anyone: over max_connections the one that has waited longest is closed for a newcomer.
enum class conn_state : uint8_t {
    header,  // accepted, or a kept-alive one's next request begun: its header is not complete (header_timeout_s)
    idle,    // kept alive, waiting for the next request's first byte (idle_timeout_s)
    body,    // reading the body (read_timeout_s)
    busy,    // the request is being served: generating, writing the response
    closing, // a final reply was sent; draining what the client still sends, then closed
};

constexpr bool evictable(conn_state s) { return s == conn_state::header || s == conn_state::idle || s == conn_state::closing; }

// A connection is closed for a newcomer only once it has been in an evictable state this long and has no unread bytes
// waiting in its socket: one just accepted or just answered is about to send (a burst's clients may take a few hundred
// ms to write requests on connections the kernel has already completed), and one whose bytes wait for a busy I/O
// thread is not stalling, so a burst of real clients gets 503 with Retry-After rather than resets, while a connection
// that holds a slot without sending loses it.
constexpr std::chrono::milliseconds k_evict_grace{1000};
constexpr int k_evict_attempts = 4; // candidates tried for one newcomer before it is answered 503

struct session_entry {
    std::weak_ptr<session> conn; // taken from the shared_ptr once the session is fully constructed
    conn_state state = conn_state::header;
    clock_type::time_point since; // when `state` began
    bool counted = false;         // holds one of max_connections' slots
    bool probing = false;         // chosen for a newcomer; its own executor decides (hand_over_slot)
};

// What hand_over_slot decided: whether the chosen connection is to be closed, and whether the newcomer has a slot.
struct handover {
    bool close_victim = false;
    bool admitted = false;
};

namespace {
struct pending_generation;
} // namespace

struct http_server::impl {
    server_options opts;
    const strata_engine_api *api;
    strata_sampling_params defaults;
    const strata_host_services *host;
    std::atomic<bool> stopping{false};
    std::atomic<bool> draining{false}; // a stop lets the requests being served finish (shutdown_timeout_s)
    std::atomic<uint64_t> next_id{1};
    frontend_metrics metrics;
    // Every open connection by serial number (to choose one to close, and to close all at shutdown). Sessions are
    // added by `admit` after construction and remove themselves in their destructor.
    std::mutex sessions_mu;
    std::map<uint64_t, session_entry> sessions; // guarded by sessions_mu
    int64_t counted_sessions = 0;               // entries with `counted` (guarded by sessions_mu)
    uint64_t next_session = 1;                  // guarded by sessions_mu
    // Declared last so they go first: the handlers the io_context destroys hold sessions that use the members above.
    net::io_context ioc{1};
    tcp::acceptor acceptor{ioc};
    // Prepares requests and builds answers; never waits on a running generation (pending_generation).
    net::thread_pool workers{16};

    void accept();
    void admit(tcp::socket sock);
    void make_room(const std::shared_ptr<session> &newcomer, int attempt);
    handover hand_over_slot(uint64_t victim, uint64_t newcomer, bool victim_quiet);
    void refuse(const std::shared_ptr<session> &newcomer);
    void set_state(uint64_t serial, conn_state st);
    void forget(uint64_t serial);
    // Closes every open connection (when `all`), or every one not serving a request; returns how many are left open.
    size_t close_connections(bool all);
    // The drain's end: once no connection is left, or at `deadline` (the rest closed), or when a second stop ended
    // the drain, the io_context stops.
    void finish_drain(std::shared_ptr<net::steady_timer> timer, clock_type::time_point deadline);
    void handle_request(const std::shared_ptr<session> &s, http::request<http::string_body> &&req);
    void generate(const std::shared_ptr<session> &s, generation_request req, clock_type::time_point arrival, bool keep);
    // A generation's choices have all had their final event: its answer is built on a worker (complete), posted there
    // by whoever finished last (release).
    void release(pending_generation &g);
    void complete(pending_generation &g);
    void refuse(pending_generation &g);
    // strata_request's penalty and logprobs fields (and the token event's logprobs) exist from ABI 1.4 on; the host
    // that serves the engine says which minor it speaks.
    bool engine_has_penalties_and_logprobs() const { return host != nullptr && host->host_abi_minor >= 4; }
    uint64_t fresh_seed() {
        static thread_local std::mt19937_64 rng{std::random_device{}()};
        return rng();
    }
};

namespace {

std::string lower(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Equal strings compare in time independent of where they differ (API keys).
bool same_secret(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

} // namespace

// One TCP connection. All socket work happens on the I/O thread; workers and engine callbacks only append to `out_`
// under `mu_` and post a flush.
class session : public std::enable_shared_from_this<session> {
  public:
    // Not registered here: impl::admit registers the session once make_shared has returned, so no other thread can
    // reach an object still under construction (or its weak_from_this before make_shared has set it).
    session(http_server::impl &srv, tcp::socket sock) : srv_(srv), stream_(std::move(sock)) {}
    ~session() {
        if (serial_ != 0) srv_.forget(serial_);
    }

    void set_serial(uint64_t serial) { serial_ = serial; }
    uint64_t serial() const { return serial_; }
    // start and reject_busy run on the session's executor.
    void start() {
        net::post(stream_.get_executor(), [self = shared_from_this()] {
            self->make_non_blocking();
            self->read_request();
        });
    }

    // Over max_connections with no connection to close: read the request (so closing does not reset the connection
    // under the reply), answer 503 and close.
    void reject_busy() {
        net::post(stream_.get_executor(), [self = shared_from_this()] {
            self->make_non_blocking();
            self->busy_ = true;
            self->read_request();
        });
    }

    // Chosen to make room for `newcomer`: on its own executor it looks whether bytes wait unread in its socket, and
    // hands its slot over (and closes) or keeps it, in which case the next candidate is tried.
    void offer_slot(std::shared_ptr<session> newcomer, int attempt) {
        net::post(stream_.get_executor(), [self = shared_from_this(), newcomer = std::move(newcomer), attempt] {
            beast::error_code ec;
            const size_t unread = self->stream_.socket().available(ec);
            const handover h = self->srv_.hand_over_slot(self->serial_, newcomer->serial(), ec || unread == 0);
            if (h.close_victim) {
                self->srv_.metrics.connections_evicted.fetch_add(1);
                self->close();
            }
            if (h.admitted) newcomer->start();
            else if (attempt + 1 < k_evict_attempts) self->srv_.make_room(newcomer, attempt + 1);
            else self->srv_.refuse(newcomer);
        });
    }

    // --- responses (I/O thread) ---------------------------------------------------------------------------------
    void send_response(http::status status, std::string content_type, std::string body, bool keep_alive,
                       int64_t retry_after_s = 0) {
        auto res = std::make_shared<http::response<http::string_body>>(status, 11);
        res->set(http::field::server, "strata");
        res->set(http::field::content_type, content_type);
        if (retry_after_s > 0) res->set(http::field::retry_after, std::to_string(retry_after_s));
        res->keep_alive(keep_alive && !srv_.stopping);
        res->body() = std::move(body);
        res->prepare_payload();
        stream_.expires_after(std::chrono::seconds(srv_.opts.read_timeout_s));
        http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
            if (ec) return self->close();
            if (!res->keep_alive()) return self->linger_close();
            self->read_request();
        });
    }
    void send_error(const api_error &e, bool keep_alive) {
        send_response(static_cast<http::status>(e.status), "application/json", e.to_json(), keep_alive, e.retry_after_s);
    }
    void send_json(const std::string &body, bool keep_alive) { send_response(http::status::ok, "application/json", body, keep_alive); }

    // --- streaming (any thread) ---------------------------------------------------------------------------------
    // A streamed response is held until every choice is queued: what is appended meanwhile (role and echo chunks,
    // early tokens) stays buffered, and begin_stream puts the 200 head before it, or discard_output drops it when
    // the request is refused after all.
    void hold_output() {
        std::lock_guard<std::mutex> lock(mu_);
        held_ = true;
    }
    void discard_output() {
        std::lock_guard<std::mutex> lock(mu_);
        out_.clear();
        held_ = false;
    }
    void begin_stream(bool keep_alive) {
        const std::string head = std::string("HTTP/1.1 200 OK\r\nServer: strata\r\nContent-Type: text/event-stream\r\n"
                                             "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: ") +
                                 (keep_alive ? "keep-alive" : "close") + "\r\n\r\n";
        std::lock_guard<std::mutex> lock(mu_);
        keep_alive_ = keep_alive;
        out_.insert(0, head);
        held_ = false;
        schedule_flush_locked();
    }
    // One HTTP chunk holding `data`.
    void append_chunk(std::string_view data) {
        if (data.empty()) return;
        char size_line[24];
        const int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
        std::lock_guard<std::mutex> lock(mu_);
        out_.append(size_line, static_cast<size_t>(n));
        out_.append(data);
        out_ += "\r\n";
        schedule_flush_locked();
    }
    void end_stream() {
        std::lock_guard<std::mutex> lock(mu_);
        out_ += "0\r\n\r\n";
        stream_done_ = true;
        schedule_flush_locked();
    }
    // A whole response produced off the I/O thread.
    void post_json(std::string body, bool keep_alive) {
        net::post(stream_.get_executor(), [self = shared_from_this(), body = std::move(body), keep_alive]() mutable {
            self->generating_ = false;
            self->send_json(body, keep_alive);
        });
    }
    void post_error(api_error e, bool keep_alive) {
        net::post(stream_.get_executor(), [self = shared_from_this(), e = std::move(e), keep_alive] {
            self->generating_ = false;
            self->send_error(e, keep_alive);
        });
    }

    // --- the generations this connection waits for ----------------------------------------------------------------
    bool client_gone() const { return client_gone_.load(); }
    void track(strata_request_id id) {
        std::lock_guard<std::mutex> lock(mu_);
        active_.push_back(id);
        if (client_gone_) srv_.api->cancel(srv_.api->engine, id);
    }
    void untrack(strata_request_id id) {
        std::lock_guard<std::mutex> lock(mu_);
        std::erase(active_, id);
    }
    void cancel_all() {
        std::lock_guard<std::mutex> lock(mu_);
        for (strata_request_id id : active_) srv_.api->cancel(srv_.api->engine, id);
    }
    // While a generation runs nothing is read; a readable socket then means the client closed (or pipelined).
    void watch_for_disconnect() {
        generating_ = true;
        stream_.expires_never();
        stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
            if (!self->generating_) return;
            char b;
            beast::error_code peek_ec;
            if (!ec) self->stream_.socket().receive(net::buffer(&b, 1), tcp::socket::message_peek, peek_ec);
            if (peek_ec == net::error::would_block) return self->watch_for_disconnect(); // woken without data
            if (ec || peek_ec) self->mark_gone();
        });
    }

    // Shutdown: stop generating and drop the connection.
    void abort() {
        mark_gone();
        net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
    }

  private:
    void mark_gone() {
        client_gone_ = true;
        cancel_all();
    }

    // The deadlines: a fresh connection has header_timeout_s from accept for its header; a kept-alive one has
    // idle_timeout_s for its next request to start, then header_timeout_s from that first byte; a body then has
    // read_timeout_s once its header is in.
    void read_request() {
        if (srv_.stopping) return close();
        parser_.emplace();
        parser_->header_limit(srv_.opts.max_header_bytes);
        parser_->body_limit(srv_.opts.max_body_bytes);
        if (served_ == 0 || buffer_.size() > 0) return read_header(); // fresh, or the next request already began
        idle_ = true;
        srv_.set_state(serial_, conn_state::idle);
        arm_deadline(srv_.opts.idle_timeout_s);
        pump_header();
    }

    void read_header() {
        idle_ = false;
        srv_.set_state(serial_, conn_state::header);
        arm_deadline(srv_.opts.header_timeout_s);
        pump_header();
    }

    // The header is read by waiting for readability and then reading what is there with a non-blocking read_some in
    // the handler, not by Beast's async_read_header: that way bytes the server has not handled yet stay in the socket,
    // where offer_slot sees them (available() > 0), instead of sitting in a completed read whose handler is still
    // queued, so a connection that is merely waiting for a busy I/O thread is never taken for a stalled one.
    void pump_header() {
        if (buffer_.size() > 0) {
            beast::error_code ec;
            buffer_.consume(parser_->put(buffer_.data(), ec));
            if (ec && ec != http::error::need_more) {
                deadline_.cancel();
                return on_read(ec);
            }
            if (parser_->is_header_done()) {
                deadline_.cancel();
                return read_body();
            }
        }
        stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
            if (ec) return self->on_read(ec);
            const size_t n = self->stream_.socket().read_some(self->buffer_.prepare(k_read_chunk), ec);
            self->buffer_.commit(n);
            if (ec == net::error::would_block) return self->pump_header(); // woken without data
            if (ec) {
                self->deadline_.cancel();
                return self->on_read(ec);
            }
            if (self->idle_) return self->read_header(); // the next request's first bytes: its header deadline starts
            self->pump_header();
        });
    }

    // The header (or idle) deadline: when it passes, the connection is closed (the pending wait ends, aborted).
    void arm_deadline(int64_t seconds) {
        deadline_.expires_after(std::chrono::seconds(seconds));
        deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
            if (!ec) self->close();
        });
    }

    // curl sends "Expect: 100-continue" before bodies over 1 KiB and waits a second for the go-ahead.
    void read_body() {
        srv_.set_state(serial_, conn_state::body);
        stream_.expires_after(std::chrono::seconds(srv_.opts.read_timeout_s));
        auto read_rest = [self = shared_from_this()] {
            http::async_read(self->stream_, self->buffer_, *self->parser_,
                             [self](beast::error_code ec, size_t) { self->on_read(ec); });
        };
        if (lower(std::string(parser_->get()[http::field::expect])) == "100-continue" && !busy_) {
            static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
            net::async_write(stream_, net::buffer(k_continue.data(), k_continue.size()),
                             [self = shared_from_this(), read_rest](beast::error_code ec, size_t) {
                                 if (ec) return self->close();
                                 read_rest();
                             });
            return;
        }
        read_rest();
    }

    void on_read(beast::error_code ec) {
        // Gone or out of time (partial_message: the client closed in the middle of its request): nobody to answer.
        if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == beast::error::timeout ||
            ec == net::error::operation_aborted || ec == net::error::connection_reset || ec == net::error::eof) {
            return close();
        }
        srv_.set_state(serial_, conn_state::busy); // every path below writes a reply
        if (busy_ && !ec) {
            api_error e;
            e.status = 503;
            e.type = "server_busy";
            e.message = "too many connections (max_connections = " + std::to_string(srv_.opts.max_connections) +
                        ", none idle); retry later";
            e.retry_after_s = 1;
            return send_error(e, false);
        }
        if (ec == http::error::body_limit) {
            api_error e;
            e.status = 413;
            e.message = "request body larger than max_body_bytes (" + std::to_string(srv_.opts.max_body_bytes) + " bytes)";
            return send_error(e, false);
        }
        if (ec == http::error::header_limit) {
            api_error e;
            e.status = 431;
            e.message = "request headers larger than max_header_bytes (" + std::to_string(srv_.opts.max_header_bytes) + " bytes)";
            return send_error(e, false);
        }
        if (ec) return send_error(bad_request(std::string("malformed HTTP request: ") + ec.message()), false);
        ++served_;
        srv_.handle_request(shared_from_this(), parser_->release());
    }

    void schedule_flush_locked() {
        if (held_ || flush_posted_ || writing_) return;
        flush_posted_ = true;
        net::post(stream_.get_executor(), [self = shared_from_this()] { self->flush(); });
    }

    // I/O thread: writes whatever is buffered; at the end of a stream goes back to reading (keep-alive) or closes.
    void flush() {
        std::unique_lock<std::mutex> lock(mu_);
        flush_posted_ = false;
        if (writing_) return;
        if (out_.empty()) {
            if (stream_done_) {
                stream_done_ = false;
                generating_ = false;
                lock.unlock();
                if (keep_alive_ && !client_gone_ && !srv_.stopping) read_request();
                else close();
            }
            return;
        }
        std::swap(out_, wire_);
        out_.clear();
        writing_ = true;
        lock.unlock();
        if (client_gone_) {
            // Nobody to write to: drop the bytes so the worker's stream still runs to its end.
            std::lock_guard<std::mutex> relock(mu_);
            writing_ = false;
            wire_.clear();
            net::post(stream_.get_executor(), [self = shared_from_this()] { self->flush(); });
            return;
        }
        stream_.expires_after(std::chrono::seconds(srv_.opts.read_timeout_s));
        net::async_write(stream_, net::buffer(wire_), [self = shared_from_this()](beast::error_code ec, size_t) {
            {
                std::lock_guard<std::mutex> lock(self->mu_);
                self->writing_ = false;
                self->wire_.clear();
            }
            if (ec) self->mark_gone();
            self->flush();
        });
    }

    // After a final reply: stop sending, then read and drop what the client still sends (the rest of a body over the
    // limit) until it closes, so the kernel does not answer those bytes with a reset that could destroy the reply.
    void linger_close() {
        srv_.set_state(serial_, conn_state::closing);
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        stream_.expires_after(std::chrono::seconds(5));
        drain();
    }
    void drain() {
        if (drained_ > (64u << 20)) return close();
        stream_.async_read_some(net::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, size_t n) {
            self->drained_ += n;
            if (ec) return self->close();
            self->drain();
        });
    }

    void close() {
        beast::error_code ec;
        deadline_.cancel();
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.socket().close(ec);
    }

    // The handlers' own reads (pump_header, the disconnect peek) must never block the I/O thread; Asio's
    // asynchronous operations work the same on a non-blocking socket.
    void make_non_blocking() {
        beast::error_code ec;
        stream_.socket().non_blocking(true, ec);
    }

    static constexpr size_t k_read_chunk = 4096; // most bytes one header read takes from the socket

    http_server::impl &srv_;
    beast::tcp_stream stream_;
    net::steady_timer deadline_{stream_.get_executor()}; // the header (or idle) deadline; Beast's covers the rest
    bool idle_ = false;   // waiting for a kept-alive connection's next request
    uint64_t serial_ = 0; // its key in srv_.sessions (0: not registered)
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    uint64_t served_ = 0;
    bool busy_ = false;
    uint64_t drained_ = 0;
    std::array<char, 16384> scratch_{};
    bool keep_alive_ = true;
    std::atomic<bool> generating_{false};
    std::atomic<bool> client_gone_{false};
    std::mutex mu_;
    std::string out_;  // bytes waiting to be written (guarded by mu_)
    std::string wire_; // bytes being written
    bool writing_ = false;
    bool flush_posted_ = false;
    bool held_ = false; // a streamed response not begun yet: keep out_ unwritten
    bool stream_done_ = false;
    std::vector<strata_request_id> active_;
};

// ------------------------------------------------------------------------------------------------------------------

void http_server::impl::accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket sock) {
        if (stopping) return;
        if (!ec) admit(std::move(sock));
        accept();
    });
}

// A new connection takes a free slot. At max_connections it takes the slot of the counted connection that has been
// idle, header-pending or lingering longest (k_evict_grace at least), which is closed, provided that connection's own
// executor finds no unread bytes in its socket; otherwise the next candidate is asked. With none left (after
// k_evict_attempts) the newcomer is answered 503. The newcomer holds no slot meanwhile, so the count never passes
// max_connections.
void http_server::impl::admit(tcp::socket sock) {
    auto s = std::make_shared<session>(*this, std::move(sock));
    bool counted = false;
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        const uint64_t serial = next_session++;
        s->set_serial(serial);
        counted = counted_sessions < opts.max_connections;
        sessions.emplace(serial, session_entry{s, conn_state::header, clock_type::now(), counted});
        if (counted) ++counted_sessions;
    }
    if (counted) s->start();
    else make_room(s, 0);
}

void http_server::impl::make_room(const std::shared_ptr<session> &newcomer, int attempt) {
    std::shared_ptr<session> victim; // released after the lock: a destructor takes sessions_mu
    bool admitted = false;
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        auto self = sessions.find(newcomer->serial());
        if (self == sessions.end()) return;
        if (counted_sessions < opts.max_connections) { // a slot came free meanwhile
            self->second.counted = true;
            ++counted_sessions;
            admitted = true;
        } else {
            const auto settled = clock_type::now() - k_evict_grace;
            auto oldest = sessions.end();
            for (auto it = sessions.begin(); it != sessions.end(); ++it) {
                const session_entry &e = it->second;
                if (e.counted && !e.probing && evictable(e.state) && e.since <= settled &&
                    (oldest == sessions.end() || e.since < oldest->second.since)) {
                    oldest = it;
                }
            }
            if (oldest != sessions.end()) {
                victim = oldest->second.conn.lock();
                if (victim) {
                    oldest->second.probing = true;
                } else { // being destroyed: its slot is free now
                    oldest->second.counted = false;
                    self->second.counted = true;
                    admitted = true;
                }
            }
        }
    }
    if (admitted) newcomer->start();
    else if (victim) victim->offer_slot(newcomer, attempt);
    else refuse(newcomer);
}

// Under the lock, on the victim's executor: the victim gives its slot up if it is still evictable and quiet (no unread
// bytes); the newcomer is admitted if a slot is free then.
handover http_server::impl::hand_over_slot(uint64_t victim, uint64_t newcomer, bool victim_quiet) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    handover h;
    if (auto v = sessions.find(victim); v != sessions.end()) {
        v->second.probing = false;
        if (victim_quiet && v->second.counted && evictable(v->second.state)) {
            v->second.counted = false;
            v->second.state = conn_state::closing;
            --counted_sessions;
            h.close_victim = true;
        }
    }
    auto n = sessions.find(newcomer);
    if (n != sessions.end() && counted_sessions < opts.max_connections) {
        n->second.counted = true;
        ++counted_sessions;
        h.admitted = true;
    }
    return h;
}

void http_server::impl::refuse(const std::shared_ptr<session> &newcomer) {
    metrics.connections_refused.fetch_add(1);
    newcomer->reject_busy();
}

void http_server::impl::set_state(uint64_t serial, conn_state st) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    auto it = sessions.find(serial);
    if (it == sessions.end()) return;
    it->second.state = st;
    it->second.since = clock_type::now();
}

void http_server::impl::forget(uint64_t serial) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    auto it = sessions.find(serial);
    if (it == sessions.end()) return;
    if (it->second.counted) --counted_sessions;
    sessions.erase(it);
}

namespace {

api_error not_found(const std::string &what) {
    api_error e;
    e.status = 404;
    e.type = "not_found_error";
    e.message = what;
    return e;
}

api_error method_not_allowed(const std::string &path, const char *allowed) {
    api_error e;
    e.status = 405;
    e.message = path + " accepts " + allowed + " only";
    return e;
}

const char *finish_name(int32_t f) {
    switch (f) {
    case STRATA_FINISH_STOP: return "stop";
    case STRATA_FINISH_LENGTH: return "length";
    case STRATA_FINISH_CANCELLED: return "abort";
    default: return "error";
    }
}

} // namespace

void http_server::impl::handle_request(const std::shared_ptr<session> &s, http::request<http::string_body> &&req) {
    std::string path(req.target());
    if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
    const bool keep = req.keep_alive();
    const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;

    if (path == "/health") {
        if (!get) return s->send_error(method_not_allowed(path, "GET"), keep);
        return s->send_response(http::status::ok, "text/plain", "", keep);
    }
    if (!opts.api_keys.empty()) {
        std::string auth(req[http::field::authorization]);
        bool ok = false;
        if (lower(auth.substr(0, 7)) == "bearer ") {
            const std::string key = auth.substr(7);
            for (const std::string &k : opts.api_keys) ok = same_secret(key, k) || ok;
        }
        if (!ok) {
            api_error e;
            e.status = 401;
            e.type = "authentication_error";
            e.code = "invalid_api_key";
            e.message = auth.empty() ? "missing API key: send the header 'Authorization: Bearer <key>'" : "invalid API key";
            return s->send_error(e, keep);
        }
    }
    if (path == "/v1/models") {
        if (!get) return s->send_error(method_not_allowed(path, "GET"), keep);
        // Every served name is a model id, as vLLM lists them (the first is the model's own; the others alias it).
        json data = json::array();
        for (const std::string &name : opts.served_model_names)
            data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "strata"},
                            {"root", opts.served_model_names.front()}, {"max_model_len", api->max_model_len(api->engine)}});
        return s->send_json(json{{"object", "list"}, {"data", data}}.dump(), keep);
    }
    if (path == "/metrics") {
        if (!get) return s->send_error(method_not_allowed(path, "GET"), keep);
        strata_engine_stats st{};
        st.struct_size = sizeof st;
        api->get_stats(api->engine, &st);
        return s->send_response(http::status::ok, "text/plain; version=0.0.4", prometheus_text(metrics, st, opts.served_model_names.front()),
                                keep);
    }
    if (path == "/tokenize") {
        if (!post) return s->send_error(method_not_allowed(path, "POST"), keep);
        auto parsed = parse_tokenize_request(req.body());
        if (auto *e = std::get_if<api_error>(&parsed)) return s->send_error(*e, keep);
        const auto &t = std::get<tokenize_request>(parsed);
        std::string text = t.prompt;
        if (!t.chat_request.empty()) {
            // The ids /v1/chat/completions would feed the model: the same rendering, tokenized the same way.
            api_error e;
            if (!render_chat(api, t.chat_request, text, e)) return s->send_error(e, keep);
        }
        strata_status st{};
        int32_t n = 0;
        std::vector<int32_t> ids;
        if (api->tokenize(api->engine, text.c_str(), t.add_special_tokens, nullptr, 0, &n, &st) == STRATA_OK) {
            ids.resize(static_cast<size_t>(n));
            api->tokenize(api->engine, text.c_str(), t.add_special_tokens, ids.data(), n, &n, &st);
        }
        if (st.code != STRATA_OK) return s->send_error(bad_request(st.message), keep);
        return s->send_json(json{{"count", n}, {"max_model_len", api->max_model_len(api->engine)}, {"tokens", ids}}.dump(), keep);
    }
    if (path == "/detokenize") {
        if (!post) return s->send_error(method_not_allowed(path, "POST"), keep);
        auto parsed = parse_detokenize_request(req.body());
        if (auto *e = std::get_if<api_error>(&parsed)) return s->send_error(*e, keep);
        const auto &ids = std::get<std::vector<int32_t>>(parsed);
        strata_status st{};
        int32_t n = 0;
        std::string text;
        if (api->detokenize(api->engine, ids.data(), static_cast<int32_t>(ids.size()), nullptr, 0, &n, &st) == STRATA_OK) {
            text.resize(static_cast<size_t>(n));
            api->detokenize(api->engine, ids.data(), static_cast<int32_t>(ids.size()), text.data(), n, &n, &st);
        }
        if (st.code != STRATA_OK) return s->send_error(bad_request(st.message, "tokens"), keep);
        return s->send_json(json{{"prompt", text}}.dump(-1, ' ', false, json::error_handler_t::replace), keep);
    }
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
        if (!post) return s->send_error(method_not_allowed(path, "POST"), keep);
        const endpoint kind = path == "/v1/completions" ? endpoint::completions : endpoint::chat_completions;
        parse_context ctx{opts.served_model_names, defaults, engine_has_penalties_and_logprobs()};
        auto parsed = parse_generation_request(req.body(), kind, ctx);
        if (auto *e = std::get_if<api_error>(&parsed)) return s->send_error(*e, keep);
        s->watch_for_disconnect();
        net::post(workers, [this, s, r = std::move(std::get<generation_request>(parsed)), arrival = clock_type::now(), keep]() mutable {
            generate(s, std::move(r), arrival, keep);
        });
        return;
    }
    s->send_error(not_found("no route " + std::string(req.method_string()) + " " + path), keep);
}

namespace {

// The state of one choice while the engine generates it; the engine's callback updates it.
struct choice_state {
    http_server::impl *srv = nullptr;
    pending_generation *owner = nullptr; // told when this choice's final event has come
    tool_format tools = tool_format::none; // tool calls are parsed out of this choice's text
    bool forced_calls = false;             // tool_choice required/named: the whole text is calls (held to the end)
    size_t content_sent = 0;               // streaming with tools: bytes of released text sent as content
    std::string released;                  // streaming with tools: the text released so far
    session *conn = nullptr;
    const response_ids *ids = nullptr;
    bool stream = false;
    int32_t index = 0;
    strata_request_id id = 0;
    text_stream text;
    std::string scratch; // the SSE event being built (reused; no per-token allocation once grown)
    clock_type::time_point arrival, last_token;
    bool first = true;
    int32_t completion_tokens = 0;
    bool want_logprobs = false;
    logprob_log logprobs;
    size_t logprobs_sent = 0; // streaming: entries already sent in a chunk
};

// One HTTP generation request from its submit to its answer. No thread waits on it: each choice's final event
// releases it once and the last one posts `complete` to a worker, so every request the clients send reaches the engine
// (and its batch) at once, however many there are.
struct pending_generation {
    std::shared_ptr<session> conn;
    generation_request req;
    response_ids ids;
    std::string echo_text; // each choice's text starts with it (echo)
    int64_t n_prompt = 0;
    bool keep = false;
    std::vector<std::unique_ptr<choice_state>> choices;
    // One per queued choice, plus one that `generate` holds until every choice is queued.
    std::atomic<int32_t> unfinished{1};
    int32_t refused = STRATA_OK; // a later choice was refused (the earlier ones are cancelled): the request fails
    std::string refusal;         // the engine's reason
    std::shared_ptr<pending_generation> self; // the owning reference while choices are in the engine
    // The workers' pool is not joined while a generation is in the engine (its answer is still to be posted there).
    net::executor_work_guard<net::thread_pool::executor_type> work;
    explicit pending_generation(net::thread_pool &pool) : work(pool.get_executor()) {}
};

// The text of one token as a client reads it, with the leading space SPM's decode drops from a first token:
// decode(id id) minus decode(id). Uses a fixed buffer; a longer token is cut (display only).
std::string_view token_text(const strata_engine_api &api, int32_t id, std::array<char, 512> &buf) {
    const int32_t ids[2] = {id, id};
    strata_status st{};
    int32_t one = 0, two = 0;
    if (api.detokenize(api.engine, ids, 1, nullptr, 0, &one, &st) != STRATA_OK) return {};
    if (api.detokenize(api.engine, ids, 2, buf.data(), static_cast<int32_t>(buf.size()), &two, &st) != STRATA_OK) return {};
    two = std::min(two, static_cast<int32_t>(buf.size()));
    if (one >= two) return {};
    return std::string_view(buf.data() + one, static_cast<size_t>(two - one));
}

// The logprobs object for the entries not sent yet ("null" when the request did not ask).
std::string pending_logprobs(choice_state &c) {
    if (!c.want_logprobs) return "null";
    std::string j = c.logprobs.to_json(c.ids->kind, c.logprobs_sent, c.logprobs.size());
    c.logprobs_sent = c.logprobs.size();
    return j;
}

void on_token(void *user, const strata_token_event *ev) {
    auto &c = *static_cast<choice_state *>(user);
    if (ev->token < 0) {
        // Counted here, on the engine thread before it takes the next request, so /metrics is exact once a later
        // request has been answered.
        const bool ok = c.text.stopped() || ev->finish == STRATA_FINISH_STOP || ev->finish == STRATA_FINISH_LENGTH;
        (ok ? c.srv->metrics.request_success : c.srv->metrics.request_failure).fetch_add(1);
        c.srv->release(*c.owner);
        return;
    }
    const auto now = clock_type::now();
    if (c.first) c.srv->metrics.time_to_first_token.observe(std::chrono::duration<double>(now - c.arrival).count());
    else c.srv->metrics.inter_token_latency.observe(std::chrono::duration<double>(now - c.last_token).count());
    c.first = false;
    c.last_token = now;
    if (c.text.stopped()) return; // tokens generated after a stop string matched do not count
    ++c.completion_tokens;
    if (c.want_logprobs && ev->struct_size >= offsetof(strata_token_event, top_logprobs) + sizeof ev->top_logprobs) {
        c.logprobs.add_token(std::string_view(ev->piece, static_cast<size_t>(ev->piece_len)), ev->logprob);
        std::array<char, 512> buf;
        for (int32_t k = 0; k < std::min(ev->n_top, c.logprobs.n_top()); ++k) {
            c.logprobs.add_alternative(token_text(*c.srv->api, ev->top_tokens[k], buf), ev->top_logprobs[k]);
        }
    }
    std::string_view piece(ev->piece, static_cast<size_t>(ev->piece_len));
    if (c.tools != tool_format::none) {
        // A tool-call marker that is a special token has no text of its own: it reads as its marker here.
        for (const auto &[id, text] : c.srv->opts.marker_tokens)
            if (id == ev->token) piece = text;
    }
    if (c.text.push(piece)) {
        c.srv->api->cancel(c.srv->api->engine, ev->id);
    }
    if (c.stream) {
        std::string_view ready = c.text.take_ready();
        if (c.forced_calls) return; // calls, sent whole at the end
        if (c.tools != tool_format::none) {
            // Only what can be no tool call goes out now; the rest waits for the end of the generation.
            c.released.append(ready);
            const size_t content = std::max(c.content_sent, tool_content_prefix(c.tools, c.released));
            ready = std::string_view(c.released).substr(c.content_sent, content - c.content_sent);
            c.content_sent = content;
        }
        if (ready.empty()) return;
        c.scratch.clear();
        append_text_chunk(c.scratch, *c.ids, c.index, ready, pending_logprobs(c));
        c.conn->append_chunk(c.scratch);
    }
}

} // namespace

void http_server::impl::generate(const std::shared_ptr<session> &s, generation_request req, clock_type::time_point arrival,
                                 bool keep) {
    const int32_t max_len = api->max_model_len(api->engine);
    response_ids ids;
    ids.kind = req.kind;
    ids.id = (req.kind == endpoint::chat_completions ? "chatcmpl-" : "cmpl-") + std::to_string(next_id.fetch_add(1));
    ids.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ids.model = req.model; // the name the request used (vLLM echoes it)

    // The prompt as token ids, so its length can be checked against max_model_len before anything is queued.
    // echo: each choice's text starts with the prompt, as written or (token ids) as they decode.
    std::string echo_text;
    if (req.echo && req.prompt_tokens.empty()) echo_text = req.prompt_text;
    std::vector<int32_t> prompt = std::move(req.prompt_tokens);
    if (prompt.empty()) {
        std::string text = req.prompt_text;
        if (req.kind == endpoint::chat_completions) {
            if (req.tools_given && opts.tools == tool_format::none) {
                return s->post_error(bad_request("this model's chat template writes tool calls in no format Strata can "
                                                 "read back; start the server with --tool-call-parser hermes|llama3_json|"
                                                 "mistral|deepseek_v3, or send tool_choice \"none\"",
                                                 "tools"),
                                     keep);
            }
            api_error e;
            if (!render_chat(api, req.chat_request, text, e)) return s->post_error(e, keep);
        }
        strata_status st{};
        int32_t n = 0;
        if (api->tokenize(api->engine, text.c_str(), 1, nullptr, 0, &n, &st) == STRATA_OK) {
            prompt.resize(static_cast<size_t>(n));
            api->tokenize(api->engine, text.c_str(), 1, prompt.data(), n, &n, &st);
        }
        if (st.code != STRATA_OK) return s->post_error(bad_request(st.message, "prompt"), keep);
    } else {
        // Token ids are checked against the vocabulary now, before a streamed response has sent its 200 header.
        strata_status st{};
        int32_t n = 0;
        if (api->detokenize(api->engine, prompt.data(), static_cast<int32_t>(prompt.size()), nullptr, 0, &n, &st) != STRATA_OK) {
            return s->post_error(bad_request(std::string("'prompt' holds a token id outside the vocabulary: ") + st.message, "prompt"),
                                 keep);
        }
        if (req.echo) {
            echo_text.resize(static_cast<size_t>(n));
            api->detokenize(api->engine, prompt.data(), static_cast<int32_t>(prompt.size()), echo_text.data(), n, &n, &st);
            echo_text.resize(static_cast<size_t>(std::max(n, 0)));
        }
    }
    const auto n_prompt = static_cast<int64_t>(prompt.size());
    if (n_prompt >= max_len) {
        return s->post_error(bad_request("This model's maximum context length is " + std::to_string(max_len) +
                                             " tokens, but the prompt has " + std::to_string(n_prompt) +
                                             " tokens; shorten the prompt",
                                         req.kind == endpoint::chat_completions ? "messages" : "prompt"),
                             keep);
    }
    if (req.max_tokens_given && n_prompt + req.sampling.max_tokens > max_len) {
        return s->post_error(bad_request("This model's maximum context length is " + std::to_string(max_len) + " tokens, but " +
                                             std::to_string(n_prompt) + " prompt tokens plus max_tokens " +
                                             std::to_string(req.sampling.max_tokens) + " exceed it; lower max_tokens",
                                         "max_tokens"),
                             keep);
    }
    if (!req.max_tokens_given) {
        // OpenAI's defaults: 16 tokens for completions, the rest of the context for chat.
        req.sampling.max_tokens = req.kind == endpoint::completions ? 16 : static_cast<int32_t>(max_len - n_prompt);
    }
    if (opts.log_requests) {
        strata::plugin::log(host, STRATA_LOG_INFO, "openai_http", "request %s: %s, model '%s', %lld prompt tokens, max_tokens %d, n %d%s",
                            ids.id.c_str(), req.kind == endpoint::chat_completions ? "chat" : "completion", req.model.c_str(),
                            static_cast<long long>(n_prompt), req.sampling.max_tokens, req.n, req.stream ? ", streamed" : "");
    }
    const uint64_t seed = req.seed_given ? req.sampling.seed : fresh_seed();

    auto g = std::make_shared<pending_generation>(workers);
    g->conn = s;
    g->ids = std::move(ids);
    g->echo_text = std::move(echo_text);
    g->n_prompt = n_prompt;
    g->keep = keep;
    for (int32_t i = 0; i < req.n; ++i) {
        auto c = std::make_unique<choice_state>();
        c->srv = this;
        c->owner = g.get();
        c->conn = s.get();
        c->ids = &g->ids;
        c->stream = req.stream;
        c->index = i;
        c->text = text_stream(req.stop);
        if (req.tools_given) c->tools = opts.tools;
        c->forced_calls = req.forced != generation_request::forced_tools::none;
        c->scratch.reserve(512);
        c->arrival = arrival;
        c->want_logprobs = req.logprobs != 0;
        if (c->want_logprobs) c->logprobs.reserve(static_cast<size_t>(std::min(req.sampling.max_tokens, 4096)), std::max(req.logprobs, 0));
        g->choices.push_back(std::move(c));
    }
    if (req.stream) {
        s->hold_output(); // the 200 head goes first once every choice is queued
        if (req.kind == endpoint::chat_completions) {
            for (int32_t i = 0; i < req.n; ++i) s->append_chunk(role_chunk(g->ids, i));
        }
        if (!g->echo_text.empty()) {
            // The prompt is each choice's first text chunk, sent before generation starts (vLLM joins it to the first
            // token's text; the concatenated stream is the same).
            std::string chunk;
            for (int32_t i = 0; i < req.n; ++i) {
                chunk.clear();
                append_text_chunk(chunk, g->ids, i, g->echo_text);
                s->append_chunk(chunk);
            }
        }
    }

    // Submit every choice (the engine queues them); the last final event posts the answer (release).
    g->self = g;
    std::string failure;
    int32_t refused = STRATA_OK;
    for (auto &c : g->choices) {
        if (s->client_gone()) break;
        strata_request r{};
        r.struct_size = sizeof r;
        r.prompt_tokens = prompt.data();
        r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
        r.sampling = req.sampling;
        r.sampling.seed = seed + static_cast<uint64_t>(c->index);
        r.on_token = on_token;
        r.user = c.get();
        r.presence_penalty = req.presence_penalty;
        r.frequency_penalty = req.frequency_penalty;
        r.logprobs = req.logprobs;
        r.constraint_kind = req.constraint_kind;
        r.constraint = req.constraint_kind == STRATA_CONSTRAINT_NONE ? nullptr : req.constraint.c_str();
        strata_status st{};
        g->unfinished.fetch_add(1);
        if (const int32_t rc = api->submit(api->engine, &r, &c->id, &st); rc != STRATA_OK) {
            g->unfinished.fetch_sub(1); // not queued: no final event will come
            c->id = 0;
            failure = st.message;
            refused = rc;
            break;
        }
        s->track(c->id);
    }
    if (refused != STRATA_OK) {
        // Nothing was sent yet: the choices already queued are cancelled and the request is refused as a whole once
        // their final events have come (complete), so no thread waits for the engine to notice the cancel.
        s->cancel_all();
        if (refused == STRATA_ERR_BUSY) metrics.requests_refused_busy.fetch_add(1);
        g->refused = refused;
        g->refusal = std::move(failure);
    }
    if (req.stream && refused == STRATA_OK) s->begin_stream(keep);
    g->req = std::move(req);
    release(*g);
}

void http_server::impl::release(pending_generation &g) {
    if (g.unfinished.fetch_sub(1) != 1) return;
    net::post(workers, [this, owner = std::move(g.self)] { complete(*owner); });
}

// A later choice was refused and the queued ones were cancelled; their final events have all come. The engine
// forgets them (wait returns at once), what a held stream buffered is dropped, and the request is refused as a whole.
void http_server::impl::refuse(pending_generation &g) {
    const std::shared_ptr<session> &s = g.conn;
    for (auto &c : g.choices) {
        if (c->id == 0) continue;
        strata_request_result res{};
        res.struct_size = sizeof res;
        strata_status st{};
        api->wait(api->engine, c->id, &res, &st);
        s->untrack(c->id);
    }
    if (g.req.stream) s->discard_output();
    if (g.refused == STRATA_ERR_BUSY) {
        api_error e;
        e.status = 503;
        e.type = "server_busy";
        e.code = "engine_busy";
        e.message = g.refusal;
        e.retry_after_s = 1;
        return s->post_error(e, g.keep);
    }
    // Submit refuses bad input; the request's fields were checked before, so this is rare.
    return s->post_error(bad_request(g.refusal, "prompt"), g.keep);
}

// Every choice has finished: each is waited for (at once: its final event has come) and the answer is sent.
void http_server::impl::complete(pending_generation &g) {
    if (g.refused != STRATA_OK) return refuse(g);
    const std::shared_ptr<session> &s = g.conn;
    const generation_request &req = g.req;
    const response_ids &ids = g.ids;
    const bool keep = g.keep;
    std::string failure;
    usage_counts usage;
    usage.prompt_tokens = g.n_prompt;
    std::vector<choice_result> results;
    for (auto &c : g.choices) {
        if (c->id == 0) continue;
        strata_request_result res{};
        res.struct_size = sizeof res;
        strata_status st{};
        const int32_t rc = api->wait(api->engine, c->id, &res, &st);
        s->untrack(c->id);
        if (rc != STRATA_OK && failure.empty()) failure = st.message;
        usage.completion_tokens += c->completion_tokens;
        std::string finish = c->text.stopped() ? "stop" : finish_name(res.finish);
        // Tool calls read back from the whole text (OpenAI's finish_reason then says so).
        parsed_output out{c->text.text(), {}};
        if (c->tools != tool_format::none && rc == STRATA_OK) {
            out = parse_tool_calls(c->tools, c->text.text());
            if (!req.parallel_tool_calls && out.calls.size() > 1) out.calls.resize(1);
            if (!out.calls.empty() && finish == "stop") finish = "tool_calls";
        }
        if (c->forced_calls && rc == STRATA_OK && finish == "stop") {
            // The constrained output is the calls themselves (cut short by max_tokens it stays text).
            out = forced_tool_calls(req, c->text.text());
            // OpenAI answers a forced call with finish_reason "stop"; the calls are in the message.
        }
        if (req.stream && rc == STRATA_OK) {
            std::string_view rest = c->text.take_rest();
            if (c->tools != tool_format::none) {
                // What was held back: content that turned out to be no call, then the calls.
                c->released.append(rest);
                rest = out.calls.empty() ? std::string_view(c->released).substr(c->content_sent) : std::string_view();
            }
            if (c->forced_calls) rest = out.calls.empty() ? std::string_view(c->text.text()) : std::string_view();
            if (!rest.empty() || (c->want_logprobs && c->logprobs_sent < c->logprobs.size())) {
                c->scratch.clear();
                append_text_chunk(c->scratch, ids, c->index, rest, pending_logprobs(*c));
                s->append_chunk(c->scratch);
            }
            if (!out.calls.empty()) s->append_chunk(tool_calls_chunk(ids, c->index, out.calls));
            s->append_chunk(finish_chunk(ids, c->index, finish));
        }
        results.push_back({g.echo_text + out.content, finish,
                           c->want_logprobs ? c->logprobs.to_json(req.kind, 0, c->logprobs.size()) : std::string(),
                           std::move(out.calls)});
    }
    if (req.stream) {
        if (!failure.empty()) {
            api_error e = bad_request(failure);
            e.status = 500;
            e.type = "internal_error";
            s->append_chunk(sse_event(e.to_json()));
        } else if (req.include_usage) {
            s->append_chunk(usage_chunk(ids, usage));
        }
        s->append_chunk(k_sse_done);
        s->end_stream();
        return;
    }
    if (!failure.empty()) {
        // A generation failed after it was queued: the server's fault.
        api_error e = bad_request(failure);
        e.status = 500;
        e.type = "internal_error";
        return s->post_error(e, keep);
    }
    s->post_json(completion_body(ids, results, usage), keep);
}

// ------------------------------------------------------------------------------------------------------------------

http_server::http_server(server_options opts, const strata_engine_api *engine, const strata_sampling_params &defaults,
                         const strata_host_services *host)
    : impl_(std::make_unique<impl>()) {
    impl_->opts = std::move(opts);
    impl_->api = engine;
    impl_->defaults = defaults;
    impl_->host = host;
}

http_server::~http_server() {
    request_stop();
    impl_->workers.join();
}

void http_server::run() {
    impl &m = *impl_;
    beast::error_code ec;
    const auto address = net::ip::make_address(m.opts.host, ec);
    if (ec) throw std::runtime_error("openai_http: host '" + m.opts.host + "' is not an IP address: " + ec.message());
    const tcp::endpoint ep(address, m.opts.port);
    m.acceptor.open(ep.protocol(), ec);
    if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) m.acceptor.bind(ep, ec);
    if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
        throw std::runtime_error("openai_http: cannot listen on " + m.opts.host + ":" + std::to_string(m.opts.port) + ": " +
                                 ec.message() + " (choose another --port or --host)");
    }
    const auto bound = m.acceptor.local_endpoint();
    strata::plugin::log(m.host, STRATA_LOG_INFO, "openai_http", "ready on http://%s:%u",
                        bound.address().to_string().c_str(), static_cast<unsigned>(bound.port()));
    m.accept();
    auto guard = net::make_work_guard(m.ioc);
    m.ioc.run();
    // Generations still in the engine hold work on the pool (pending_generation::work): join returns once each has
    // completed (the stop cancelled them), before the engine goes away; what they post to their connections, closed
    // by the stop, goes with the io_context.
    m.workers.join();
}

size_t http_server::impl::close_connections(bool all) {
    // Take references under the lock but abort (and maybe drop the last reference, whose destructor takes the lock)
    // outside it.
    std::vector<std::shared_ptr<session>> open;
    size_t left = 0;
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        open.reserve(sessions.size());
        for (auto &[serial, e] : sessions) {
            if (!all && e.state == conn_state::busy) {
                ++left;
                continue;
            }
            if (auto alive = e.conn.lock()) open.push_back(std::move(alive)); // skip one being destroyed
        }
    }
    for (const auto &s : open) s->abort();
    return left;
}

void http_server::impl::finish_drain(std::shared_ptr<net::steady_timer> timer, clock_type::time_point deadline) {
    // The connections still serving a request (one answered and lingering is not waited for).
    size_t left = 0;
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        for (const auto &[serial, e] : sessions) left += e.state == conn_state::busy ? 1 : 0;
    }
    if (left > 0 && draining && clock_type::now() < deadline) {
        timer->expires_after(std::chrono::milliseconds(50));
        timer->async_wait([this, timer, deadline](beast::error_code) { finish_drain(timer, deadline); });
        return;
    }
    if (left > 0)
        strata::plugin::log(host, STRATA_LOG_WARN, "openai_http", "stopping with %zu connection(s) still serving a "
                            "request: their requests are cancelled", left);
    draining = false;
    close_connections(true);
    ioc.stop();
}

void http_server::request_stop() {
    impl &m = *impl_;
    if (m.stopping.exchange(true)) {
        // A second stop while the requests in flight finish: end the wait now.
        if (m.draining.exchange(false))
            strata::plugin::log(m.host, STRATA_LOG_INFO, "openai_http", "stopped again: not waiting for the requests in "
                                "flight");
        return;
    }
    const int64_t wait_s = m.opts.shutdown_timeout_s;
    const size_t serving = m.close_connections(wait_s <= 0);
    if (wait_s <= 0) {
        net::post(m.ioc, [&m] {
            beast::error_code ec;
            m.acceptor.close(ec);
            m.ioc.stop();
        });
        return;
    }
    // vLLM's --shutdown-timeout: no new connection or request; the ones being served finish (each connection closes
    // after its answer), for up to shutdown_timeout_s.
    m.draining = true;
    strata::plugin::log(m.host, STRATA_LOG_INFO, "openai_http",
                        "stopping: %zu connection(s) serving a request may finish within %lld s (shutdown_timeout_s; "
                        "stop again to end them now)",
                        serving, static_cast<long long>(wait_s));
    const auto deadline = clock_type::now() + std::chrono::seconds(wait_s);
    net::post(m.ioc, [&m, deadline] {
        beast::error_code ec;
        m.acceptor.close(ec);
        m.finish_drain(std::make_shared<net::steady_timer>(m.ioc), deadline);
    });
}

} // namespace strata::openai_http
