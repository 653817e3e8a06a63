// `runtime perplexity` end to end on stories260K: a finite perplexity on a generated story text, KL divergence of a
// model against itself (0, every top token the same) and of Q8_0 against F32 (small and positive), llama-perplexity's
// base file written, read back and refused when damaged, and every bad flag or input a clear error with a nonzero exit.
// (The numbers against llama-perplexity itself are tools/peer/perplexity_vs_llama_cpp.sh's, in docs/ACCURACY.md.)
#include "eval/kl_base_file.hpp"
#include "made_model.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct run_result {
    int exit_code;
    std::string out;
    std::string err;
};

std::string read_file(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// One folder per test (CTest runs tests as parallel processes), reused by the next run.
fs::path work_dir() {
    const fs::path d = fs::path(STRATA_BINARY_DIR) / "test-perplexity" /
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(d);
    return d;
}

// `runtime perplexity ARGS`, stdout captured, stderr in a file; the bandwidth cache stays in the build tree.
run_result run(const std::string &args) {
    const fs::path err = work_dir() / "stderr.txt";
    const std::string cmd = "cd " STRATA_SOURCE_DIR " && XDG_CACHE_HOME=" STRATA_BINARY_DIR
                            "/test-xdg-default " STRATA_BINARY_DIR "/bin/runtime perplexity " +
                            args + " </dev/null 2>" + err.string();
    run_result r{};
    FILE *p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return {-1, "", "popen failed"};
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = read_file(err);
    return r;
}

const std::string k_models = std::string(STRATA_SHARED_DIR) + "/models/";
const std::string k_f32 = k_models + "stories260K-f32.gguf";
const std::string k_q8 = k_models + "stories260K-q8_0.gguf";
// A small KV cache: these runs need one chunk of 128 tokens, not the CPU default of 1 GiB.
const std::string k_engine = " --kv-cache-memory 16MiB";

// Simple English sentences in the TinyStories style, chosen by a fixed LCG: the same text on every run.
std::string story_text(int sentences) {
    const std::array<const char *, 6> names{"Lily", "Tom", "Ben", "Sue", "Max", "Anna"};
    const std::array<const char *, 5> animals{"dog", "cat", "bird", "bunny", "frog"};
    const std::array<const char *, 5> places{"park", "garden", "forest", "house", "school"};
    const std::array<const char *, 5> things{"ball", "toy", "box", "kite", "cake"};
    const std::array<const char *, 5> feelings{"happy", "sad", "excited", "scared", "tired"};
    uint32_t s = 1;
    auto pick = [&s](size_t n) {
        s = s * 1103515245u + 12345u;
        return ((s & 0x7fffffffu) >> 16) % n;
    };
    std::string out;
    for (int i = 0; i < sentences; ++i) {
        const std::string n = names[pick(6)], a = animals[pick(5)], p = places[pick(5)], t = things[pick(5)],
                          f = feelings[pick(5)];
        switch (pick(5)) {
        case 0: out += "Once upon a time, there was a little girl named " + n + ". She loved to play in the " + p;
            break;
        case 1: out += "One day, " + n + " saw a big " + a + " in the " + p + ". The " + a + " was very " + f; break;
        case 2: out += n + " wanted to play with the " + t + ". " + n + " said, \"Can I have the " + t + ", please?";
            break;
        case 3: out += "The " + a + " found a " + t + " and gave it to " + n + ". They were very " + f; break;
        default: out += "At the end of the day, " + n + " went home and told mom about the " + a; break;
        }
        out += out.back() == '?' ? "\" " : ". ";
    }
    return out + "\n";
}

std::string story_file() {
    const fs::path p = work_dir() / "story.txt";
    if (!fs::exists(p)) std::ofstream(p, std::ios::binary) << story_text(160);
    return p.string();
}

// The number after `label` in `text`, or NaN.
double number_after(const std::string &text, const std::string &label) {
    const size_t at = text.find(label);
    if (at == std::string::npos) return std::nan("");
    return std::strtod(text.c_str() + at + label.size(), nullptr);
}

double final_ppl(const std::string &out) { return number_after(out, "Final estimate: PPL = "); }

} // namespace

TEST(RuntimePerplexity, HelpListsTheOptions) {
    const run_result r = run("--help");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const char *o : {"--ctx", "--chunks", "--kl-divergence-model", "--kl-divergence-base", "--save-kl-base"})
        EXPECT_NE(r.out.find(o), std::string::npos) << o;
}

