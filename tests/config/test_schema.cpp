#include "common/error.hpp"
#include "config/schema.hpp"
#include "example_schema.hpp"

#include <gtest/gtest.h>

using namespace strata::config;

TEST(Schema, FindsTablesKeysAndFlags) {
    const schema s = test_support::example_schema();
    ASSERT_NE(s.find_table("sampling"), nullptr);
    EXPECT_EQ(s.find_table("nope"), nullptr);
    ASSERT_NE(s.find_key("sampling", "top_p"), nullptr);
    EXPECT_EQ(s.find_key("sampling", "top_q"), nullptr);
    std::string table;
    const key_spec *k = s.find_flag("--threads", &table);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->name, "threads");
    EXPECT_EQ(table, "engine");
    EXPECT_NE(s.find_flag("top-k", nullptr), nullptr);
}

TEST(Schema, RejectsDuplicatesAndBadDefaults) {
    schema s = test_support::example_schema();
    EXPECT_THROW(s.add_table({"sampling", "again", {}}), strata::error);
    EXPECT_THROW(s.add_table({"x", "", {{"a", STRATA_CONFIG_INT}, {"a", STRATA_CONFIG_INT}}}), strata::error);
    EXPECT_THROW(s.add_table({"y", "", {{"a", STRATA_CONFIG_INT, "\"text\""}}}), strata::error);
    EXPECT_THROW(s.add_table({"z", "", {{"a", STRATA_CONFIG_FLOAT, "5", 0, 1}}}), strata::error);
    EXPECT_THROW(s.add_table({"w", "", {{"a", STRATA_CONFIG_INT, std::nullopt, 0, 0, "", "--threads"}}}), strata::error);
    EXPECT_THROW(s.add_table({"v", "", {{"a", STRATA_CONFIG_BOOL, std::nullopt, 0, 0, "", "--help"}}}), strata::error);
    EXPECT_EQ(s.find_table("x"), nullptr); // a rejected table leaves nothing behind
}

TEST(Schema, AddsPluginTablesFromTheCAbi) {
    schema s = test_support::example_schema();
    const strata_config_key keys[] = {
        {"threads_per_core", STRATA_CONFIG_INT, "1", 1, 2, "SMT use", "cpu-smt", nullptr},
        {"kernel", STRATA_CONFIG_STRING, "\"auto\"", 0, 0, "kernel choice", nullptr, "auto|avx2|scalar"},
    };
    s.add_plugin_table("cpu", keys, 2);
    const table_spec *t = s.find_table("cpu");
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->is_plugin);
    ASSERT_EQ(t->keys.size(), 2U);
    EXPECT_EQ(t->keys[0].flag, "--cpu-smt"); // dashes added so every flag is spelled one way
    EXPECT_EQ(t->keys[1].choices, "auto|avx2|scalar");

    const strata_config_key bad[] = {{"k", 99, nullptr, 0, 0, nullptr, nullptr, nullptr}};
    try {
        s.add_plugin_table("broken", bad, 1);
        FAIL() << "accepted a key of unknown type";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("plugin 'broken'"), std::string::npos) << e.what();
    }
}

TEST(Schema, HelpTextListsFlagsDefaultsAndTables) {
    const std::string help = test_support::example_schema().help_text();
    EXPECT_NE(help.find("[sampling]"), std::string::npos);
    EXPECT_NE(help.find("--temperature VALUE"), std::string::npos);
    EXPECT_NE(help.find("default 0.8"), std::string::npos);
    EXPECT_NE(help.find("--stream, --no-stream"), std::string::npos);
    EXPECT_NE(help.find("--set sampling.top_p=VALUE"), std::string::npos);
    EXPECT_NE(help.find("text|json"), std::string::npos);
    EXPECT_NE(help.find("not supported yet"), std::string::npos);
}

TEST(Schema, AliasesAreDeclaredAfterTheFlagAndListedInHelp) {
    const schema s = test_support::example_schema();
    const key_spec *threads = s.find_key("engine", "threads");
    ASSERT_NE(threads, nullptr);
    EXPECT_EQ(threads->flag, "--threads");
    EXPECT_EQ(threads->aliases, (std::vector<std::string>{"-t", "--cpu-parallelism"}));
    EXPECT_EQ(s.find_flag("-t", nullptr), threads);
    EXPECT_EQ(s.find_flag("-ngl", nullptr), s.find_key("engine", "n_gpu_layers"));
    const flag_match off = s.match_flag("--disable-log-requests");
    EXPECT_EQ(off.key, s.find_key("engine", "log_requests"));
    EXPECT_TRUE(off.inverted);
    EXPECT_FALSE(s.match_flag("--enable-log-requests").inverted);

    const std::string help = s.help_text();
    EXPECT_NE(help.find("also: -t, --cpu-parallelism"), std::string::npos) << help;
    EXPECT_NE(help.find("--disable-log-requests (= --enable-log-requests=false)"), std::string::npos) << help;
}

TEST(Schema, RejectsAliasesThatClashOrCannotMeanAnything) {
    schema s = test_support::example_schema();
    // -t is [engine] threads already; an alias must start with '-'; only a switch can be inverted.
    EXPECT_THROW(s.add_table({"a", "", {{"x", STRATA_CONFIG_INT, std::nullopt, 0, 0, "", "--x|-t"}}}), strata::error);
    EXPECT_THROW(s.add_table({"b", "", {{"x", STRATA_CONFIG_INT, std::nullopt, 0, 0, "", "--x|x"}}}), strata::error);
    EXPECT_THROW(s.add_table({"c", "", {{"x", STRATA_CONFIG_INT, std::nullopt, 0, 0, "", "--x|!--no-x"}}}),
                 strata::error);
    EXPECT_THROW(s.add_table({"d", "", {{"x", STRATA_CONFIG_BOOL, std::nullopt, 0, 0, "", "--x|-h"}}}), strata::error);
    EXPECT_NO_THROW(s.add_table({"e", "", {{"x", STRATA_CONFIG_BOOL, std::nullopt, 0, 0, "", "--x|!--no-more-x"}}}));
}
