// Issue #18 item 4, "injected faults fail one request, never the server", through the whole engine on stories260K:
// I/O faults of the nvme tier (injected with the TEST ONLY [nvme] inject_faults key, and real ones: the tier file
// truncated underneath the engine) while it streams weights through the prefetch ring and while it swaps KV blocks.
//
//  - Weights cannot be recomputed: the requests of the step whose layer did not load finish with reason error and a
//    message naming the tier and the errno text; the ring starts over, and the next request gives the undisturbed
//    greedy tokens (a one-off fault) or fails the same clear way (a file that stays truncated).
//  - KV blocks can: a swap-out or swap-in that fails gives the sequence's blocks back and recomputes it from its
//    tokens (logged with the tier and the errno text), so every request still gives its undisturbed tokens.
// Either way every block is back in its pool once the engine is idle, and the engine keeps serving.
#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

using namespace strata;
using namespace strata::testing;
namespace fs = std::filesystem;

namespace {

const std::string k_model = shared_path("models/stories260K-f32.gguf");
constexpr uint64_t kib = 1024;

// One nvme tier file per test process (CTest runs test cases in parallel processes).
std::string tier_path(const std::string &name) {
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-fault-files";
    fs::create_directories(dir);
    const fs::path p = dir / (name + "_" + std::to_string(::getpid()) + ".tier");
    fs::remove(p);
    return p.string();
}

// The [nvme] table: a path, the fault rules, and optionally the chunk size (block_size).
struct nvme_table : test_table {
    std::map<std::string, int64_t> ints;
    nvme_table(std::string path, std::string faults, int64_t block_size = 0) {
        strings["path"] = std::move(path);
        if (!faults.empty()) strings["inject_faults"] = std::move(faults);
        if (block_size > 0) ints["block_size"] = block_size;
        view.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            auto &m = static_cast<nvme_table *>(static_cast<test_table *>(ctx))->ints;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second;
            return 1;
        };
    }
};

// What a request saw: its tokens, its finish reason and error text (from the final event).
struct outcome {
    std::vector<int32_t> tokens;
    int32_t finish = -1;
    std::string error;
    std::function<void(const outcome &)> after_token; // runs on the engine's worker thread
};

void on_event(void *user, const strata_token_event *ev) {
    auto *o = static_cast<outcome *>(user);
    if (ev->token >= 0) {
        o->tokens.push_back(ev->token);
        if (o->after_token) o->after_token(*o);
        return;
    }
    o->finish = ev->finish;
    if (ev->error != nullptr) o->error = ev->error;
}

// Submits every prompt as one arrival (greedy, EOS ignored) and waits for all.
std::vector<outcome> run(engine::engine &e, const std::vector<std::vector<int32_t>> &prompts, int32_t max_tokens,
                         std::function<void(const outcome &)> after_token = {}) {
    std::vector<outcome> out(prompts.size());
    std::vector<strata_request> reqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
        out[i].after_token = after_token;
        reqs.push_back(greedy_request(prompts[i], max_tokens, on_event, &out[i]));
    }
    const std::vector<strata_request_id> ids = e.submit_all(reqs);
    for (size_t i = 0; i < ids.size(); ++i) {
        try {
            e.wait(ids[i]); // a request that finished with reason error throws its message, which out[i] holds too
        } catch (const std::exception &ex) {
            EXPECT_EQ(out[i].finish, STRATA_FINISH_ERROR) << ex.what();
            EXPECT_EQ(out[i].error, ex.what());
        }
    }
    return out;
}

engine::engine_options base_options() {
    return batching_options(k_model, 0, engine::preemption_mode::automatic, 0);
}

// Each prompt's greedy tokens run alone on an undisturbed engine (every weight resident, ample KV).
std::vector<std::vector<int32_t>> undisturbed(int n, int32_t max_tokens) {
    static std::map<std::pair<int, int32_t>, std::vector<std::vector<int32_t>>> cache;
    auto &v = cache[{n, max_tokens}];
    if (v.empty()) {
        auto o = base_options();
        o.offload.kv_cache_memory = 4096 * kib;
        o.kv.swap_space_gib = 0;
        auto e = std::make_unique<engine::engine>(test_registry(), test_host(), o);
        for (int i = 0; i < n; ++i) v.push_back(run(*e, {story_prompt(*e, i)}, max_tokens)[0].tokens);
    }
    return v;
}

