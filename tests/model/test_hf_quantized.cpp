// GPTQ, AWQ and FP8 checkpoints (written by tools/hf_quantize with AutoGPTQ's, AutoAWQ's, llm-compressor's and
// AutoFP8's layouts from a random-weight Llama exported by tools/hf-export) run with their weights kept as 4- or 8-bit
// groups or e4m3 blocks: greedy tokens equal and logits within 5e-5 of the largest logit of the float32 model
// dequantized from the same integers (the only difference is the order of float sums inside each block's dot
// product). Act-order (desc_act) checkpoints, whose
// g_idx permutes the inputs among the groups, keep their input order beside the weights and the devices gather the
// activations through it. The plan of a config.json-only folder shows the repacked bytes; --quantization must name
// the checkpoint's method.
#include "config_only_plan.hpp"
#include "engine/device_capability.hpp"
#include "engine/requested_formats.hpp"
#include "engine_fixture.hpp"
#include "error_of.hpp"
#include "made_model.hpp"
#include "model_file/hf_quantization.hpp"
#include "model_file/open_model_file.hpp"
#include "quantizable_llama.hpp"
#include "same_model.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace {

using namespace strata::testing;
namespace fs = std::filesystem;

using strata::testing::error_of;

struct quant_case {
    const char *name;
    const char *args;
};

class HfQuantized : public ::testing::TestWithParam<quant_case> {};

TEST_P(HfQuantized, LogitsMatchTheFloatModelDequantizedFromTheSameIntegers) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [quantized, dequantized] = quantized_hf(std::string("hfq-") + GetParam().name, quantizable_llama_hf(), GetParam().args);
    ASSERT_FALSE(quantized.empty()) << "tools/hf_quantize failed";
    expect_same_model(dequantized, quantized, "Once upon a time", 40, 5e-5);
    // The weights stayed 4 or 8 bits: each projection is one of the group-integer types, at its real size.
    const auto file = strata::open_model_file(quantized, {});
    const strata::gguf::tensor_info *q = file->find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_GE(q->type, strata::gguf::first_strata_type);
    const strata::gguf::type_traits *tr = strata::gguf::ggml_type_traits(q->type);
    ASSERT_NE(tr, nullptr);
    const bool act_order = std::string(GetParam().args).find("--act-order") != std::string::npos;
    EXPECT_EQ(q->input_order, act_order) << "an act-order layer keeps its input order, no other does";
    EXPECT_EQ(q->n_bytes, static_cast<uint64_t>(q->ne[1] * (q->ne[0] / tr->block_elems) * tr->block_bytes) +
                              (act_order ? static_cast<uint64_t>(q->ne[0]) * 4 : 0));
    EXPECT_LT(q->n_bytes, static_cast<uint64_t>(q->ne[0] * q->ne[1] * 2)); // smaller than F16, never expanded
}

INSTANTIATE_TEST_SUITE_P(
    Decoder, HfQuantized,
    ::testing::Values(quant_case{"gptq_4bit_g32_sym", "--method gptq --bits 4 --group-size 32"},
                      quant_case{"gptq_4bit_g128_asym", "--method gptq --bits 4 --group-size 128 --asym"},
                      quant_case{"gptq_4bit_row_groups", "--method gptq --bits 4 --group-size -1 --asym"},
                      quant_case{"gptq_8bit_g64_v2", "--method gptq --bits 8 --group-size 64 --checkpoint-format gptq_v2"},
                      quant_case{"gptq_8bit_g128_asym", "--method gptq --bits 8 --group-size 128 --asym"},
                      quant_case{"gptq_4bit_g32_act_order", "--method gptq --bits 4 --group-size 32 --act-order"},
                      quant_case{"gptq_8bit_g64_act_order_asym",
                                 "--method gptq --bits 8 --group-size 64 --asym --act-order"},
                      quant_case{"awq_4bit_g128", "--method awq --bits 4 --group-size 128"},
                      quant_case{"awq_4bit_g64", "--method awq --bits 4 --group-size 64"},
                      // FP8 (e4m3) as llm-compressor and AutoFP8 / transformers write it: the logits of the float
                      // model dequantized from the same bytes and scales.
                      quant_case{"ct_fp8_channel", "--method compressed-tensors --scheme channel"},
                      quant_case{"ct_fp8_tensor_static_bf16_scales",
                                 "--method compressed-tensors --scheme tensor --static-activations --scale-dtype BF16"},
                      quant_case{"ct_fp8_block64", "--method compressed-tensors --scheme block --block-size 64"},
                      quant_case{"fp8_tensor_static", "--method fp8 --scheme tensor --static-activations"},
                      quant_case{"fp8_block128", "--method fp8 --scheme block --block-size 128"}),
    [](const auto &info) { return std::string(info.param.name); });

