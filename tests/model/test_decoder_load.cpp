// The decoder plugin's load step through the plugin ABI over an in-memory model source (no file): the family table
// decides which tensors a layer must, may or must not have, the planner's tensor list follows from it, and what the
// plugin does not implement is refused with its name rather than run.
#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace {

using strata::testing::test_registry;

// A model source over maps: metadata keys and F32 tensors (zeros; a tensor's view can be edited before create).
struct fake_source {
    std::map<std::string, uint64_t> u64;
    std::map<std::string, double> f64;
    std::map<std::string, std::string> str;
    std::map<std::string, strata_tensor_view> tensors;
    std::map<std::string, std::vector<float>> storage;
    std::vector<std::string> names;
    const strata_quant_desc *f32 = nullptr;
    strata_model_source view{};

    fake_source(const fake_source &) = delete; // view.ctx and the views point into this object
    fake_source &operator=(const fake_source &) = delete;
    fake_source() {
        f32 = test_registry().find_quant_by_type(0).desc;
        view.struct_size = offsetof(strata_model_source, host) + sizeof(view.host); // no host copies
        view.ctx = this;
        view.get_u64 = [](void *ctx, const char *key, uint64_t *out) -> int32_t {
            auto &m = static_cast<fake_source *>(ctx)->u64;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second;
            return 1;
        };
        view.get_f64 = [](void *ctx, const char *key, double *out) -> int32_t {
            auto &m = static_cast<fake_source *>(ctx)->f64;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second;
            return 1;
        };
        view.get_str = [](void *ctx, const char *key, const char **out) -> int32_t {
            auto &m = static_cast<fake_source *>(ctx)->str;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second.c_str();
            return 1;
        };
        view.get_tensor = [](void *ctx, const char *name, strata_tensor_view *out) -> int32_t {
            auto &m = static_cast<fake_source *>(ctx)->tensors;
            auto it = m.find(name);
            if (it == m.end()) return 0;
            *out = it->second;
            return 1;
        };
    }

    // A matrix [cols, rows], or with stack > 0 a 3-D expert tensor [cols, rows, stack] with its dimensions (ABI 1.17).
    void tensor(const std::string &name, int64_t cols, int64_t rows = 1, int64_t stack = 0) {
        auto &data = storage[name];
        data.assign(static_cast<size_t>(cols * rows * std::max<int64_t>(stack, 1)), 1.0f);
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        v.ggml_type = 0;
        v.quant = f32;
        v.data = data.data();
        v.rows = rows;
        v.cols = cols;
        v.row_bytes = cols * 4;
        v.name = storage.find(name)->first.c_str();
        if (stack > 0) {
            v.rows = rows * stack;
            v.n_dims = 3;
            v.ne[0] = cols, v.ne[1] = rows, v.ne[2] = stack, v.ne[3] = 1;
        }
        tensors[name] = v;
    }
};

// Fills s with a model of `layers` layers of `arch` with dim 32, 4 heads (2 KV) of head size `head`, ff 64, vocab 16:
// every tensor the family requires (phi3: fused Q/K/V and gate-up; gemma: post-norms), plus Q/K/V biases when asked.
void fill(fake_source &s, const std::string &arch, int64_t head = 8, bool qkv_bias = false, int layers = 2) {
    const std::string p = arch + ".";
    const bool gemma = arch == "gemma2" || arch == "gemma3";
    s.str["general.architecture"] = arch;
    s.u64[p + "embedding_length"] = 32;
    s.u64[p + "block_count"] = static_cast<uint64_t>(layers);
    s.u64[p + "attention.head_count"] = 4;
    s.u64[p + "attention.head_count_kv"] = 2;
    s.u64[p + "feed_forward_length"] = 64;
    if (head != 8) s.u64[p + "attention.key_length"] = static_cast<uint64_t>(head);
    s.tensor("token_embd.weight", 32, 16);
    s.tensor("output_norm.weight", 32);
    for (int l = 0; l < layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        s.tensor(b + "attn_norm.weight", 32);
        if (arch == "phi3") {
            s.tensor(b + "attn_qkv.weight", 32, 8 * head);
            if (qkv_bias) s.tensor(b + "attn_qkv.bias", 8 * head);
        } else {
            s.tensor(b + "attn_q.weight", 32, 4 * head);
            s.tensor(b + "attn_k.weight", 32, 2 * head);
            s.tensor(b + "attn_v.weight", 32, 2 * head);
        }
        if (qkv_bias && arch != "phi3") {
            s.tensor(b + "attn_q.bias", 4 * head);
            s.tensor(b + "attn_k.bias", 2 * head);
            s.tensor(b + "attn_v.bias", 2 * head);
        }
        if (arch == "qwen3" || arch == "gemma3") {
            s.tensor(b + "attn_q_norm.weight", head);
            s.tensor(b + "attn_k_norm.weight", head);
        }
        s.tensor(b + "attn_output.weight", 4 * head, 32);
        if (gemma) s.tensor(b + "post_attention_norm.weight", 32);
        if (gemma) s.tensor(b + "post_ffw_norm.weight", 32);
        s.tensor(b + "ffn_norm.weight", 32);
        if (arch != "phi3") s.tensor(b + "ffn_gate.weight", 32, 64);
        s.tensor(b + "ffn_up.weight", 32, arch == "phi3" ? 128 : 64); // Phi-3: gate and up fused
        s.tensor(b + "ffn_down.weight", 64, 32);
    }
}

