// Chat end to end on a model with a real byte-level vocabulary (a random-weight make-model GGUF with the Qwen2 vocab)
// and Qwen2.5's real chat template: tool calls read back (forced by a grammar, as a canned model would emit one),
// tool_choice required and named, response_format json_object and json_schema (constrained decoding), template
// errors and hostile tool definitions answered with 400 while the server keeps serving.
#include "http_test_support.hpp"
#include "made_model.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace {

using json = nlohmann::json;
using namespace strata_http_test;

const std::string k_tools = R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"],
    "additionalProperties": false}}}])";

class HttpChat : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        const std::string model = strata::testing::made_model(
            "random-qwen2-f32.gguf", "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 1024 --type f32 "
                                     "--vocab-from " STRATA_SHARED_DIR "/models/vocab/ggml-vocab-qwen2.gguf");
        ASSERT_FALSE(model.empty()) << "make-model failed";
        g_port = free_port();
        log_ = fs::temp_directory_path() / ("strata_http_chat_" + std::to_string(::getpid()) + ".log");
        pid_ = await_ready(spawn_runtime_argv(log_, {"--model", model, "--frontend", "openai_http", "--port",
                                                     std::to_string(g_port), "--api-key", k_key, "--chat-template",
                                                     STRATA_SHARED_DIR "/models/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja",
                                                     "--temperature", "0"}),
                           g_port, log_);
        ASSERT_NE(pid_, 0) << "server did not start:\n" << read_text(log_);
    }
    static void TearDownTestSuite() {
        if (pid_ > 0) stop_runtime(pid_, log_);
        fs::remove(log_);
    }
    static json chat(const std::string &fields) {
        const http_reply r = request("POST", "/v1/chat/completions",
                                     R"({"messages": [{"role": "user", "content": "What is the weather in Oslo?"}],)" +
                                         fields + "}");
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body, nullptr, false);
    }
    static inline pid_t pid_ = 0;
    static inline fs::path log_;
};