// Quantized mixtures of experts: each expert's layer repacked alone, then stacked into the 3-D expert tensor; the
// logits those of the float model dequantized from the same integers, and a plan from config.json alone counts
// every expert's repacked bytes.
struct moe_quant_case {
    const char *name;
    const char *model_args;
    const char *quant_args;
};

class HfQuantizedMixture : public ::testing::TestWithParam<moe_quant_case> {};

TEST_P(HfQuantizedMixture, LogitsMatchTheFloatModelDequantizedFromTheSameIntegers) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const moe_quant_case &c = GetParam();
    const std::string float_hf = quantizable_moe_hf(std::string("hfq-moe-") + c.name + "-float", c.model_args);
    ASSERT_FALSE(float_hf.empty());
    const auto [quantized, dequantized] = quantized_hf(std::string("hfq-moe-") + c.name, float_hf, c.quant_args);
    ASSERT_FALSE(quantized.empty()) << "tools/hf_quantize failed";
    expect_same_model(dequantized, quantized, "Once upon a time", 40, 5e-5);
    const auto file = strata::open_model_file(quantized, {});
    const strata::gguf::tensor_info *up = file->find_tensor("blk.0.ffn_up_exps.weight");
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(up->n_dims, 3u);
    EXPECT_GE(up->type, strata::gguf::first_strata_type) << "the experts stay quantized";
    EXPECT_EQ(up->n_bytes, strata::repacked_bytes(up->type, up->ne[1], up->ne[0]) * static_cast<uint64_t>(up->ne[2]));
    expect_plan_matches(*file, *strata::open_model_file(config_only_copy(quantized, std::string("hfq-moe-") + c.name +
                                                                                         "-config-only"),
                                                        {}, true));
}

INSTANTIATE_TEST_SUITE_P(
    Decoder, HfQuantizedMixture,
    ::testing::Values(moe_quant_case{"qwen3moe_gptq_4bit_g32", "--arch qwen3moe --head-dim 32 --experts 4 "
                                                               "--experts-used 2 --expert-ff 64",
                                     "--method gptq --bits 4 --group-size 32"},
                      moe_quant_case{"qwen3moe_fp8_block128", "--arch qwen3moe --head-dim 32 --experts 4 "
                                                              "--experts-used 2 --expert-ff 64",
                                     "--method fp8 --scheme block --block-size 128"},
                      moe_quant_case{"mixtral_awq_4bit_g64", "--experts 4 --experts-used 2 --ff 128",
                                     "--method awq --bits 4 --group-size 64"},
                      moe_quant_case{"qwen2moe_ct_fp8_channel", "--arch qwen2moe --experts 4 --experts-used 2 "
                                                                "--expert-ff 64",
                                     "--method compressed-tensors --scheme channel"}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(HfQuantizedCheckpoint, APlanFromConfigJsonAloneShowsTheRepackedBytes) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [quantized, dequantized] = quantized_hf("hfq-awq_4bit_g128", quantizable_llama_hf(), "--method awq --bits 4 --group-size 128");
    ASSERT_FALSE(quantized.empty());
    const auto full = strata::open_model_file(quantized, {});
    expect_plan_matches(*full, *strata::open_model_file(config_only_copy(quantized, "hfq-awq-config-only"), {}, true));
}

// FP8 plans from config.json alone, for both config styles: each projection at its repacked FP8 size, lm_head left
// as the checkpoint leaves it (compressed-tensors' ignore list, fp8's unquantized lm_head).
TEST(HfQuantizedCheckpoint, AnFp8PlanFromConfigJsonAloneShowsTheRepackedBytes) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    for (const auto &[name, args] : std::vector<std::pair<std::string, std::string>>{
             {"hfq-ct_fp8_channel", "--method compressed-tensors --scheme channel"},
             {"hfq-fp8_block128", "--method fp8 --scheme block --block-size 128"}}) {
        SCOPED_TRACE(name);
        const auto [quantized, dequantized] = quantized_hf(name, quantizable_llama_hf(), args);
        ASSERT_FALSE(quantized.empty());
        const auto full = strata::open_model_file(quantized, {});
        expect_plan_matches(*full, *strata::open_model_file(config_only_copy(quantized, name + "-config-only"), {}, true));
        int fp8 = 0;
        for (const auto &t : full->tensors())
            fp8 += t.type == STRATA_TYPE_F8_E4M3_B32 || t.type == STRATA_TYPE_F8_E4M3_B128 ? 1 : 0;
        EXPECT_EQ(fp8, 5 * 7) << "every projection of the 5 layers";
    }
}