// ---- weights streamed from the nvme tier -----------------------------------------------------------------------

// Every layer of stories260K in the nvme tier, streamed through a ring of two slots: every token reads five layers.
// With tensor_parallel ranks, each streams its share from a tier file of its own (rank r > 0: `path`.rank<r>).
std::unique_ptr<engine::engine> streaming_engine(nvme_table &nvme, int32_t tensor_parallel = 1) {
    auto o = base_options();
    o.offload.kv_cache_memory = 4096 * kib;
    o.kv.swap_space_gib = 0;
    o.offload.cpu_offload_layers = 5;
    o.offload.tiers = {"nvme"};
    o.offload.prefetch_depth = 1;
    o.offload.tier_configs["nvme"] = &nvme.view;
    o.tensor_parallel_size = tensor_parallel;
    return std::make_unique<engine::engine>(test_registry(), test_host(), o);
}

struct weight_fault {
    const char *name;
    const char *rule;
    const char *says; // in the failed request's error
};

void PrintTo(const weight_fault &f, std::ostream *os) { *os << f.rule; } // CTest's test names stay readable

class WeightStreamingFault : public ::testing::TestWithParam<weight_fault> {};

TEST_P(WeightStreamingFault, FailsTheRequestsOfThatStepWithTheTierAndErrnoAndTheNextRequestGetsTheUndisturbedTokens) {
    constexpr int32_t max_tokens = 40;
    const auto want = undisturbed(2, max_tokens);
    nvme_table nvme(tier_path(std::string("weights_") + GetParam().name), GetParam().rule);
    auto e = streaming_engine(nvme);
    ASSERT_GT(e->memory_plan().offloaded_layers, 0);
    const auto prompts = story_prompts(*e, 2);

    // The 61st read request lands inside the first request's generation (every token reads every layer).
    const outcome hit = run(*e, {prompts[0]}, max_tokens)[0];
    EXPECT_EQ(hit.finish, STRATA_FINISH_ERROR) << "the injected fault did not fail the request";
    EXPECT_LT(hit.tokens.size(), static_cast<size_t>(max_tokens));
    EXPECT_NE(hit.error.find("tier 'nvme'"), std::string::npos) << hit.error;
    EXPECT_NE(hit.error.find(GetParam().says), std::string::npos) << hit.error;
    // What it did produce before the fault is the undisturbed prefix: a failed read never turns into wrong tokens.
    EXPECT_TRUE(std::equal(hit.tokens.begin(), hit.tokens.end(), want[0].begin())) << "tokens before the fault";
    expect_pools_full(*e);

    // The engine keeps serving: the same prompt again, and another one, give the undisturbed greedy tokens.
    for (int i = 0; i < 2; ++i) {
        const outcome again = run(*e, {prompts[static_cast<size_t>(i)]}, max_tokens)[0];
        EXPECT_EQ(again.finish, STRATA_FINISH_LENGTH) << again.error;
        EXPECT_EQ(again.tokens, want[static_cast<size_t>(i)]) << "prompt " << i;
    }
    expect_pools_full(*e);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, WeightStreamingFault,
    ::testing::Values(weight_fault{"eio", "read:eio:after=60", "Input/output error"},
                      weight_fault{"short", "read:short:after=60", "the tier file ended at offset"}),
    [](const auto &info) { return std::string(info.param.name); });

namespace {

// `file` (a tier file the engine streams weights from) truncated after the third token of a request: the request
// fails naming the tier and the truncation, after the undisturbed tokens only; two later requests fail the same
// clear way without a token; every block is back in its pool. Returns the failed request's outcome.
outcome expect_truncation_fails_clearly(engine::engine &e, const std::string &file, int32_t max_tokens) {
    const auto want = undisturbed(1, max_tokens);
    const auto prompts = story_prompts(e, 1);
    const outcome hit = run(e, prompts, max_tokens, [&](const outcome &o) {
        if (o.tokens.size() == 3) {
            ASSERT_EQ(::truncate(file.c_str(), 0), 0);
        }
    })[0];
    EXPECT_EQ(hit.finish, STRATA_FINISH_ERROR);
    EXPECT_GE(hit.tokens.size(), 3u);
    EXPECT_TRUE(std::equal(hit.tokens.begin(), hit.tokens.end(), want[0].begin()));
    EXPECT_NE(hit.error.find("tier 'nvme'"), std::string::npos) << hit.error;
    EXPECT_NE(hit.error.find("truncated"), std::string::npos) << hit.error;
    expect_pools_full(e);
    for (int i = 0; i < 2; ++i) {
        const outcome later = run(e, prompts, max_tokens)[0];
        EXPECT_EQ(later.finish, STRATA_FINISH_ERROR);
        EXPECT_TRUE(later.tokens.empty()) << "no token may come from weights that are gone";
        EXPECT_NE(later.error.find("tier 'nvme'"), std::string::npos) << later.error;
    }
    expect_pools_full(e);
    return hit;
}

} // namespace

