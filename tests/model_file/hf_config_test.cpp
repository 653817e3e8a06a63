// config.json -> GGUF metadata: each mapped key, the HF class defaults, Llama 3's rope_freqs as llama.cpp's converter
// computes it, and the refusals (unknown architecture, quantization_config, unknown keys, sliding windows).
#include "common/error.hpp"
#include "model_file/hf_architectures.hpp"
#include "model_file/hf_config.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using namespace strata;

const std::string k_llama = R"("architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,)"
                            R"("intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,)"
                            R"("num_key_value_heads":8,"vocab_size":128256,"max_position_embeddings":131072)";

std::string error_of(const std::string &json) {
    metadata_table m("config.json");
    try {
        (void)map_hf_config(json, "dir/config.json", m);
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

TEST(HfConfig, MapsLlamaKeysWithTheConfigClassDefaults) {
    metadata_table m("config.json");
    const hf_config c = map_hf_config("{" + k_llama + R"(,"rope_theta":500000.0,"torch_dtype":"bfloat16"})",
                                      "dir/config.json", m);
    ASSERT_NE(c.architecture, nullptr);
    EXPECT_EQ(*m.get_string("general.architecture"), "llama");
    EXPECT_EQ(*m.get_uint("llama.embedding_length"), 4096u);
    EXPECT_EQ(*m.get_uint("llama.feed_forward_length"), 14336u);
    EXPECT_EQ(*m.get_uint("llama.block_count"), 32u);
    EXPECT_EQ(*m.get_uint("llama.attention.head_count_kv"), 8u);
    EXPECT_EQ(*m.get_uint("llama.context_length"), 131072u);
    EXPECT_DOUBLE_EQ(*m.get_float("llama.rope.freq_base"), 500000.0);
    EXPECT_DOUBLE_EQ(*m.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-6); // LlamaConfig's default
    EXPECT_EQ(*m.get_string("strata.rope.layout"), "neox");
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_TRUE(c.computed.empty());
}

// llama.cpp's convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) for Llama 3.1's rope_scaling: factor 8,
// low 1, high 4, original context 8192, theta 500000, head size 128: 64 factors, 1 for short wavelengths, 8 for long
// ones and the smooth blend between.
TEST(HfConfig, Llama3RopeScalingBecomesRopeFreqsAsLlamaCppComputesThem) {
    metadata_table m("config.json");
    const hf_config c = map_hf_config(
        "{" + k_llama +
            R"(,"rope_theta":500000.0,"rope_scaling":{"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,)"
            R"("original_max_position_embeddings":8192,"rope_type":"llama3"}})",
        "dir/config.json", m);
    ASSERT_EQ(c.computed.size(), 1u);
    EXPECT_EQ(c.computed[0].name, "rope_freqs.weight");
    const auto &f = c.computed[0].values;
    ASSERT_EQ(f.size(), 64u);
    for (size_t i = 0; i < f.size(); ++i) {
        const double freq = static_cast<float>(1.0 / std::pow(500000.0, static_cast<double>(2 * i) / 128.0));
        const double wavelen = 2 * M_PI / freq;
        if (wavelen < 8192.0 / 4) EXPECT_EQ(f[i], 1.0f) << i;
        else if (wavelen > 8192.0) EXPECT_EQ(f[i], 8.0f) << i;
        else {
            EXPECT_GT(f[i], 1.0f) << i;
            EXPECT_LT(f[i], 8.0f) << i;
        }
    }
    EXPECT_EQ(f.front(), 1.0f);
    EXPECT_EQ(f.back(), 8.0f);
    EXPECT_FALSE(m.has("llama.rope.scaling.type"));
}

// Keys a config.json leaves out take the config class's defaults (Qwen3Config: 32 KV heads, head_dim 128;
// MistralConfig: 8 KV heads and a window of 4096; Gemma2Config: 4 KV heads, head_dim 256, soft-caps 50 and 30).
TEST(HfConfig, MissingKeysTakeTheConfigClassDefaults) {
    const std::string dims = R"("hidden_size":4096,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":32)";
    metadata_table q("config.json");
    map_hf_config(R"({"architectures":["Qwen3ForCausalLM"],)" + dims + "}", "dir/config.json", q);
    EXPECT_EQ(*q.get_uint("qwen3.attention.head_count_kv"), 32u);
    EXPECT_EQ(*q.get_uint("qwen3.attention.key_length"), 128u);
    metadata_table m("config.json");
    map_hf_config(R"({"architectures":["MistralForCausalLM"],)" + dims + "}", "dir/config.json", m);
    EXPECT_EQ(*m.get_uint("llama.attention.head_count_kv"), 8u);
    EXPECT_EQ(*m.get_uint("llama.attention.sliding_window"), 4096u);
    metadata_table none("config.json");
    map_hf_config(R"({"architectures":["MistralForCausalLM"],"sliding_window":null,)" + dims + "}", "dir/config.json",
                  none);
    EXPECT_FALSE(none.has("llama.attention.sliding_window"));
    metadata_table g("config.json");
    map_hf_config(R"({"architectures":["Gemma2ForCausalLM"],)" + dims + "}", "dir/config.json", g);
    EXPECT_EQ(*g.get_uint("gemma2.attention.head_count_kv"), 4u);
    EXPECT_EQ(*g.get_uint("gemma2.attention.key_length"), 256u);
    EXPECT_DOUBLE_EQ(*g.get_float("gemma2.attn_logit_softcapping"), 50.0);
    EXPECT_DOUBLE_EQ(*g.get_float("gemma2.final_logit_softcapping"), 30.0);
    EXPECT_EQ(*g.get_uint("gemma2.attention.sliding_window"), 4096u);
}

