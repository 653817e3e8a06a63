// Issue #4's acceptance on a real model (stories260K): continuous batching under a KV budget that forces preemption,
// swap vs recompute, prefix-cache hits from every tier (and after a restart), a context four times the device KV,
// cancellation — every case must give exactly the greedy tokens of the sequence run alone with ample KV, and leave
// every pool full again.
#include "engine_fixture.hpp"
#include "sanitizer_build.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <fstream>

using namespace strata;
using namespace strata::testing;
namespace fs = std::filesystem;

namespace {

const std::string k_model = shared_path("models/stories260K-f32.gguf");
constexpr uint64_t kib = 1024;

// stories260K: 5 layers x 2 x 4 KV heads x 8 dims x 4 bytes = 1.25 KiB per token, 20 KiB per 16-token block.
engine::engine_options options(uint64_t kv_bytes, double swap_gib, engine::preemption_mode mode, bool prefix) {
    engine::engine_options o = batching_options(k_model, kv_bytes, mode, swap_gib);
    o.kv.enable_prefix_caching = prefix;
    return o;
}

// Greedy tokens of each prompt run alone with ample KV (computed once per test binary).
const std::vector<std::vector<int32_t>> &alone(int n, int32_t max_tokens) {
    static std::map<std::pair<int, int32_t>, std::vector<std::vector<int32_t>>> cache;
    auto &v = cache[{n, max_tokens}];
    if (v.empty()) {
        auto e = engine_from(options(4096 * kib, 0, engine::preemption_mode::recompute, false));
        for (int i = 0; i < n; ++i) v.push_back(run_all(*e, {story_prompt(*e, i)}, max_tokens)[0]);
    }
    return v;
}

// Runs prompts 0..n-1 at once on `e` and checks each one's tokens against the same prompt alone with ample KV.
void expect_alone_tokens(engine::engine &e, int n, int32_t max_tokens) {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < n; ++i) prompts.push_back(story_prompt(e, i));
    const auto got = run_all(e, prompts, max_tokens);
    const auto &want = alone(n, max_tokens);
    for (int i = 0; i < n; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "sequence " << i;
}

} // namespace

class EngineBatching : public ::testing::TestWithParam<engine::preemption_mode> {};

TEST_P(EngineBatching, SixteenConcurrentSequencesUnderForcedPreemptionGiveTheirAloneTokens) {
    constexpr int n = 16;
    constexpr int32_t max_tokens = 48;
    // 24 blocks of device KV for 16 sequences that each grow to ~4 blocks: preemption is certain.
    auto e = engine_from(options(24 * 20 * kib, 0.01, GetParam(), false));
    ::testing::internal::CaptureStderr();
    expect_alone_tokens(*e, n, max_tokens);
    const std::string log = ::testing::internal::GetCapturedStderr();
    const strata_engine_stats s = e->stats();
    EXPECT_GT(s.preemptions_swap + s.preemptions_recompute, 0) << "the KV budget was meant to force preemption";
    // vLLM's line for each preemption, and where swapped pages went.
    if (s.preemptions_swap > 0) {
        EXPECT_NE(log.find(" is preempted by PreemptionMode.SWAP mode because there is not enough KV cache space."),
                  std::string::npos);
        EXPECT_NE(log.find("KV cache pages evicted to CPU: "), std::string::npos);
    }
    if (s.preemptions_recompute > 0) {
        EXPECT_NE(log.find(" is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."),
                  std::string::npos);
    }
    if (GetParam() == engine::preemption_mode::swap) {
        EXPECT_GT(s.preemptions_swap, 0);
        EXPECT_GT(s.kv_bytes_swapped_out, 0);
        EXPECT_EQ(s.kv_bytes_swapped_in, s.kv_bytes_swapped_out) << "every swapped block came back";
    }
    if (GetParam() == engine::preemption_mode::recompute) {
        EXPECT_EQ(s.preemptions_swap, 0);
        EXPECT_GT(s.preemptions_recompute, 0);
    }
    expect_pools_full(*e);
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineBatching,
                         ::testing::Values(engine::preemption_mode::swap, engine::preemption_mode::recompute,
                                           engine::preemption_mode::automatic),
                         [](const auto &info) {
                             return std::string(info.param == engine::preemption_mode::swap        ? "swap"
                                                : info.param == engine::preemption_mode::recompute ? "recompute"
                                                                                                   : "auto");
                         });

