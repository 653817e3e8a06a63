// vLLM-style YAML config files: names resolved through the schema's flags and aliases, the same validation as TOML
// with file:line, and a file's place in the precedence (below --set and flags).
#include "error_of.hpp"
#include "common/error.hpp"
#include "config/command_line.hpp"
#include "config/document.hpp"
#include "config/yaml_config.hpp"
#include "example_schema.hpp"

#include <gtest/gtest.h>

#include <functional>

using namespace strata::config;

namespace {

using strata::testing::error_of;

document resolved(const std::string &yaml) {
    document doc = document::from_yaml_string(yaml, "serve.yaml");
    doc.resolve_yaml(test_support::example_schema(), true);
    return doc;
}

} // namespace

TEST(YamlConfig, VllmNamesWithDashesOrUnderscoresAndNestedTables) {
    const schema s = test_support::example_schema();
    const document doc = resolved("model: m.gguf\n"
                                  "temperature: 0.25\n"
                                  "top-k: 7\n"
                                  "cpu_parallelism: 3\n"      // an alias of --threads
                                  "disable_log_requests: true\n" // an inverted alias
                                  "stop: [\"a\", b]\n"           // a sequence for a list key
                                  "memory:\n  kv_cache: 2GiB\n"); // a Strata table as a nested mapping
    doc.validate(s);
    EXPECT_EQ(doc.get_string("model", "path", s), "m.gguf");
    EXPECT_DOUBLE_EQ(*doc.get_float("sampling", "temperature", s), 0.25);
    EXPECT_EQ(doc.get_int("sampling", "top_k", s), 7);
    EXPECT_EQ(doc.get_int("engine", "threads", s), 3);
    EXPECT_EQ(doc.get_bool("engine", "log_requests", s), false);
    EXPECT_EQ(doc.get_string_list("cli", "stop", s), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(doc.get_bytes("memory", "kv_cache", s), 2ULL << 30);
    EXPECT_TRUE(doc.is_set("engine", "threads"));
    EXPECT_FALSE(doc.is_set("sampling", "top_p"));
}

TEST(YamlConfig, ProblemsNameTheFileLineAndKeyAsWritten) {
    const schema s = test_support::example_schema();
    EXPECT_EQ(error_of([] { resolved("model: m.gguf\ntemprature: 0.5\n"); }),
              "serve.yaml:2: unknown option 'temprature'; did you mean 'temperature'?");
    EXPECT_NE(error_of([] { resolved("max_batch: 4\n"); }).find("serve.yaml:1: unknown option 'max_batch'"),
              std::string::npos);
    const document bad = resolved("temperature: 7\nthreads: many\n");
    EXPECT_EQ(error_of([&] { bad.validate(s); }),
              "serve.yaml:1 (temperature): [sampling] temperature = 7 is out of range [0, 2]\n"
              "serve.yaml:2 (threads): [engine] threads must be an integer, got string \"many\"");
    // A key whose mechanism is not built: the same "not supported yet" as in TOML.
    EXPECT_NE(error_of([&] { resolved("memory:\n  cpu_offload_gb: 4\n").validate(s); })
                  .find("serve.yaml:2 (memory.cpu_offload_gb): [memory] cpu_offload_gb is not supported yet"),
              std::string::npos);
}

TEST(YamlConfig, SyntaxAndShapeErrorsSayWhere) {
    EXPECT_EQ(error_of([] { read_yaml_config("model: [a\n", "x.yaml"); }).rfind("x.yaml:2:1: ", 0), 0u);
    EXPECT_NE(error_of([] { read_yaml_config("- a\n- b\n", "x.yaml"); }).find("x.yaml:1: a YAML config is a mapping"),
              std::string::npos);
    EXPECT_EQ(error_of([] { read_yaml_config("seed: 1\nseed: 2\n", "x.yaml"); }),
              "x.yaml:2: 'seed' is given twice (first on line 1)");
    EXPECT_EQ(error_of([] { read_yaml_config("seed:\n", "x.yaml"); }), "x.yaml:1: 'seed' has no value; give one or delete the line");
    EXPECT_NE(error_of([] { read_yaml_config("memory:\n  a:\n    b: 1\n", "x.yaml"); }).find("tables hold values"),
              std::string::npos);
    EXPECT_TRUE(read_yaml_config("", "x.yaml").empty()); // an empty file sets nothing
    EXPECT_TRUE(is_yaml_path("a/B.YML"));
    EXPECT_FALSE(is_yaml_path("a.toml"));
}

TEST(YamlConfig, NamesThePluginsAddWaitForTheirTables) {
    schema core;
    core.add_table({"model", "", {{"path", STRATA_CONFIG_STRING, std::nullopt, 0, 0, "", "--model"}}});
    document doc = document::from_yaml_string("model: m.gguf\nthreads: 2\n", "x.yaml");
    doc.resolve_yaml(core, false); // before plugins load: model resolves, threads waits
    EXPECT_TRUE(doc.is_set("model", "path"));
    EXPECT_FALSE(doc.is_set("engine", "threads"));
    doc.resolve_yaml(test_support::example_schema(), true);
    EXPECT_TRUE(doc.is_set("engine", "threads"));
}

TEST(YamlConfig, SetAndFlagsBeatTheFile) {
    const schema s = test_support::example_schema();
    document doc = document::from_yaml_string("temperature: 0.1\ntop_k: 5\nthreads: 2\n", "x.yaml");
    doc.resolve_yaml(s, true);
    const char *argv[] = {"runtime", "--set", "sampling.top_k=6", "--threads", "3"};
    apply_command_line(doc, parse_command_line(5, argv), s);
    // The file's entries rank below overrides given later, whatever order they were resolved in.
    doc.resolve_yaml(s, true);
    doc.validate(s);
    EXPECT_DOUBLE_EQ(*doc.get_float("sampling", "temperature", s), 0.1);
    EXPECT_EQ(doc.get_int("sampling", "top_k", s), 6);
    EXPECT_EQ(doc.get_int("engine", "threads", s), 3);
}

TEST(YamlConfig, ForeignKeysWithoutMeaningSayWhy) {
    EXPECT_EQ(error_of([] { resolved("download_dir: /tmp/hf\n"); }),
              "serve.yaml:1: 'download_dir' has no meaning here: models are read from local files only (no model hub); "
              "pass the path");
}