// Gemma 3's window pattern from transformers' layer_types, its local RoPE base, and the query scale check.
TEST(HfConfig, Gemma3LayerTypesBecomeTheWindowPattern) {
    std::string types;
    for (int l = 0; l < 12; ++l) types += std::string(l ? "," : "") + ((l + 1) % 6 ? "\"sliding_attention\"" : "\"full_attention\"");
    const std::string base = R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":64,)"
                             R"("intermediate_size":128,"num_hidden_layers":12,"num_attention_heads":4,"head_dim":16,)"
                             R"("sliding_window":512,"rope_local_base_freq":10000,"query_pre_attn_scalar":)";
    metadata_table m("config.json");
    map_hf_config(base + R"(16,"layer_types":[)" + types + "]}", "dir/config.json", m);
    EXPECT_EQ(*m.get_uint("gemma3.attention.sliding_window_pattern"), 6u);
    EXPECT_EQ(*m.get_uint("gemma3.attention.sliding_window"), 512u);
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.freq_base_swa"), 10000.0);
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.freq_base"), 1000000.0); // Gemma3TextConfig's default
    EXPECT_NE(error_of(base + "32}").find("query_pre_attn_scalar 32"), std::string::npos);
    EXPECT_NE(error_of(base + R"(16,"layer_types":["full_attention","sliding_attention"]})").find("layer_types[1]"),
              std::string::npos);
}

