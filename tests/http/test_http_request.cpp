// Unit tests of the socket-free parts of openai_http: request parsing/validation, chat renderers, stop strings and
// UTF-8 hold-back, and the JSON/SSE shapes.
#include "tool_calls.hpp"
#include "metrics.hpp"
#include "request_parse.hpp"
#include "response_format.hpp"
#include "text_stream.hpp"
#include "gguf/gguf_file.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <fstream>
#include <limits>
#include <sstream>

namespace {

using namespace strata::openai_http;
using json = nlohmann::json;

parse_context ctx() {
    parse_context c;
    c.served_model_names = {"m"};
    c.defaults.struct_size = sizeof c.defaults;
    c.defaults.temperature = 0.8f;
    c.defaults.top_p = 0.95f;
    c.defaults.top_k = 40;
    c.defaults.repetition_penalty = 1.0f;
    c.defaults.max_tokens = 256;
    return c;
}

generation_request ok(std::string_view body, endpoint k = endpoint::completions) {
    auto r = parse_generation_request(body, k, ctx());
    EXPECT_TRUE(std::holds_alternative<generation_request>(r)) << (std::holds_alternative<api_error>(r) ? std::get<api_error>(r).message : "");
    return std::holds_alternative<generation_request>(r) ? std::get<generation_request>(r) : generation_request{};
}

api_error err(std::string_view body, endpoint k = endpoint::completions) {
    auto r = parse_generation_request(body, k, ctx());
    EXPECT_TRUE(std::holds_alternative<api_error>(r)) << body;
    return std::holds_alternative<api_error>(r) ? std::get<api_error>(r) : api_error{};
}

TEST(HttpRequestParse, CompletionFieldsMapToSampling) {
    generation_request r = ok(R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,
        "min_p":0.1,"seed":42,"repetition_penalty":1.1,"stop":["a","b"],"n":2,"stream":true,
        "stream_options":{"include_usage":true},"user":"u"})");
    EXPECT_EQ(r.prompt_text, "hi");
    EXPECT_EQ(r.sampling.max_tokens, 7);
    EXPECT_TRUE(r.max_tokens_given);
    EXPECT_EQ(r.sampling.temperature, 0.0f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
    EXPECT_EQ(r.sampling.top_k, 3);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_TRUE(r.seed_given);
    EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(r.n, 2);
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
}

TEST(HttpRequestParse, DefaultsComeFromTheServerAndTokenPromptsAreAccepted) {
    generation_request r = ok(R"({"prompt":[1,2,3]})");
    EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
    EXPECT_EQ(r.sampling.top_k, 40);
    EXPECT_FALSE(r.max_tokens_given);
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(ok(R"({"prompt":[[5,6]]})").prompt_tokens, (std::vector<int32_t>{5, 6}));
    EXPECT_EQ(ok(R"({"prompt":["one"]})").prompt_text, "one");
    EXPECT_EQ(ok(R"({"prompt":"x","max_completion_tokens":9})").sampling.max_tokens, 9);
    EXPECT_EQ(ok(R"({"prompt":"x","stop":"end"})").stop, (std::vector<std::string>{"end"}));
    EXPECT_EQ(ok(R"({"prompt":"x","top_k":-1})").sampling.top_k, 0);
}

TEST(HttpRequestParse, ChatMessagesIncludingTextParts) {
    generation_request r = ok(R"({"messages":[{"role":"system","content":"be brief"},
        {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
                              endpoint::chat_completions);
    // The messages go to the engine's chat template as they came (the template decides how parts join).
    const auto chat = nlohmann::json::parse(r.chat_request);
    ASSERT_EQ(chat["messages"].size(), 2u);
    EXPECT_EQ(chat["messages"][0]["role"], "system");
    EXPECT_EQ(chat["messages"][1]["content"][1]["text"], "b");
    EXPECT_FALSE(chat.contains("tools"));
    EXPECT_FALSE(r.tools_given);
}

TEST(HttpRequestParse, ChatTemplateFieldsToolsAndToolChoice) {
    const auto chat = endpoint::chat_completions;
    generation_request r = ok(R"({"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
           "function":{"name":"f","arguments":"{\"x\":1}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"42"}],
        "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
        "chat_template_kwargs":{"enable_thinking":false},"add_generation_prompt":true,"parallel_tool_calls":false})",
                              chat);
    const auto j = nlohmann::json::parse(r.chat_request);
    EXPECT_EQ(j["messages"][0]["role"], "system"); // OpenAI's developer role is the templates' system role
    EXPECT_EQ(j["tools"][0]["function"]["name"], "f");
    EXPECT_EQ(j["chat_template_kwargs"]["enable_thinking"], false);
    EXPECT_TRUE(r.tools_given);
    EXPECT_FALSE(r.parallel_tool_calls);
    EXPECT_FALSE(ok(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
        "tool_choice":"none"})", chat).tools_given);
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", chat).param, "tool_choice");
    EXPECT_EQ(ok(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})", chat).constraint_kind,
              STRATA_CONSTRAINT_NONE);
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web"}]})", chat).param, "tools");
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"continue_final_message":true})", chat).param,
              "continue_final_message");
    EXPECT_EQ(err(R"({"messages":[{"role":"user"}]})", chat).param, "messages");
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", chat).param, "messages");
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"guided_whitespace_pattern":"a+"})", chat).param,
              "guided_whitespace_pattern");
}

