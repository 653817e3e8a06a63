#include "common/error.hpp"
#include "config/command_line.hpp"
#include "example_schema.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

using namespace strata::config;

namespace {

command_line parse(std::initializer_list<const char *> args) {
    std::vector<const char *> argv{"runtime"};
    argv.insert(argv.end(), args.begin(), args.end());
    return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

std::vector<std::string> resolve(std::initializer_list<const char *> args) {
    return resolve_flags(parse(args), test_support::example_schema());
}

std::string resolve_error(std::initializer_list<const char *> args) {
    try {
        resolve(args);
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(CommandLine, BuiltInOptionsAndSubcommand) {
    const command_line cl = parse({"plan", "--config", "a.toml", "--set", "sampling.top_k=3", "--set=engine.seed=1",
                                   "--json", "-h", "--version"});
    EXPECT_EQ(cl.subcommand, "plan");
    EXPECT_EQ(cl.config_path, "a.toml");
    EXPECT_EQ(cl.set_assignments, (std::vector<std::string>{"sampling.top_k=3", "engine.seed=1"}));
    EXPECT_TRUE(cl.json);
    EXPECT_TRUE(cl.help);
    EXPECT_TRUE(cl.version);
    EXPECT_TRUE(cl.flags.empty());

    // -c is llama.cpp's --ctx-size now, a flag like any other (the config file is --config only).
    EXPECT_FALSE(parse({"-c", "4096"}).config_path.has_value());
    EXPECT_EQ(parse({"-c", "4096"}).flags.at(0), (std::pair<std::string, std::string>{"-c", "4096"}));
    EXPECT_EQ(parse({"--config=c.toml"}).config_path, "c.toml");
    EXPECT_EQ(parse({}).subcommand, "");
    EXPECT_TRUE(parse({"help"}).help);
}

TEST(CommandLine, RejectsStrayWordsAndMissingValues) {
    EXPECT_THROW(parse({"serve", "a.gguf", "b.gguf"}), strata::error);
    EXPECT_THROW(parse({"plan", "a.gguf"}), strata::error); // only serve takes a model word
    EXPECT_THROW(parse({"--config"}), strata::error);
    EXPECT_THROW(parse({"--set"}), strata::error);
    EXPECT_EQ(resolve_error({"-xyzzy"}), "unknown option -xyzzy; run with --help to list the options");
    try {
        parse({"topolgy"});
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("did you mean the subcommand 'topology'?"), std::string::npos) << e.what();
    }
}

TEST(CommandLine, RecordsFlagsProvisionallyInOrder) {
    const command_line cl = parse({"--threads", "4", "--stream", "--no-stream", "--output=json", "plan"});
    ASSERT_EQ(cl.flags.size(), 4U);
    EXPECT_EQ(cl.flags[0], (std::pair<std::string, std::string>{"--threads", "4"}));
    EXPECT_EQ(cl.flags[1], (std::pair<std::string, std::string>{"--stream", "true"}));
    EXPECT_EQ(cl.flags[2], (std::pair<std::string, std::string>{"--no-stream", "false"}));
    EXPECT_EQ(cl.flags[3], (std::pair<std::string, std::string>{"--output", "json"}));
    EXPECT_EQ(cl.subcommand, "plan"); // a subcommand word is never taken as a flag's value
}

TEST(CommandLine, ResolvesValueFlags) {
    EXPECT_EQ(resolve({"--threads", "4", "--temperature=0.2", "--model", "m.gguf"}),
              (std::vector<std::string>{"engine.threads=4", "sampling.temperature=0.2", "model.path=m.gguf"}));
    // The next element is the value even when it starts with '-' (validation then rejects it).
    EXPECT_EQ(resolve({"--temperature", "-1"}), (std::vector<std::string>{"sampling.temperature=-1"}));
    EXPECT_NE(resolve_error({"--threads"}).find("--threads needs a value"), std::string::npos);
}

TEST(CommandLine, ResolvesBoolFlags) {
    EXPECT_EQ(resolve({"--stream"}), (std::vector<std::string>{"cli.stream=true"}));
    EXPECT_EQ(resolve({"--no-stream"}), (std::vector<std::string>{"cli.stream=false"}));
    EXPECT_EQ(resolve({"--stream=false"}), (std::vector<std::string>{"cli.stream=false"}));
    EXPECT_EQ(resolve({"--stream", "false"}), (std::vector<std::string>{"cli.stream=false"}));
    EXPECT_EQ(resolve({"--stream", "--threads", "2"}), (std::vector<std::string>{"cli.stream=true", "engine.threads=2"}));
    EXPECT_EQ(resolve({"--stream", "--config", "x.toml"}), (std::vector<std::string>{"cli.stream=true"}));
    // A switch does not swallow the word after it.
    EXPECT_NE(resolve_error({"--stream", "hello"}).find("unexpected argument 'hello'"), std::string::npos);
    EXPECT_NE(resolve_error({"--no-threads"}).find("is not a switch"), std::string::npos);
}

TEST(CommandLine, UnknownFlagsGetSuggestions) {
    EXPECT_EQ(resolve_error({"--temprature", "0.5"}), "unknown option --temprature; did you mean --temperature?");
    EXPECT_EQ(resolve_error({"--no-streem"}), "unknown option --no-streem; did you mean --no-stream?");
    EXPECT_NE(resolve_error({"--frobnicate"}).find("run with --help"), std::string::npos);
}

TEST(CommandLine, AppliedFlagsBeatSetAndAreValidated) {
    const schema s = test_support::example_schema();
    document doc = document::from_string("[sampling]\ntemperature = 0.1\n", "x.toml");
    apply_command_line(doc, parse({"--set", "sampling.temperature=0.3", "--temperature", "0.4"}), s);
    doc.validate(s);
    EXPECT_DOUBLE_EQ(*doc.get_float("sampling", "temperature", s), 0.4);

    document bad = document::empty();
    apply_command_line(bad, parse({"--temperature", "-1"}), s);
    try {
        bad.validate(s);
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_EQ(std::string(e.what()), "--temperature: [sampling] temperature = -1 is out of range [0, 2]");
    }
}

// --- the spellings vLLM and llama.cpp users type -------------------------------------------------------------------

TEST(CommandLine, ServeTakesTheModelAsItsFirstWord) {
    const command_line cl = parse({"serve", "models/m.gguf", "--threads", "2", "--stream"});
    EXPECT_EQ(cl.subcommand, "serve");
    EXPECT_EQ(cl.model_argument, "models/m.gguf");
    EXPECT_EQ(resolve_flags(cl, test_support::example_schema()),
              (std::vector<std::string>{"engine.threads=2", "cli.stream=true"}));
    EXPECT_FALSE(parse({"serve"}).model_argument.has_value()); // the runtime says "runtime serve needs the model"
    // Flags before serve do not move its model word.
    EXPECT_EQ(parse({"--threads", "2", "serve", "m.gguf", "--stream"}).model_argument, "m.gguf");
    // A model word after the options is not taken for a switch's value: the message says where it goes.
    const command_line late = parse({"serve", "--stream", "m.gguf"});
    EXPECT_FALSE(late.model_argument.has_value());
    try {
        resolve_flags(late, test_support::example_schema());
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("the model comes right after serve"), std::string::npos) << e.what();
    }
}

TEST(CommandLine, ShortAndForeignSpellingsResolveToTheirKeys) {
    EXPECT_EQ(resolve({"-m", "m.gguf", "-t", "4", "-ngl", "20", "--cpu-parallelism", "3"}),
              (std::vector<std::string>{"model.path=m.gguf", "engine.threads=4", "engine.n_gpu_layers=20",
                                        "engine.threads=3"}));
    // A negative number is a value, not a flag: llama.cpp's -ngl -1 (all layers).
    EXPECT_EQ(resolve({"-ngl", "-1"}), (std::vector<std::string>{"engine.n_gpu_layers=-1"}));
    // vLLM's -O3 is -O 3.
    EXPECT_EQ(resolve({"-O3"}), (std::vector<std::string>{"engine.level=3"}));
    EXPECT_EQ(resolve({"-O", "1"}), (std::vector<std::string>{"engine.level=1"}));
    // An inverted alias flips a switch: --disable-log-requests sets log_requests = false.
    EXPECT_EQ(resolve({"--enable-log-requests"}), (std::vector<std::string>{"engine.log_requests=true"}));
    EXPECT_EQ(resolve({"--disable-log-requests"}), (std::vector<std::string>{"engine.log_requests=false"}));
    EXPECT_EQ(resolve({"--disable-log-requests=false"}), (std::vector<std::string>{"engine.log_requests=true"}));
    // Typos of a short spelling get the nearest spelling.
    EXPECT_EQ(resolve_error({"-ngll", "3"}), "unknown option -ngll; did you mean -ngl?");
}

TEST(CommandLine, MessagesNameTheSpellingTheUserTyped) {
    const schema s = test_support::example_schema();
    document doc = document::empty();
    apply_command_line(doc, parse({"-t", "0"}), s);
    try {
        doc.validate(s);
        FAIL();
    } catch (const strata::error &e) {
        EXPECT_EQ(std::string(e.what()), "-t: [engine] threads = 0 is out of range [1, 1024]");
    }
}

TEST(CommandLine, ListFlagsTakeSeveralWordsAsVllmDoes) {
    EXPECT_EQ(resolve({"--stop", "a", "b", "c", "--threads", "2"}),
              (std::vector<std::string>{"cli.stop=a,b,c", "engine.threads=2"}));
    EXPECT_EQ(resolve({"--stop", "a,b"}), (std::vector<std::string>{"cli.stop=a,b"}));
    // Other flags still take one word: the next is a stray argument.
    EXPECT_NE(resolve_error({"--threads", "2", "3"}).find("unexpected argument '3'"), std::string::npos);
    EXPECT_NE(resolve_error({"--stream", "true", "x"}).find("unexpected argument 'x'"), std::string::npos);
    EXPECT_EQ(parse({"--stop", "a", "plan"}).subcommand, "plan"); // a subcommand word is never a list item
}

TEST(CommandLine, ForeignOptionsWithoutMeaningSayWhy) {
    EXPECT_EQ(resolve_error({"--trust-remote-code"}),
              "--trust-remote-code has no meaning here: no Python code runs here: the architecture is the plugin "
              "named by general.architecture");
    EXPECT_NE(resolve_error({"-sm", "row"}).find("-sm has no meaning here: one device computes the model"),
              std::string::npos);
}

TEST(CommandLine, ARepeatedListFlagAddsItsItems) {
    // llama.cpp's -ot a=X -ot b=Y (and --stop s1 --stop s2): every occurrence counts, in order.
    EXPECT_EQ(resolve({"--stop", "a", "--threads", "2", "--stop", "b,c"}),
              (std::vector<std::string>{"cli.stop=a,b,c", "engine.threads=2"}));
    // Other flags: the last one wins when applied.
    EXPECT_EQ(resolve({"--threads", "2", "--threads", "3"}), (std::vector<std::string>{"engine.threads=2", "engine.threads=3"}));
}