// Gemma 3's multimodal checkpoints (4B, 12B, 27B): the language model's config is text_config, completed with
// Gemma3TextConfig's defaults for the keys transformers leaves out; the vision settings are set aside; any other
// top-level key is refused.
TEST(HfConfig, Gemma3ConditionalGenerationReadsItsTextConfig) {
    const std::string mm = R"({"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3",)"
                           R"("boi_token_index":255999,"eoi_token_index":256000,"image_token_index":262144,)"
                           R"("mm_tokens_per_image":256,"torch_dtype":"bfloat16","vision_config":{"hidden_size":1152},)"
                           R"("text_config":{"hidden_size":2560,"intermediate_size":10240,"model_type":"gemma3_text",)"
                           R"("num_hidden_layers":34,"rope_scaling":{"factor":8.0,"rope_type":"linear"},)"
                           R"("sliding_window":1024})";
    metadata_table m("config.json");
    const hf_config cfg = map_hf_config(mm + "}", "dir/config.json", m);
    EXPECT_TRUE(cfg.multimodal);
    EXPECT_EQ(std::string(cfg.architecture->hf_name), "Gemma3ForCausalLM");
    EXPECT_EQ(*m.get_uint("gemma3.attention.head_count"), 8u);    // Gemma3TextConfig's default
    EXPECT_EQ(*m.get_uint("gemma3.attention.head_count_kv"), 4u); // the architecture row's
    EXPECT_EQ(*m.get_uint("gemma3.attention.key_length"), 256u);
    EXPECT_EQ(*m.get_uint("gemma3.vocab_size"), 262208u);
    EXPECT_EQ(*m.get_uint("gemma3.attention.sliding_window"), 1024u);
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.freq_base_swa"), 10000.0);
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.scaling.factor"), 8.0);
    EXPECT_EQ(cfg.torch_dtype, "bfloat16");
    EXPECT_NE(error_of(mm + R"(,"audio_config":{}})").find("Gemma3ForConditionalGeneration key audio_config"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3"})").find("text_config"),
              std::string::npos);
}

// transformers 5's rope_parameters keyed by layer type (Gemma 3): the global layers' base and scaling are the model's,
// the windowed layers' base is their own; anything but a plain RoPE on the windowed layers is refused.
TEST(HfConfig, Gemma3RopeParametersByLayerTypeGiveBothBases) {
    const std::string base = R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":64,)"
                             R"("intermediate_size":128,"num_hidden_layers":6,"num_attention_heads":4,"head_dim":16,)"
                             R"("query_pre_attn_scalar":16,"rope_parameters":)";
    metadata_table m("config.json");
    map_hf_config(base + R"({"sliding_attention":{"rope_type":"default","rope_theta":10000.0},)"
                         R"("full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0}}})",
                  "dir/config.json", m);
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.freq_base"), 1000000.0);
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.freq_base_swa"), 10000.0);
    EXPECT_EQ(*m.get_string("gemma3.rope.scaling.type"), "linear");
    EXPECT_DOUBLE_EQ(*m.get_float("gemma3.rope.scaling.factor"), 8.0);
    const std::string scaled = error_of(base + R"({"sliding_attention":{"rope_type":"linear","factor":2},"full_attention":{}}})");
    EXPECT_NE(scaled.find("the windowed layers' RoPE is plain"), std::string::npos) << scaled;
    EXPECT_NE(error_of(base + R"({"sliding_attention":{"rope_theta":10000.0}}})").find("no full_attention"),
              std::string::npos);
    EXPECT_NE(error_of(base + R"({"full_attention":{},"chunked_attention":{}}})").find("rope_parameters.chunked_attention"),
              std::string::npos);
    const std::string two_local = error_of(base + R"({"full_attention":{},"sliding_attention":{"rope_theta":5000}},"rope_local_base_freq":10000})");
    EXPECT_NE(two_local.find("disagree"), std::string::npos) << two_local;
    // A model with one RoPE base refuses two.
    EXPECT_NE(error_of(R"({"architectures":["Gemma2ForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                       R"("num_hidden_layers":6,"num_attention_heads":4,"head_dim":16,"query_pre_attn_scalar":16,)"
                       R"("rope_parameters":{"full_attention":{"rope_theta":10000},"sliding_attention":{"rope_theta":500}}})")
                  .find("one base per model"),
              std::string::npos);
}