TEST(HttpRequestParse, ErrorsHaveStatusAndParam) {
    EXPECT_EQ(err("{\"prompt\": ").status, 400);
    EXPECT_EQ(err("[1,2]").status, 400);
    api_error t = err(R"({"prompt":"x","temperature":"hot"})");
    EXPECT_EQ(t.status, 400);
    EXPECT_EQ(t.param, "temperature");
    EXPECT_EQ(err(R"({"prompt":"x","temperature":3})").param, "temperature");
    EXPECT_EQ(err(R"({"prompt":"x","top_p":0})").param, "top_p");
    EXPECT_EQ(err(R"({"prompt":"x","max_tokens":0})").param, "max_tokens");
    EXPECT_EQ(err(R"({"prompt":"x","max_tokens":1.5})").param, "max_tokens");
    EXPECT_EQ(err(R"({"prompt":"x","n":0})").param, "n");
    EXPECT_EQ(err(R"({"prompt":"x","stream":"yes"})").param, "stream");
    EXPECT_EQ(err(R"({"prompt":"x","stop":[1]})").param, "stop");
    EXPECT_EQ(err(R"({"prompt":[-1]})").param, "prompt");
    EXPECT_EQ(err(R"({"prompt":["a","b"]})").param, "prompt");
    EXPECT_EQ(err(R"({})").param, "prompt");
    EXPECT_EQ(err(R"({"messages":[]})", endpoint::chat_completions).param, "messages");
    EXPECT_EQ(err(R"({"messages":[{"role":"robot","content":"x"}]})", endpoint::chat_completions).param, "messages");
    EXPECT_EQ(err(R"({"prompt":"x","presence_penalty":2.5})").param, "presence_penalty");
    EXPECT_EQ(err(R"({"prompt":"x","frequency_penalty":"1"})").param, "frequency_penalty");
    EXPECT_EQ(ok(R"({"prompt":"x","presence_penalty":0,"frequency_penalty":0})").prompt_text, "x");
    api_error m = err(R"({"prompt":"x","model":"other"})");
    EXPECT_EQ(m.status, 404);
    EXPECT_EQ(m.code, "model_not_found");
    const json body = json::parse(m.to_json());
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["param"], "model");
    EXPECT_TRUE(body["error"].contains("message"));
}

TEST(HttpRequestParse, PenaltiesAreCarriedInOpenAiRange) {
    const generation_request r = ok(R"({"prompt":"x","presence_penalty":1.5,"frequency_penalty":-0.5})");
    EXPECT_FLOAT_EQ(r.presence_penalty, 1.5f);
    EXPECT_FLOAT_EQ(r.frequency_penalty, -0.5f);
    EXPECT_FLOAT_EQ(ok(R"({"prompt":"x"})").presence_penalty, 0.f);
    EXPECT_EQ(err(R"({"prompt":"x","frequency_penalty":-2.01})").param, "frequency_penalty");
}

