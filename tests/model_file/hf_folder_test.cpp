// HF checkpoint folders with missing or inconsistent parts: each refused with one error naming the file and what to
// do; a consistent sharded folder maps its tensors to GGUF names pointing into the shards.
#include "common/error.hpp"
#include "model_file/hf_checkpoint.hpp"
#include "safetensors_bytes.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using strata::hf_checkpoint;
using strata::testing::safetensors_bytes;

const char *k_config = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":8,)"
                       R"("intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":4,)"
                       R"("tie_word_embeddings":true})";

// A minimal tokenizer.json: four tokens, no merges.
const char *k_tokenizer = R"({"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,)"
                          R"("post_processor":null,"decoder":null,"model":{"type":"BPE","dropout":null,)"
                          R"("unk_token":null,"vocab":{"a":0,"b":1,"c":2,"d":3},"merges":[]}})";

class HfFolder : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("strata_hf_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    void write(const std::string &name, const std::string &text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
    void write(const std::string &name, const std::vector<uint8_t> &b) {
        std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char *>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    // One F32 tensor of `n` floats named `name`.
    static std::vector<uint8_t> one_tensor(const std::string &name, const std::string &dtype = "F32", int n = 32) {
        const int esize = dtype == "F32" ? 4 : dtype == "I8" ? 1 : 2;
        return safetensors_bytes(R"({")" + name + R"(":{"dtype":")" + dtype + R"(","shape":[4,)" +
                                     std::to_string(n / 4) + R"(],"data_offsets":[0,)" + std::to_string(n * esize) + "]}}",
                                 static_cast<size_t>(n * esize));
    }
    std::string error() {
        try {
            (void)hf_checkpoint::open(dir_.string());
        } catch (const strata::error &e) {
            return e.what();
        }
        return "";
    }
    fs::path dir_;
};

TEST_F(HfFolder, ShardsMapToGgufNamesPointingIntoTheMappedFiles) {
    write("config.json", k_config);
    write("tokenizer.json", k_tokenizer);
    write("model-00001-of-00002.safetensors", one_tensor("model.embed_tokens.weight"));
    write("model-00002-of-00002.safetensors", one_tensor("model.layers.0.mlp.up_proj.weight", "BF16", 128));
    write("model.safetensors.index.json",
          R"({"weight_map":{"model.embed_tokens.weight":"model-00001-of-00002.safetensors",)"
          R"("model.layers.0.mlp.up_proj.weight":"model-00002-of-00002.safetensors"}})");
    const auto c = hf_checkpoint::open(dir_.string());
    ASSERT_EQ(c->shards().size(), 2u);
    const auto *e = c->find_tensor("token_embd.weight");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->type, 0u);
    EXPECT_EQ(e->ne[0], 8);
    EXPECT_EQ(e->ne[1], 4);
    const auto *u = c->find_tensor("blk.0.ffn_up.weight");
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->type, 30u); // BF16
    EXPECT_EQ(u->ne[0], 32);
    EXPECT_EQ(u->data, c->shards()[1].tensors()[0].data); // not copied
    EXPECT_EQ(*c->get_string("general.architecture"), "llama");
    ASSERT_NE(c->own_vocab(), nullptr);
    EXPECT_EQ(c->own_vocab()->tokens.size(), 4u);
}