// The model is made to write a Hermes tool call (Qwen2.5's format) by a grammar, as a canned model would: the
// server must read it back into tool_calls, since the template asks for <tool_call> and tool_choice is auto.
TEST_F(HttpChat, AToolCallInTheOutputComesBackAsToolCalls) {
    const std::string grammar =
        R"(root ::= "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call>")";
    const json r = chat(R"("tools": )" + k_tools + R"(, "max_tokens": 64, "grammar": )" + json(grammar).dump());
    ASSERT_TRUE(r.is_object());
    const json &m = r["choices"][0]["message"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
    ASSERT_EQ(m["tool_calls"].size(), 1u) << r.dump();
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(m["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              json::parse(R"({"city": "Oslo", "unit": "celsius"})"));
    EXPECT_TRUE(m["tool_calls"][0]["id"].get<std::string>().starts_with("call_"));
}

TEST_F(HttpChat, StreamedToolCallsArriveWholeAfterTheContent) {
    const std::string grammar =
        R"(root ::= "Let me check.<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>")";
    const http_reply r = request("POST", "/v1/chat/completions",
                                 R"({"messages": [{"role": "user", "content": "Time?"}], "stream": true, "tools": )" +
                                     k_tools + R"(, "max_tokens": 64, "grammar": )" + json(grammar).dump() + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    std::string content;
    json calls = json::array();
    std::string finish;
    for (size_t at = r.body.find("data: "); at != std::string::npos; at = r.body.find("data: ", at + 6)) {
        const size_t end = r.body.find("\n\n", at);
        const std::string payload = r.body.substr(at + 6, end - at - 6);
        if (payload == "[DONE]") break;
        const json chunk = json::parse(payload);
        const json &choice = chunk["choices"][0];
        if (choice["delta"].contains("content") && choice["delta"]["content"].is_string())
            content += choice["delta"]["content"].get<std::string>();
        if (choice["delta"].contains("tool_calls"))
            for (const json &c : choice["delta"]["tool_calls"]) calls.push_back(c);
        if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    EXPECT_EQ(content, "Let me check.");
    ASSERT_EQ(calls.size(), 1u) << r.body;
    EXPECT_EQ(calls[0]["index"], 0);
    EXPECT_EQ(calls[0]["function"]["name"], "get_time");
    EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>())["zone"], "UTC");
    EXPECT_EQ(finish, "tool_calls");
}

// tool_choice forces calls by constrained decoding (vLLM's forms): whatever the random model prefers, the answer is
// a call of an offered function with arguments valid for its schema.
TEST_F(HttpChat, ToolChoiceNamedAndRequiredForceValidCalls) {
    json r = chat(R"("tools": )" + k_tools +
                  R"(, "max_tokens": 96, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
    ASSERT_TRUE(r.is_object());
    json calls = r["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.dump();
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
    // maxLength counts characters: UTF-8 bytes that do not continue one.
    const std::string city = args["city"].is_string() ? args["city"].get<std::string>() : std::string(13, 'x');
    EXPECT_LE(std::count_if(city.begin(), city.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }),
              12)
        << args;
    EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << args;

    r = chat(R"("tools": )" + k_tools + R"(, "max_tokens": 160, "tool_choice": "required", "parallel_tool_calls": false)");
    calls = r["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.dump();
    const std::string name = calls[0]["function"]["name"];
    EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
    EXPECT_TRUE(json::parse(calls[0]["function"]["arguments"].get<std::string>()).is_object());
}

TEST_F(HttpChat, ResponseFormatJsonOutputParses) {
    json r = chat(R"("max_tokens": 128, "response_format": {"type": "json_schema", "json_schema": {"name": "w",
        "schema": {"type": "object", "properties": {"ok": {"type": "boolean"},
                   "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["ok", "unit"],
                   "additionalProperties": false}}})");
    ASSERT_TRUE(r.is_object());
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
    const json out = json::parse(r["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(out.is_object()) << r.dump();
    EXPECT_TRUE(out["ok"].is_boolean());
    EXPECT_TRUE(out["unit"] == "c" || out["unit"] == "f");
    EXPECT_EQ(out.size(), 2u);

    // Any JSON object: whatever the model writes, a finished answer parses as one.
    r = chat(R"("max_tokens": 256, "response_format": {"type": "json_object"})");
    const std::string text = r["choices"][0]["message"]["content"];
    if (r["choices"][0]["finish_reason"] == "stop")
        EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
    else
        EXPECT_TRUE(text.starts_with("{")) << text; // cut by max_tokens: still a JSON object's beginning
}

TEST_F(HttpChat, GuidedRegexAndChoiceOnCompletions) {
    http_reply r = request("POST", "/v1/completions",
                           R"({"prompt": "Code:", "max_tokens": 16, "guided_regex": "[A-F]{2}-[0-9]{3}"})");
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    const std::string code = j["choices"][0]["text"];
    ASSERT_EQ(code.size(), 6u) << code;
    EXPECT_TRUE(code[0] >= 'A' && code[0] <= 'F' && code[2] == '-' && code[5] >= '0' && code[5] <= '9') << code;
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    r = request("POST", "/v1/completions", R"({"prompt": "Answer:", "max_tokens": 8, "guided_choice": ["yes", "no"]})");
    ASSERT_EQ(r.status, 200) << r.body;
    j = json::parse(r.body);
    EXPECT_TRUE(j["choices"][0]["text"] == "yes" || j["choices"][0]["text"] == "no") << r.body;
}

TEST_F(HttpChat, BadConstraintsTemplatesAndToolsAre400AndTheServerServesOn) {
    http_reply r = request("POST", "/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": "x"}], "grammar": "root ::= undefined-rule"})");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("undefined rule 'undefined-rule'"), std::string::npos) << r.body;
    // A template error: the request's own template raises, and its message reaches the client.
    r = request("POST", "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "x"}],
                    "chat_template": "{{ raise_exception('roles must alternate user/assistant') }}"})");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("roles must alternate"), std::string::npos) << r.body;
    // Tool parameters nested 10,000 deep: refused by the template engine's depth limit, not a crash.
    std::string deep;
    for (int i = 0; i < 10000; ++i) deep += R"({"type": "object", "properties": {"a": )";
    deep += "{}";
    for (int i = 0; i < 10000; ++i) deep += "}}";
    r = request("POST", "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "tools": [{"type": "function",
                    "function": {"name": "f", "parameters": )" + deep + "}}]}");
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    // Still serving.
    const json ok = chat(R"("max_tokens": 4)");
    ASSERT_TRUE(ok.is_object());
    EXPECT_EQ(ok["usage"]["completion_tokens"], 4);
}