TEST(EngineBatchingPrefix, AHitFromEachTierAndAfterARestartGivesTheSameTokensAsAMiss) {
    const int32_t max_tokens = 24;
    auto plain = engine_from(options(4096 * kib, 0, engine::preemption_mode::recompute, false));
    // A 40-odd token prompt: two full 16-token blocks are cacheable.
    const auto p = plain->tokenizer().encode(
        "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends "
        "and her dog.",
        true);
    ASSERT_GE(p.size(), 33u);
    const auto miss = run_all(*plain, {p}, max_tokens)[0];
    plain.reset();

    // Device hit.
    auto dev = engine_from(options(4096 * kib, 0, engine::preemption_mode::recompute, true));
    EXPECT_EQ(run_all(*dev, {p}, max_tokens)[0], miss);
    EXPECT_EQ(run_all(*dev, {p}, max_tokens)[0], miss);
    EXPECT_GE(dev->stats().prefix_hits[0], 32);
    expect_pools_full(*dev);
    dev.reset();

    // Host hit: 20 device blocks; other prompts push the prefix's blocks down into the host tier.
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-prefix-store";
    fs::remove_all(dir);
    auto o = options(20 * 20 * kib, 0.01, engine::preemption_mode::recompute, true);
    o.kv.prefix_store_dir = dir.string();
    o.kv.prefix_store_gib = 0.01;
    // Then an NVMe hit after a restart.
    expect_host_and_store_prefix_hits(o, p, miss, max_tokens, 40);

    // A corrupt store entry is recomputed, never used.
    int damaged = 0;
    for (const auto &f : fs::recursive_directory_iterator(dir)) {
        if (f.path().extension() != ".kvb") continue;
        std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
        io.seekg(-1, std::ios::end);
        char c = 0;
        io.get(c);
        io.seekp(-1, std::ios::end);
        io.put(static_cast<char>(c ^ 0x5a));
        ++damaged;
    }
    ASSERT_GT(damaged, 0);
    {
        auto again = engine_from(o);
        EXPECT_EQ(run_all(*again, {p}, max_tokens)[0], miss);
        EXPECT_EQ(again->stats().prefix_hits[2], 0);
        expect_pools_full(*again);
    }
    fs::remove_all(dir);
}

TEST(EngineBatchingLongContext, AContextFourTimesTheDeviceKvCompletesWithTheSameTokens) {
    const int32_t max_tokens = 280;
    auto ample_o = options(4096 * kib, 0, engine::preemption_mode::swap, false);
    ample_o.max_model_len = 320;
    auto ample = engine_from(ample_o);
    const auto p = story_prompt(*ample, 0);
    const auto want = run_all(*ample, {p}, max_tokens)[0];
    ample.reset();
    // 4 device blocks = 64 tokens; the sequence reaches ~290 tokens (4.5x), the rest lives in the host tier.
    auto o = options(4 * 20 * kib, 0.01, engine::preemption_mode::swap, false);
    o.max_model_len = 320;
    auto small = engine_from(o);
    ASSERT_GE(p.size() + max_tokens, 4u * 64u);
    EXPECT_EQ(run_all(*small, {p}, max_tokens)[0], want);
    EXPECT_GT(small->stats().kv_bytes_swapped_out, 0) << "older pages moved to the host tier";
    expect_pools_full(*small);
}

