// Reading the real GGUF files in shared/models: the stories260K conversions and llama.cpp's vocab-only files.
#include "gguf/gguf_file.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

namespace strata::gguf {
namespace {

const std::string models_dir = std::string(STRATA_SHARED_DIR) + "/models/";

constexpr uint32_t ggml_f32 = 0, ggml_f16 = 1, ggml_q4_0 = 2, ggml_q8_0 = 8;

void expect_shape(const file &f, const std::string &name, std::vector<int64_t> ne, uint32_t type) {
    SCOPED_TRACE(name);
    const tensor_info *t = f.find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->name, name);
    ASSERT_EQ(t->n_dims, ne.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t->ne[d], d < ne.size() ? ne[d] : 1) << "dim " << d;
    EXPECT_EQ(t->type, type);
    const type_traits *tt = ggml_type_traits(type);
    ASSERT_NE(tt, nullptr);
    EXPECT_EQ(t->n_bytes, static_cast<uint64_t>(t->n_elements()) / tt->block_elems * tt->block_bytes);
}

void expect_stories_metadata(const file &f, uint64_t file_type) {
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_string("general.name"), "stories260K");
    EXPECT_EQ(f.get_uint("general.file_type"), file_type);
    EXPECT_EQ(f.get_uint("llama.vocab_size"), 512u);
    EXPECT_EQ(f.get_uint("llama.context_length"), 512u);
    EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
    EXPECT_EQ(f.get_uint("llama.block_count"), 5u);
    EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 172u);
    EXPECT_EQ(f.get_uint("llama.attention.head_count"), 8u);
    EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 4u);
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
    EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), 8u);
    EXPECT_EQ(f.get_float("llama.rope.freq_base"), 10000.0);
    ASSERT_TRUE(f.get_float("llama.attention.layer_norm_rms_epsilon").has_value());
    EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_EQ(f.type_of("llama.rope.freq_base"), value_type::f32);
    EXPECT_EQ(f.type_of("llama.block_count"), value_type::u32);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
    EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
    EXPECT_EQ(f.get_uint("tokenizer.ggml.unknown_token_id"), 0u);
    EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
    EXPECT_EQ(f.get_bool("tokenizer.ggml.add_eos_token"), false);

    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.has_value());
    ASSERT_EQ(tokens->size(), 512u);
    EXPECT_EQ((*tokens)[0], "<unk>");
    EXPECT_EQ((*tokens)[1], "<s>");
    EXPECT_EQ((*tokens)[2], "</s>");
    EXPECT_EQ((*tokens)[3], "<0x00>");
    EXPECT_EQ((*tokens)[258], "<0xFF>");
    for (std::string_view t : *tokens) EXPECT_EQ(t.data()[t.size()], '\0'); // NUL-terminated views
    const auto scores = f.get_float_array("tokenizer.ggml.scores");
    ASSERT_TRUE(scores.has_value());
    EXPECT_EQ(scores->size(), 512u);
    const auto types = f.get_int_array("tokenizer.ggml.token_type");
    ASSERT_TRUE(types.has_value());
    ASSERT_EQ(types->size(), 512u);
    EXPECT_EQ((*types)[0], 2); // UNKNOWN
    EXPECT_EQ((*types)[1], 3); // CONTROL
    EXPECT_EQ((*types)[3], 6); // BYTE
    EXPECT_EQ((*types)[300], 1); // NORMAL

    EXPECT_FALSE(f.has("general.alignment"));
    EXPECT_FALSE(f.get_uint("no.such.key").has_value());
    EXPECT_FALSE(f.get_string_array("no.such.key").has_value());
    // Present with another type: an error, not a silent "missing".
    EXPECT_THROW((void)f.get_string("llama.block_count"), strata::error);
    EXPECT_THROW((void)f.get_float_array("tokenizer.ggml.tokens"), strata::error);
    EXPECT_THROW((void)f.get_string_array("general.name"), strata::error);
}

