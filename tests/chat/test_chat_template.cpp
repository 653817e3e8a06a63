// The public API: parse once and render many times, errors with locations, raise_exception, the clock, and a real
// template's output.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

namespace {

// Qwen2.5's template, abridged: the ChatML shape most templates share.
const char *chatml = R"({%- for message in messages %}
    {%- if loop.first and message.role != 'system' %}
        {{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
    {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)";

const json conversation = {
    {"messages", json::array({{{"role", "user"}, {"content", "Hi!"}}, {{"role", "assistant"}, {"content", "Hello."}}})},
    {"add_generation_prompt", true}};

} // namespace

TEST(chat_template, RendersAChatMlConversation) {
    const template_program p = template_program::parse(chatml, "qwen.jinja");
    EXPECT_EQ(p.render(conversation),
              "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
              "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>assistant\n");
    // Parsed once, rendered again with another context.
    EXPECT_EQ(p.render({{"messages", json::array()}}), "");
    EXPECT_EQ(p.origin(), "qwen.jinja");
}

TEST(chat_template, RuntimeErrorsSayWhere) {
    const std::string e = error_of("ok\n{{ messages[0].content.nope() }}", conversation);
    EXPECT_TRUE(contains(e, "test.jinja:2:24: '.nope' is undefined, so it cannot be called")) << e;
    EXPECT_TRUE(contains(e, "\n    {{ messages[0].content.nope() }}\n" + std::string(27, ' ') + "^")) << e;
}

TEST(chat_template, RaiseExceptionIsATemplateException) {
    const template_program p = template_program::parse(
        "{% if messages|length == 0 %}{{ raise_exception('No messages!') }}{% endif %}", "t.jinja");
    try {
        p.render({{"messages", json::array()}});
        FAIL() << "no exception";
    } catch (const template_exception &e) {
        EXPECT_EQ(e.message(), "No messages!");
        EXPECT_TRUE(contains(e.what(), "t.jinja:1:33: the template raised an error: No messages!")) << e.what();
    }
    EXPECT_EQ(p.render({{"messages", json::array({1})}}), "");
}

TEST(chat_template, StrftimeNowReadsTheGivenClock) {
    render_options o;
    o.now = [] {
        std::tm t{};
        t.tm_year = 2026 - 1900;
        t.tm_mon = 0;
        t.tm_mday = 2;
        t.tm_hour = 3;
        t.tm_min = 4;
        t.tm_sec = 5;
        t.tm_wday = 5;
        return t;
    };
    EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %b %B %a %%') }}|{{ strftime_now('%d %b %Y') }}", {}, o),
              "2026-01-02 03:04:05 Jan January Fri %|02 Jan 2026");
    // Without a clock, the system's: at least a plausible year.
    EXPECT_GE(std::stoi(render("{{ strftime_now('%Y') }}")), 2024);
}

TEST(chat_template, ContextKeepsKeyOrderAndTypes) {
    const json ctx = json::parse(
        R"({"tools": [{"name": "f", "parameters": {"z": 1, "a": 2.0, "m": [true, null]}}], "flag": false})");
    EXPECT_EQ(render("{{ tools[0]|tojson }}|{{ tools[0].parameters.items()|list }}|{{ flag }}", ctx),
              "{\"name\": \"f\", \"parameters\": {\"z\": 1, \"a\": 2, \"m\": [true, null]}}|[[\"z\", 1], [\"a\", 2], "
              "[\"m\", [true, null]]]|false");
    EXPECT_TRUE(contains(error_of("x", json::array({1})), "the context must be a JSON object"));
    EXPECT_EQ(render("{{ range }}x", {{"range", 5}}), "5x"); // the context may shadow a global
}

TEST(chat_template, InvalidUtf8BecomesReplacementCharacters) {
    EXPECT_EQ(render("a\xff{{ s }}", {{"s", "ok"}}), "a\xEF\xBF\xBDok");
    json ctx;
    ctx["s"] = std::string("b\xC3", 2); // nlohmann keeps what it is given; the engine repairs it
    EXPECT_EQ(render("{{ s }}", ctx), "b\xEF\xBF\xBD");
}

TEST(chat_template, ParseLimits) {
    parse_limits tiny;
    tiny.max_source_bytes = 10;
    try {
        template_program::parse("{{ 'this is too long' }}", "big.jinja", tiny);
        FAIL() << "no error";
    } catch (const strata::error &e) {
        EXPECT_TRUE(contains(e.what(), "big.jinja: the template is 24 bytes long; at most 10 are accepted"))
            << e.what();
    }
}