// Keys real Gemma 2 9B / Gemma 3 (transformers >= 4.53) / Phi-4-mini configs carry, at the values those models have;
// any other value is refused.
TEST(HfConfig, RealConfigsExtraKeysAreReadAndCheckedNotRefusedUnread) {
    const std::string dims = R"("hidden_size":64,"intermediate_size":128,"num_hidden_layers":6,"num_attention_heads":4,)"
                             R"("num_key_value_heads":2,"head_dim":16,"query_pre_attn_scalar":16)";
    metadata_table g2("config.json");
    map_hf_config(R"({"architectures":["Gemma2ForCausalLM"],"sliding_window":4096,"sliding_window_size":4096,)" + dims +
                      "}",
                  "dir/config.json", g2);
    EXPECT_EQ(*g2.get_uint("gemma2.attention.sliding_window"), 4096u);
    EXPECT_NE(error_of(R"({"architectures":["Gemma2ForCausalLM"],"sliding_window":4096,"sliding_window_size":512,)" +
                       dims + "}")
                  .find("sliding_window_size 512"),
              std::string::npos);
    metadata_table g3("config.json");
    map_hf_config(R"({"architectures":["Gemma3ForCausalLM"],"_sliding_window_pattern":3,)"
                  R"("use_bidirectional_attention":false,)" + dims + "}",
                  "dir/config.json", g3);
    EXPECT_EQ(*g3.get_uint("gemma3.attention.sliding_window_pattern"), 3u);
    EXPECT_NE(error_of(R"({"architectures":["Gemma3ForCausalLM"],"use_bidirectional_attention":true,)" + dims + "}")
                  .find("use_bidirectional_attention"),
              std::string::npos);
    const std::string phi = R"({"architectures":["Phi3ForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                            R"("num_hidden_layers":2,"num_attention_heads":4,"lm_head_bias":false,)";
    metadata_table p4("config.json");
    map_hf_config(phi + R"("full_attn_mod":1,"interpolate_factor":1})", "dir/config.json", p4);
    EXPECT_NE(error_of(phi + R"("full_attn_mod":2})").find("full_attn_mod 2"), std::string::npos);
    EXPECT_NE(error_of(phi + R"("interpolate_factor":2})").find("interpolate_factor 2"), std::string::npos);
}

// LongRoPE's original context read from inside rope_scaling still reaches the plugin (it picks long or short
// factors against it).
TEST(HfConfig, LongRopeOriginalContextInsideRopeScalingIsWritten) {
    metadata_table m("config.json");
    const std::string factors = "[1.0,1.1,1.2,1.3,1.4,1.5,1.6,1.7]";
    map_hf_config(R"({"architectures":["Phi3ForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                  R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":1024,)"
                  R"("rope_scaling":{"type":"longrope","original_max_position_embeddings":256,"long_factor":)" +
                      factors + R"(,"short_factor":)" + factors + "}}",
                  "dir/config.json", m);
    EXPECT_EQ(*m.get_uint("phi3.rope.scaling.original_context_length"), 256u);
}

TEST(HfConfig, QwenYarnAndHeadDimMapToTheirKeys) {
    metadata_table m("config.json");
    map_hf_config(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":1024,)"
                  R"("intermediate_size":3072,"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,)"
                  R"("head_dim":128,"use_sliding_window":false,"sliding_window":null,"max_window_layers":28,)"
                  R"("tie_word_embeddings":true,"rope_scaling":{"rope_type":"yarn","factor":4.0,)"
                  R"("original_max_position_embeddings":32768}})",
                  "dir/config.json", m);
    EXPECT_EQ(*m.get_uint("qwen3.attention.key_length"), 128u);
    EXPECT_EQ(*m.get_string("qwen3.rope.scaling.type"), "yarn");
    EXPECT_DOUBLE_EQ(*m.get_float("qwen3.rope.scaling.factor"), 4.0);
    EXPECT_EQ(*m.get_uint("qwen3.rope.scaling.original_context_length"), 32768u);
}

