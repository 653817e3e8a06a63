// Capability asked at load (ABI 1.12, rope_scaled 1.13, attention terms 1.15, experts 1.16): a model's optional device ops against
// a device's slots, with stand-ins for the model plugin and for devices of several ABI ages.
#include "engine/device_capability.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <cstdio>
#include <string>

namespace {

using strata::engine::check_device_offers_model_ops;
using strata::engine::missing_model_op;

int32_t dummy_rope_ext(strata_device *, float *, int32_t, int32_t, int32_t, int32_t, const int32_t *, float, int32_t,
                       float, const float *, strata_status *) {
    return STRATA_OK;
}

// A model needing rope_ext for its frequency factors and add_rows for a bias.
int32_t two_needs(const strata_model *, int32_t index, int32_t *op, const char **what) {
    if (index == 0) { *op = STRATA_DEVICE_OP_ROPE_EXT; *what = "tensor 'rope_freqs.weight'"; return 1; }
    if (index == 1) { *op = STRATA_DEVICE_OP_ADD_ROWS; *what = "tensor 'blk.0.attn_q.bias'"; return 1; }
    return 0;
}

int32_t unknown_need(const strata_model *, int32_t index, int32_t *op, const char **what) {
    if (index != 0) return 0;
    *op = 99;
    *what = "tensor 'x'";
    return 1;
}

strata_model_arch_desc arch_with(int32_t (*need)(const strata_model *, int32_t, int32_t *, const char **)) {
    strata_model_arch_desc a{};
    a.header.struct_size = sizeof a;
    a.header.name = "stand-in";
    a.device_op_need = need;
    return a;
}

strata_device_desc device_up_to(size_t struct_size) {
    strata_device_desc d{};
    d.header.struct_size = static_cast<uint32_t>(struct_size);
    d.header.name = "old";
    d.rope_ext = dummy_rope_ext;
    return d;
}

TEST(DeviceCapability, AnOpTheDeviceLacksIsNamedWithWhatNeedsItAndTheDevice) {
    const strata_model_arch_desc arch = arch_with(two_needs);
    // ABI 1.11: rope_ext but not add_rows.
    const strata_device_desc old = device_up_to(offsetof(strata_device_desc, add_rows));
    const std::string why = missing_model_op(arch, nullptr, old, "offload_device", "m.gguf");
    EXPECT_NE(why.find("m.gguf: tensor 'blk.0.attn_q.bias' needs the device op 'add_rows' (plugin ABI 1.12), which "
                       "offload_device 'old' does not offer"),
              std::string::npos)
        << why;
    EXPECT_THROW(check_device_offers_model_ops(arch, nullptr, old, "device", "m.gguf"), strata::error);
    // Older still (before rope_ext): the first need fails first.
    const strata_device_desc older = device_up_to(offsetof(strata_device_desc, rope_ext));
    EXPECT_NE(missing_model_op(arch, nullptr, older, "device", "m.gguf").find("'rope_ext'"), std::string::npos);
}

int32_t yarn_need(const strata_model *, int32_t index, int32_t *op, const char **what) {
    if (index != 0) return 0;
    *op = STRATA_DEVICE_OP_ROPE_SCALED;
    *what = "YaRN RoPE scaling ('qwen2.rope.scaling.type')";
    return 1;
}

TEST(DeviceCapability, A112DeviceLacksRopeScaled) {
    strata_device_desc d = device_up_to(offsetof(strata_device_desc, rope_scaled));
    d.add_rows = [](strata_device *, const float *, const float *, int32_t, int32_t, float *, strata_status *) {
        return int32_t{STRATA_OK};
    };
    const std::string why = missing_model_op(arch_with(yarn_need), nullptr, d, "device", "q.gguf");
    EXPECT_NE(why.find("q.gguf: YaRN RoPE scaling ('qwen2.rope.scaling.type') needs the device op 'rope_scaled' "
                       "(plugin ABI 1.13), which device 'old' does not offer"),
              std::string::npos)
        << why;
    strata_device_desc full = device_up_to(sizeof(strata_device_desc));
    full.rope_scaled = [](strata_device *, float *, const strata_rope_args *, strata_status *) {
        return int32_t{STRATA_OK};
    };
    EXPECT_EQ(missing_model_op(arch_with(yarn_need), nullptr, full, "device", "q.gguf"), "");
}

int32_t window_need(const strata_model *, int32_t index, int32_t *op, const char **what) {
    if (index != 0) return 0;
    *op = STRATA_DEVICE_OP_ATTENTION_TERMS;
    *what = "the sliding window ('gemma2.attention.sliding_window')";
    return 1;
}

// Attention's softcap and window fields are read by devices built against ABI 1.14: a device whose descriptor stops
// before the 1.14 slots would ignore them, so a Gemma model is refused there, and accepted by any 1.14 descriptor
// (its element-wise slots filled or not).
TEST(DeviceCapability, A113DeviceCannotWindowOrCapAttention) {
    const strata_device_desc old = device_up_to(offsetof(strata_device_desc, scale));
    const std::string why = missing_model_op(arch_with(window_need), nullptr, old, "device", "g.gguf");
    EXPECT_NE(why.find("g.gguf: the sliding window ('gemma2.attention.sliding_window') needs the device op 'attention "
                       "with softcap and window' (plugin ABI 1.14), which device 'old' does not offer"),
              std::string::npos)
        << why;
    EXPECT_EQ(missing_model_op(arch_with(window_need), nullptr, device_up_to(sizeof(strata_device_desc)), "device",
                               "g.gguf"),
              "");
}

int32_t moe_need(const strata_model *, int32_t index, int32_t *op, const char **what) {
    if (index != 0) return 0;
    *op = STRATA_DEVICE_OP_MOE;
    *what = "the experts ('llama.expert_count' 8)";
    return 1;
}

// ABI 1.16's experts need all three MoE slots; the refusal says which plugins have them, so a Mixtral on a device
// without them is refused at start-up by name rather than failing at its first forward.
TEST(DeviceCapability, AMixtureOfExpertsNeedsAllThreeMoeSlots) {
    strata_device_desc d = device_up_to(sizeof(strata_device_desc));
    d.header.name = "cuda";
    d.moe_route = [](strata_device *, const strata_moe_route_args *, strata_status *) { return int32_t{STRATA_OK}; };
    d.matmul_id = [](strata_device *, const strata_matmul_id_args *, strata_status *) { return int32_t{STRATA_OK}; };
    const std::string why = missing_model_op(arch_with(moe_need), nullptr, d, "device", "mixtral.gguf");
    EXPECT_NE(why.find("mixtral.gguf: the experts ('llama.expert_count' 8) needs the device op 'moe_route, matmul_id "
                       "and moe_combine' (plugin ABI 1.16), which device 'cuda' does not offer; run it on a device that "
                       "has it (the cpu and cuda plugins of this release do)"),
              std::string::npos)
        << why;
    // At load, a device that may leave the experts to the CPU (--cpu-moe) is not asked for them yet (the engine asks
    // once its plan puts any expert on the device).
    EXPECT_EQ(missing_model_op(arch_with(moe_need), nullptr, d, "device", "mixtral.gguf", STRATA_DEVICE_OP_MOE), "");
    d.moe_combine = [](strata_device *, const float *, const float *, int32_t, int32_t, int32_t, float *,
                       strata_status *) { return int32_t{STRATA_OK}; };
    EXPECT_EQ(missing_model_op(arch_with(moe_need), nullptr, d, "device", "mixtral.gguf"), "");
}

TEST(DeviceCapability, ADeviceWithEveryOpAndAModelWithoutNeedsPass) {
    strata_device_desc full = device_up_to(sizeof(strata_device_desc));
    full.add_rows = [](strata_device *, const float *, const float *, int32_t, int32_t, float *, strata_status *) {
        return int32_t{STRATA_OK};
    };
    EXPECT_EQ(missing_model_op(arch_with(two_needs), nullptr, full, "device", "m.gguf"), "");
    // A slot inside the struct but NULL is not offered.
    strata_device_desc null_slot = device_up_to(sizeof(strata_device_desc));
    EXPECT_NE(missing_model_op(arch_with(two_needs), nullptr, null_slot, "device", "m.gguf"), "");
    // A model plugin from before ABI 1.12 (no device_op_need) asks nothing.
    strata_model_arch_desc old_arch = arch_with(two_needs);
    old_arch.header.struct_size = static_cast<uint32_t>(offsetof(strata_model_arch_desc, device_op_need));
    EXPECT_EQ(missing_model_op(old_arch, nullptr, null_slot, "device", "m.gguf"), "");
    // An op id this runtime does not know is refused, not ignored.
    EXPECT_NE(missing_model_op(arch_with(unknown_need), nullptr, full, "device", "m.gguf").find("does not know"),
              std::string::npos);
}

} // namespace

