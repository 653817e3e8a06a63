// check_model_covers_file (core/engine/model_coverage.cpp) on an in-memory GGUF and a stand-in model plugin: every
// `<arch>.` key nobody read and every tensor that is neither a model weight nor read by the plugin is listed in one
// error; other namespaces (general.*, tokenizer.*) are not the model's; the list stops at 12 and gives the count.
#include "common/error.hpp"
#include "engine/model_coverage.hpp"
#include "gguf/gguf_file.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using strata::engine::check_model_covers_file;

// The model's weights, as tensor_at reports them (the stand-in plugin's state).
std::vector<std::string> g_weights;

int32_t weight_count(const strata_model *) { return static_cast<int32_t>(g_weights.size()); }

int32_t weight_at(const strata_model *, int32_t i, strata_tensor_view *out, int32_t *layer) {
    if (i < 0 || i >= static_cast<int32_t>(g_weights.size())) return STRATA_ERR_INVALID_ARGUMENT;
    out->name = g_weights[static_cast<size_t>(i)].c_str();
    if (layer) *layer = 0;
    return STRATA_OK;
}

strata_model_arch_desc stand_in() {
    strata_model_arch_desc d{};
    d.tensor_count = weight_count;
    d.tensor_at = weight_at;
    return d;
}

std::vector<uint8_t> file_with(int n_extra_tensors) {
    strata::gguf::writer w;
    w.add_string("general.architecture", "llama");
    w.add_string("general.name", "coverage");
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_u32("llama.block_count", 1);
    w.add_u32("llama.attention.sliding_window", 4096);
    for (const char *name : {"weight", "constant", "bias"}) w.add_tensor(name, 0, {4}, std::vector<uint8_t>(16));
    for (int i = 0; i < n_extra_tensors; ++i)
        w.add_tensor("extra." + std::to_string(i), 0, {4}, std::vector<uint8_t>(16));
    return w.to_bytes();
}

// The error check_model_covers_file throws, or "" when it accepts the file.
std::string error_of(const std::vector<uint8_t> &bytes, const std::set<std::string> &keys_read,
                     const std::set<std::string> &tensors_read) {
    const auto file = strata::gguf::file::parse(bytes.data(), bytes.size(), "m.gguf");
    const strata_model_arch_desc d = stand_in();
    try {
        check_model_covers_file(file, "llama", d, nullptr, keys_read, tensors_read, "stand-in", "m.gguf");
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

TEST(ModelCoverageCheck, UnreadArchKeysAndUnusedTensorsAreListedTogether) {
    g_weights = {"weight"};
    const std::string e = error_of(file_with(0), {"llama.block_count"}, {"constant"});
    EXPECT_NE(e.find("m.gguf: the 'stand-in' model plugin does not use 2 part(s) of this 'llama' file"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("metadata key 'llama.attention.sliding_window' = 4096"), std::string::npos) << e;
    EXPECT_NE(e.find("tensor 'bias' [4] F32"), std::string::npos) << e;
    for (const char *used : {"'weight'", "'constant'", "block_count", "general.name", "tokenizer.ggml.model"})
        EXPECT_EQ(e.find(used), std::string::npos) << used << " is used or not the model's:\n" << e;
}

TEST(ModelCoverageCheck, AFileWhollyUsedIsAccepted) {
    g_weights = {"weight", "bias"};
    EXPECT_EQ(error_of(file_with(0), {"llama.block_count", "llama.attention.sliding_window"}, {"constant"}), "");
}

TEST(ModelCoverageCheck, ALongListStopsAtTwelveAndCountsTheRest) {
    g_weights = {"weight", "constant", "bias"};
    const std::string e = error_of(file_with(20), {"llama.block_count", "llama.attention.sliding_window"}, {});
    EXPECT_NE(e.find("does not use 20 part(s)"), std::string::npos) << e;
    EXPECT_NE(e.find("tensor 'extra.11'"), std::string::npos) << e;
    EXPECT_EQ(e.find("tensor 'extra.12'"), std::string::npos) << e;
    EXPECT_NE(e.find("... and 8 more"), std::string::npos) << e;
}

} // namespace
