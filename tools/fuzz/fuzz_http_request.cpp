// libFuzzer target for the openai_http frontend's input path: arbitrary bytes go through Beast's HTTP/1.1 request
// parser with the server's limits, and the body through the request parsers (completions, chat, tokenize,
// detokenize), a chat request through the built-in chat templates (core/chat, as the engine renders it), the
// tool-call parsers and the stop-string stream. No input may crash, and every rejection must be a well-formed OpenAI
// error with a 4xx status.
#include "chat/chat_formatter.hpp"
#include "common/error.hpp"
#include "request_parse.hpp"
#include "response_format.hpp"
#include "text_stream.hpp"
#include "tool_calls.hpp"

#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

namespace http = boost::beast::http;
using namespace strata::openai_http;
namespace chat = strata::chat;
using strata::error;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void check_error(const api_error &e) {
    check(e.status >= 400 && e.status < 500);
    const auto j = nlohmann::json::parse(e.to_json(), nullptr, false);
    check(!j.is_discarded() && j.contains("error") && j["error"]["message"].is_string());
}

// One formatter per built-in template (the request's own chat_template text is rendered too, under its limits).
const std::vector<chat::chat_formatter> &formatters() {
    static const std::vector<chat::chat_formatter> all = [] {
        std::vector<chat::chat_formatter> v;
        for (const std::string_view name : chat::builtin_template_names())
            v.emplace_back(std::vector<chat::template_source>{*chat::builtin_template(name)}, "<s>", "</s>", true,
                           chat::content_format::automatic);
        return v;
    }();
    return all;
}

void exercise_body(std::string_view body) {
    parse_context ctx;
    ctx.served_model_names = {"m", "other"};
    ctx.defaults.struct_size = sizeof ctx.defaults;
    ctx.defaults.temperature = 0.8f;
    ctx.defaults.top_p = 1.0f;
    ctx.defaults.repetition_penalty = 1.0f;
    for (endpoint k : {endpoint::completions, endpoint::chat_completions}) {
        auto r = parse_generation_request(body, k, ctx);
        if (auto *e = std::get_if<api_error>(&r)) {
            check_error(*e);
            continue;
        }
        const auto &g = std::get<generation_request>(r);
        check(g.n >= 1 && g.n <= 16);
        check(g.sampling.temperature >= 0.0f && g.sampling.temperature <= 2.0f);
        check(!g.max_tokens_given || g.sampling.max_tokens >= 1);
        if (k == endpoint::chat_completions) {
            const auto request = nlohmann::ordered_json::parse(g.chat_request, nullptr, false);
            check(request.is_object() && request.contains("messages"));
            for (const chat::chat_formatter &f : formatters()) {
                try {
                    (void)f.render(request);
                } catch (const error &) {
                }
            }
            for (const tool_format f : {tool_format::hermes, tool_format::llama3_json, tool_format::mistral,
                                        tool_format::deepseek_v3}) {
                const parsed_output out = parse_tool_calls(f, body);
                for (const tool_call &c : out.calls) check(!nlohmann::json::parse(c.arguments, nullptr, false).is_discarded());
                check(tool_content_prefix(f, body) <= body.size());
            }
        }
        // The stop strings against the body itself as "generated" text, in two pieces.
        text_stream s(g.stop);
        const response_ids ids{k, "id", 0, "m"};
        auto check_chunk = [&](std::string_view text) {
            std::string out;
            append_text_chunk(out, ids, 0, text);
            check(!nlohmann::json::parse(out.substr(6, out.size() - 8), nullptr, false).is_discarded());
        };
        s.push(body.substr(0, body.size() / 2));
        check_chunk(s.take_ready());
        s.push(body.substr(body.size() / 2));
        check_chunk(s.take_rest());
        check(s.text().size() <= body.size());
    }
    auto t = parse_tokenize_request(body);
    if (auto *e = std::get_if<api_error>(&t)) check_error(*e);
    auto d = parse_detokenize_request(body);
    if (auto *e = std::get_if<api_error>(&d)) check_error(*e);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char *>(data), size);
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 << 10);
    parser.body_limit(1 << 20);
    parser.eager(true);
    boost::beast::error_code ec;
    parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    if (!ec && !parser.is_done()) parser.put_eof(ec);
    if (!ec && parser.is_done()) exercise_body(parser.get().body());
    // The raw bytes as a body too, so the JSON paths are reached without a valid HTTP frame.
    exercise_body(bytes);
    return 0;
}