TEST_F(HfFolder, EachDefectIsOneErrorNamingWhatToFix) {
    EXPECT_NE(error().find("no config.json"), std::string::npos);
    write("config.json", k_config);
    EXPECT_NE(error().find("neither model.safetensors nor model.safetensors.index.json"), std::string::npos);

    write("model.safetensors.index.json", R"({"weight_map":{"model.embed_tokens.weight":"../x.safetensors"}})");
    EXPECT_NE(error().find("not a .safetensors file name in the same folder"), std::string::npos);
    write("model.safetensors.index.json", R"({"weight_map":{"model.embed_tokens.weight":"a.safetensors"}})");
    std::string e = error();
    EXPECT_NE(e.find("shard 'a.safetensors'"), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
    write("a.safetensors", one_tensor("model.norm.weight"));
    EXPECT_NE(error().find("does not put it there"), std::string::npos);
    auto truncated = one_tensor("model.embed_tokens.weight");
    truncated.resize(truncated.size() - 4);
    write("a.safetensors", truncated);
    e = error();
    EXPECT_NE(e.find("a.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find("reach past the data"), std::string::npos) << e;
    fs::remove(dir_ / "model.safetensors.index.json");
    fs::remove(dir_ / "a.safetensors");

    write("model.safetensors", one_tensor("model.vision_tower.proj.weight"));
    EXPECT_NE(error().find("model.vision_tower.proj.weight"), std::string::npos);
    write("model.safetensors", one_tensor("model.embed_tokens.weight", "I8"));
    EXPECT_NE(error().find("is I8"), std::string::npos);
    write("config.json", std::string(k_config).replace(std::string(k_config).find("true"), 4, "false"));
    write("model.safetensors", one_tensor("model.embed_tokens.weight"));
    EXPECT_NE(error().find("no lm_head.weight"), std::string::npos);
    // A bias config.json does not declare: transformers would drop it; Strata refuses to guess.
    write("model.safetensors",
          safetensors_bytes(R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[4,8],"data_offsets":[0,128]},)"
                            R"("model.layers.0.self_attn.q_proj.bias":{"dtype":"F32","shape":[8],)"
                            R"("data_offsets":[128,160]}})",
                            160));
    write("config.json", k_config);
    EXPECT_NE(error().find("does not declare it (attention_bias)"), std::string::npos) << error();
    write("config.json", std::string(k_config).replace(std::string(k_config).find("\"tie_word"), 0,
                                                       "\"attention_bias\":true,"));
    EXPECT_NE(error().find("lacks it"), std::string::npos) << error();
    write("config.json", k_config);
    write("model.safetensors", one_tensor("model.embed_tokens.weight"));
    EXPECT_NE(error().find("no tokenizer.json"), std::string::npos);
    write("tokenizer.json", k_tokenizer);
    EXPECT_EQ(error(), "");
}

// A mixture's experts: each layer's per-expert matrices must all be there, of one shape and dtype, and numbered
// below the expert count; an act-order GPTQ mixture is refused (a stacked expert tensor has no input order).
TEST_F(HfFolder, MixtureExpertsMustBeCompleteAndAlike) {
    const std::string moe = R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral","hidden_size":8,)"
                            R"("intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":4,)"
                            R"("num_key_value_heads":2,"tie_word_embeddings":true,"num_local_experts":2,"num_experts_per_tok":1)";
    write("config.json", moe + "}");
    write("tokenizer.json", k_tokenizer);
    auto experts = [](const std::string &second_name, const std::string &second_dtype, int second_rows) {
        const int bytes2 = second_rows * 8 * (second_dtype == "F32" ? 4 : 2);
        return safetensors_bytes(
            R"({"model.layers.0.block_sparse_moe.experts.0.w1.weight":{"dtype":"F32","shape":[16,8],"data_offsets":[0,512]},)"
            R"(")" + second_name + R"(":{"dtype":")" + second_dtype + R"(","shape":[)" + std::to_string(second_rows) +
                R"(,8],"data_offsets":[512,)" + std::to_string(512 + bytes2) + "]}}",
            static_cast<size_t>(512 + bytes2));
    };
    write("model.safetensors", experts("model.layers.0.block_sparse_moe.experts.2.w1.weight", "F32", 16));
    std::string e = error();
    EXPECT_NE(e.find("is expert 2, but config.json's num_local_experts is 2"), std::string::npos) << e;
    write("model.safetensors", experts("model.layers.0.block_sparse_moe.experts.1.w1.weight", "BF16", 16));
    e = error();
    EXPECT_NE(e.find("the experts of a layer are matrices of one shape and dtype"), std::string::npos) << e;
    write("model.safetensors", experts("model.layers.0.block_sparse_moe.experts.1.w1.weight", "F32", 8));
    EXPECT_NE(error().find("of one shape and dtype"), std::string::npos) << error();
    write("model.safetensors", one_tensor("model.layers.0.block_sparse_moe.experts.1.w3.weight", "F32", 128));
    e = error();
    EXPECT_NE(e.find("expert 0 of 'blk.0.ffn_up_exps.weight' is missing"), std::string::npos) << e;
    write("config.json", moe + R"(,"quantization_config":{"quant_method":"gptq","bits":4,"group_size":32,"desc_act":true}})");
    e = error();
    EXPECT_NE(e.find("act-order (desc_act) GPTQ checkpoint of a mixture of experts (MixtralForCausalLM) is not "
                     "implemented"), std::string::npos) << e;
}

// More embedding rows than tokenizer.json has tokens (Qwen2.5's 151936 rows for 151665 tokens): the missing ids are
// unused [PAD<id>] tokens, as llama.cpp's converter writes them; fewer rows than tokens is an error.
TEST_F(HfFolder, VocabularyRowsBeyondTheTokenizerArePaddedAndFewerAreRefused) {
    const std::string base(k_config);
    write("config.json", std::string(base).replace(base.find("\"vocab_size\":4"), 14, "\"vocab_size\":6"));
    write("tokenizer.json", k_tokenizer);
    write("model.safetensors", one_tensor("model.embed_tokens.weight", "F32", 48));
    const auto c = hf_checkpoint::open(dir_.string());
    ASSERT_NE(c->own_vocab(), nullptr);
    const auto &v = *c->own_vocab();
    ASSERT_EQ(v.tokens.size(), 6u);
    EXPECT_EQ(v.tokens[3], "d");
    EXPECT_EQ(v.tokens[5], "[PAD5]");
    EXPECT_EQ(v.types[5], strata::token_type::unused);
    EXPECT_EQ(v.types[0], strata::token_type::normal);
    write("config.json", std::string(base).replace(base.find("\"vocab_size\":4"), 14, "\"vocab_size\":3"));
    EXPECT_NE(error().find("tokenizer.json has 4 tokens but the model has 3"), std::string::npos) << error();
}

// Gemma 3 cuts the embedding rows past the tokenizer off (llama.cpp's converter: "remove OOV rows") instead of padding.
TEST_F(HfFolder, Gemma3EmbeddingRowsPastTheTokenizerAreCutOff) {
    write("config.json", R"({"architectures":["Gemma3ForCausalLM"],"hidden_size":8,"intermediate_size":16,)"
                         R"("num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":2,"head_dim":4,)"
                         R"("query_pre_attn_scalar":4,"vocab_size":6})");
    write("tokenizer.json", k_tokenizer);
    write("model.safetensors",
          safetensors_bytes(R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[6,8],"data_offsets":[0,192]},)"
                            R"("model.layers.0.self_attn.q_norm.weight":{"dtype":"F32","shape":[4],)"
                            R"("data_offsets":[192,208]},)"
                            R"("model.layers.0.self_attn.k_norm.weight":{"dtype":"F32","shape":[4],)"
                            R"("data_offsets":[208,224]}})",
                            224));
    const auto c = hf_checkpoint::open(dir_.string());
    const auto *e = c->find_tensor("token_embd.weight");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->ne[1], 4);
    EXPECT_EQ(e->n_bytes, 4u * 8u * 4u);
    EXPECT_EQ(*c->get_uint("gemma3.vocab_size"), 4u);
    EXPECT_EQ(c->own_vocab()->tokens.size(), 4u);
    // Gemma's norms come back as w + 1 (HF stores w - 1): the file's bytes 0..15 of the q_norm were 192..207.
    const auto *q = c->find_tensor("blk.0.attn_q_norm.weight");
    ASSERT_NE(q, nullptr);
    float first;
    std::memcpy(&first, q->data, 4);
    float stored;
    const auto bytes = safetensors_bytes("{}", 224);
    std::memcpy(&stored, bytes.data() + 8 + 8 + 192, 4);
    EXPECT_EQ(first, stored + 1.0f);
}

} // namespace
