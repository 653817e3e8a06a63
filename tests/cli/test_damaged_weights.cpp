// A model file with one damaged weight block (a NaN binary16 scale in a Q4_K tensor, as a bad download or a broken
// quantizer leaves it): with --check-tensors start-up refuses it naming the tensor, row and block; without, the
// request fails with a message pointing at --check-tensors instead of printing garbage; an intact file passes the
// check and runs.
#include "gguf/gguf_file.hpp"
#include "made_model.hpp"
#include "runtime_process.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;

using run_result = strata::testing::runtime_result;

run_result run(const std::string &args) { return strata::testing::run_runtime(args); }

std::vector<char> read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// A copy of `intact` whose tensor `name` has a NaN scale in the first block of row `row`, named for this process.
std::string damaged_copy(const std::string &intact, const std::string &name, int64_t row) {
    const auto file = strata::gguf::file::open(intact);
    const strata::gguf::tensor_info *t = nullptr;
    for (const auto &x : file.tensors())
        if (x.name == name) t = &x;
    if (t == nullptr) return {};
    const uint64_t row_bytes = t->n_bytes / static_cast<uint64_t>(t->n_elements() / t->ne[0]);
    std::vector<char> bytes = read_bytes(intact);
    // The tensor's bytes inside the file: its first row (plus the next) is unique in a random-weight model.
    const std::string needle(reinterpret_cast<const char *>(t->data), 2 * row_bytes);
    const std::string hay(bytes.begin(), bytes.end());
    const size_t at = hay.find(needle);
    if (at == std::string::npos || hay.find(needle, at + 1) != std::string::npos) return {};
    const uint16_t nan_half = 0x7e00;
    std::memcpy(bytes.data() + at + row * row_bytes, &nan_half, 2); // Q4_K's d is the block's first two bytes
    // One copy per process: CTest runs this file's cases at once, and a copy rewritten while another case's runtime
    // reads it would be a truncated file, not a damaged one.
    const std::string out = fs::path(intact).parent_path() / ("damaged-" + std::to_string(::getpid()) + "-" +
                                                              fs::path(intact).filename().string());
    std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out;
}

std::string model() {
    return strata::testing::made_model("q4_k_m-256x2.gguf", "--dim 256 --layers 2 --heads 4 --kv-heads 1 --ff 512 "
                                                            "--ctx 128 --type q4_k_m --seed 7 2>/dev/null");
}

TEST(DamagedWeights, CheckTensorsRefusesTheFileNamingTensorRowAndBlock) {
    const std::string intact = model();
    ASSERT_FALSE(intact.empty());
    const std::string bad = damaged_copy(intact, "blk.0.attn_output.weight", 2);
    ASSERT_FALSE(bad.empty());
    const run_result r = run("--model " + bad + " --check-tensors --prompt hello --max-tokens 4");
    fs::remove(bad);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.all.find("'blk.0.attn_output.weight' (q4_k) row 2: the block at element 0 has a NaN or infinite"),
              std::string::npos)
        << r.all;
}

TEST(DamagedWeights, WithoutTheCheckTheRequestFailsInsteadOfPrintingGarbage) {
    const std::string intact = model();
    ASSERT_FALSE(intact.empty());
    const std::string bad = damaged_copy(intact, "blk.0.attn_output.weight", 2);
    ASSERT_FALSE(bad.empty());
    const run_result r = run("--model " + bad + " --prompt hello --max-tokens 4 --temperature 0");
    fs::remove(bad);
    EXPECT_NE(r.exit_code, 0) << r.all;
    EXPECT_NE(r.all.find("NaN logits"), std::string::npos) << r.all;
    EXPECT_NE(r.all.find("--check-tensors"), std::string::npos) << r.all;
}

TEST(DamagedWeights, AnIntactFilePassesTheCheckAndRuns) {
    const std::string intact = model();
    ASSERT_FALSE(intact.empty());
    const run_result r = run("--model " + intact + " --check-tensors --prompt hello --max-tokens 4 --temperature 0");
    EXPECT_EQ(r.exit_code, 0) << r.all;
    EXPECT_EQ(r.all.find("NaN"), std::string::npos) << r.all;
}

} // namespace