namespace {

// Three weights of a stand-in model: two of type 8 (Q8_0), one of type 16 (IQ2_XXS), which the device below refuses.
int32_t three_count(const strata_model *) { return 3; }
int32_t three_at(const strata_model *, int32_t index, strata_tensor_view *out, int32_t *layer) {
    static const char *names[] = {"blk.0.attn_q.weight", "blk.0.ffn_up.weight", "output.weight"};
    out->ggml_type = index == 1 ? 16 : 8;
    out->name = names[index];
    out->rows = 64;
    out->cols = 256;
    *layer = 0;
    return STRATA_OK;
}

// A device descriptor as the engine holds it; without a library the host takes it for a plugin of its own ABI.
strata::plugins::handle<strata_device_desc> handle_of(const strata_device_desc &d,
                                                      std::shared_ptr<const strata::plugins::library> lib = nullptr) {
    return {&d, std::move(lib)};
}

// A model that lists its weights (tensor_count / tensor_at) and a device of this ABI named `name`.
strata_model_arch_desc arch_listing(int32_t (*count)(const strata_model *),
                                    int32_t (*at)(const strata_model *, int32_t, strata_tensor_view *, int32_t *)) {
    strata_model_arch_desc arch = arch_with(nullptr);
    arch.tensor_count = count;
    arch.tensor_at = at;
    return arch;
}
strata_device_desc device_named(const char *name) {
    strata_device_desc d = device_up_to(sizeof(strata_device_desc));
    d.header.name = name;
    return d;
}

// ABI 1.17's supports: a device that computes Q8_0 weights only and heads of at most 128.
int32_t picky_supports(strata_device *, const strata_support_query *q, char *why, uint32_t why_cap) {
    if (q->kind == STRATA_SUPPORT_WEIGHT && q->weight->ggml_type != 8) {
        std::snprintf(why, why_cap, "type %u is not computed here", q->weight->ggml_type);
        return 0;
    }
    if (q->kind == STRATA_SUPPORT_ATTENTION && q->head_dim > 128) {
        std::snprintf(why, why_cap, "head_dim %d > 128", q->head_dim);
        return 0;
    }
    return 1;
}

} // namespace