void expect_stories_tensors(const file &f, uint32_t matrix_type, uint32_t ffn_down_type) {
    ASSERT_EQ(f.tensors().size(), 47u);
    EXPECT_EQ(f.tensors().front().name, "token_embd.weight");
    EXPECT_EQ(f.tensors().back().name, "output_norm.weight");
    expect_shape(f, "token_embd.weight", {64, 512}, matrix_type);
    for (int l = 0; l < 5; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        expect_shape(f, b + "attn_norm.weight", {64}, ggml_f32);
        expect_shape(f, b + "attn_q.weight", {64, 64}, matrix_type);
        expect_shape(f, b + "attn_k.weight", {64, 32}, matrix_type);
        expect_shape(f, b + "attn_v.weight", {64, 32}, matrix_type);
        expect_shape(f, b + "attn_output.weight", {64, 64}, matrix_type);
        expect_shape(f, b + "ffn_norm.weight", {64}, ggml_f32);
        expect_shape(f, b + "ffn_gate.weight", {64, 172}, matrix_type);
        expect_shape(f, b + "ffn_down.weight", {172, 64}, ffn_down_type);
        expect_shape(f, b + "ffn_up.weight", {64, 172}, matrix_type);
    }
    expect_shape(f, "output_norm.weight", {64}, ggml_f32);
    EXPECT_EQ(f.find_tensor("output.weight"), nullptr); // tied to token_embd
    EXPECT_EQ(f.find_tensor("blk.5.attn_q.weight"), nullptr);

    // Every tensor's data lies inside the data section, aligned, and tensors do not overlap.
    const uint8_t *base = f.tensors().front().data - f.tensors().front().offset - f.data_offset();
    EXPECT_EQ(f.data_offset() % 32, 0u);
    uint64_t previous_end = 0;
    for (const tensor_info &t : f.tensors()) {
        EXPECT_EQ(t.offset % 32, 0u) << t.name;
        EXPECT_GE(t.offset, previous_end) << t.name;
        EXPECT_EQ(t.data, base + f.data_offset() + t.offset) << t.name;
        EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, f.file_size()) << t.name;
        previous_end = t.offset + t.n_bytes;
    }
}

std::vector<uint8_t> read_all(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufModels, StoriesF32) {
    const file f = file::open(models_dir + "stories260K-f32.gguf");
    EXPECT_EQ(f.file_size(), 1054336u);
    EXPECT_EQ(f.name(), models_dir + "stories260K-f32.gguf");
    expect_stories_metadata(f, 0);
    EXPECT_FALSE(f.has("general.quantization_version"));
    expect_stories_tensors(f, ggml_f32, ggml_f32);

    // The embedding matches the llama2.c checkpoint it was converted from (floats right after its 28-byte header).
    const std::vector<uint8_t> checkpoint = read_all(models_dir + "stories260K.bin");
    ASSERT_GE(checkpoint.size(), 28u + 64 * 512 * 4);
    const tensor_info *embd = f.find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(std::memcmp(embd->data, checkpoint.data() + 28, embd->n_bytes), 0);
    float first = 0;
    std::memcpy(&first, embd->data, 4);
    EXPECT_FLOAT_EQ(first, -0.29474878f);
}

TEST(GgufModels, StoriesF16) {
    const file f = file::open(models_dir + "stories260K-f16.gguf");
    expect_stories_metadata(f, 1);
    expect_stories_tensors(f, ggml_f16, ggml_f16);
}

TEST(GgufModels, StoriesQ8_0) {
    const file f = file::open(models_dir + "stories260K-q8_0.gguf");
    expect_stories_metadata(f, 7);
    EXPECT_EQ(f.get_uint("general.quantization_version"), 2u);
    expect_stories_tensors(f, ggml_q8_0, ggml_f16);
    const tensor_info *q = f.find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, 8u);
    EXPECT_EQ(q->n_bytes, 64u / 32 * 34 * 64);
    EXPECT_EQ(q->offset, 35072u);
    EXPECT_EQ(f.find_tensor("blk.3.ffn_down.weight")->type, 1u);
}

TEST(GgufModels, StoriesQ4_0) {
    const file f = file::open(models_dir + "stories260K-q4_0.gguf");
    expect_stories_metadata(f, 2);
    expect_stories_tensors(f, ggml_q4_0, ggml_f16);
    EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight")->n_bytes, 64u / 32 * 18 * 32);
}