TEST(HttpRequestParse, CompletionsLogprobsIsTheNumberOfAlternatives) {
    EXPECT_EQ(ok(R"({"prompt":"x","logprobs":3})").logprobs, 3);
    EXPECT_EQ(ok(R"({"prompt":"x","logprobs":0})").logprobs, -1); // the chosen tokens' logprobs, no alternatives
    EXPECT_EQ(ok(R"({"prompt":"x","logprobs":null})").logprobs, 0);
    EXPECT_EQ(ok(R"({"prompt":"x","logprobs":false})").logprobs, 0);
    EXPECT_EQ(ok(R"({"prompt":"x"})").logprobs, 0);
    EXPECT_EQ(err(R"({"prompt":"x","logprobs":21})").param, "logprobs");
    EXPECT_EQ(err(R"({"prompt":"x","logprobs":-1})").param, "logprobs");
    EXPECT_EQ(err(R"({"prompt":"x","logprobs":true})").param, "logprobs");
    EXPECT_EQ(err(R"({"prompt":"x","top_logprobs":2})").param, "top_logprobs");
}

TEST(HttpRequestParse, ChatLogprobsIsABooleanWithTopLogprobs) {
    const auto chat = endpoint::chat_completions;
    EXPECT_EQ(ok(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})", chat).logprobs, -1);
    EXPECT_EQ(ok(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":4})", chat).logprobs, 4);
    EXPECT_EQ(ok(R"({"messages":[{"role":"user","content":"x"}],"logprobs":false})", chat).logprobs, 0);
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"logprobs":2})", chat).param, "logprobs");
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", chat).param, "top_logprobs");
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", chat).param,
              "top_logprobs");
}

TEST(HttpRequestParse, AnEngineBeforeAbi14KeepsRefusingPenaltiesAndLogprobs) {
    parse_context old = ctx();
    old.penalties_and_logprobs = false;
    auto refused = [&](std::string_view body, endpoint k, const char *param) {
        auto r = parse_generation_request(body, k, old);
        ASSERT_TRUE(std::holds_alternative<api_error>(r)) << body;
        EXPECT_EQ(std::get<api_error>(r).status, 400);
        EXPECT_EQ(std::get<api_error>(r).param, param);
        EXPECT_NE(std::get<api_error>(r).message.find("not supported yet"), std::string::npos);
    };
    refused(R"({"prompt":"x","presence_penalty":0.5})", endpoint::completions, "presence_penalty");
    refused(R"({"prompt":"x","frequency_penalty":0.5})", endpoint::completions, "frequency_penalty");
    refused(R"({"prompt":"x","logprobs":2})", endpoint::completions, "logprobs");
    refused(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})", endpoint::chat_completions, "logprobs");
    auto fine = parse_generation_request(R"({"prompt":"x","presence_penalty":0,"logprobs":false})", endpoint::completions, old);
    EXPECT_TRUE(std::holds_alternative<generation_request>(fine));
}

TEST(HttpResponseFormat, LogprobsObjectsHaveOpenAiShapes) {
    logprob_log log;
    log.reserve(2, 2);
    log.add_token("Once", -0.5f);
    log.add_alternative("Once", -0.5f);
    log.add_alternative(" Once", -1.5f);
    log.add_token(" upon", -0.25f);
    log.add_alternative(" upon", -0.25f);
    log.add_alternative(" a", -std::numeric_limits<float>::infinity());
    const json c = json::parse(log.to_json(endpoint::completions, 0, 2));
    EXPECT_EQ(c["tokens"], json({"Once", " upon"}));
    EXPECT_EQ(c["token_logprobs"][1], -0.25);
    EXPECT_EQ(c["text_offset"], json({0, 4}));
    ASSERT_EQ(c["top_logprobs"].size(), 2u);
    EXPECT_EQ(c["top_logprobs"][0][" Once"], -1.5);
    EXPECT_EQ(c["top_logprobs"][1][" a"], -9999.0); // -inf is not JSON
    const json tail = json::parse(log.to_json(endpoint::completions, 1, 2));
    EXPECT_EQ(tail["text_offset"], json({4}));
    const json chat = json::parse(log.to_json(endpoint::chat_completions, 0, 2));
    ASSERT_EQ(chat["content"].size(), 2u);
    EXPECT_EQ(chat["content"][1]["token"], " upon");
    EXPECT_EQ(chat["content"][1]["bytes"], json({32, 117, 112, 111, 110}));
    EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], " Once");
    EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["logprob"], -1.5);
    std::string chunk;
    append_text_chunk(chunk, response_ids{endpoint::chat_completions, "chatcmpl-1", 0, "m"}, 0, "Once", log.to_json(endpoint::chat_completions, 0, 1));
    const json ev = json::parse(chunk.substr(6));
    EXPECT_EQ(ev["choices"][0]["logprobs"]["content"][0]["logprob"], -0.5);
}