TEST(RuntimePerplexity, PrintsTheRunningValueAfterEachChunkAndAFiniteFinalEstimate) {
    const run_result r = run("-m " + k_f32 + " -f " + story_file() + " --ctx 128" + k_engine);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // [1]4.6394,[2]4.3254,...,[N]x, then the final estimate with its error.
    const std::regex running(R"(^\[1\][0-9]+\.[0-9]{4},\[2\][0-9]+\.[0-9]{4},)");
    EXPECT_TRUE(std::regex_search(r.out, running)) << r.out;
    const std::regex final_line(R"(Final estimate: PPL = ([0-9]+\.[0-9]{4}) \+/- ([0-9]+\.[0-9]{5}))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, final_line)) << r.out;
    const double ppl = std::stod(m[1]), err = std::stod(m[2]);
    EXPECT_TRUE(std::isfinite(ppl));
    EXPECT_GT(ppl, 1.0);
    EXPECT_LT(ppl, 20.0) << "a TinyStories model on TinyStories-like text"; // 512 tokens would be uniform
    EXPECT_GT(err, 0.0);
    EXPECT_LT(err, ppl / 5);
    // The last running value is the final estimate.
    const size_t last = r.out.rfind("]", r.out.find("Final estimate"));
    EXPECT_EQ(r.out.substr(last + 1, m[1].length()), m[1].str()) << r.out;
    // Chunk count: the text's tokens / 128, each the second half scored; progress on stderr.
    EXPECT_NE(r.err.find("chunks of 128 tokens, the last 63 positions of each scored"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("seconds per chunk - ETA"), std::string::npos) << r.err;

    // --chunks limits the run; the first value is the same.
    const run_result two = run("-m " + k_f32 + " -f " + story_file() + " --ctx 128 --chunks 2" + k_engine);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out.substr(0, 20), r.out.substr(0, 20));
    EXPECT_EQ(two.out.find("[3]"), std::string::npos) << two.out;
}

TEST(RuntimePerplexity, KlDivergenceOfAModelAgainstItselfIsZeroWithEveryTopTokenTheSame) {
    const run_result r = run("-m " + k_f32 + " -f " + story_file() + " --ctx 128 --chunks 8 --kl-divergence-model " +
                             k_f32 + k_engine);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double kld = number_after(r.out, "Mean    KLD:");
    ASSERT_TRUE(std::isfinite(kld)) << r.out;
    EXPECT_LT(std::fabs(kld), 1e-6) << r.out;
    EXPECT_NEAR(number_after(r.out, "Maximum KLD:"), 0.0, 1e-6) << r.out;
    EXPECT_EQ(number_after(r.out, "Same top p:"), 100.0) << r.out;
    EXPECT_EQ(number_after(r.out, "Mean PPL(Q)                   :"),
              number_after(r.out, "Mean PPL(base)                :"))
        << r.out;
    EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
}

// Tensor parallel (#16 item 3): two ranks score the text as one process does; their logits differ by the partial
// sums' order only (a few ulps on float weights), so the perplexity agrees to 1e-5.
TEST(RuntimePerplexity, TwoTensorParallelRanksGiveOneProcesssPerplexityAlsoInsidePipelineStages) {
    const run_result one = run("-m " + k_f32 + " -f " + story_file() + " --ctx 128 --chunks 4" + k_engine);
    const run_result two = run("-m " + k_f32 + " -f " + story_file() + " --ctx 128 --chunks 4 -tp 2 -t 2" + k_engine);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(two.exit_code, 0) << two.err;
    const double a = final_ppl(one.out), b = final_ppl(two.out);
    ASSERT_TRUE(std::isfinite(a) && a > 1.0) << one.out;
    EXPECT_NEAR(b, a, 1e-5 * a) << two.out;
    // The same two ranks inside two pipeline stages: -tp 2's logits bit for bit, so its perplexity as printed.
    const run_result grid = run("-m " + k_f32 + " -f " + story_file() + " --ctx 128 --chunks 4 -tp 2 -pp 2 -t 2" + k_engine);
    ASSERT_EQ(grid.exit_code, 0) << grid.err;
    EXPECT_EQ(final_ppl(grid.out), b) << grid.out;
}

TEST(RuntimePerplexity, Q8_0AgainstF32HasASmallPositiveKlAndReportsBothPerplexities) {
    const std::string common = " -f " + story_file() + " --ctx 128 --chunks 12" + k_engine;
    const run_result r = run("-m " + k_q8 + common + " --kl-divergence-model " + k_f32);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("ln(PPL(Q)/PPL(base))"), std::string::npos) << r.out; // the per-chunk table
    const double kld = number_after(r.out, "Mean    KLD:");
    EXPECT_GT(kld, 1e-5) << r.out;
    EXPECT_LT(kld, 0.01) << r.out;
    const double top = number_after(r.out, "Same top p:");
    EXPECT_GT(top, 90.0) << r.out;
    EXPECT_LT(top, 100.0) << r.out;
    // PPL(base) is the F32 model's perplexity alone, PPL(Q) the Q8_0 model's (4 decimals as both print).
    const run_result f32 = run("-m " + k_f32 + common), q8 = run("-m " + k_q8 + common);
    ASSERT_EQ(f32.exit_code, 0) << f32.err;
    ASSERT_EQ(q8.exit_code, 0) << q8.err;
    EXPECT_NEAR(number_after(r.out, "Mean PPL(base)                :"), final_ppl(f32.out), 1e-4) << r.out << f32.out;
    EXPECT_NEAR(number_after(r.out, "Mean PPL(Q)                   :"), final_ppl(q8.out), 1e-4) << r.out << q8.out;
    EXPECT_NE(final_ppl(f32.out), final_ppl(q8.out));
}

