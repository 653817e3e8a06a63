// The chat-request layer over the Jinja engine: built-in families, content parts, tool-call arguments, named
// templates, kwargs, the BOS rule, broken templates and bad requests.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "error_of.hpp"
#include "chat/chat_formatter.hpp"
#include "common/error.hpp"

namespace {

using namespace strata::chat;
using json = nlohmann::ordered_json;

chat_formatter formatter(std::string_view builtin_name, bool adds_bos = false, content_format f = content_format::automatic) {
    return chat_formatter({*builtin_template(builtin_name)}, "<s>", "</s>", adds_bos, f);
}

chat_formatter formatter_of(std::string text, bool adds_bos = false, content_format f = content_format::automatic) {
    return chat_formatter({{"default", std::move(text), "test.jinja"}}, "<s>", "</s>", adds_bos, f);
}

const json k_chat = {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", "Hi"}},
                                               {{"role", "assistant"}, {"content", "Hello."}},
                                               {{"role", "user"}, {"content", "Bye"}}})}};

using strata::testing::error_of;

TEST(chat_formatter, BuiltinFamiliesRenderTheirShapes) {
    EXPECT_EQ(formatter("chatml").render(k_chat),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
              "Hello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(formatter("llama3").render(k_chat),
              "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
              "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_EQ(formatter("llama2").render(k_chat),
              "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye [/INST]");
    EXPECT_EQ(formatter("mistral").render(k_chat), "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]");
    EXPECT_EQ(formatter("phi3").render(k_chat),
              "<s><|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n<|user|>\nBye<|end|>\n"
              "<|assistant|>\n");
    EXPECT_EQ(formatter("gemma").render(k_chat),
              "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
              "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
    EXPECT_EQ(formatter("plain").render(k_chat), "system: Be brief.\nuser: Hi\nassistant: Hello.\nuser: Bye\nassistant:");
    EXPECT_FALSE(builtin_template("nope"));
    EXPECT_EQ(builtin_template_names().size(), 7u);
}

TEST(chat_formatter, GenerationPromptAndTheBosRule) {
    json r = k_chat;
    r["add_generation_prompt"] = false;
    EXPECT_EQ(formatter("chatml").render(r).ends_with("Bye<|im_end|>\n"), true);
    // The vocabulary adds BOS itself: the template's leading BOS text goes (llama.cpp's rule), so BOS comes once.
    EXPECT_TRUE(formatter("llama3", true).render(k_chat).starts_with("<|start_header_id|>system"));
    EXPECT_TRUE(formatter("chatml", true).render(k_chat).starts_with("<|im_start|>"));
}

TEST(chat_formatter, ContentPartsAreJoinedUnlessTheTemplateWalksThem) {
    const json parts = {{"messages", json::array({{{"role", "user"},
                                                   {"content", json::array({{{"type", "text"}, {"text", "a"}},
                                                                            {{"type", "text"}, {"text", "b"}}})}}})},
                        {"add_generation_prompt", false}};
    EXPECT_EQ(formatter("plain").render(parts), "user: a\nb\n");
    const std::string walker = "{% for m in messages %}{% for p in m['content'] %}[{{ p.text }}]{% endfor %}{% endfor %}";
    EXPECT_EQ(formatter_of(walker).render(parts), "[a][b]");
    EXPECT_EQ(formatter_of(walker).format_for(), content_format::openai);
    EXPECT_EQ(formatter_of("{{ messages[0].content }}", false, content_format::openai).render(parts),
              R"([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])");
    const json image = {{"messages", json::array({{{"role", "user"},
                                                   {"content", json::array({{{"type", "image_url"}}})}}})}};
    EXPECT_NE(error_of([&] { (void)formatter("plain").render(image); }).find("not a text part"), std::string::npos);
}

TEST(chat_formatter, ToolsPickTheToolUseTemplateAndArgumentsBecomeObjects) {
    const chat_formatter f({{"default", "plain:{{ messages | length }}", "d"},
                            {"tool_use", "{% for t in tools %}{{ t.function.name }};{% endfor %}"
                                         "{% for m in messages %}{% for c in m.tool_calls or [] %}"
                                         "{{ c.function.name }}({{ c.function.arguments.city }}){% endfor %}{% endfor %}",
                             "t"}},
                           "", "", false, content_format::automatic);
    json r = {{"messages", json::array({{{"role", "user"}, {"content", "weather?"}},
                                        {{"role", "assistant"},
                                         {"content", nullptr},
                                         {"tool_calls", json::array({{{"id", "c1"},
                                                                      {"type", "function"},
                                                                      {"function", {{"name", "get_weather"},
                                                                                    {"arguments", "{\"city\": \"Oslo\"}"}}}}})}}})}};
    EXPECT_EQ(f.render(r), "plain:2"); // no tools: the default template
    r["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}}});
    EXPECT_EQ(f.render(r), "get_weather;get_weather(Oslo)");
    r["chat_template"] = "default"; // by name
    EXPECT_EQ(f.render(r), "plain:2");
    r["chat_template"] = "{{ 'own' }}"; // a template text of the request's own
    EXPECT_EQ(f.render(r), "own");
}

TEST(chat_formatter, KwargsAreTemplateVariablesButNotTheRequestFields) {
    const chat_formatter f = formatter_of("{{ 'think' if enable_thinking is not defined or enable_thinking else 'no' }}");
    json r = k_chat;
    EXPECT_EQ(f.render(r), "think");
    r["chat_template_kwargs"] = {{"enable_thinking", false}};
    EXPECT_EQ(f.render(r), "no");
    r["chat_template_kwargs"] = {{"messages", json::array()}};
    EXPECT_NE(error_of([&] { (void)f.render(r); }).find("may not set 'messages'"), std::string::npos);
}

TEST(chat_formatter, TemplateErrorsReachTheRequestNotStartUp) {
    const chat_formatter broken = formatter_of("{% for m in messages %}{{ m.content }");
    const std::string msg = error_of([&] { (void)broken.render(k_chat); });
    EXPECT_NE(msg.find("test.jinja:1:"), std::string::npos) << msg;
    const chat_formatter raising = formatter_of("{{ raise_exception('Conversation roles must alternate') }}");
    try {
        (void)raising.render(k_chat);
        FAIL() << "expected the template's exception";
    } catch (const template_exception &e) {
        EXPECT_EQ(e.message(), "Conversation roles must alternate");
    }
}

TEST(chat_formatter, BadRequestsAreNamed) {
    const chat_formatter f = formatter("chatml");
    EXPECT_NE(error_of([&] { (void)f.render(json::object()); }).find("'messages' must be a non-empty array"),
              std::string::npos);
    EXPECT_NE(error_of([&] { (void)f.render({{"messages", json::array({1})}}); }).find("'messages[0]' must be an object"),
              std::string::npos);
    json r = k_chat;
    r["tools"] = "x";
    EXPECT_NE(error_of([&] { (void)f.render(r); }).find("'tools' must be an array"), std::string::npos);
    r = k_chat;
    r["add_generation_prompt"] = 1;
    EXPECT_NE(error_of([&] { (void)f.render(r); }).find("add_generation_prompt"), std::string::npos);
}

TEST(chat_formatter, RealLlama32TemplateWithTools) {
    std::ifstream in(std::string(STRATA_SHARED_DIR) + "/models/chat_templates/meta-llama-Llama-3.2-3B-Instruct.jinja");
    ASSERT_TRUE(in) << "the shared chat templates are missing";
    std::stringstream text;
    text << in.rdbuf();
    const chat_formatter f({{"default", text.str(), "llama-3.2.jinja"}}, "<|begin_of_text|>", "<|eot_id|>", true,
                           content_format::automatic);
    json r = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Oslo?"}}})},
              {"tools", json::array({{{"type", "function"},
                                      {"function", {{"name", "get_weather"},
                                                    {"parameters", {{"type", "object"}}}}}}})}};
    const std::string out = f.render(r);
    EXPECT_TRUE(out.starts_with("<|start_header_id|>system<|end_header_id|>")) << out; // BOS removed: the vocab adds it
    EXPECT_NE(out.find("\"name\": \"get_weather\""), std::string::npos) << out;
    EXPECT_TRUE(out.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n")) << out;
}

} // namespace