TEST(HttpRequestParse, TokenizeAndDetokenizeBodies) {
    auto t = parse_tokenize_request(R"({"prompt":"hello","add_special_tokens":false})");
    ASSERT_TRUE(std::holds_alternative<tokenize_request>(t));
    EXPECT_EQ(std::get<tokenize_request>(t).prompt, "hello");
    EXPECT_FALSE(std::get<tokenize_request>(t).add_special_tokens);
    EXPECT_TRUE(std::holds_alternative<api_error>(parse_tokenize_request(R"({"prompt":5})")));
    auto d = parse_detokenize_request(R"({"tokens":[1,2]})");
    ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(d));
    EXPECT_EQ(std::get<std::vector<int32_t>>(d).size(), 2u);
    EXPECT_TRUE(std::holds_alternative<api_error>(parse_detokenize_request(R"({"tokens":"x"})")));
}

TEST(HttpRequestParse, OutputConstraintsFromEveryFieldThatAsksForOne) {
    const auto chat = endpoint::chat_completions;
    const std::string tools = R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"g"}}])";
    generation_request r = ok(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})", chat);
    EXPECT_EQ(r.constraint_kind, STRATA_CONSTRAINT_ANY_JSON_OBJECT);
    r = ok(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
        "json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"integer"}}},"strict":true}}})", chat);
    EXPECT_EQ(r.constraint_kind, STRATA_CONSTRAINT_JSON_SCHEMA);
    EXPECT_EQ(nlohmann::json::parse(r.constraint)["properties"]["a"]["type"], "integer");
    // A named function: its parameters; required: vLLM's array of {"name", "parameters"}.
    r = ok(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
               R"(,"tool_choice":{"type":"function","function":{"name":"f"}}})", chat);
    EXPECT_EQ(r.forced, generation_request::forced_tools::named);
    EXPECT_EQ(r.forced_name, "f");
    EXPECT_EQ(nlohmann::json::parse(r.constraint)["properties"]["city"]["type"], "string");
    EXPECT_FALSE(r.tools_given);
    r = ok(R"({"messages":[{"role":"user","content":"x"}],)" + tools + R"(,"tool_choice":"required","parallel_tool_calls":false})",
           chat);
    EXPECT_EQ(r.forced, generation_request::forced_tools::required);
    const auto schema = nlohmann::json::parse(r.constraint);
    EXPECT_EQ(schema["type"], "array");
    EXPECT_EQ(schema["maxItems"], 1);
    EXPECT_EQ(schema["items"]["anyOf"].size(), 2u);
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],)" + tools +
                      R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})", chat).param, "tool_choice");
    // llama.cpp's and vLLM's spellings, on completions too; two constraints at once are refused.
    EXPECT_EQ(ok(R"({"prompt":"x","grammar":"root ::= \"a\""})").constraint_kind, STRATA_CONSTRAINT_GBNF);
    EXPECT_EQ(ok(R"({"prompt":"x","json_schema":{"type":"object"}})").constraint_kind, STRATA_CONSTRAINT_JSON_SCHEMA);
    EXPECT_EQ(ok(R"({"prompt":"x","guided_choice":["yes","no"]})").constraint, R"(root ::= "yes" | "no")");
    EXPECT_EQ(ok(R"({"prompt":"x","guided_regex":"[0-9]{3}"})").constraint_kind, STRATA_CONSTRAINT_REGEX);
    EXPECT_EQ(err(R"({"prompt":"x","grammar":"root ::= \"a\"","guided_json":{}})").param, "grammar");
    EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})", chat).param,
              "response_format");
}