// A real failure: the weights' tier file is truncated under the running engine. The request then running fails with
// the reason; the weights are gone, so later requests fail the same clear way, promptly, and the engine stays up.
TEST(WeightStreamingRealFault, ATierFileTruncatedUnderTheEngineFailsRequestsClearlyAndNeverHangs) {
    const std::string path = tier_path("weights_truncated");
    nvme_table nvme(path, "");
    auto e = streaming_engine(nvme);
    expect_truncation_fails_clearly(*e, path, 40);
}

// Tensor parallel (#16 item 3): two ranks each stream their half of every layer from a tier file of their own, and
// rank 1's file is truncated under the running engine. Rank 0's forward goes on to the next all_reduce and waits
// there for rank 1, whose read fails: the group's barrier breaks, the step fails with rank 1's reason (not a hang,
// not rank 0's "another rank failed"), and later steps fail the same clear way, promptly.
TEST(WeightStreamingRealFault, ATensorParallelRankWhoseTierFileIsTruncatedFailsTheStepAndNoRankWaitsForIt) {
    const std::string path = tier_path("weights_truncated_tp");
    fs::remove(path + ".rank1");
    nvme_table nvme(path, "");
    auto e = streaming_engine(nvme, 2);
    ASSERT_EQ(e->ranks().size(), 2u);
    ASSERT_TRUE(fs::exists(path + ".rank1")) << "rank 1's own tier file";
    const outcome hit = expect_truncation_fails_clearly(*e, path + ".rank1", 40);
    EXPECT_EQ(hit.error.find("another rank failed"), std::string::npos) << "the reason is rank 1's: " << hit.error;
    e.reset();
    fs::remove(path + ".rank1");
}

// ---- KV blocks swapped to the nvme tier ------------------------------------------------------------------------

// 24 device blocks of KV for 16 sequences that each grow to ~4 blocks, no host pool: every preemption swaps to the
// nvme tier and back (the weights stay resident, so every nvme I/O is a KV swap).
std::unique_ptr<engine::engine> swapping_engine(nvme_table &nvme) {
    auto o = base_options();
    o.offload.kv_cache_memory = 24 * 20 * kib;
    o.kv.swap_space_gib = 0;
    o.kv.nvme_space_gib = 0.01;
    o.scheduler.mode = engine::preemption_mode::swap;
    o.offload.tier_configs["nvme"] = &nvme.view;
    return std::make_unique<engine::engine>(test_registry(), test_host(), o);
}

struct kv_fault {
    const char *name;
    const char *rule;
    const char *says;    // in the log line of the sequence recomputed instead
    int64_t chunk_bytes; // the tier's block_size: 1 MiB (default) holds many 20 KiB KV blocks, so every swap-out
                         // reads its chunk first; 4 KiB chunks make a swap-out pure writes and a swap-in pure reads
    const char *path;    // "swapping out" or "swapping in": which way the failed sequence was going
};

void PrintTo(const kv_fault &f, std::ostream *os) {
    *os << f.rule << ", block_size " << (f.chunk_bytes > 0 ? std::to_string(f.chunk_bytes) : std::string("1MiB"));
}

class KvSwapFault : public ::testing::TestWithParam<kv_fault> {};