TEST(HfQuantizedCheckpoint, QuantizationFlagMustNameTheCheckpointsMethod) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [quantized, dequantized] = quantized_hf("hfq-gptq_4bit_g32_sym", quantizable_llama_hf(), "--method gptq --bits 4 --group-size 32");
    ASSERT_FALSE(quantized.empty());
    const auto file = strata::open_model_file(quantized, {});
    EXPECT_EQ(file->quantization(), "gptq");
    for (const char *ok : {"auto", "gptq", "gptq_marlin"})
        EXPECT_NO_THROW(strata::engine::check_quantization(*file, ok, quantized)) << ok;
    // clang 14 cannot capture a structured binding: the lambdas capture a named copy.
    const std::string folder = quantized;
    const std::string awq = error_of([&] { strata::engine::check_quantization(*file, "awq", folder); });
    EXPECT_NE(awq.find("is a gptq checkpoint"), std::string::npos) << awq;
    const auto plain = strata::open_model_file(dequantized, {});
    EXPECT_THROW(strata::engine::check_quantization(*plain, "gptq", dequantized), strata::error);
    // The same refusal from config.json alone, before any shard is read or repacked (a folder without shards).
    const fs::path only = config_only_copy(quantized, "hfq-gptq-quantization-flag-config-only");
    const std::string early = error_of([&] { strata::engine::check_quantization_before_load("awq", only.string()); });
    EXPECT_NE(early.find("--quantization awq: " + only.string() + " is a gptq checkpoint"), std::string::npos) << early;
    EXPECT_EQ(error_of([&] { strata::engine::check_quantization_before_load("gptq_marlin", only.string()); }), "(no error)");
    const std::string missing = dequantized + "-missing";
    EXPECT_EQ(error_of([&] { strata::engine::check_quantization_before_load("awq", missing); }), "(no error)");
    // vLLM's names for FP8 checkpoints: the config's own method.
    const auto [ct, ct_float] = quantized_hf("hfq-ct_fp8_channel", quantizable_llama_hf(), "--method compressed-tensors --scheme channel");
    ASSERT_FALSE(ct.empty());
    const auto ct_file = strata::open_model_file(ct, {});
    EXPECT_EQ(ct_file->quantization(), "compressed-tensors");
    EXPECT_NO_THROW(strata::engine::check_quantization(*ct_file, "compressed-tensors", ct));
    const std::string ct_folder = ct;
    const std::string fp8 = error_of([&] { strata::engine::check_quantization(*ct_file, "fp8", ct_folder); });
    EXPECT_NE(fp8.find("is a compressed-tensors checkpoint"), std::string::npos) << fp8;
}