// /tokenize's chat form gives the ids /v1/chat/completions feeds the model.
TEST_F(HttpChat, TokenizeChatFormEqualsTheChatPrompt) {
    const std::string messages = R"("messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hi 😀"}])";
    const http_reply t = request("POST", "/tokenize", "{" + messages + "}");
    ASSERT_EQ(t.status, 200) << t.body;
    const json ids = json::parse(t.body)["tokens"];
    // Qwen2.5's template: ChatML turns, and no BOS (the Qwen2 vocab adds none).
    const http_reply text = request("POST", "/detokenize", json{{"tokens", ids}}.dump());
    ASSERT_EQ(text.status, 200) << text.body;
    const http_reply c = request("POST", "/v1/chat/completions", "{" + messages + R"(, "max_tokens": 1})");
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(json::parse(c.body)["usage"]["prompt_tokens"], ids.size());
    EXPECT_EQ(ids.front(), 151644); // <|im_start|>
}

} // namespace

namespace {

// The same on the Llama 3 vocabulary with Llama 3.2's real template, whose tool calls are bare JSON
// ({"name": ..., "parameters": ...}), and a JSON-schema answer.
TEST(HttpChatLlama3, ToolCallsAndJsonOnTheLlama3Vocabulary) {
    const std::string model = strata::testing::made_model(
        "random-llama-bpe-f32.gguf", "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 1024 --type f32 "
                                     "--vocab-from " STRATA_SHARED_DIR "/models/vocab/ggml-vocab-llama-bpe.gguf");
    ASSERT_FALSE(model.empty()) << "make-model failed";
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() / ("strata_http_chat_l3_" + std::to_string(::getpid()) + ".log");
    const pid_t pid = await_ready(
        spawn_runtime_argv(log, {"--model", model, "--frontend", "openai_http", "--port", std::to_string(g_port),
                                 "--api-key", k_key, "--chat-template",
                                 STRATA_SHARED_DIR "/models/chat_templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
                                 "--temperature", "0"}),
        g_port, log);
    ASSERT_NE(pid, 0) << "server did not start:\n" << read_text(log);
    const std::string grammar = R"(root ::= "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}")";
    http_reply r = request("POST", "/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": "Time in Paris?"}], "max_tokens": 48, "tools": )" +
                               k_tools + R"(, "grammar": )" + json(grammar).dump() + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << r.body;
    ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << r.body;
    EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_time");
    EXPECT_EQ(json::parse(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>())["zone"],
              "CET");
    r = request("POST", "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "Rate it"}], "max_tokens": 64, "response_format":
                    {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object",
                     "properties": {"stars": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["stars"],
                     "additionalProperties": false}}}})");
    ASSERT_EQ(r.status, 200) << r.body;
    j = json::parse(r.body);
    const json out = json::parse(j["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(out.is_object()) << r.body;
    EXPECT_TRUE(out["stars"].is_number_integer() && out["stars"] >= 1 && out["stars"] <= 5) << out;
    stop_runtime(pid, log);
    fs::remove(log);
}

} // namespace