TEST(GgufModels, ParseBorrowsBufferLikeOpen) {
    const std::vector<uint8_t> bytes = read_all(models_dir + "stories260K-q4_0.gguf");
    const file f = file::parse(bytes.data(), bytes.size(), "q4.gguf");
    EXPECT_EQ(f.name(), "q4.gguf");
    EXPECT_EQ(f.file_size(), bytes.size());
    const tensor_info *t = f.find_tensor("output_norm.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->data, bytes.data() + f.data_offset() + t->offset);
}

TEST(GgufModels, MovedFileKeepsViews) {
    file a = file::open(models_dir + "stories260K-q4_0.gguf");
    const std::string_view arch = *a.get_string("general.architecture");
    const std::vector<std::string_view> tokens = *a.get_string_array("tokenizer.ggml.tokens");
    const tensor_info *t = a.find_tensor("token_embd.weight");
    file b = std::move(a);
    EXPECT_EQ(arch, "llama");
    EXPECT_EQ(tokens[1], "<s>");
    EXPECT_EQ(b.find_tensor("token_embd.weight"), t);
    EXPECT_EQ(b.get_string("general.architecture")->data(), arch.data());
}

TEST(GgufModels, KvSummaries) {
    const file f = file::open(models_dir + "stories260K-f32.gguf");
    ASSERT_EQ(f.kv_count(), 22u);
    std::map<std::string, std::string> summary;
    for (size_t i = 0; i < f.kv_count(); ++i) summary[std::string(f.kv_key(i))] = f.kv_summary(i);
    EXPECT_EQ(summary["general.architecture"], "\"llama\"");
    EXPECT_EQ(summary["llama.block_count"], "5");
    EXPECT_EQ(summary["llama.rope.freq_base"], "10000");
    EXPECT_EQ(summary["tokenizer.ggml.add_bos_token"], "true");
    const std::string &tokens = summary["tokenizer.ggml.tokens"];
    EXPECT_EQ(tokens.rfind("[\"<unk>\", \"<s>\", \"</s>\"", 0), 0u) << tokens;
    EXPECT_NE(tokens.find("...] (512 x string)"), std::string::npos) << tokens;
    EXPECT_LE(tokens.size(), 60u + 30u) << tokens;
    EXPECT_EQ(f.kv_type(0), value_type::string);
    EXPECT_THROW((void)f.kv_key(22), strata::error);
}

TEST(GgufVocab, LlamaSpm) {
    const file f = file::open(models_dir + "vocab/ggml-vocab-llama-spm.gguf");
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.kv_count(), 22u);
    EXPECT_EQ(f.data_offset(), f.file_size()); // ends right after the KVs
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "default");
    EXPECT_EQ(f.get_uint("llama.vocab_size"), 32000u);
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.has_value());
    ASSERT_EQ(tokens->size(), 32000u);
    EXPECT_EQ((*tokens)[29871], "\xe2\x96\x81");        // "▁"
    EXPECT_EQ((*tokens)[450], "\xe2\x96\x81The");        // "▁The"
    EXPECT_EQ((*tokens)[31999], "\xe7\xbb\x99");         // "给"
    const auto scores = f.get_float_array("tokenizer.ggml.scores");
    ASSERT_TRUE(scores.has_value());
    ASSERT_EQ(scores->size(), 32000u);
    EXPECT_EQ((*scores)[31999], -31740.0f);
    EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->size(), 32000u);
}

TEST(GgufVocab, EveryVocabFileParses) {
    const std::pair<const char *, size_t> vocabs[] = {
        {"ggml-vocab-llama-spm.gguf", 32000},  {"ggml-vocab-phi-3.gguf", 32064},
        {"ggml-vocab-llama-bpe.gguf", 128256}, {"ggml-vocab-qwen2.gguf", 151936},
        {"ggml-vocab-gpt-2.gguf", 50257},      {"ggml-vocab-deepseek-coder.gguf", 32256},
    };
    for (const auto &[name, n_vocab] : vocabs) {
        SCOPED_TRACE(name);
        const file f = file::open(models_dir + "vocab/" + name);
        const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
        ASSERT_TRUE(tokens.has_value());
        EXPECT_EQ(tokens->size(), n_vocab);
        for (size_t i = 0; i < f.kv_count(); ++i) EXPECT_FALSE(f.kv_summary(i).empty());
        if (f.get_string("tokenizer.ggml.model") == "gpt2") {
            const auto merges = f.get_string_array("tokenizer.ggml.merges");
            ASSERT_TRUE(merges.has_value());
            EXPECT_GT(merges->size(), 1000u);
        }
    }
}

TEST(GgufFile, OpenErrorsNameThePath) {
    try {
        (void)file::open("/nonexistent/model.gguf");
        FAIL() << "no error";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf: cannot open"), std::string::npos) << e.what();
    }
    try {
        (void)file::open(models_dir);
        FAIL() << "no error";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
    try {
        (void)file::open(models_dir + "stories260K.bin");
        FAIL() << "no error";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("not a GGUF file"), std::string::npos) << e.what();
    }
}

TEST(GgufTypes, TraitsTable) {
    ASSERT_NE(ggml_type_traits(0), nullptr);
    EXPECT_STREQ(ggml_type_traits(0)->name, "F32");
    EXPECT_EQ(ggml_type_traits(8)->block_elems, 32u);
    EXPECT_EQ(ggml_type_traits(8)->block_bytes, 34u);
    EXPECT_EQ(ggml_type_traits(2)->block_bytes, 18u);
    EXPECT_EQ(ggml_type_traits(12)->block_bytes, 144u); // Q4_K
    EXPECT_EQ(ggml_type_traits(14)->block_bytes, 210u); // Q6_K
    EXPECT_STREQ(ggml_type_traits(28)->name, "F64");
    EXPECT_STREQ(ggml_type_traits(30)->name, "BF16");
    EXPECT_EQ(ggml_type_traits(4), nullptr);
    EXPECT_EQ(ggml_type_traits(31), nullptr);
    EXPECT_EQ(ggml_type_traits(1000), nullptr);
    EXPECT_STREQ(value_type_name(value_type::boolean), "bool");
    EXPECT_STREQ(value_type_name(static_cast<value_type>(77)), "unknown");
}

} // namespace
} // namespace strata::gguf