TEST_P(KvSwapFault, RecomputesTheSequenceWhoseBlocksFailedAndEverySequenceGetsItsUndisturbedTokens) {
    constexpr int n = 16;
    constexpr int32_t max_tokens = 48;
    const auto want = undisturbed(n, max_tokens);
    nvme_table nvme(tier_path(std::string("kv_") + GetParam().name), GetParam().rule, GetParam().chunk_bytes);
    auto e = swapping_engine(nvme);
    ASSERT_GT(e->stats().kv_blocks_total[2], 0);
    const auto prompts = story_prompts(*e, n);
    ::testing::internal::CaptureStderr();
    const auto got = run(*e, prompts, max_tokens);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("TEST ONLY: injected fault #1"), std::string::npos) << "the fault never fired";
    EXPECT_NE(log.find("is recomputed instead"), std::string::npos) << log;
    EXPECT_NE(log.find("tier 'nvme'"), std::string::npos) << log;
    EXPECT_NE(log.find(GetParam().says), std::string::npos) << log;
    EXPECT_NE(log.find(std::string(GetParam().path) + " sequence group"), std::string::npos) << log;
    for (int i = 0; i < n; ++i) {
        const outcome &o = got[static_cast<size_t>(i)];
        EXPECT_EQ(o.finish, STRATA_FINISH_LENGTH) << "sequence " << i << ": " << o.error;
        EXPECT_EQ(o.tokens, want[static_cast<size_t>(i)]) << "sequence " << i;
    }
    const strata_engine_stats s = e->stats();
    EXPECT_GT(s.preemptions_swap, 0);
    expect_pools_full(*e);
    // And again, with whatever faults the rule has left: the same tokens.
    const auto second = run(*e, prompts, max_tokens);
    for (int i = 0; i < n; ++i) EXPECT_EQ(second[static_cast<size_t>(i)].tokens, want[static_cast<size_t>(i)]) << i;
    expect_pools_full(*e);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, KvSwapFault,
    ::testing::Values(
        kv_fault{"write_enospc", "write:enospc:after=5", "No space left on device", 0, "swapping out"},
        kv_fault{"write_enospc_4k", "write:enospc:after=20", "No space left on device", 4096, "swapping out"},
        kv_fault{"rmw_read_eio", "read:eio:after=3", "Input/output error", 0, "swapping out"},
        kv_fault{"read_eio", "read:eio:after=3", "Input/output error", 4096, "swapping in"},
        kv_fault{"read_short", "read:short:after=3", "the tier file ended at offset", 4096, "swapping in"},
        // A tier that breaks for good: every request from the 21st on fails, reads and writes.
        kv_fault{"all_eio", "any:eio:after=20:count=0", "Input/output error", 4096, "swapping out"}),
    [](const auto &info) { return std::string(info.param.name); });

// A real failure: the KV tier file is truncated under the engine and grown back (zeros where blocks were). Swapped
// blocks then fail their checksums and those sequences are recomputed; nothing wrong is ever attended.
TEST(KvSwapRealFault, ATierFileTruncatedUnderTheEngineIsRecomputedNeverServed) {
    constexpr int n = 16;
    constexpr int32_t max_tokens = 48;
    const auto want = undisturbed(n, max_tokens);
    const std::string path = tier_path("kv_truncated");
    nvme_table nvme(path, "", 4096); // 4 KiB chunks: blocks swapped out after the cut are whole chunks again
    auto e = swapping_engine(nvme);
    const auto prompts = story_prompts(*e, n);
    const uint64_t size = fs::file_size(path);
    int tokens_seen = 0;
    ::testing::internal::CaptureStderr();
    const auto got = run(*e, prompts, max_tokens, [&](const outcome &) {
        if (++tokens_seen == 200) { // well into the run: sequences are swapped out by now
            ASSERT_EQ(::truncate(path.c_str(), 0), 0);
            ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
        }
    });
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("checksum mismatch"), std::string::npos) << "no swapped block was read back after the cut";
    EXPECT_NE(log.find("swapping in sequence group"), std::string::npos);
    EXPECT_NE(log.find("is recomputed instead"), std::string::npos);
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(got[static_cast<size_t>(i)].finish, STRATA_FINISH_LENGTH) << got[static_cast<size_t>(i)].error;
        EXPECT_EQ(got[static_cast<size_t>(i)].tokens, want[static_cast<size_t>(i)]) << "sequence " << i;
    }
    expect_pools_full(*e);
    const auto second = run(*e, prompts, max_tokens);
    for (int i = 0; i < n; ++i) EXPECT_EQ(second[static_cast<size_t>(i)].tokens, want[static_cast<size_t>(i)]) << i;
    expect_pools_full(*e);
}

} // namespace