TEST(EngineBatchingCancel, CancellingMidGenerationFreesItsBlocks) {
    auto e = engine_from(options(64 * 20 * kib, 0, engine::preemption_mode::recompute, false));
    struct state {
        engine::engine *e;
        std::atomic<strata_request_id> id{0};
        int tokens = 0;
        int32_t finish = -1;
    } st{e.get()};
    const auto p = story_prompt(*e, 1);
    strata_request req{};
    req.struct_size = sizeof req;
    req.prompt_tokens = p.data();
    req.n_prompt_tokens = static_cast<int32_t>(p.size());
    req.sampling = greedy(200);
    req.sampling.ignore_eos = 1;
    req.on_token = [](void *u, const strata_token_event *ev) {
        auto *s = static_cast<state *>(u);
        if (ev->token < 0) {
            s->finish = ev->finish;
            return;
        }
        // From the 10th token on (the id is known once submit has returned).
        if (++s->tokens >= 10 && s->id.load() != 0) s->e->cancel(s->id.load());
    };
    req.user = &st;
    st.id = e->submit(req);
    const strata_request_result r = e->wait(st.id.load());
    EXPECT_EQ(r.finish, STRATA_FINISH_CANCELLED);
    EXPECT_LT(st.tokens, 200);
    expect_pools_full(*e);
}

// The paths a discrete GPU takes, run on the CPU device in its `separate_memory` mode: weights uploaded into device
// memory, streamed layers staged through host buffers and `copy`, KV swaps and prefix loads through `copy`, logits
// read back with `copy`, and no block attended in place in the host tier.
TEST(EngineSeparateMemory, PreemptionSwapStreamedLayersAndPrefixHitsGiveTheAloneTokens) {
    constexpr int n = 16;
    constexpr int32_t max_tokens = 48;
    cpu_table table;
    auto o = options(24 * 20 * kib, 0.01, engine::preemption_mode::swap, true);
    o.device_config = &table.view;
    // The last three layers stream through a two-slot ring: one slot holds layer 3, the other cycles layers 2 and 4,
    // each load a copy_after the fence recorded when the slot was released (the device's fence path).
    o.offload.cpu_offload_layers = 3;
    o.offload.prefetch_depth = 1;
    auto e = engine_from(o);
    expect_alone_tokens(*e, n, max_tokens);
    // The same prompts again: prefix hits (device or host tier) through copies.
    expect_alone_tokens(*e, n, max_tokens);
    const strata_engine_stats s = e->stats();
    EXPECT_GT(s.preemptions_swap, 0);
    EXPECT_GT(s.prefix_hits[0] + s.prefix_hits[1], 0);
    const engine::ring_stats ring = e->offload_stats();
    EXPECT_GT(ring.layer_loads, 2 * ring.forwards) << "two loads per forward pass into the cycling slot";
    expect_pools_full(*e);
}

// Hybrid placement under continuous batching and preemption: steps of 16+ tokens (prefill chunks, full decode
// batches) stream the offloaded layers, smaller ones compute them on the CPU; either way every sequence gets its
// alone tokens.
TEST(EngineSeparateMemory, HybridPlacementUnderPreemptionGivesTheAloneTokens) {
    constexpr int n = 16;
    constexpr int32_t max_tokens = 48;
    cpu_table table;
    auto o = options(24 * 20 * kib, 0.01, engine::preemption_mode::swap, false);
    o.device_config = &table.view;
    o.offload.cpu_offload_layers = 3;
    o.offload.offload_compute = "cpu";
    o.offload.op_offload_min_batch = 16;
    auto e = engine_from(o);
    expect_alone_tokens(*e, n, max_tokens);
    const auto h = e->hybrid();
    EXPECT_EQ(h.host_layers, (std::vector<int32_t>{2, 3, 4}));
    EXPECT_GT(h.cpu_steps, 0u);
    EXPECT_GT(h.streamed_steps, 0u);
    EXPECT_GT(e->stats().preemptions_swap, 0);
    expect_pools_full(*e);
}

TEST(EngineSeparateMemory, AContextLargerThanTheDeviceKvIsRefusedAtStartUpWithTheKnobs) {
    cpu_table table;
    auto o = options(4 * 20 * kib, 0.01, engine::preemption_mode::swap, false);
    o.device_config = &table.view;
    try {
        engine_from(o);
        FAIL() << "a device that cannot read host memory must hold one max_model_len sequence itself";
    } catch (const std::exception &ex) {
        EXPECT_NE(std::string(ex.what()).find("--kv-cache-memory"), std::string::npos) << ex.what();
    }
}

namespace {

struct nvme_table : test_table {
    explicit nvme_table(std::string path) {
        strings["path"] = std::move(path);
        bools["direct_io"] = true;
    }
};

} // namespace