// Phi-3's LongRoPE as llama.cpp's converter writes it: the factor lists as tensors, the attention factor
// sqrt(1 + ln(scale) / ln(original context)) with scale 1024 / 256 = 4: sqrt(1.25).
TEST(HfConfig, Phi3LongRopeBecomesTheFactorTensorsAndTheAttentionFactor) {
    metadata_table m("config.json");
    const std::string factors = "[1.0,1.1,1.2,1.3,1.4,1.5,1.6,1.7]";
    const hf_config c = map_hf_config(
        R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":64,"intermediate_size":128,)"
        R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":1024,)"
        R"("original_max_position_embeddings":256,"sliding_window":262144,"embd_pdrop":0.0,"resid_pdrop":0.0,)"
        R"("rope_scaling":{"type":"longrope","long_factor":)" + factors + R"(,"short_factor":)" + factors + "}}",
        "dir/config.json", m);
    ASSERT_EQ(c.computed.size(), 2u);
    EXPECT_EQ(c.computed[0].name, "rope_factors_long.weight");
    EXPECT_EQ(c.computed[1].name, "rope_factors_short.weight");
    EXPECT_EQ(c.computed[0].values.size(), 8u);
    EXPECT_FLOAT_EQ(c.computed[0].values[7], 1.7f);
    EXPECT_NEAR(*m.get_float("phi3.rope.scaling.attn_factor"), std::sqrt(1.25), 1e-6);
    EXPECT_EQ(*m.get_uint("phi3.rope.scaling.original_context_length"), 256u);
    EXPECT_EQ(*m.get_uint("phi3.attention.sliding_window"), 262144u);
    EXPECT_DOUBLE_EQ(*m.get_float("phi3.attention.layer_norm_rms_epsilon"), 1e-5); // Phi3Config's default
    metadata_table bad("config.json");
    EXPECT_THROW(map_hf_config(R"({"architectures":["Phi3ForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                               R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":1024,)"
                               R"("original_max_position_embeddings":256,"rope_scaling":{"type":"longrope",)"
                               R"("long_factor":[1.0],"short_factor":[1.0]}})",
                               "dir/config.json", bad),
                 strata::error);
}

// quantization_config as AutoGPTQ / GPTQModel and AutoAWQ write it: read, or refused naming the key or value.
TEST(HfConfig, ReadsGptqAndAwqQuantizationConfigsAndRefusesTheRest) {
    metadata_table m("config.json");
    const hf_config gptq = map_hf_config(
        "{" + k_llama + R"(,"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128,"desc_act":false,)"
                        R"("sym":true,"damp_percent":0.01,"true_sequential":true,"static_groups":false,)"
                        R"("model_name_or_path":null,"model_file_base_name":"model"}})",
        "dir/config.json", m);
    EXPECT_EQ(gptq.quant.method, "gptq");
    EXPECT_EQ(gptq.quant.bits, 4);
    EXPECT_EQ(gptq.quant.group_size, 128);
    EXPECT_TRUE(gptq.quant.zeros_minus_one); // AutoGPTQ's v1 format
    metadata_table m2("config.json");
    const hf_config v2 = map_hf_config("{" + k_llama + R"(,"quantization_config":{"quant_method":"gptq","bits":8,)"
                                                       R"("group_size":-1,"checkpoint_format":"gptq_v2","sym":false}})",
                                       "dir/config.json", m2);
    EXPECT_FALSE(v2.quant.zeros_minus_one);
    EXPECT_EQ(v2.quant.group_size, -1);
    EXPECT_FALSE(v2.quant.sym);
    metadata_table m3("config.json");
    const hf_config awq = map_hf_config("{" + k_llama + R"(,"quantization_config":{"quant_method":"awq","zero_point":true,)"
                                                        R"("q_group_size":128,"w_bit":4,"version":"GEMM","modules_to_not_convert":null}})",
                                        "dir/config.json", m3);
    EXPECT_EQ(awq.quant.method, "awq");
    EXPECT_EQ(awq.quant.group_size, 128);
    EXPECT_FALSE(awq.quant.zeros_minus_one);
    for (const auto &[qc, message] : std::vector<std::pair<std::string, std::string>>{
             {R"({"quant_method":"gptq","bits":3})", "bits 3 is not implemented"},
             {R"({"quant_method":"gptq","bits":4,"group_size":100})", "group_size 100 is not implemented"},
             {R"({"quant_method":"gptq","bits":4,"is_marlin_format":true})", "Marlin"},
             {R"({"quant_method":"gptq","bits":4,"checkpoint_format":"marlin"})", "checkpoint_format 'marlin'"},
             {R"({"quant_method":"gptq","bits":4,"dynamic":{"-:.*down":{}}})", "dynamic"},
             {R"({"quant_method":"gptq","bits":4,"rotation":"hadamard"})", "key(s) rotation"},
             {R"({"quant_method":"awq","bits":4,"version":"gemv"})", "AWQ version 'gemv'"},
             {R"({"quant_method":"awq","bits":4,"zero_point":false})", "zero_point is false"},
             {R"({"quant_method":"awq","bits":8})", "AWQ with 8 bits"},
             {R"({"bits":4})", "no quant_method"}}) {
        const std::string e = error_of("{" + k_llama + R"(,"quantization_config":)" + qc + "}");
        EXPECT_NE(e.find(message), std::string::npos) << qc << "\n" << e;
    }
}

