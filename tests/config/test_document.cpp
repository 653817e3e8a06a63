#include "common/error.hpp"
#include "config/document.hpp"
#include "example_schema.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace strata::config;

namespace {

// The validation message for `toml`, or "" when it validates.
std::string problems(std::string_view toml, const std::vector<std::string> &overrides = {}) {
    document doc = document::from_string(toml, "configs/x.toml");
    for (const std::string &o : overrides) doc.set_override(o, "--set");
    try {
        doc.validate(test_support::example_schema());
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string &text, std::string_view part) { return text.find(part) != std::string::npos; }

} // namespace

TEST(Document, AcceptsAValidFile) {
    EXPECT_EQ(problems("[sampling]\ntemperature = 0\ntop_k = 5\n[memory]\nkv_cache = \"2GiB\"\n[cli]\nstop = [\"a\"]\n"), "");
    EXPECT_EQ(problems(""), "");
}

TEST(Document, UnknownKeyAndTableCarryLineAndSuggestion) {
    const std::string p = problems("[sampling]\ntop_p = 0.9\ntemprature = 0.5\n[modle]\npath = \"m.gguf\"\n");
    EXPECT_TRUE(contains(p, "configs/x.toml:3: unknown key 'temprature' in [sampling]; did you mean 'temperature'?")) << p;
    EXPECT_TRUE(contains(p, "configs/x.toml:4: unknown table [modle]; did you mean [model]?")) << p;
    const std::string q = problems("[sampling]\nbanana = 1\n");
    EXPECT_TRUE(contains(q, "known keys: temperature, top_p, top_k")) << q;
}

TEST(Document, WrongTypesAreNamed) {
    EXPECT_TRUE(contains(problems("[engine]\n\nseed = \"abc\"\n"),
                         "configs/x.toml:3: [engine] seed must be an integer, got string \"abc\""));
    EXPECT_TRUE(contains(problems("[cli]\nstream = 1\n"), "[cli] stream must be true or false, got integer 1"));
    EXPECT_TRUE(contains(problems("[cli]\nstop = [\"a\", 2]\n"), "must be an array of strings, but holds integer 2"));
    EXPECT_TRUE(contains(problems("[memory]\nkv_cache = 1.5\n"), "[memory] kv_cache must be a byte count"));
    EXPECT_TRUE(contains(problems("[memory]\nkv_cache = \"lots\"\n"), "[memory] kv_cache = \"lots\" is not a byte size"));
    EXPECT_TRUE(contains(problems("sampling = 3\n"), "[sampling] must be a table, got integer 3"));
    EXPECT_TRUE(contains(problems("temperature = 0.5\n"), "did you mean to put it under [sampling]?"));
    // FLOAT accepts integers, BYTES accepts integers.
    EXPECT_EQ(problems("[sampling]\ntemperature = 1\n[memory]\nkv_cache = 4096\n"), "");
}

TEST(Document, RangesAndChoices) {
    EXPECT_TRUE(contains(problems("[sampling]\n\n\n\n\n\n\n\ntop_p = 1.5\n"),
                         "configs/x.toml:9: [sampling] top_p = 1.5 is out of range [0, 1]"));
    EXPECT_TRUE(contains(problems("[engine]\nthreads = 0\n"), "[engine] threads = 0 is out of range [1, 1024]"));
    EXPECT_TRUE(contains(problems("[cli]\noutput = \"xml\"\n"), "[cli] output = \"xml\" must be one of text|json"));
    EXPECT_EQ(problems("[cli]\noutput = \"json\"\n[sampling]\ntop_p = 1\n"), "");
}

TEST(Document, NotSupportedKeysAreErrorsOnlyWhenSet) {
    EXPECT_TRUE(contains(problems("[memory]\ncpu_offload_gb = 4\n"),
                         "configs/x.toml:2: [memory] cpu_offload_gb is not supported yet: CPU offload arrives with the "
                         "tier manager"));
    EXPECT_EQ(problems("[memory]\n"), "");
}

TEST(Document, ReportsEveryProblemInLineOrderThenOverrides) {
    const std::string p = problems("[sampling]\ntop_p = 2\n[engine]\nseed = \"x\"\n[cli]\noutput = \"xml\"\n",
                                   {"sampling.top_k=abc"});
    const size_t a = p.find(":2: [sampling] top_p"), b = p.find(":4: [engine] seed"), c = p.find(":6: [cli] output"),
                 d = p.find("--set sampling.top_k: [sampling] top_k must be an integer, got string \"abc\"");
    ASSERT_NE(a, std::string::npos) << p;
    ASSERT_NE(b, std::string::npos) << p;
    ASSERT_NE(c, std::string::npos) << p;
    ASSERT_NE(d, std::string::npos) << p;
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
    EXPECT_LT(c, d);
    EXPECT_EQ(std::count(p.begin(), p.end(), '\n'), 3);
}

TEST(Document, OverrideProblemsNameTheirOrigin) {
    EXPECT_TRUE(contains(problems("", {"sampling.temprature=1"}),
                         "--set sampling.temprature: unknown key 'temprature' in [sampling]; did you mean 'temperature'?"));
    EXPECT_TRUE(contains(problems("", {"modle.path=x"}), "--set modle.path: unknown table [modle]; did you mean [model]?"));
    document doc = document::empty();
    doc.set_override("engine.threads=many", "--threads");
    try {
        doc.validate(test_support::example_schema());
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_EQ(std::string(e.what()), "--threads: [engine] threads must be an integer, got string \"many\"");
    }
}

TEST(Document, MalformedOverridesThrowAtOnce) {
    document doc = document::empty();
    EXPECT_THROW(doc.set_override("temperature=1", "--set"), strata::error);
    EXPECT_THROW(doc.set_override("sampling.temperature", "--set"), strata::error);
    EXPECT_THROW(doc.set_override(".x=1", "--set"), strata::error);
}

TEST(Document, OverridesBeatTheFileWhichBeatsDefaults) {
    const schema s = test_support::example_schema();
    document doc = document::from_string("[sampling]\ntemperature = 0.3\ntop_k = 7\n", "x.toml");
    doc.set_override("sampling.temperature=0.5", "--set");
    doc.set_override("sampling.temperature=0.6", "--temperature"); // the last override wins
    doc.validate(s);
    EXPECT_DOUBLE_EQ(*doc.get_float("sampling", "temperature", s), 0.6);
    EXPECT_EQ(*doc.get_int("sampling", "top_k", s), 7);
    EXPECT_DOUBLE_EQ(*doc.get_float("sampling", "top_p", s), 1.0); // default
    EXPECT_TRUE(doc.is_set("sampling", "temperature"));
    EXPECT_TRUE(doc.is_set("sampling", "top_k"));
    EXPECT_FALSE(doc.is_set("sampling", "top_p"));
}

TEST(Document, DefaultsAndTypedGetters) {
    const schema s = test_support::example_schema();
    const document doc = document::empty();
    doc.validate(s);
    EXPECT_DOUBLE_EQ(*doc.get_float("sampling", "temperature", s), 0.8);
    EXPECT_EQ(*doc.get_int("sampling", "top_k", s), 40);
    EXPECT_EQ(*doc.get_bytes("memory", "kv_cache", s), 1ULL << 30);
    EXPECT_EQ(*doc.get_string("cli", "output", s), "text");
    EXPECT_EQ(*doc.get_bool("cli", "stream", s), true);
    EXPECT_TRUE(doc.get_string_list("cli", "stop", s).empty());
    EXPECT_FALSE(doc.get_int("engine", "seed", s).has_value()); // no value, no default
    EXPECT_FALSE(doc.get_string("model", "path", s).has_value());
    EXPECT_THROW(doc.get_int("engine", "nope", s), strata::error);          // undeclared key
    EXPECT_THROW(doc.get_int("sampling", "temperature", s), strata::error); // getter of the wrong type
}

TEST(Document, OverrideValuesAreTomlOrPlainText) {
    const schema s = test_support::example_schema();
    document doc = document::empty();
    doc.set_override("model.path=/models/a b.gguf", "--set");
    doc.set_override("cli.stop=[\"x\", \"y\"]", "--set");
    doc.set_override("memory.kv_cache=512MiB", "--set");
    doc.set_override("cli.stream=false", "--set");
    doc.set_override("engine.seed=42", "--set");
    doc.validate(s);
    EXPECT_EQ(*doc.get_string("model", "path", s), "/models/a b.gguf");
    EXPECT_EQ(doc.get_string_list("cli", "stop", s), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(*doc.get_bytes("memory", "kv_cache", s), 512ULL << 20);
    EXPECT_EQ(*doc.get_bool("cli", "stream", s), false);
    EXPECT_EQ(*doc.get_int("engine", "seed", s), 42);

    // A string key keeps the raw text of a value that happens to parse as something else; a list takes commas.
    doc.set_override("model.path=2024", "--set");
    doc.set_override("cli.stop=END, STOP", "--set");
    doc.validate(s);
    EXPECT_EQ(*doc.get_string("model", "path", s), "2024");
    EXPECT_EQ(doc.get_string_list("cli", "stop", s), (std::vector<std::string>{"END", "STOP"}));
}

TEST(Document, GettersRefuseValuesThatWouldFailValidation) {
    const schema s = test_support::example_schema();
    const document doc = document::from_string("[engine]\nseed = \"abc\"\n", "x.toml");
    try {
        (void)doc.get_int("engine", "seed", s);
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_TRUE(contains(e.what(), "x.toml:2")) << e.what();
    }
}

TEST(Document, SyntaxErrorsCarryLineAndColumn) {
    try {
        (void)document::from_string("[sampling]\ntemperature = = 1\n", "configs/bad.toml");
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("configs/bad.toml:2:", 0), 0U) << e.what();
        EXPECT_GT(std::string(e.what()).size(), std::string("configs/bad.toml:2:1: ").size());
    }
}

TEST(Document, FromFileResolvesBaseDirAndReportsMissingFiles) {
    const auto dir = std::filesystem::temp_directory_path() / ("strata_cfg_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = dir / "run.toml";
    std::ofstream(path) << "[model]\npath = \"m.gguf\"\n";
    const schema s = test_support::example_schema();
    const document doc = document::from_file(path.string());
    doc.validate(s);
    EXPECT_EQ(doc.source_name(), path.string());
    EXPECT_EQ(doc.base_dir(), dir);
    EXPECT_EQ(*doc.get_string("model", "path", s), "m.gguf");
    std::filesystem::remove_all(dir);

    try {
        (void)document::from_file((dir / "missing.toml").string());
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_TRUE(contains(e.what(), "missing.toml")) << e.what();
        EXPECT_TRUE(contains(e.what(), "--config")) << e.what();
    }
}