TEST(EngineBatchingNvmeSwap, SequencesSwappedToNvmeComeBackWithTheirAloneTokens) {
    constexpr int n = 16;
    constexpr int32_t max_tokens = 48;
    nvme_table nvme(std::string(STRATA_BINARY_DIR) + "/test-kv-nvme-swap.bin");
    // No host pool: every swapped block goes to the nvme tier and is read back from it.
    auto o = options(24 * 20 * kib, 0, engine::preemption_mode::swap, false);
    o.kv.nvme_space_gib = 0.01;
    o.offload.tier_configs["nvme"] = &nvme.view;
    auto e = engine_from(o);
    ::testing::internal::CaptureStderr();
    expect_alone_tokens(*e, n, max_tokens);
    EXPECT_NE(::testing::internal::GetCapturedStderr().find("KV cache pages evicted to NVMe: "), std::string::npos);
    const strata_engine_stats s = e->stats();
    EXPECT_EQ(s.kv_blocks_total[1], 0) << "no host pool in this test";
    EXPECT_GT(s.kv_blocks_total[2], 0);
    EXPECT_GT(s.preemptions_swap, 0);
    EXPECT_GT(s.kv_bytes_swapped_in, 0) << "blocks were read back from NVMe";
    expect_pools_full(*e);
}