TEST(HttpRequestParse, UnknownFieldsAreRefusedByName) {
    const api_error e = err(R"({"prompt":"x","unknown_field":{"x":1}})");
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "unknown_field");
    EXPECT_NE(e.message.find("'unknown_field' is not a field"), std::string::npos) << e.message;
    EXPECT_EQ(err(R"({"prompt":"x","logit_bias":{"5":1}})").param, "logit_bias");
    EXPECT_EQ(ok(R"({"prompt":"x","logit_bias":{}})").prompt_text, "x");
    EXPECT_EQ(err(R"({"prompt":"x","messages":[]})").param, "messages");
}

TEST(HttpTextStream, StopStringCutsTheTextAndHoldsBackPossiblePrefixes) {
    text_stream t({"END"});
    EXPECT_FALSE(t.push("abc E"));
    EXPECT_EQ(t.take_ready(), "abc "); // "E" might start "END"
    EXPECT_FALSE(t.push("N"));
    EXPECT_EQ(t.take_ready(), "");
    EXPECT_TRUE(t.push("D and more"));
    EXPECT_EQ(t.take_ready(), "");
    EXPECT_EQ(t.text(), "abc ");
    EXPECT_TRUE(t.push("ignored"));
    EXPECT_EQ(t.text(), "abc ");

    text_stream u({"xy"});
    u.push("ax");
    EXPECT_EQ(u.take_ready(), "a");
    u.push("b");
    EXPECT_EQ(u.take_ready(), "xb"); // "x" did not become "xy"
}

TEST(HttpTextStream, IncompleteUtf8IsHeldUntilComplete) {
    text_stream t;
    t.push("a\xC3");
    EXPECT_EQ(t.take_ready(), "a");
    t.push("\xA9!");
    EXPECT_EQ(t.take_ready(), "\xC3\xA9!");
    t.push("\xE2\x82");
    EXPECT_EQ(t.take_ready(), "");
    EXPECT_EQ(t.take_rest(), "\xE2\x82");
    EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98"), 2u);
    EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98\x80"), 6u);
}

TEST(HttpResponseFormat, TextChunksAreSseEventsWithValidJson) {
    response_ids ids{endpoint::completions, "cmpl-1", 123, "m"};
    std::string out;
    append_text_chunk(out, ids, 0, "he said \"hi\"\n\x01\xFF");
    ASSERT_EQ(out.rfind("data: ", 0), 0u);
    ASSERT_EQ(out.substr(out.size() - 2), "\n\n");
    json j = json::parse(out.substr(6, out.size() - 8));
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["text"], "he said \"hi\"\n\x01\xEF\xBF\xBD");
    EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());

    out.clear();
    append_text_chunk(out, ids, 0, "\xED\xA0\x80|\xE0\x80\x80|\xF4\x90\x80\x80|\xE2\x82\xAC"); // surrogate, overlong, > U+10FFFF, euro
    j = json::parse(out.substr(6, out.size() - 8));
    EXPECT_EQ(j["choices"][0]["text"], "\uFFFD\uFFFD\uFFFD|\uFFFD\uFFFD\uFFFD|\uFFFD\uFFFD\uFFFD\uFFFD|\u20AC");

    response_ids chat{endpoint::chat_completions, "chatcmpl-1", 123, "m"};
    out.clear();
    append_text_chunk(out, chat, 1, "x");
    j = json::parse(out.substr(6, out.size() - 8));
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    EXPECT_EQ(j["choices"][0]["delta"]["content"], "x");
    EXPECT_EQ(j["choices"][0]["index"], 1);
    const std::string fin = finish_chunk(chat, 0, "stop");
    EXPECT_EQ(json::parse(fin.substr(6))["choices"][0]["finish_reason"], "stop");
    const std::string role = role_chunk(chat, 0);
    EXPECT_EQ(json::parse(role.substr(6))["choices"][0]["delta"]["role"], "assistant");
    const std::string usage = usage_chunk(chat, {3, 4});
    EXPECT_EQ(json::parse(usage.substr(6))["usage"]["total_tokens"], 7);
    EXPECT_EQ(k_sse_done, "data: [DONE]\n\n");
}