// ABI 1.17: types and shapes asked at load (ggml's supports_op), every refusal in one message naming the tensor.
TEST(DeviceCapability, TypesAndShapesTheDeviceCannotRunAreListedAtLoad) {
    strata_model_arch_desc arch = arch_listing(three_count, three_at);
    strata_device_desc d = device_named("picky");
    strata_model_hparams hp{};
    hp.n_head = 8;
    hp.n_head_kv = 2;
    hp.head_dim = 256;
    hp.rope_dims = 256;
    EXPECT_EQ(strata::engine::unsupported_model_shapes(arch, nullptr, hp, handle_of(d), nullptr, "device", "m.gguf"), "")
        << "a device without the slot is asked nothing";
    d.supports = picky_supports;
    const std::string why = strata::engine::unsupported_model_shapes(arch, nullptr, hp, handle_of(d), nullptr, "device", "m.gguf");
    EXPECT_NE(why.find("m.gguf: device 'picky' cannot run this model:\n  tensor 'blk.0.ffn_up.weight': type 16 is not "
                       "computed here\n  attention of 8 heads (2 KV) of 256: head_dim 256 > 128\n"),
              std::string::npos)
        << why;
    EXPECT_EQ(why.find("attn_q"), std::string::npos) << why;
    hp.head_dim = 128;
    arch.tensor_count = [](const strata_model *) { return 1; }; // only the Q8_0 one
    EXPECT_EQ(strata::engine::unsupported_model_shapes(arch, nullptr, hp, handle_of(d), nullptr, "device", "m.gguf"), "");
}

namespace {

// One GPTQ act-order weight (ABI 1.19): its view carries an input order.
int32_t one_count(const strata_model *) { return 1; }
int32_t ordered_at(const strata_model *, int32_t, strata_tensor_view *out, int32_t *layer) {
    static const int32_t order[4] = {2, 0, 3, 1};
    out->ggml_type = STRATA_TYPE_Q4_G32;
    out->name = "blk.0.attn_q.weight";
    out->rows = 8;
    out->cols = 4;
    out->input_order = order;
    *layer = 0;
    return STRATA_OK;
}

} // namespace

