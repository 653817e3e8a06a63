// Limits: a template or context from an untrusted source ends in a clear strata::error, never a crash, a hang or a
// stack overflow: steps, nesting (of the template, of evaluation, of values), output size, memory.
#include "jinja_test_support.hpp"

#include <gtest/gtest.h>

using namespace strata::chat;
using test_support::contains;
using test_support::error_of;
using test_support::json;
using test_support::render;

namespace {

render_options with_limits(uint64_t steps, size_t output, size_t memory, int depth = 512) {
    render_options o;
    o.limits.max_steps = steps;
    o.limits.max_output_bytes = output;
    o.limits.max_memory_bytes = memory;
    o.limits.max_depth = depth;
    return o;
}

std::string repeat(std::string_view s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

} // namespace

TEST(jinja_limits, StepsEndLongLoops) {
    const render_options small = with_limits(100000, 1 << 20, 64 << 20);
    EXPECT_TRUE(
        contains(error_of("{% for i in range(10**9) %}{% endfor %}"), "range() of 1000000000 numbers is more than"));
    const std::string e =
        error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", {}, small);
    EXPECT_TRUE(contains(e, "the render took more than 100000 steps (render_limits.max_steps)")) << e;
    EXPECT_TRUE(contains(e, "test.jinja:1:")) << e;
    // The default allows what real templates do many times over.
    EXPECT_EQ(render("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok"), "ok");
}

TEST(jinja_limits, RecursionEndsAtTheDepthLimit) {
    const std::string e = error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}");
    EXPECT_TRUE(contains(e, "the template nests deeper than 512 levels (render_limits.max_depth)")) << e;
    EXPECT_TRUE(contains(
        error_of("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", {}, with_limits(1000000, 1 << 20, 1 << 26, 50)),
        "deeper than 50 levels"));
    // Bounded recursion is fine.
    EXPECT_EQ(
        render("{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{% else %}bottom{% endif %}{% endmacro %}{{ r(100) }}"),
        "bottom");
}

TEST(jinja_limits, DeeplyNestedTemplatesAreSyntaxErrors) {
    EXPECT_TRUE(contains(error_of("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"),
                         "nests deeper than 128 levels (parse_limits.max_nesting)"));
    EXPECT_TRUE(
        contains(error_of("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}"), "nests deeper than 128 levels"));
    EXPECT_TRUE(contains(error_of("{{ " + repeat("not ", 100000) + "x }}"), "nests deeper than 128 levels"));
    EXPECT_TRUE(contains(error_of("{{ " + repeat("-", 100000) + "x }}"), "nests deeper than 128 levels"));
    EXPECT_TRUE(
        contains(error_of(repeat("{% if x %}", 10000) + repeat("{% endif %}", 10000)), "nests deeper than 128 levels"));
    // A long chain of operators builds a deep tree without recursing in the parser: its height is bounded too.
    EXPECT_TRUE(
        contains(error_of("{{ 1" + repeat(" + 1", 100000) + " }}"), "expression nested deeper than 128 levels"));
    EXPECT_TRUE(
        contains(error_of("{{ x" + repeat("|trim", 100000) + " }}"), "expression nested deeper than 128 levels"));
    EXPECT_EQ(render("{{ 1" + repeat(" + 1", 100) + " }}"), "101");
    // Many elifs are a list, not a nesting.
    std::string elifs = "{% if n == 0 %}0";
    for (int i = 1; i < 1000; ++i) elifs += "{% elif n == " + std::to_string(i) + " %}" + std::to_string(i);
    EXPECT_EQ(render(elifs + "{% endif %}", {{"n", 999}}), "999");
}

TEST(jinja_limits, DeeplyNestedContextIsRefused) {
    // (nlohmann::json itself overflows the stack parsing ~100000 levels; a caller must bound what it parses.)
    const json deep = json::parse(repeat("[", 5000) + repeat("]", 5000));
    EXPECT_TRUE(contains(error_of("{{ x }}", {{"x", deep}}), "the JSON nests deeper than 512 levels"));
    // ... unless the template cannot see it.
    EXPECT_EQ(render("ok", {{"unused", deep}}), "ok");
    EXPECT_TRUE(contains(error_of("{{ (s|from_json)|length }}", {{"s", repeat("[", 10000) + repeat("]", 10000)}}),
                         "from_json: the JSON nests deeper than 512 levels"));
}

TEST(jinja_limits, OutputAndTextSize) {
    const render_options small = with_limits(10000000, 100000, 64 << 20);
    EXPECT_TRUE(contains(error_of("{% for i in range(1000) %}{{ 'x' * 1000 }}{% endfor %}", {}, small),
                         "the output grew past 100000 bytes (render_limits.max_output_bytes)"));
    EXPECT_TRUE(contains(error_of("{{ 'x' * 1000000 }}", {}, small), "exceeds render_limits.max_output_bytes"));
    // Doubling a string runs into the limit long before memory does.
    EXPECT_TRUE(contains(
        error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
        "grew past"));
    // Output captured by macros counts while it waits to be printed.
    EXPECT_TRUE(contains(
        error_of("{% macro m(n) %}{{ 'y' * 60000 }}{% if n %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(5) }}", {},
                 small),
        "past 100000 bytes"));
}

TEST(jinja_limits, MemoryOfValues) {
    const render_options small = with_limits(10000000, 1 << 20, 1 << 20);
    const std::string e =
        error_of("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set _ = ns.l.append('x' * 100 ~ i) %}"
                 "{% endfor %}",
                 {}, small);
    EXPECT_TRUE(contains(e, "the render needs more than 1 MiB of memory (render_limits.max_memory_bytes)")) << e;
    // Values that die give their memory back: a loop making garbage runs on.
    EXPECT_EQ(render("{% for i in range(20000) %}{% set x = ['x' * 100, {'k': i}] %}{% endfor %}ok", {}, small), "ok");
}

TEST(jinja_limits, CyclesAndDeepValuesAreReleased) {
    // A namespace and a list that contain themselves: printing stops at the depth limit; the render frees them
    // (LeakSanitizer checks this in the sanitizer build).
    EXPECT_TRUE(
        contains(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "nested deeper than 512 levels"));
    EXPECT_EQ(render("{% set l = [] %}{% set _ = l.append(l) %}{% set _ = l.append(l) %}{{ l|length }}"), "2");
    // 100000 lists each inside the next are freed without recursion.
    EXPECT_EQ(
        render(
            "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}done"),
        "done");
}