// Mixtures of experts: the expert counts and sizes mapped to GGUF's keys; a routing or layout the GGUF architecture
// does not compute refused.
TEST(HfConfig, MixturesMapTheirExpertsAndRefuseOtherRouting) {
    const std::string qwen3 = R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":64,)"
                              R"("intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"head_dim":16,)"
                              R"("num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32,)"
                              R"("router_aux_loss_coef":0.001,"output_router_logits":false,"decoder_sparse_step":1,)"
                              R"("mlp_only_layers":[])";
    metadata_table m("config.json");
    map_hf_config(qwen3 + R"(,"norm_topk_prob":true})", "dir/config.json", m);
    EXPECT_EQ(*m.get_string("general.architecture"), "qwen3moe");
    EXPECT_EQ(*m.get_uint("qwen3moe.expert_count"), 8u);
    EXPECT_EQ(*m.get_uint("qwen3moe.expert_used_count"), 2u);
    EXPECT_EQ(*m.get_uint("qwen3moe.expert_feed_forward_length"), 32u);
    EXPECT_NE(error_of(qwen3 + "}").find("norm_topk_prob is false (the config class's default)"), std::string::npos)
        << error_of(qwen3 + "}");
    EXPECT_NE(error_of(qwen3 + R"(,"norm_topk_prob":true,"decoder_sparse_step":2})").find("decoder_sparse_step 2"),
              std::string::npos);
    EXPECT_NE(error_of(qwen3 + R"(,"norm_topk_prob":true,"mlp_only_layers":[0]})").find("mlp_only_layers"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"architectures":["MixtralForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                       R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"num_local_experts":8,)"
                       R"("num_experts_per_tok":9})")
                  .find("implausible"),
              std::string::npos);
    metadata_table q2("config.json");
    map_hf_config(R"({"architectures":["Qwen2MoeForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                  R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"num_experts":4,"num_experts_per_tok":2,)"
                  R"("moe_intermediate_size":32,"shared_expert_intermediate_size":64})",
                  "dir/config.json", q2);
    EXPECT_EQ(*q2.get_uint("qwen2moe.expert_shared_feed_forward_length"), 64u);
    EXPECT_NE(error_of(R"({"architectures":["Qwen2MoeForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                       R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"num_experts":4,"num_experts_per_tok":2,)"
                       R"("moe_intermediate_size":32,"shared_expert_intermediate_size":64,"norm_topk_prob":true})")
                  .find("does not renormalise"),
              std::string::npos);
}