// A device plugin built before ABI 1.19 would compute an act-order weight with its columns in the wrong order: it is
// refused at load, naming the tensor and the plugin, whether or not it has `supports`; a 1.19 one is asked as usual.
TEST(DeviceCapability, AnInputOrderedWeightIsRefusedOnADevicePluginThatPredatesIt) {
    const strata_model_arch_desc arch = arch_listing(one_count, ordered_at);
    strata_device_desc d = device_named("old");
    strata_model_hparams hp{};
    hp.n_head = hp.n_head_kv = 1;
    hp.head_dim = hp.rope_dims = 64;
    strata_plugin_info info{};
    info.abi_major = 1;
    info.abi_minor = 18;
    auto lib = std::make_shared<strata::plugins::library>();
    lib->info = &info;
    for (bool with_supports : {false, true}) {
        d.supports = with_supports ? picky_supports : nullptr;
        const std::string why =
            strata::engine::unsupported_model_shapes(arch, nullptr, hp, handle_of(d, lib), nullptr, "device", "m");
        EXPECT_NE(why.find("tensor 'blk.0.attn_q.weight': its columns meet the activations in an input order (GPTQ "
                           "act-order, plugin ABI 1.19), which this plugin (ABI 1.18) does not read; update the 'old' "
                           "plugin"),
                  std::string::npos)
            << why;
    }
    info.abi_minor = 19;
    d.supports = nullptr;
    EXPECT_EQ(strata::engine::unsupported_model_shapes(arch, nullptr, hp, handle_of(d, lib), nullptr, "device", "m"),
              "");
}

namespace {

// ABI 1.20: a device that keeps float32 and float16 KV only.
int32_t f16_kv_supports(strata_device *, const strata_support_query *q, char *why, uint32_t why_cap) {
    if (q->kind == STRATA_SUPPORT_ATTENTION && q->kv_type != STRATA_KV_F32 && q->kv_type != STRATA_KV_F16) {
        std::snprintf(why, why_cap, "KV type %u is not kept here", q->kv_type);
        return 0;
    }
    return 1;
}

} // namespace

// A 16-bit KV cache needs a device and a model plugin of ABI 1.20 (older ones lay KV out in float32) and the device's
// yes, an FP8 one a model plugin of 1.21; float32 is asked of nobody.
TEST(DeviceCapability, A16BitKvCacheNeedsPluginsThatLayItOutAndTheDevicesYes) {
    const strata_model_arch_desc arch = arch_listing(one_count, ordered_at);
    strata_device_desc d = device_named("gpu");
    d.supports = f16_kv_supports;
    strata_model_hparams hp{};
    hp.n_head = 8;
    hp.n_head_kv = 2;
    hp.head_dim = 64;
    strata_plugin_info old_info{}, new_info{};
    old_info.abi_major = new_info.abi_major = 1;
    old_info.abi_minor = 19;
    new_info.abi_minor = 20;
    auto old_lib = std::make_shared<strata::plugins::library>(), new_lib = std::make_shared<strata::plugins::library>();
    old_lib->info = &old_info;
    new_lib->info = &new_info;
    strata_model_arch_desc named_arch = arch;
    named_arch.header.name = "decoder";
    const strata::plugins::handle<strata_model_arch_desc> old_arch{&named_arch, old_lib}, new_arch{&named_arch, new_lib};
    using strata::engine::unsupported_kv_type;
    EXPECT_EQ(unsupported_kv_type(STRATA_KV_F32, hp, handle_of(d, old_lib), nullptr, old_arch, "m"), "");
    EXPECT_EQ(unsupported_kv_type(STRATA_KV_F16, hp, handle_of(d, new_lib), nullptr, new_arch, "m"), "");
    std::string why = unsupported_kv_type(STRATA_KV_F16, hp, handle_of(d, old_lib), nullptr, new_arch, "m");
    EXPECT_NE(why.find("m: --kv-cache-dtype float16: device 'gpu' (built for plugin ABI 1.19) stores float32 KV only"),
              std::string::npos)
        << why;
    why = unsupported_kv_type(STRATA_KV_F16, hp, handle_of(d, new_lib), nullptr, old_arch, "m");
    EXPECT_NE(why.find("model_arch 'decoder' (built for plugin ABI 1.19) lays the KV cache out in float32 only"),
              std::string::npos)
        << why;
    why = unsupported_kv_type(STRATA_KV_BF16, hp, handle_of(d, new_lib), nullptr, new_arch, "m");
    EXPECT_NE(why.find("--kv-cache-dtype bfloat16: device 'gpu' cannot keep this KV cache: KV type 30 is not kept here; "
                       "use --kv-cache-dtype auto"),
              std::string::npos)
        << why;
    // The FP8 types came with 1.21: a 1.20 model plugin does not know their size; a 1.21 one does, and the device
    // is asked.
    strata_plugin_info fp8_info = new_info;
    fp8_info.abi_minor = 21;
    auto fp8_lib = std::make_shared<strata::plugins::library>();
    fp8_lib->info = &fp8_info;
    const strata::plugins::handle<strata_model_arch_desc> fp8_arch{&named_arch, fp8_lib};
    why = unsupported_kv_type(STRATA_KV_FP8_E4M3, hp, handle_of(d, new_lib), nullptr, new_arch, "m");
    EXPECT_NE(why.find("model_arch 'decoder' (built for plugin ABI 1.20) does not know the FP8 KV types"),
              std::string::npos)
        << why;
    why = unsupported_kv_type(STRATA_KV_FP8_E5M2, hp, handle_of(d, new_lib), nullptr, fp8_arch, "m");
    EXPECT_NE(why.find("--kv-cache-dtype fp8_e5m2: device 'gpu' cannot keep this KV cache: KV type 1041 is not kept"),
              std::string::npos)
        << why;
    // q8_0 came with 1.23: a 1.22 model plugin does not know its groups; a 1.23 one does, and the device is asked.
    strata_plugin_info q8_info = new_info, pre_q8_info = new_info;
    q8_info.abi_minor = 23;
    pre_q8_info.abi_minor = 22;
    auto q8_lib = std::make_shared<strata::plugins::library>(), pre_q8_lib = std::make_shared<strata::plugins::library>();
    q8_lib->info = &q8_info;
    pre_q8_lib->info = &pre_q8_info;
    const strata::plugins::handle<strata_model_arch_desc> q8_arch{&named_arch, q8_lib}, pre_q8_arch{&named_arch, pre_q8_lib};
    why = unsupported_kv_type(STRATA_KV_Q8_0, hp, handle_of(d, new_lib), nullptr, pre_q8_arch, "m");
    EXPECT_NE(why.find("--kv-cache-dtype q8_0: model_arch 'decoder' (built for plugin ABI 1.22) does not know the q8_0 KV "
                       "type (it came with ABI 1.23)"),
              std::string::npos)
        << why;
    why = unsupported_kv_type(STRATA_KV_Q8_0, hp, handle_of(d, new_lib), nullptr, q8_arch, "m");
    EXPECT_NE(why.find("--kv-cache-dtype q8_0: device 'gpu' cannot keep this KV cache: KV type 8 is not kept"),
              std::string::npos)
        << why;
}