TEST(RuntimePerplexity, BaseFileIsWrittenWhenAbsentReadWhenPresentAndRefusedWhenDamaged) {
    const fs::path base = work_dir() / "f32.logits";
    fs::remove(base);
    const std::string common = " -f " + story_file() + " --ctx 128 --chunks 6" + k_engine;
    const run_result w = run("-m " + k_f32 + common + " --kl-divergence-base " + base.string());
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_TRUE(std::isfinite(final_ppl(w.out))) << w.out;
    ASSERT_TRUE(fs::exists(base)) << w.err;
    EXPECT_EQ(read_file(base).substr(0, 8), "_logits_");
    // 6 chunks of 128 tokens, 63 rows each of (512 + 4) uint16.
    EXPECT_EQ(fs::file_size(base), 20u + 6 * 128 * 4 + 6 * 63 * (512 + 4) * 2);

    // Present: read, the text optional (the file holds the tokens); the KL equals the model-against-model one
    // within the file's 16-bit steps.
    const run_result rd = run("-m " + k_q8 + " --ctx 128" + k_engine + " --kl-divergence-base " + base.string());
    ASSERT_EQ(rd.exit_code, 0) << rd.err;
    const run_result direct = run("-m " + k_q8 + common + " --kl-divergence-model " + k_f32);
    ASSERT_EQ(direct.exit_code, 0) << direct.err;
    const double kld_file = number_after(rd.out, "Mean    KLD:"), kld_direct = number_after(direct.out, "Mean    KLD:");
    EXPECT_GT(kld_file, 0.0) << rd.out;
    EXPECT_NEAR(kld_file, kld_direct, 0.02 * kld_direct) << rd.out << direct.out;
    EXPECT_NEAR(number_after(rd.out, "Same top p:"), number_after(direct.out, "Same top p:"), 1.0);
    EXPECT_NEAR(number_after(rd.out, "Mean PPL(base)                :"), final_ppl(w.out), 1e-3);
    // The same model against its own file: KL within the quantization noise, every top token the same.
    const run_result self = run("-m " + k_f32 + k_engine + " --kl-divergence --kl-divergence-base " + base.string());
    ASSERT_EQ(self.exit_code, 0) << self.err;
    EXPECT_LT(std::fabs(number_after(self.out, "Mean    KLD:")), 1e-4) << self.out;
    EXPECT_EQ(number_after(self.out, "Same top p:"), 100.0) << self.out;

    // --save-kl-base writes it again even though it exists.
    const auto before = fs::last_write_time(base);
    const run_result again = run("-m " + k_f32 + common + " --save-kl-base --kl-divergence-base " + base.string());
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("Final estimate"), std::string::npos) << again.out;
    EXPECT_GE(fs::last_write_time(base), before);

    // A different chunk size than the file's, a truncated file, a file over another vocabulary: refused.
    run_result e = run("-m " + k_q8 + " --ctx 64" + k_engine + " --kl-divergence-base " + base.string());
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(e.err.find("was computed with chunks of 128 tokens; drop --ctx 64 or pass --ctx 128"), std::string::npos)
        << e.err;
    const std::string bytes = read_file(base);
    const fs::path cut = work_dir() / "cut.logits";
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    e = run("-m " + k_q8 + k_engine + " --kl-divergence-base " + cut.string());
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(e.err.find("is truncated"), std::string::npos) << e.err;
    EXPECT_NE(e.err.find("write the base file again"), std::string::npos) << e.err;
    const fs::path other = work_dir() / "vocab100.logits";
    {
        strata::eval::kl_base_writer ow(other.string(), 16, 100, 1, std::vector<int32_t>(16, 3));
        const std::vector<float> row(100, 0.f);
        for (int i = 0; i < 7; ++i) ow.write_row(row.data());
        ow.finish();
    }
    e = run("-m " + k_q8 + k_engine + " --kl-divergence-base " + other.string());
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(e.err.find("holds log-probabilities over 100 tokens but"), std::string::npos) << e.err;
    e = run("-m " + k_q8 + k_engine + " --kl-divergence --kl-divergence-base " + (work_dir() / "none.logits").string());
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(e.err.find("does not exist; write it first"), std::string::npos) << e.err;
}