namespace {

// Llamas with grouped-query attention from tools/make-model (random weights, llama-spm vocabulary): the integer
// matmul path and GQA under batching and preemption. Q8_0: 4 layers x 2 x 2 KV heads x 32 x 4 B = 2 KiB/token.
// Q4_K_M, llama-quantize's mixture (Q4_K with Q6_K for half the attn_v/ffn_down and the output): rows of 256 for the
// super-blocks, 4 layers x 2 x 2 KV heads x 64 x 4 B = 4 KiB/token. The other families of the decoder plugin in Q8_0:
// qwen2 (Q/K/V biases, NEOX RoPE), qwen3 (per-head Q/K norms, a head size of 64 with dim 128), a llama with every
// optional bias, and phi3 (fused Q/K/V and gate-up: row views of one Q8_0 tensor, on both devices of the hybrid case).
// Each also answers a prompt from its cached prefix blocks with the tokens of the miss, from every prefix-cache tier.
struct quantized_case {
    const char *name;
    const char *type;
    const char *dims; // and the architecture and features
    uint64_t kv_bytes_per_token;
};

std::string made_gqa_model(const quantized_case &c) {
    return made_model(std::string("batching-") + c.name + ".gguf",
                      std::string(c.dims) + " --layers 4 --heads 4 --kv-heads 2 --ctx 256 --type " + c.type +
                          " --seed 5 --vocab-from " + shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
}

void PrintTo(const quantized_case &c, std::ostream *os) { *os << c.name; }

class EngineBatchingQuantized : public ::testing::TestWithParam<quantized_case> {};

} // namespace

TEST_P(EngineBatchingQuantized, SixteenConcurrentSequencesAndAPrefixHitGiveTheirAloneTokensUnderSwapAndRecompute) {
    // The scheduling here is the float32 suites' (run under TSan above); what the types add is kernel work, which
    // ThreadSanitizer instruments at minutes per case and cannot race: the plain and ASan+UBSan builds run it.
    if (strata::testing::under_thread_sanitizer)
        GTEST_SKIP() << "quantized kernels on the float32 suites' scheduling: not a ThreadSanitizer subject (runs in "
                        "the plain and ASan+UBSan builds)";
    const quantized_case &c = GetParam();
    const std::string model = made_gqa_model(c);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    constexpr int n = 16;
    constexpr int32_t max_tokens = 40;
    const uint64_t blocks = c.kv_bytes_per_token * 16; // the engine's 16-token KV blocks
    auto opts = [&](uint64_t kv, engine::preemption_mode mode) {
        auto o = options(kv, mode == engine::preemption_mode::swap ? 0.01 : 0, mode, false);
        o.model_path = model;
        return o;
    };
    std::vector<std::vector<int32_t>> prompts, want;
    {
        auto ample = engine_from(opts(256 * blocks, engine::preemption_mode::recompute));
        for (int i = 0; i < n; ++i) prompts.push_back(story_prompt(*ample, i));
        for (int i = 0; i < n; ++i) want.push_back(run_all(*ample, {prompts[static_cast<size_t>(i)]}, max_tokens)[0]);
    }
    // Prefix hits from each tier: a long prompt's cached blocks give the tokens of the miss, in every family and
    // type, from the device, from the host tier after other prompts pushed them down, and from the persistent store
    // after a restart (the blocks' bytes as the family laid them out, read back into another engine).
    {
        auto o = options(256 * blocks, 0, engine::preemption_mode::recompute, true);
        o.model_path = model;
        auto cached = engine_from(o);
        const auto p = cached->tokenizer().encode(
            "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her "
            "friends and her dog. One day they found a big red ball under a tree.",
            true);
        ASSERT_GE(p.size(), 33u);
        const auto miss = run_all(*cached, {p}, max_tokens)[0];
        EXPECT_EQ(run_all(*cached, {p}, max_tokens)[0], miss);
        EXPECT_GE(cached->stats().prefix_hits[0], 32);
        expect_pools_full(*cached);
        cached.reset();

        const fs::path dir = fs::path(STRATA_BINARY_DIR) / (std::string("test-prefix-store-") + c.name);
        fs::remove_all(dir);
        auto tiered = options(20 * blocks, 0.01, engine::preemption_mode::recompute, true);
        tiered.model_path = model;
        tiered.kv.prefix_store_dir = dir.string();
        tiered.kv.prefix_store_gib = 0.01;
        expect_host_and_store_prefix_hits(tiered, p, miss, max_tokens, 16);
        fs::remove_all(dir);
    }
    for (auto mode : {engine::preemption_mode::swap, engine::preemption_mode::recompute}) {
        auto e = engine_from(opts(24 * blocks, mode)); // 24 blocks for 16 sequences of ~4 blocks each
        const auto got = run_all(*e, prompts, max_tokens);
        for (int i = 0; i < n; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "sequence " << i;
        const strata_engine_stats s = e->stats();
        EXPECT_GT(mode == engine::preemption_mode::swap ? s.preemptions_swap : s.preemptions_recompute, 0);
        expect_pools_full(*e);
    }
    // On the GPU stand-in with half the layers computed by the CPU where they live (the integer matmul path on both
    // devices), steps of 16+ tokens streaming them instead; a mixture's experts of the other two layers on the CPU in
    // every step (--n-cpu-moe 2).
    const bool moe = std::string(c.dims).find("--experts") != std::string::npos;
    cpu_table gpu;
    auto o = opts(24 * blocks, engine::preemption_mode::swap);
    o.device_config = &gpu.view;
    o.offload.cpu_offload_layers = 2;
    o.offload.offload_compute = "cpu";
    o.offload.op_offload_min_batch = 16;
    if (moe) o.offload.n_cpu_moe = 2;
    auto e = engine_from(o);
    const auto got = run_all(*e, prompts, max_tokens);
    for (int i = 0; i < n; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "hybrid, sequence " << i;
    EXPECT_EQ(e->hybrid().host_layers, (std::vector<int32_t>{2, 3}));
    EXPECT_EQ(e->hybrid().expert_layers, moe ? (std::vector<int32_t>{0, 1}) : (std::vector<int32_t>{}));
    EXPECT_GT(e->hybrid().cpu_steps, 0u);
    EXPECT_GT(e->hybrid().streamed_steps, 0u);
    expect_pools_full(*e);
}

INSTANTIATE_TEST_SUITE_P(Types, EngineBatchingQuantized,
                         ::testing::Values(quantized_case{"q8_0", "q8_0", "--dim 128 --ff 256", 2 * kib},
                                           quantized_case{"q4_k_m", "q4_k_m", "--dim 256 --ff 256", 4 * kib},
                                           quantized_case{"qwen2_q8_0", "q8_0", "--arch qwen2 --dim 128 --ff 256", 2 * kib},
                                           quantized_case{"qwen3_q8_0", "q8_0",
                                                          "--arch qwen3 --dim 128 --head-dim 64 --ff 256", 4 * kib},
                                           quantized_case{"llama_biases_q8_0", "q8_0",
                                                          "--dim 128 --ff 256 --feature qkv-bias --feature mlp-bias",
                                                          2 * kib},
                                           quantized_case{"phi3_q8_0", "q8_0", "--arch phi3 --dim 128 --ff 256", 2 * kib},
                                           quantized_case{"gemma2_q8_0", "q8_0",
                                                          "--arch gemma2 --dim 128 --ff 256 --window 8", 2 * kib},
                                           quantized_case{"gemma3_q8_0", "q8_0",
                                                          "--arch gemma3 --dim 128 --ff 256 --window 8 --swa-pattern 2",
                                                          2 * kib},
                                           quantized_case{"mixtral_q8_0", "q8_0",
                                                          "--dim 128 --ff 256 --experts 4 --experts-used 2", 2 * kib},
                                           quantized_case{"qwen3moe_q8_0", "q8_0",
                                                          "--arch qwen3moe --dim 128 --ff 256 --experts 8 "
                                                          "--experts-used 2 --expert-ff 128",
                                                          2 * kib},
                                           quantized_case{"qwen2moe_q8_0", "q8_0",
                                                          "--arch qwen2moe --dim 128 --ff 256 --experts 8 "
                                                          "--experts-used 2 --expert-ff 128",
                                                          2 * kib}),
                         [](const auto &info) { return std::string(info.param.name); });

// The rows of a step are drawn together on the engine's sampling pool once there are enough of them (16 rows of a
// 32000-token vocabulary here): each seeded request — temperature, top-k, top-p, repetition penalty, logprobs — gets
// the tokens it gets alone, drawn one row per step on the step thread.
TEST(EngineBatchingSampling, SeededDrawsTogetherGiveEachRequestItsAloneTokens) {
    const std::string model = made_model("batching-sampling-f32.gguf",
                                         "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 256 --type f32 "
                                         "--seed 7 --vocab-from " +
                                             shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
    ASSERT_FALSE(model.empty()) << "make-model failed";
    auto e = engine_from(batching_options(model, 4096 * kib, engine::preemption_mode::recompute, 0));
    constexpr int n = 16;
    constexpr int32_t max_tokens = 24;
    std::vector<strata_request> requests;
    const auto prompts = story_prompts(*e, n);
    for (int i = 0; i < n; ++i) {
        strata_request r = greedy_request(prompts[static_cast<size_t>(i)], max_tokens, collect, nullptr);
        r.sampling.temperature = 0.9f;
        r.sampling.top_p = i % 2 == 0 ? 0.95f : 1.0f;
        r.sampling.top_k = i % 4 == 1 ? 40 : 0;
        r.sampling.repetition_penalty = i % 3 == 0 ? 1.1f : 1.0f;
        r.sampling.seed = 100 + static_cast<uint64_t>(i);
        r.logprobs = i % 5 == 0 ? 3 : 0;
        requests.push_back(r);
    }
    std::vector<generation_result> alone(n), together(n);
    for (int i = 0; i < n; ++i) {
        strata_request r = requests[static_cast<size_t>(i)];
        r.user = &alone[static_cast<size_t>(i)];
        e->wait(e->submit(r));
    }
    std::vector<strata_request_id> ids;
    for (int i = 0; i < n; ++i) {
        strata_request r = requests[static_cast<size_t>(i)];
        r.user = &together[static_cast<size_t>(i)];
        ids.push_back(e->submit(r));
    }
    for (const auto id : ids) e->wait(id);
    const auto greedy_tokens = run_all(*e, {prompts[0]}, max_tokens)[0];
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(alone[static_cast<size_t>(i)].tokens.size(), static_cast<size_t>(max_tokens)) << "request " << i;
        EXPECT_EQ(together[static_cast<size_t>(i)].tokens, alone[static_cast<size_t>(i)].tokens) << "request " << i;
    }
    EXPECT_NE(alone[0].tokens, greedy_tokens) << "the draws are random: a sampled request differs from greedy";
    expect_pools_full(*e);
}