namespace {

int32_t stages_yes(const strata_model *) { return 1; }
int32_t stages_no(const strata_model *) { return 0; }

} // namespace

// Pipeline ranks need a model plugin whose pipeline_stages slot (ABI 1.24) says yes and that reads kv_first_layer
// (ABI 1.25, a rank's blocks hold its layers only): without the slot, with a no, or built for 1.24, it is refused by
// name before anything is placed.
TEST(DeviceCapability, PipelineRanksNeedAModelPluginThatRunsStagesOverItsOwnLayersKv) {
    strata_model_arch_desc arch = arch_with(nullptr);
    arch.header.name = "decoder";
    strata_plugin_info info{};
    info.abi_major = 1;
    info.abi_minor = 25;
    auto lib = std::make_shared<strata::plugins::library>();
    lib->info = &info;
    const strata::plugins::handle<strata_model_arch_desc> h{&arch, lib};
    using strata::engine::unsupported_pipeline_ranks;
    std::string why = unsupported_pipeline_ranks(h, nullptr, "m");
    EXPECT_NE(why.find("m: model plugin 'decoder' cannot run this model as pipeline stages (its pipeline_stages slot, "
                       "ABI 1.24); run it with pipeline_parallel_size 1"),
              std::string::npos)
        << why;
    arch.pipeline_stages = stages_no;
    EXPECT_NE(unsupported_pipeline_ranks(h, nullptr, "m").find("cannot run this model as pipeline stages"),
              std::string::npos);
    arch.pipeline_stages = stages_yes;
    EXPECT_EQ(unsupported_pipeline_ranks(h, nullptr, "m"), "");
    info.abi_minor = 24;
    why = unsupported_pipeline_ranks(h, nullptr, "m");
    EXPECT_NE(why.find("m: model plugin 'decoder' was built for ABI 1.24, before a rank's KV blocks could hold its "
                       "layers only (kv_first_layer, 1.25); rebuild it against this SDK or run with "
                       "pipeline_parallel_size 1"),
              std::string::npos)
        << why;
}