// An act-order checkpoint's plan from config.json alone (desc_act true) counts each layer's input order, as the
// loaded checkpoint does; the loaded layers carry it.
TEST(HfQuantizedCheckpoint, AnActOrderPlanFromConfigJsonAloneCountsTheInputOrder) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [quantized, dequantized] =
        quantized_hf("hfq-gptq_4bit_g32_act_order", quantizable_llama_hf(), "--method gptq --bits 4 --group-size 32 --act-order");
    ASSERT_FALSE(quantized.empty());
    const fs::path only = config_only_copy(quantized, "hfq-gptq-act-order-config-only");
    const auto full = strata::open_model_file(quantized, {});
    expect_plan_matches(*full, *strata::open_model_file(only.string(), {}, true));
    int ordered = 0;
    for (const auto &t : full->tensors()) ordered += t.input_order ? 1 : 0;
    EXPECT_EQ(ordered, 5 * 7) << "every projection of the 5 layers";
    // With static_groups AutoGPTQ fixes the groups on the columns before permuting them, so g_idx keeps them in
    // place: no layer carries an order, and the plan does not count one.
    std::string config;
    {
        std::ifstream in(only / "config.json");
        config.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t at = config.find("\"static_groups\": false");
    ASSERT_NE(at, std::string::npos);
    config.replace(at, std::string("\"static_groups\": false").size(), "\"static_groups\": true");
    std::ofstream(only / "config.json") << config;
    const auto static_planned = strata::open_model_file(only.string(), {}, true);
    for (const auto &t : static_planned->tensors()) EXPECT_FALSE(t.input_order) << t.name;
    // A model plugin built before ABI 1.19 would pass views without the order on: refused at load, by name.
    strata_plugin_info info{};
    info.abi_major = 1;
    info.abi_minor = 18;
    auto lib = std::make_shared<strata::plugins::library>();
    lib->info = &info;
    strata_model_arch_desc arch{};
    arch.header.name = "old";
    const strata::plugins::handle<strata_model_arch_desc> old{&arch, lib};
    const strata::model_file &loaded = *full;
    const std::string e = error_of([&] { strata::engine::check_model_reads_input_order(loaded, old, "m"); });
    EXPECT_NE(e.find("which model_arch 'old' (built for ABI 1.18) does not pass on"), std::string::npos) << e;
    info.abi_minor = 19;
    EXPECT_EQ(error_of([&] { strata::engine::check_model_reads_input_order(loaded, old, "m"); }), "(no error)");
}

// A quantized layer Strata has no name for (its parts renamed in the header, same lengths so the offsets hold) is
// refused by name, like any unmapped tensor.
TEST(HfQuantizedCheckpoint, AQuantizedLayerWithoutAMeaningIsRefusedByName) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [quantized, dequantized] = quantized_hf("hfq-gptq_4bit_g32_sym", quantizable_llama_hf(), "--method gptq --bits 4 --group-size 32");
    ASSERT_FALSE(quantized.empty());
    const fs::path bad = fs::path(STRATA_BINARY_DIR) / "test-models" / "hfq-gptq-renamed-layer";
    fs::remove_all(bad);
    fs::copy(quantized, bad);
    std::string bytes;
    {
        std::ifstream in(bad / "model.safetensors", std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    int renamed = 0;
    for (const char *part : {"qweight", "qzeros", "scales", "g_idx"}) {
        const std::string from = std::string("layers.0.mlp.down_proj.") + part;
        const size_t at = bytes.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        bytes.replace(at, from.size(), std::string("layers.0.mlp.dowx_proj.") + part);
        ++renamed;
    }
    ASSERT_EQ(renamed, 4);
    std::ofstream(bad / "model.safetensors", std::ios::binary) << bytes;
    const std::string e = error_of([&] { strata::open_model_file(bad.string(), {}); });
    EXPECT_NE(e.find("model.layers.0.mlp.dowx_proj.qweight"), std::string::npos) << e;
}

} // namespace