// FP8 quantization_config as llm-compressor (compressed-tensors, float-quantized) and AutoFP8 / transformers (fp8)
// write it: the scale layout, static activation scales and the ignore list read; every other scheme refused by name.
TEST(HfConfig, ReadsFp8QuantizationConfigsAndRefusesTheRest) {
    const std::string weights = R"("weights":{"num_bits":8,"type":"float","symmetric":true,"strategy":"channel",)"
                                R"("dynamic":false,"group_size":null,"block_structure":null,"actorder":null,)"
                                R"("observer":"minmax","observer_kwargs":{}})";
    const std::string dynamic_acts = R"("input_activations":{"num_bits":8,"type":"float","symmetric":true,)"
                                     R"("strategy":"token","dynamic":true,"observer":null})";
    auto ct = [&](const std::string &group, const std::string &top = "") {
        return R"({"quant_method":"compressed-tensors","format":"float-quantized","quantization_status":"compressed",)"
               R"("global_compression_ratio":1.2,"ignore":["lm_head","re:.*mlp\\.gate$"],"kv_cache_scheme":null,)"
               R"("sparsity_config":{},"version":"0.9.4",)" + top + R"("config_groups":{"group_0":{"targets":["Linear"],)" +
               group + R"(,"output_activations":null}}})";
    };
    metadata_table m("config.json");
    const hf_config channel =
        map_hf_config("{" + k_llama + R"(,"quantization_config":)" + ct(weights + "," + dynamic_acts) + "}", "dir/config.json", m);
    EXPECT_EQ(channel.quant.method, "compressed-tensors");
    EXPECT_EQ(channel.quant.fp8_scales, "channel");
    EXPECT_FALSE(channel.quant.static_input_scale);
    EXPECT_FALSE(channel.quant.quantized_lm_head) << "lm_head is in the ignore list";
    EXPECT_TRUE(channel.quant.ignores("model.layers.3.mlp.gate")) << "a re: entry matches as Python's re.match";
    EXPECT_FALSE(channel.quant.ignores("model.layers.3.mlp.gate_proj"));
    EXPECT_FALSE(channel.quant.ignores("x.model.layers.3.mlp.gatez"));
    metadata_table m2("config.json");
    const hf_config fp8 = map_hf_config("{" + k_llama + R"(,"quantization_config":{"quant_method":"fp8",)"
                                                        R"("activation_scheme":"dynamic","fmt":"e4m3","weight_block_size":[128,128],)"
                                                        R"("modules_to_not_convert":["model.layers.0.mlp.down_proj"]}})",
                                        "dir/config.json", m2);
    EXPECT_EQ(fp8.quant.fp8_scales, "block");
    EXPECT_EQ(fp8.quant.block_rows, 128);
    EXPECT_EQ(fp8.quant.block_cols, 128);
    EXPECT_TRUE(fp8.quant.ignores("model.layers.0.mlp.down_proj"));
    metadata_table m3("config.json");
    const hf_config autofp8 = map_hf_config(
        "{" + k_llama + R"(,"quantization_config":{"quant_method":"fp8","activation_scheme":"static","ignored_layers":["lm_head"]}})",
        "dir/config.json", m3);
    EXPECT_EQ(autofp8.quant.fp8_scales, "tensor");
    EXPECT_TRUE(autofp8.quant.static_input_scale);
    const std::string int_weights = R"("weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"group","group_size":128})";
    const std::string group_weights = R"("weights":{"num_bits":8,"type":"float","strategy":"group","group_size":128})";
    for (const auto &[qc, message] : std::vector<std::pair<std::string, std::string>>{
             {R"({"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{}})", "format 'pack-quantized'"},
             {ct(int_weights), "int 4-bit"},
             {ct(group_weights), "group_size 128 is not implemented"},
             {ct(R"("weights":{"num_bits":8,"type":"float","strategy":"block"})"), "block_structure is missing"},
             {ct(R"("weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":[128,48]})"), "48 columns wide"},
             {ct(R"("weights":{"num_bits":8,"type":"float","dynamic":true})"), "dynamic is true"},
             {ct(R"("weights":{"num_bits":8,"type":"float","rotation":1})"), "key(s) rotation"},
             {ct(weights + R"(,"input_activations":{"num_bits":8,"type":"float","strategy":"token","dynamic":false})"),
              "static per token"},
             {ct(weights + R"(,"input_activations":{"num_bits":8,"type":"int","strategy":"token","dynamic":true})"),
              "activations are 8-bit float"},
             {R"({"quant_method":"compressed-tensors","format":"float-quantized","config_groups":{"a":{"targets":["Linear"],)" +
                  weights + R"(},"b":{"targets":["Linear"],)" + weights + "}}}",
              "exactly one scheme"},
             {R"({"quant_method":"compressed-tensors","format":"float-quantized","config_groups":{"a":{"targets":["re:.*q_proj"],)" +
                  weights + "}}}",
              "target [\"Linear\"]"},
             {R"({"quant_method":"compressed-tensors","format":"float-quantized","quantization_status":"frozen","config_groups":{}})",
              "quantization_status 'frozen'"},
             {R"({"quant_method":"compressed-tensors","format":"float-quantized","ignore":["re:(("],"config_groups":{"a":{"targets":["Linear"],)" +
                  weights + "}}}",
              "not a regular expression"},
             {R"({"quant_method":"fp8","fmt":"e5m2"})", "fmt 'e5m2'"},
             {R"({"quant_method":"fp8","activation_scheme":"static","weight_block_size":[128,128]})", "static activation"},
             {R"({"quant_method":"fp8","weight_block_size":[128]})", "weight_block_size"},
             {R"({"quant_method":"fp8","activation_scheme":"per_token"})", "activation_scheme 'per_token'"}}) {
        const std::string e = error_of("{" + k_llama + R"(,"quantization_config":)" + qc + "}");
        EXPECT_NE(e.find(message), std::string::npos) << qc << "\n" << e;
    }
    const std::string kv = error_of("{" + k_llama + R"(,"quantization_config":{"quant_method":"compressed-tensors",)"
                                                    R"("format":"float-quantized","kv_cache_scheme":{"num_bits":8}}})");
    EXPECT_NE(kv.find("kv_cache_scheme"), std::string::npos) << kv;
}