struct load_result {
    strata_model *model = nullptr;
    std::string error;
    std::vector<std::string> listed; // tensor_at names in order
    strata_model_hparams hp{};
};

load_result load(fake_source &s) {
    load_result r;
    const auto arch = test_registry().find_model_arch_for(s.str["general.architecture"]);
    if (!arch) {
        r.error = "no plugin";
        return r;
    }
    strata_status st{};
    r.model = arch->create(&s.view, &st);
    if (r.model == nullptr) {
        r.error = st.message;
        return r;
    }
    for (int32_t i = 0; i < arch->tensor_count(r.model); ++i) {
        strata_tensor_view v{};
        int32_t layer = 0;
        if (arch->tensor_at(r.model, i, &v, &layer) == STRATA_OK) r.listed.emplace_back(v.name);
    }
    r.hp.struct_size = sizeof r.hp;
    arch->get_hparams(r.model, &r.hp);
    arch->destroy(r.model);
    r.model = nullptr;
    return r;
}

void expect_refused(fake_source &s, const std::string &needle) {
    const load_result r = load(s);
    EXPECT_FALSE(r.error.empty()) << "loaded; expected a refusal naming " << needle;
    EXPECT_NE(r.error.find(needle), std::string::npos) << r.error;
}

TEST(DecoderLoad, EachFamilyListsTheTensorsItsRowAllowsInUseOrder) {
    fake_source qwen3;
    fill(qwen3, "qwen3", 16); // head size 16 with dim 32 / 4 heads = 8: attention.key_length
    const load_result r = load(qwen3);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.hp.head_dim, 16);
    EXPECT_EQ(r.hp.rope_mode, STRATA_ROPE_NEOX);
    // The embedding, 11 tensors per layer (the 9 shared + the Q/K norms), the output norm and the tied classifier.
    ASSERT_EQ(r.listed.size(), 1u + 2u * 11u + 2u);
    const std::vector<std::string> layer0(r.listed.begin() + 1, r.listed.begin() + 12);
    EXPECT_EQ(layer0, (std::vector<std::string>{"blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                                                "blk.0.attn_v.weight", "blk.0.attn_q_norm.weight",
                                                "blk.0.attn_k_norm.weight", "blk.0.attn_output.weight",
                                                "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
                                                "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}));
    EXPECT_EQ(r.listed.back(), "token_embd.weight") << "a tied classifier is the embedding";

    fake_source qwen2;
    fill(qwen2, "qwen2", 8, true);
    const load_result q2 = load(qwen2);
    ASSERT_TRUE(q2.error.empty()) << q2.error;
    EXPECT_EQ(q2.listed.size(), 1u + 2u * 12u + 2u) << "the three biases per layer are weights the planner places";
    EXPECT_EQ(q2.hp.rope_mode, STRATA_ROPE_NEOX);
    // qwen2's optional output.bias (llama.cpp adds it to the logits) is a weight after the classifier; llama has none.
    qwen2.tensor("output.bias", 16);
    const load_result q2b = load(qwen2);
    ASSERT_TRUE(q2b.error.empty()) << q2b.error;
    ASSERT_EQ(q2b.listed.size(), 1u + 2u * 12u + 3u);
    EXPECT_EQ(q2b.listed.back(), "output.bias");

    fake_source llama;
    fill(llama, "llama");
    const load_result l = load(llama);
    ASSERT_TRUE(l.error.empty()) << l.error;
    EXPECT_EQ(l.listed.size(), 1u + 2u * 9u + 2u);
    EXPECT_EQ(l.hp.rope_mode, STRATA_ROPE_PAIRS);
    // A qwen3 norm in a llama file is not something llama uses: left out of the list (the engine refuses it unused).
    fake_source odd;
    fill(odd, "llama");
    odd.tensor("blk.0.attn_q_norm.weight", 8);
    const load_result o = load(odd);
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(std::count(o.listed.begin(), o.listed.end(), "blk.0.attn_q_norm.weight"), 0);
    odd.tensor("output.bias", 16);
    const load_result ob = load(odd);
    EXPECT_EQ(std::count(ob.listed.begin(), ob.listed.end(), "output.bias"), 0) << "llama reads no output.bias";
}

TEST(DecoderLoad, FusedTensorsAreListedOnceAndEitherFormOfQkvLoads) {
    fake_source phi3;
    fill(phi3, "phi3", 8, true);
    phi3.u64["phi3.attention.sliding_window"] = 2047; // read, warned about and not applied, as llama.cpp does
    const load_result r = load(phi3);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.hp.rope_mode, STRATA_ROPE_NEOX);
    ASSERT_EQ(r.listed.size(), 1u + 2u * 7u + 2u);
    const std::vector<std::string> layer0(r.listed.begin() + 1, r.listed.begin() + 8);
    EXPECT_EQ(layer0, (std::vector<std::string>{"blk.0.attn_norm.weight", "blk.0.attn_qkv.weight",
                                                "blk.0.attn_qkv.bias", "blk.0.attn_output.weight",
                                                "blk.0.ffn_norm.weight", "blk.0.ffn_up.weight",
                                                "blk.0.ffn_down.weight"}));
    // llama.cpp's create_tensor_qkv reads either form for every family: a llama with fused Q/K/V loads too.
    fake_source llama;
    fill(llama, "llama");
    for (int l = 0; l < 2; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        for (const char *t : {"attn_q.weight", "attn_k.weight", "attn_v.weight"}) llama.tensors.erase(b + t);
        llama.tensor(b + "attn_qkv.weight", 32, 64);
    }
    const load_result l = load(llama);
    ASSERT_TRUE(l.error.empty()) << l.error;
    EXPECT_EQ(l.listed.size(), 1u + 2u * 7u + 2u);
    // Phi-3's separate Q/K/V (llama.cpp accepts them too) still need their fused gate-up.
    fake_source separate;
    fill(separate, "phi3");
    for (int l = 0; l < 2; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        separate.tensors.erase(b + "attn_qkv.weight");
        separate.tensor(b + "attn_q.weight", 32, 32);
        separate.tensor(b + "attn_k.weight", 32, 16);
        separate.tensor(b + "attn_v.weight", 32, 16);
    }
    const load_result sp = load(separate);
    EXPECT_TRUE(sp.error.empty()) << sp.error;
}

// What rope op the forward calls, and why (the model's device_op_need list; empty: plain rope).
std::vector<std::pair<int32_t, std::string>> op_needs(fake_source &s) {
    std::vector<std::pair<int32_t, std::string>> needs;
    const auto arch = test_registry().find_model_arch_for(s.str["general.architecture"]);
    strata_status st{};
    strata_model *m = arch->create(&s.view, &st);
    if (m == nullptr) {
        ADD_FAILURE() << st.message;
        return needs;
    }
    int32_t op = 0;
    const char *what = nullptr;
    for (int32_t i = 0; arch->device_op_need(m, i, &op, &what) == 1; ++i) needs.emplace_back(op, what);
    arch->destroy(m);
    return needs;
}

TEST(DecoderLoad, RopeScalingPicksTheOpAndLongRopeItsFactorsByContext) {
    {
        fake_source s;
        fill(s, "qwen2");
        s.str["qwen2.rope.scaling.type"] = "yarn";
        s.f64["qwen2.rope.scaling.factor"] = 4.0;
        s.u64["qwen2.rope.scaling.original_context_length"] = 32768;
        const auto needs = op_needs(s);
        ASSERT_EQ(needs.size(), 1u);
        EXPECT_EQ(needs[0].first, STRATA_DEVICE_OP_ROPE_SCALED);
        EXPECT_NE(needs[0].second.find("YaRN"), std::string::npos) << needs[0].second;
    }
    {
        fake_source s;
        fill(s, "llama");
        s.f64["llama.rope.scaling.factor"] = 2.0; // linear by default
        const auto needs = op_needs(s);
        ASSERT_EQ(needs.size(), 1u);
        EXPECT_EQ(needs[0].first, STRATA_DEVICE_OP_ROPE_EXT);
    }
    // Phi-3 LongRoPE: the long factors when the context per sequence (the user's max_model_len, ABI 1.13, else the
    // trained context) exceeds the original; its attn_factor needs rope_scaled.
    static std::string logged; // the plugin's log lines
    strata_host_services host{};
    host.struct_size = sizeof host;
    host.log = [](void *, int32_t, const char *, const char *message) { logged += std::string(message) + "\n"; };
    for (const auto &[n_ctx_seq, want] :
         {std::pair<int64_t, const char *>{0, "long frequency factors, as the context 131072 exceeds the original 4096"},
          {4096, "short frequency factors, as the context 4096 is within the original 4096"},
          {4097, "long frequency factors, as the context 4097 exceeds the original 4096"}}) {
        fake_source s;
        fill(s, "phi3");
        s.view.struct_size = sizeof s.view; // with n_ctx_seq (and no host copies: get_host_tensor NULL)
        s.view.n_ctx_seq = n_ctx_seq;
        s.view.host = &host;
        logged.clear();
        s.u64["phi3.context_length"] = 131072;
        s.u64["phi3.rope.scaling.original_context_length"] = 4096;
        s.f64["phi3.rope.scaling.attn_factor"] = 1.19;
        s.tensor("rope_factors_long.weight", 4);
        s.tensor("rope_factors_short.weight", 4);
        const auto needs = op_needs(s);
        ASSERT_EQ(needs.size(), 1u) << n_ctx_seq;
        EXPECT_EQ(needs[0].first, STRATA_DEVICE_OP_ROPE_SCALED);
        EXPECT_NE(needs[0].second.find("attn_factor"), std::string::npos) << needs[0].second;
        EXPECT_NE(logged.find(want), std::string::npos) << logged;
    }
}

// What a model logged at load (the decoder's INFO line for Gemma) and the ops it asks of the device.
struct logged_load {
    std::string log;
    std::vector<std::pair<int32_t, std::string>> needs;
};

logged_load load_logged(fake_source &s) {
    static std::string logged;
    strata_host_services host{};
    host.struct_size = sizeof host;
    host.log = [](void *, int32_t, const char *, const char *message) { logged += std::string(message) + "\n"; };
    s.view.host = &host;
    logged.clear();
    logged_load r;
    r.needs = op_needs(s);
    r.log = logged;
    s.view.host = nullptr;
    return r;
}

// Gemma 2 and 3 as llama.cpp's load_arch_hparams read them: their default caps and window, the window pattern (every
// other layer; five of six), the windowed layers' own RoPE base, and the 27B model's query scale by layer count.
TEST(DecoderLoad, GemmaRowsReadTheirCapsWindowPatternAndQueryScale) {
    {
        fake_source s;
        fill(s, "gemma2", 16, false, 4); // head size 16 (dim 32 / 4 heads = 8)
        const load_result r = load(s);
        ASSERT_TRUE(r.error.empty()) << r.error;
        const std::vector<std::string> layer0(r.listed.begin() + 1, r.listed.begin() + 11);
        EXPECT_EQ(layer0, (std::vector<std::string>{"blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                                                    "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                                                    "blk.0.attn_output.weight", "blk.0.post_attention_norm.weight",
                                                    "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
                                                    "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}));
        EXPECT_EQ(r.listed[11], "blk.0.post_ffw_norm.weight");
        EXPECT_EQ(r.listed.back(), "token_embd.weight") << "gemma2's classifier is always the embedding";
        const logged_load l = load_logged(s);
        EXPECT_NE(l.log.find("gemma2: attention scale 0.25, scores soft-capped at 50, a sliding window of 4096 on 2 "
                             "of 4 layers (layer l when l % 2 < 1), RoPE base 10000 scale 1 there and base 10000 scale "
                             "1 elsewhere; final logits soft-capped at 30; embedding scaled by 5.65685"),
                  std::string::npos)
            << l.log;
        const std::vector<int32_t> want{STRATA_DEVICE_OP_SCALE, STRATA_DEVICE_OP_GEGLU, STRATA_DEVICE_OP_SOFTCAP,
                                        STRATA_DEVICE_OP_ATTENTION_TERMS};
        std::vector<int32_t> ops;
        for (const auto &[op, what] : l.needs) ops.push_back(op);
        EXPECT_EQ(ops, want);
        // An output.weight is not gemma2's (llama.cpp never reads it): left unlisted, so the engine refuses it.
        s.tensor("output.weight", 32, 16);
        const load_result o = load(s);
        EXPECT_EQ(std::count(o.listed.begin(), o.listed.end(), "output.weight"), 0);
    }
    {
        // The file's caps, window, pattern and windowed RoPE base, with linear scaling inherited there (gemma2).
        fake_source s;
        fill(s, "gemma2", 8, false, 4);
        s.f64["gemma2.attn_logit_softcapping"] = 2.5;
        s.f64["gemma2.final_logit_softcapping"] = 7.0;
        s.u64["gemma2.attention.sliding_window"] = 16;
        s.u64["gemma2.attention.sliding_window_pattern"] = 4;
        s.f64["gemma2.rope.freq_base_swa"] = 500.0;
        s.f64["gemma2.rope.scaling.factor"] = 2.0;
        const logged_load l = load_logged(s);
        EXPECT_NE(l.log.find("scores soft-capped at 2.5, a sliding window of 16 on 3 of 4 layers (layer l when l % 4 "
                             "< 3), RoPE base 500 scale 0.5 there and base 10000 scale 0.5 elsewhere; final logits "
                             "soft-capped at 7"),
                  std::string::npos)
            << l.log;
    }
    {
        // The 27B layer count (46) scales queries by 1 / sqrt(n_embd / n_head) = 1 / sqrt(8), not by the head size.
        fake_source s;
        fill(s, "gemma2", 16, false, 46);
        EXPECT_NE(load_logged(s).log.find("gemma2: attention scale 0.353553,"), std::string::npos);
    }
    {
        // gemma3: no window unless the file gives one; Q/K norms; an optional output.weight; no final cap by default.
        fake_source s;
        fill(s, "gemma3", 8, false, 6);
        s.f64["gemma3.rope.freq_base"] = 1e6;
        s.f64["gemma3.rope.scaling.factor"] = 8.0;
        const load_result r = load(s);
        ASSERT_TRUE(r.error.empty()) << r.error;
        EXPECT_EQ(r.listed.size(), 1u + 6u * 13u + 2u);
        const logged_load none = load_logged(s);
        EXPECT_NE(none.log.find("gemma3: attention scale 0.353553, no sliding window; embedding scaled by 5.65685\n"),
                  std::string::npos)
            << none.log;
        // With a window: five of six layers windowed at RoPE base 10000 without the global layers' linear scaling;
        // the windowed layers need only plain rope, the global ones rope_ext.
        s.u64["gemma3.attention.sliding_window"] = 512;
        s.f64["gemma3.final_logit_softcapping"] = 30.0;
        const logged_load l = load_logged(s);
        EXPECT_NE(l.log.find("a sliding window of 512 on 5 of 6 layers (layer l when l % 6 < 5), RoPE base 10000 "
                             "scale 1 there and base 1e+06 scale 0.125 elsewhere; final logits soft-capped at 30"),
                  std::string::npos)
            << l.log;
        EXPECT_EQ(l.needs.front().first, STRATA_DEVICE_OP_ROPE_EXT);
    }
    {
        fake_source s;
        fill(s, "gemma2");
        s.u64["gemma2.attention.sliding_window"] = 0;
        expect_refused(s, "'gemma2.attention.sliding_window' is 0; gemma2 windows its layers' attention");
    }
    {
        fake_source s;
        fill(s, "gemma2");
        s.f64["gemma2.attn_logit_softcapping"] = -1.0;
        expect_refused(s, "'gemma2.attn_logit_softcapping' is -1; a soft-cap must be a finite float > 0");
        s.f64["gemma2.attn_logit_softcapping"] = 1e-50; // > 0 as a double, 0 as the float the ops use
        expect_refused(s, "'gemma2.attn_logit_softcapping' is 1e-50; a soft-cap must be a finite float > 0");
    }
    {
        // Gemma 3 converted with a pattern of 1 has no window yet keeps freq_base_swa (llama.cpp loads it).
        fake_source s;
        fill(s, "gemma3");
        s.f64["gemma3.rope.freq_base_swa"] = 10000.0;
        s.u64["gemma3.attention.sliding_window_pattern"] = 1;
        EXPECT_NE(load_logged(s).log.find("no sliding window"), std::string::npos);
    }
    {
        fake_source s;
        fill(s, "gemma3");
        s.tensors.erase("blk.1.post_ffw_norm.weight");
        expect_refused(s, "missing tensor 'blk.1.post_ffw_norm.weight'; the file is not a complete gemma3 model");
    }
}

// Makes every layer of s a mixture of `experts` experts (`used` per token) of inner size `ff`: the router and the 3-D
// expert tensors (read as experts x rows stacked) in place of the dense feed-forward.
void make_experts(fake_source &s, const std::string &arch, int64_t experts, int64_t used, int64_t ff, int layers = 2) {
    s.u64[arch + ".expert_count"] = static_cast<uint64_t>(experts);
    s.u64[arch + ".expert_used_count"] = static_cast<uint64_t>(used);
    for (int l = 0; l < layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        for (const char *t : {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) s.tensors.erase(b + t);
        s.tensor(b + "ffn_gate_inp.weight", 32, experts);
        s.tensor(b + "ffn_gate_exps.weight", 32, ff, experts);
        s.tensor(b + "ffn_up_exps.weight", 32, ff, experts);
        s.tensor(b + "ffn_down_exps.weight", ff, 32, experts);
    }
}

// Mixtral (llama with expert_count), Qwen3-MoE and Qwen2-MoE: the router and experts listed in place of the dense
// feed-forward (and Qwen2-MoE's shared expert),
// the experts' inner size (llama: feed_forward_length; qwen3moe: expert_feed_forward_length, default
// feed_forward_length / expert_used_count), the MoE ops asked of the device, and what is refused.
TEST(DecoderLoad, ExpertLayersListTheRouterAndExpertsAndAskForTheMoeOps) {
    {
        fake_source s;
        fill(s, "llama");
        make_experts(s, "llama", 4, 2, 64);
        const load_result r = load(s);
        ASSERT_TRUE(r.error.empty()) << r.error;
        const std::vector<std::string> layer0(r.listed.begin() + 1, r.listed.begin() + 11);
        EXPECT_EQ(layer0, (std::vector<std::string>{"blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                                                    "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                                                    "blk.0.attn_output.weight", "blk.0.ffn_norm.weight",
                                                    "blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_exps.weight",
                                                    "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"}));
        const auto needs = op_needs(s);
        ASSERT_EQ(needs.size(), 1u);
        EXPECT_EQ(needs[0].first, STRATA_DEVICE_OP_MOE);
        EXPECT_EQ(needs[0].second, "the experts ('llama.expert_count' 4)");
        // A dense tensor beside the experts is not used (the engine refuses it by name).
        s.tensor("blk.1.ffn_up.weight", 32, 64);
        const load_result both = load(s);
        EXPECT_EQ(std::count(both.listed.begin(), both.listed.end(), "blk.1.ffn_up.weight"), 0);
    }
    {
        fake_source s;
        fill(s, "qwen3moe");
        s.tensor("blk.0.attn_q_norm.weight", 8);
        s.tensor("blk.0.attn_k_norm.weight", 8);
        s.tensor("blk.1.attn_q_norm.weight", 8);
        s.tensor("blk.1.attn_k_norm.weight", 8);
        make_experts(s, "qwen3moe", 8, 2, 32); // 64 / 2 by default
        const load_result r = load(s);
        EXPECT_TRUE(r.error.empty()) << r.error;
        s.u64["qwen3moe.expert_feed_forward_length"] = 0; // 0 is the default, as llama.cpp reads it
        EXPECT_TRUE(load(s).error.empty());
        s.u64["qwen3moe.expert_feed_forward_length"] = (1ull << 32) + 32; // not narrowed to 32
        expect_refused(s, "'qwen3moe.expert_feed_forward_length' gives 4294967328; a feed-forward length must be in");
        s.u64["qwen3moe.expert_feed_forward_length"] = 16;
        expect_refused(s, "tensor 'blk.0.ffn_gate_exps.weight' has shape [32, 32, 8], expected [32, 16, 8]");
        s.u64["qwen3moe.expert_feed_forward_length"] = 32;
        // The experts' dimensions swapped: the same 256 rows of 32, which only the file's dimensions tell apart.
        s.tensor("blk.1.ffn_up_exps.weight", 32, 8, 32);
        expect_refused(s, "tensor 'blk.1.ffn_up_exps.weight' has shape [32, 8, 32], expected [32, 32, 8]");
        s.tensor("blk.1.ffn_up_exps.weight", 32, 32, 8);
        EXPECT_TRUE(load(s).error.empty());
        s.u64.erase("qwen3moe.expert_count");
        expect_refused(s, "'qwen3moe.expert_count' is missing or 0; a qwen3moe model routes every layer's feed-forward "
                          "to experts");
    }
    {
        // qwen2moe: routed experts (not normalised) and a shared expert with its 1-row gate; a separate output.
        fake_source s;
        fill(s, "qwen2moe", 8, true);
        make_experts(s, "qwen2moe", 8, 2, 32);
        s.tensor("output.weight", 32, 16);
        for (int l = 0; l < 2; ++l) {
            const std::string b = "blk." + std::to_string(l) + ".";
            s.tensor(b + "ffn_gate_inp_shexp.weight", 32, 1);
            s.tensor(b + "ffn_gate_shexp.weight", 32, 64);
            s.tensor(b + "ffn_up_shexp.weight", 32, 64);
            s.tensor(b + "ffn_down_shexp.weight", 64, 32);
        }
        const load_result r = load(s);
        ASSERT_TRUE(r.error.empty()) << r.error;
        EXPECT_EQ(r.listed.size(), 1u + 2u * (9u + 4u + 4u) + 2u) << "Q/K/V + biases, norms, router, 3 experts, shared";
        const auto needs = op_needs(s);
        ASSERT_EQ(needs.size(), 3u);
        EXPECT_EQ(needs[1].first, STRATA_DEVICE_OP_SHARED_EXPERT);
        s.tensors.erase("blk.1.ffn_up_shexp.weight");
        expect_refused(s, "missing tensor 'blk.1.ffn_up_shexp.weight'; the file is not a complete qwen2moe model");
        s.tensors.erase("output.weight");
        expect_refused(s, "missing tensor 'output.weight'");
    }
    {
        fake_source s;
        fill(s, "llama");
        make_experts(s, "llama", 4, 2, 64);
        s.u64["llama.expert_used_count"] = 5;
        expect_refused(s, "'llama.expert_count' 4 and 'llama.expert_used_count' 5: need 0 < expert_used_count <= "
                          "expert_count");
    }
    {
        fake_source s;
        fill(s, "llama");
        make_experts(s, "llama", 4, 2, 64);
        s.tensors.erase("blk.1.ffn_down_exps.weight");
        expect_refused(s, "missing tensor 'blk.1.ffn_down_exps.weight'; the file is not a complete llama model");
    }
}

TEST(DecoderLoad, WhatTheFamilyLacksIsRefusedByName) {
    {
        // No vocabulary (fuzz_model_load: a 0-row embedding loaded), or more tokens than int32 holds (not narrowed).
        fake_source s;
        fill(s, "phi3");
        s.tensor("token_embd.weight", 32, 0);
        expect_refused(s, "the vocabulary has 0 tokens ('phi3.vocab_size', else the rows of token_embd.weight)");
        s.tensor("token_embd.weight", 32, 16);
        s.u64["phi3.vocab_size"] = (1ull << 32) + 16;
        expect_refused(s, "the vocabulary has 4294967312 tokens");
    }
    {
        fake_source s;
        fill(s, "qwen3");
        s.tensors.erase("blk.1.attn_k_norm.weight");
        expect_refused(s, "missing tensor 'blk.1.attn_k_norm.weight'; the file is not a complete qwen3 model");
    }
    {
        fake_source s;
        fill(s, "qwen2");
        s.u64["qwen2.expert_count"] = 8;
        expect_refused(s, "'qwen2.expert_count' is 8: qwen2 has no mixture-of-experts layers");
        s.u64.erase("qwen2.expert_count");
        s.u64["qwen2.expert_used_count"] = 2; // read, so never silently ignored
        expect_refused(s, "'qwen2.expert_used_count' is 2 in a qwen2 model, which has no experts to use");
    }
    {
        fake_source s;
        fill(s, "llama");
        s.u64["llama.expert_used_count"] = 2;
        expect_refused(s, "'llama.expert_used_count' is 2 without 'llama.expert_count'");
    }
    {
        fake_source s;
        fill(s, "qwen2");
        s.u64["qwen2.attention.value_length"] = 16;
        expect_refused(s, "'qwen2.attention.value_length' 16 differs from the key length 8");
    }
    {
        fake_source s;
        fill(s, "llama");
        s.tensor("blk.0.attn_qkv.weight", 32, 64);
        expect_refused(s, "the file has both 'blk.0.attn_qkv.weight' and 'blk.0.attn_q.weight'");
    }
    {
        fake_source s;
        fill(s, "phi3");
        s.tensors.erase("blk.1.attn_qkv.weight");
        expect_refused(s, "missing tensor 'blk.1.attn_q.weight' (or the fused 'blk.1.attn_qkv.weight'); the file is "
                          "not a complete phi3 model");
    }
    {
        fake_source s;
        fill(s, "phi3");
        s.tensor("blk.0.ffn_up.weight", 32, 64); // the separate size: phi3's ffn_up holds gate and up
        expect_refused(s, "tensor 'blk.0.ffn_up.weight' has shape [32, 64], expected [32, 128]");
    }
    {
        fake_source s;
        fill(s, "qwen2");
        s.u64["qwen2.attention.sliding_window"] = 4096;
        expect_refused(s, "'qwen2.attention.sliding_window' is 4096: sliding-window attention is not implemented");
    }
    {
        fake_source s;
        fill(s, "llama");
        s.tensor("rope_freqs.weight", 4);
        s.storage["rope_freqs.weight"][2] = 0.0f;
        expect_refused(s, "frequency factors must be finite and > 0");
    }
    {
        fake_source s;
        fill(s, "qwen2", 8, true);
        s.tensors["blk.0.attn_k.bias"].ggml_type = 1; // F16
        expect_refused(s, "tensor 'blk.0.attn_k.bias' must be F32");
    }
    {
        fake_source s;
        fill(s, "qwen2", 8, true);
        s.tensor("blk.1.attn_v.bias", 32); // should be 2 KV heads x 8
        expect_refused(s, "tensor 'blk.1.attn_v.bias' has shape [32, 1], expected [16, 1]");
    }
    {
        fake_source s;
        fill(s, "qwen3");
        s.str["qwen3.rope.scaling.type"] = "dynamic";
        expect_refused(s, "RoPE scaling 'dynamic' ('qwen3.rope.scaling.type') is not implemented");
    }
    {
        fake_source s;
        fill(s, "qwen2");
        s.str["qwen2.rope.scaling.type"] = "yarn";
        s.f64["qwen2.rope.scaling.factor"] = 4.0;
        s.f64["qwen2.rope.scaling.yarn_beta_fast"] = 16.0;
        expect_refused(s, "'qwen2.rope.scaling.yarn_beta_fast' is 16.000000; this plugin runs YaRN as llama.cpp does");
    }
    {
        fake_source s;
        fill(s, "qwen2");
        s.str["qwen2.rope.scaling.type"] = "yarn";
        s.f64["qwen2.rope.scaling.yarn_log_multiplier"] = 0.1;
        expect_refused(s, "'qwen2.rope.scaling.yarn_log_multiplier' is set");
    }
    {
        fake_source s;
        fill(s, "phi3");
        s.tensor("rope_factors_long.weight", 4);
        expect_refused(s, "the file has 'rope_factors_long.weight' without 'rope_factors_short.weight'");
    }
}

} // namespace

// Tensor parallel (ABI 1.30): a host that tells the parts the whole vocabulary gets the embedding split by it, as the
// classifier is (vLLM's VocabParallelEmbedding); an older host's struct keeps it whole. A part takes the vocabulary
// from the host (its embedding holds only its piece: rank 2's 6 rows of a 16-token vocabulary cut in 3), and refuses to load without it and when the file's vocab_size disagrees.
TEST(DecoderLoad, ATensorParallelPartTakesTheVocabularyFromTheHostAndHoldsItsPieceOfTheEmbedding) {
    const auto arch = test_registry().find_model_arch_for("llama");
    ASSERT_TRUE(arch);
    auto embedding_split = [&](fake_source &s) {
        strata_status st{};
        strata_model *m = arch->create(&s.view, &st);
        EXPECT_NE(m, nullptr) << st.message;
        strata_tensor_split out{};
        if (m == nullptr) return out;
        for (int32_t i = 0; i < arch->tensor_count(m); ++i) {
            strata_tensor_view v{};
            v.struct_size = sizeof v;
            int32_t layer = 0;
            if (arch->tensor_at(m, i, &v, &layer) != STRATA_OK || std::string(v.name) != "token_embd.weight") continue;
            out.struct_size = sizeof out;
            arch->tensor_split(m, i, &out);
            break;
        }
        arch->destroy(m);
        return out;
    };
    {
        fake_source whole;
        fill(whole, "llama");
        const strata_tensor_split old_host = embedding_split(whole);
        EXPECT_EQ(old_host.axis, STRATA_SPLIT_NONE) << "a host before 1.30 cannot give the parts the vocabulary";
        whole.view.struct_size = sizeof whole.view;
        const strata_tensor_split split = embedding_split(whole);
        EXPECT_EQ(split.axis, STRATA_SPLIT_ROWS);
        EXPECT_EQ(split.n_parts, 1);
        EXPECT_EQ(split.part[0], 16);
    }
    // Rank 2 of 3 holds tokens [10, 16) (strata_split_piece): its attention heads and FFN columns too.
    fake_source part;
    fill(part, "llama", 8, false, 1);
    part.view.struct_size = sizeof part.view;
    part.view.tensor_parallel_rank = 2;
    part.view.tensor_parallel_size = 3;
    part.u64["llama.attention.head_count"] = 6;
    part.u64["llama.attention.head_count_kv"] = 3;
    part.u64["llama.embedding_length"] = 48;
    part.u64["llama.feed_forward_length"] = 96;
    part.tensor("token_embd.weight", 48, 6);
    part.tensor("output_norm.weight", 48);
    part.tensor("blk.0.attn_norm.weight", 48);
    part.tensor("blk.0.attn_q.weight", 48, 16);
    part.tensor("blk.0.attn_k.weight", 48, 8);
    part.tensor("blk.0.attn_v.weight", 48, 8);
    part.tensor("blk.0.attn_output.weight", 16, 48);
    part.tensor("blk.0.ffn_norm.weight", 48);
    part.tensor("blk.0.ffn_gate.weight", 48, 32);
    part.tensor("blk.0.ffn_up.weight", 48, 32);
    part.tensor("blk.0.ffn_down.weight", 32, 48);
    expect_refused(part, "a tensor-parallel part needs the whole model's vocabulary from the host");
    part.view.tensor_parallel_n_vocab = 16;
    strata_status st{};
    strata_model *m = arch->create(&part.view, &st);
    ASSERT_NE(m, nullptr) << st.message;
    strata_model_hparams hp{};
    hp.struct_size = sizeof hp;
    arch->get_hparams(m, &hp);
    EXPECT_EQ(hp.n_vocab, 16) << "the whole vocabulary, not the piece's 6 rows";
    EXPECT_EQ(hp.n_head, 2);
    arch->destroy(m);
    part.tensor("token_embd.weight", 48, 5); // rank 2's piece of 16 is 6 rows
    expect_refused(part, "tensor 'token_embd.weight' has shape [48, 5], expected [48, 6]");
    part.tensor("token_embd.weight", 48, 6);
    part.u64["llama.vocab_size"] = 17;
    expect_refused(part, "'llama.vocab_size' is 17 but the host says the model's vocabulary is 16");
}