TEST(RuntimePerplexity, BadFlagsAndInputsAreClearErrorsNeverCrashes) {
    const std::string story = story_file();
    const fs::path short_text = work_dir() / "short.txt";
    std::ofstream(short_text) << "Once upon a time, there was a dog.\n";
    const fs::path folder = work_dir();
    struct bad_case {
        std::string args, message;
    };
    const std::vector<bad_case> cases{
        {"-m " + k_f32, "give the text: runtime perplexity -m MODEL.gguf -f TEXT"},
        {"-f " + story, "give the model to evaluate"},
        {"-m " + k_f32 + " -f " + story + " --ctx 2", "--ctx 2: a chunk needs at least 4 tokens"},
        {"-m " + k_f32 + " -f " + story + " --ctx abc", "--ctx takes an integer, not 'abc'"},
        {"-m " + k_f32 + " -f " + story + " --chunks 0", "--chunks 0: give a positive number of chunks"},
        {"-m " + k_f32 + " -f", "-f needs a value"},
        {"-m " + k_f32 + " -f /nonexistent/story.txt", "the text file /nonexistent/story.txt does not exist"},
        {"-m " + k_f32 + " -f " + folder.string(), "is a folder"},
        {"-m /nonexistent/model.gguf -f " + story, "/nonexistent/model.gguf: cannot open"},
        {"-m " + k_f32 + " -f " + short_text.string() + " --ctx 128" + k_engine,
         "needs at least 256 (twice the context, as llama-perplexity asks); give a longer text or a smaller --ctx"},
        {"-m " + k_f32 + " -f " + story + " --kl-divergence", "--kl-divergence needs the base file"},
        {"-m " + k_f32 + " -f " + story + " --kl-divergence-model " + k_f32 + " --kl-divergence-base x.logits",
         "give one of them"},
        {"-m " + k_f32 + " -f " + story + " --kl-divergence-model /nonexistent/base.gguf",
         "the base model /nonexistent/base.gguf does not exist"},
        {"-m " + k_f32 + " -f " + story + " --kl-divergence-base x.logits --kl-divergence --save-kl-base",
         "give one"},
        {"-m " + k_f32 + " -f " + story + " --kl-divergence-base /nonexistent/dir/base.logits",
         "cannot write the KL-divergence base file /nonexistent/dir/base.logits: the folder /nonexistent/dir does not "
         "exist"},
        {"-m " + k_f32 + " -f " + story + " --bogus-flag 3", "unknown option --bogus-flag"},
        {"-m " + k_f32 + " -f " + story + " --ppl-stride 64", "llama-perplexity's --ppl-stride is not implemented"},
        {"-m " + k_f32 + " -f " + story + " plan", "is a subcommand of its own"},
        {"-m " + k_f32 + " -f " + story + " -dp 2 -t 2", "runtime perplexity runs one engine; --data-parallel-size 2 applies to serving"},
    };
    for (const bad_case &c : cases) {
        const run_result r = run(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find("error: "), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_EQ(r.out.find("Final estimate"), std::string::npos) << c.args;
    }
}

TEST(RuntimePerplexity, ModelsOfDifferentVocabulariesAreRefusedAndASmallTrainedContextIsTheDefaultChunk) {
    // A random model over Llama 2's 32000-token vocabulary against stories260K's 512.
    const std::string other = strata::testing::made_model(
        "perplexity-llama-spm-f32.gguf", "--dim 32 --layers 3 --heads 2 --kv-heads 2 --ff 64 --ctx 256 --type f32 "
                                         "--vocab-from " + k_models + "vocab/ggml-vocab-llama-spm.gguf");
    ASSERT_FALSE(other.empty()) << "make-model failed";
    const run_result r =
        run("-m " + k_f32 + " -f " + story_file() + " --ctx 128" + k_engine + " --kl-divergence-model " + other);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("perplexity-llama-spm-f32.gguf has 32000 vocabulary entries and "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("stories260K-f32.gguf has 512; KL divergence compares two models over one vocabulary"),
              std::string::npos)
        << r.err;

    // Trained on 256 tokens: without --ctx the chunks are 256 tokens, not 512.
    const run_result small = run("-m " + other + " -f " + story_file() + k_engine);
    ASSERT_EQ(small.exit_code, 0) << small.err;
    EXPECT_NE(small.err.find("the model was trained on 256 tokens of context: chunks of 256 tokens"), std::string::npos)
        << small.err;
    EXPECT_NE(small.err.find("chunks of 256 tokens, the last 127 positions of each scored"), std::string::npos)
        << small.err;
    EXPECT_TRUE(std::isfinite(final_ppl(small.out))) << small.out;
}