TEST(HfConfig, RefusesWhatItCannotRunByName) {
    EXPECT_NE(error_of(R"({"architectures":["GPTNeoXForCausalLM"]})").find("'GPTNeoXForCausalLM' is not one"),
              std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"quantization_config":{"quant_method":"bitsandbytes"}})")
                  .find("quantization_config.quant_method 'bitsandbytes' is not implemented"),
              std::string::npos);
    const std::string unknown = error_of("{" + k_llama + R"(,"logit_scale":0.5})");
    EXPECT_NE(unknown.find("dir/config.json"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("logit_scale"), std::string::npos) << unknown;
    EXPECT_NE(error_of("{" + k_llama + R"(,"hidden_act":"gelu"})").find("hidden_act 'gelu'"), std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"rope_scaling":{"rope_type":"dynamic","factor":2}})").find("'dynamic'"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":64,)"
                       R"("intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,)"
                       R"("num_key_value_heads":4,"use_sliding_window":true,"sliding_window":4096})")
                  .find("use_sliding_window"),
              std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"num_attention_heads":"32"})").find("expected a non-negative integer"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"architectures":["LlamaForCausalLM"],"model_type":"mistral"})").find("does not match"),
              std::string::npos);
    EXPECT_NE(error_of("not json").find("not valid JSON"), std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"x":)" + std::string(100000, '[')).find("nests deeper"), std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"num_hidden_layers":4294967298})").find("'num_hidden_layers' is 4294967298"),
              std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"rope_scaling":{"rope_type":"yarn","factor":4.0,"attention_factor":1.0}})")
                  .find("attention_factor"),
              std::string::npos);
    EXPECT_NE(error_of("{" + k_llama + R"(,"rope_theta":500000.0,"rope_scaling":{"rope_type":"linear","factor":2,)"
                                       R"("rope_theta":10000.0}})")
                  .find("one RoPE base"),
              std::string::npos);
}

// The name table is said once and read both ways (the reader and tools/hf-export).
TEST(HfConfig, TensorNamesMapBothWays) {
    const hf_architecture *a = find_hf_architecture("Qwen2ForCausalLM");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(*gguf_tensor_name(*a, "model.layers.17.self_attn.k_proj.bias"), "blk.17.attn_k.bias");
    EXPECT_EQ(*hf_tensor_name(*a, "blk.17.attn_k.bias"), "model.layers.17.self_attn.k_proj.bias");
    EXPECT_EQ(*gguf_tensor_name(*a, "lm_head.weight"), "output.weight");
    EXPECT_FALSE(gguf_tensor_name(*a, "model.layers.x.mlp.up_proj.weight"));
    EXPECT_FALSE(gguf_tensor_name(*a, "model.layers.01.mlp.up_proj.weight"));
    EXPECT_FALSE(gguf_tensor_name(*a, "model.vision_tower.weight"));
}

} // namespace