TEST(HttpResponseFormat, NonStreamingBodiesCarryUsage) {
    response_ids chat{endpoint::chat_completions, "chatcmpl-1", 5, "m"};
    json j = json::parse(completion_body(chat, {{"hello", "length"}}, {2, 1}));
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(j["choices"][0]["message"]["content"], "hello");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
    EXPECT_EQ(j["usage"]["completion_tokens"], 1);
}

TEST(HttpMetrics, PrometheusTextHasCumulativeBucketsAndEngineCounters) {
    frontend_metrics m;
    m.time_to_first_token.observe(0.003);
    m.time_to_first_token.observe(0.2);
    m.time_to_first_token.observe(10.0);
    m.request_success = 2;
    m.requests_refused_busy = 3;
    m.connections_evicted = 4;
    m.connections_refused = 5;
    strata_engine_stats e{};
    e.requests_running = 1;
    e.requests_waiting = 3;
    e.prompt_tokens_total = 40;
    e.generation_tokens_total = 50;
    const std::string text = prometheus_text(m, e, "m");
    EXPECT_NE(text.find("vllm:num_requests_running{model_name=\"m\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("vllm:num_requests_waiting{model_name=\"m\"} 3\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:prompt_tokens_total{model_name=\"m\"} 40\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:generation_tokens_total{model_name=\"m\"} 50\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:request_success_total{model_name=\"m\"} 2\n"), std::string::npos);
    EXPECT_NE(text.find("strata:requests_refused_busy_total{model_name=\"m\"} 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("strata:http_connections_evicted_total{model_name=\"m\"} 4\n"), std::string::npos);
    EXPECT_NE(text.find("strata:http_connections_refused_total{model_name=\"m\"} 5\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.001\"} 0\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.005\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.25\"} 2\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 3\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:time_to_first_token_seconds_count{model_name=\"m\"} 3\n"), std::string::npos);
    EXPECT_NE(text.find("# TYPE vllm:inter_token_latency_seconds histogram"), std::string::npos);
}

TEST(HttpMetrics, KvSeriesAppearOnlyWhenTheEngineFilledTheAbi15Tail) {
    frontend_metrics m;
    strata_engine_stats e{};
    e.struct_size = offsetof(strata_engine_stats, kv_block_size); // an engine before ABI 1.5
    e.kv_blocks_total[STRATA_KV_DEVICE] = 99;                      // not filled by such an engine: never read
    const std::string old = prometheus_text(m, e, "m");
    EXPECT_EQ(old.find("gpu_cache_usage_perc"), std::string::npos) << old;
    EXPECT_EQ(old.find("strata_kv_blocks"), std::string::npos) << old;

    e.struct_size = sizeof e;
    e.kv_block_size = 16;
    e.kv_blocks_total[STRATA_KV_DEVICE] = 200;
    e.kv_blocks_used[STRATA_KV_DEVICE] = 80;
    e.kv_blocks_cached[STRATA_KV_DEVICE] = 30; // 50 held by requests: usage 0.25
    e.kv_blocks_total[STRATA_KV_HOST] = 1000;
    e.kv_blocks_used[STRATA_KV_HOST] = 100;
    e.kv_blocks_total[STRATA_KV_NVME] = 5000;
    e.kv_blocks_used[STRATA_KV_NVME] = 7;
    e.kv_blocks_cached[STRATA_KV_NVME] = 7;
    e.preemptions_swap = 2;
    e.preemptions_recompute = 3;
    e.prefix_queries = 40;
    e.prefix_hits[STRATA_KV_DEVICE] = 10;
    e.prefix_hits[STRATA_KV_HOST] = 4;
    e.prefix_hits[STRATA_KV_NVME] = 1;
    e.kv_bytes_swapped_out = 4096;
    e.kv_bytes_swapped_in = 1024;
    const std::string text = prometheus_text(m, e, "m");
    for (const char *line : {
             "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n",
             "vllm:cpu_cache_usage_perc{model_name=\"m\"} 0.1\n",
             "vllm:num_preemptions_total{model_name=\"m\"} 5\n",
             "vllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 40\n",
             "vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 10\n",
             "strata_kv_block_size{model_name=\"m\"} 16\n",
             "strata_kv_blocks{model_name=\"m\",tier=\"device\",state=\"total\"} 200\n",
             "strata_kv_blocks{model_name=\"m\",tier=\"device\",state=\"used\"} 80\n",
             "strata_kv_blocks{model_name=\"m\",tier=\"device\",state=\"cached\"} 30\n",
             "strata_kv_blocks{model_name=\"m\",tier=\"host\",state=\"used\"} 100\n",
             "strata_kv_blocks{model_name=\"m\",tier=\"nvme\",state=\"total\"} 5000\n",
             "strata_kv_blocks{model_name=\"m\",tier=\"nvme\",state=\"cached\"} 7\n",
             "strata_kv_preemptions_total{model_name=\"m\",mode=\"swap\"} 2\n",
             "strata_kv_preemptions_total{model_name=\"m\",mode=\"recompute\"} 3\n",
             "strata_prefix_cache_hits_total{model_name=\"m\",tier=\"device\"} 10\n",
             "strata_prefix_cache_hits_total{model_name=\"m\",tier=\"host\"} 4\n",
             "strata_prefix_cache_hits_total{model_name=\"m\",tier=\"nvme\"} 1\n",
             "strata_kv_swapped_bytes_total{model_name=\"m\",direction=\"out\"} 4096\n",
             "strata_kv_swapped_bytes_total{model_name=\"m\",direction=\"in\"} 1024\n",
             "# TYPE strata_kv_blocks gauge\n",
             "# TYPE vllm:num_preemptions_total counter\n",
         }) {
        EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
    }
    // One HELP/TYPE per family, even with several samples.
    size_t types = 0;
    for (size_t at = 0; (at = text.find("# TYPE strata_kv_blocks ", at)) != std::string::npos; ++at) ++types;
    EXPECT_EQ(types, 1u);
}

TEST(HttpRequestParse, EchoIsForCompletionsAndNotWithLogprobs) {
    EXPECT_TRUE(ok(R"({"prompt":"x","echo":true})").echo);
    EXPECT_FALSE(ok(R"({"prompt":"x","echo":false})").echo);
    EXPECT_FALSE(ok(R"({"prompt":"x"})").echo);
    EXPECT_EQ(err(R"({"prompt":"x","echo":1})").param, "echo");
    const api_error with_logprobs = err(R"({"prompt":"x","echo":true,"logprobs":2})");
    EXPECT_EQ(with_logprobs.status, 400);
    EXPECT_EQ(with_logprobs.param, "echo");
    EXPECT_NE(with_logprobs.message.find("prompt"), std::string::npos) << with_logprobs.message;
    EXPECT_NE(with_logprobs.message.find("not supported yet"), std::string::npos) << with_logprobs.message;
    EXPECT_TRUE(ok(R"({"prompt":"x","echo":true,"logprobs":null})").echo);
    const api_error chat = err(R"({"messages":[{"role":"user","content":"x"}],"echo":true})", endpoint::chat_completions);
    EXPECT_EQ(chat.param, "echo");
    EXPECT_NE(chat.message.find("/v1/completions"), std::string::npos) << chat.message;
}

} // namespace

// The tool-call format comes from the model's chat template: the real templates in the shared folder.
TEST(HttpToolCalls, FormatIsRecognisedFromTheTemplate) {
    auto read = [](const char *name) {
        std::ifstream in(std::string(STRATA_SHARED_DIR) + "/models/chat_templates/" + name);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    };
    EXPECT_EQ(detect_tool_format(read("Qwen-Qwen2.5-7B-Instruct.jinja")), tool_format::hermes);
    EXPECT_EQ(detect_tool_format(read("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja")), tool_format::hermes);
    EXPECT_EQ(detect_tool_format(read("meta-llama-Llama-3.2-3B-Instruct.jinja")), tool_format::llama3_json);
    EXPECT_EQ(detect_tool_format(read("mistralai-Mistral-Nemo-Instruct-2407.jinja")), tool_format::mistral);
    EXPECT_EQ(detect_tool_format(read("deepseek-ai-DeepSeek-V3.1.jinja")), tool_format::deepseek_v3);
    EXPECT_EQ(detect_tool_format("{{ messages[0].content }}"), tool_format::none);
    EXPECT_EQ(tool_format_from_name("llama3_json"), tool_format::llama3_json);
    EXPECT_FALSE(tool_format_from_name("pythonic"));
}

TEST(HttpToolCalls, EachFormatParsesBackIntoCallsAndContent) {
    auto calls = parse_tool_calls(tool_format::hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                                                       "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
                                                       "<tool_call>{\"name\": \"t\", \"arguments\": {}}</tool_call>");
    ASSERT_EQ(calls.calls.size(), 2u);
    EXPECT_EQ(calls.content, "Let me check.");
    EXPECT_EQ(calls.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(calls.calls[0].arguments)["city"], "Oslo");
    calls = parse_tool_calls(tool_format::llama3_json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}");
    ASSERT_EQ(calls.calls.size(), 1u);
    EXPECT_EQ(calls.calls[0].arguments, "{\"a\":1}");
    EXPECT_TRUE(calls.content.empty());
    calls = parse_tool_calls(tool_format::llama3_json, "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"s\": \"a;b\"}}");
    ASSERT_EQ(calls.calls.size(), 2u);
    EXPECT_EQ(calls.calls[1].name, "g");
    calls = parse_tool_calls(tool_format::mistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}]");
    ASSERT_EQ(calls.calls.size(), 1u);
    calls = parse_tool_calls(tool_format::mistral, "[TOOL_CALLS]f[ARGS]{\"q\": 1}[TOOL_CALLS]g[ARGS]{}");
    ASSERT_EQ(calls.calls.size(), 2u);
    EXPECT_EQ(calls.calls[1].name, "g");
    const std::string ds_begin = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>";
    const std::string ds_call = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>";
    const std::string ds_sep = "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>";
    const std::string ds_end = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>";
    calls = parse_tool_calls(tool_format::deepseek_v3, "ok" + ds_begin + ds_call + "get_weather" + ds_sep +
                                                           "{\"city\": \"Oslo\"}" + ds_end);
    ASSERT_EQ(calls.calls.size(), 1u);
    EXPECT_EQ(calls.content, "ok");
    calls = parse_tool_calls(tool_format::deepseek_v3, ds_begin + ds_call + "function" + ds_sep +
                                                           "f\n```json\n{\"a\": 2}\n```" + ds_end);
    ASSERT_EQ(calls.calls.size(), 1u);
    EXPECT_EQ(calls.calls[0].name, "f");
    // Not a call after all: the model's text comes back as content.
    calls = parse_tool_calls(tool_format::hermes, "<tool_call>{not json}</tool_call>");
    EXPECT_TRUE(calls.calls.empty());
    EXPECT_EQ(calls.content, "<tool_call>{not json}</tool_call>");
}

TEST(HttpToolCalls, StreamingHoldsBackWhatMayBeACall) {
    EXPECT_EQ(tool_content_prefix(tool_format::hermes, "Sure. <tool"), 6u);
    EXPECT_EQ(tool_content_prefix(tool_format::hermes, "Sure. <b>"), 9u);
    EXPECT_EQ(tool_content_prefix(tool_format::hermes, "a<tool_call>{"), 1u);
    EXPECT_EQ(tool_content_prefix(tool_format::llama3_json, "  {\"na"), 0u);
    EXPECT_EQ(tool_content_prefix(tool_format::llama3_json, "<|pyth"), 0u);
    EXPECT_EQ(tool_content_prefix(tool_format::llama3_json, "The answer"), 10u);
}
