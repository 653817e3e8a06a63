// Data parallel in one process (#16 item 5): replicas of the whole model behind the one engine API, each on its own
// share of the CPU (threads divided, ABI 1.27 device instances) and planning its share of the RAM; requests go to the
// least loaded replica. Every request's tokens must be one engine's, whichever replica ran it and whatever ran beside
// it; the API's stats are the replicas' sums; replicas that cannot each get a share are refused with the reason.
#include "engine/engine_api.hpp"
#include "engine/replica_set.hpp"
#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

using namespace strata;
using namespace strata::testing;

namespace {

const std::string &stories() {
    static const std::string p = shared_path("models/stories260K-f32.gguf");
    return p;
}

// stories260K over a CPU device of two threads, `replicas` replicas, pipeline ranks with these layers each (empty: one).
engine::engine_options options(const test_table &cpu, int32_t replicas, const std::vector<int32_t> &layers = {}) {
    engine::engine_options o = test_engine_options(stories(), 256, 32);
    o.device_config = &cpu.view;
    o.scheduler.max_num_seqs = 8;
    o.scheduler.max_num_batched_tokens = 64;
    o.offload.kv_cache_memory = uint64_t{8} << 20;
    o.offload.device_total = uint64_t{8} << 30; // the RAM a replica divides (else what is free now, which moves)
    o.kv.swap_space_gib = 0;
    o.data_parallel_size = replicas;
    o.pipeline_parallel_size = std::max<int32_t>(1, static_cast<int32_t>(layers.size()));
    o.pipeline_layer_partition = layers;
    return o;
}

struct two_threads : test_table {
    two_threads() { ints["threads"] = 2; }
};

// What a request's token events said: its tokens, and every id they carried.
struct events {
    generation_result g;
    std::set<strata_request_id> ids;
    static void on_token(void *user, const strata_token_event *ev) {
        auto *e = static_cast<events *>(user);
        e->ids.insert(ev->id);
        collect(&e->g, ev);
    }
};

// Submits every prompt through the C API (the frontends' path) at once and waits for each; every token event of a
// request must carry the id submit gave it (frontends cancel by the event's id, e.g. on a stop string).
std::vector<std::vector<int32_t>> run_through_api(const strata_engine_api &api, const std::vector<std::vector<int32_t>> &prompts,
                                                  int32_t max_tokens) {
    std::vector<events> g(prompts.size());
    std::vector<strata_request_id> ids(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        const strata_request r = greedy_request(prompts[i], max_tokens, events::on_token, &g[i]);
        strata_status st{};
        EXPECT_EQ(api.submit(api.engine, &r, &ids[i], &st), STRATA_OK) << st.message;
    }
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < prompts.size(); ++i) {
        strata_status st{};
        strata_request_result res{};
        EXPECT_EQ(api.wait(api.engine, ids[i], &res, &st), STRATA_OK) << st.message;
        EXPECT_EQ(res.n_completion_tokens, max_tokens) << "request " << i;
        EXPECT_EQ(g[i].ids, std::set<strata_request_id>{ids[i]}) << "request " << i << "'s events carry another id";
        out.push_back(g[i].g.tokens);
    }
    return out;
}

} // namespace

TEST(DataParallel, TwoReplicasGiveOneEnginesTokensEachOnHalfTheCpuAndTheApiSumsTheirStats) {
    two_threads cpu;
    constexpr int n = 8;
    constexpr int32_t max_tokens = 24;
    std::vector<std::vector<int32_t>> prompts, want;
    {
        engine::replica_set one(test_registry(), test_host(), options(cpu, 1));
        ASSERT_EQ(one.size(), 1);
        EXPECT_EQ(one.front().device_threads(), 2);
        for (int i = 0; i < n; ++i) prompts.push_back(story_prompt(one.front(), i));
        for (const auto &p : prompts) want.push_back(run_all(one.front(), {p}, max_tokens)[0]);
        EXPECT_EQ(one.front().memory_plan_inputs().device_total, uint64_t{8} << 30);
    }
    engine::replica_set two(test_registry(), test_host(), options(cpu, 2));
    ASSERT_EQ(two.size(), 2);
    for (int32_t d = 0; d < 2; ++d) {
        SCOPED_TRACE("replica " + std::to_string(d));
        EXPECT_EQ(two.replica(d).device_threads(), 1) << "each replica computes on its half of the two threads";
        EXPECT_EQ(two.replica(d).memory_plan_inputs().device_total, uint64_t{4} << 30) << "each plans half the RAM";
        EXPECT_EQ(two.replica(d).fingerprint(), two.front().fingerprint());
    }
    const strata_engine_api api = engine::make_engine_api(two);
    EXPECT_EQ(run_through_api(api, prompts, max_tokens), want) << "a replica's tokens differ from one engine's";
    // A request goes to the replica with the fewest unfinished ones: the burst is spread over both.
    const strata_engine_stats s0 = two.replica(0).stats(), s1 = two.replica(1).stats();
    EXPECT_GT(s0.requests_finished, 0);
    EXPECT_GT(s1.requests_finished, 0);
    strata_engine_stats sum{};
    sum.struct_size = sizeof sum;
    api.get_stats(api.engine, &sum);
    EXPECT_EQ(sum.requests_finished, n);
    EXPECT_EQ(sum.requests_finished, s0.requests_finished + s1.requests_finished);
    EXPECT_EQ(sum.generation_tokens_total, int64_t{n} * max_tokens);
    EXPECT_EQ(sum.prompt_tokens_total, s0.prompt_tokens_total + s1.prompt_tokens_total);
    EXPECT_EQ(sum.kv_blocks_total[0], s0.kv_blocks_total[0] + s1.kv_blocks_total[0]);
    EXPECT_GT(s1.kv_blocks_total[0], 0);
    EXPECT_EQ(sum.kv_block_size, s0.kv_block_size);
    // The same requests again, cancelled through the API: each id reaches the replica that holds it.
    std::vector<generation_result> g(n);
    std::vector<strata_request_id> ids(n);
    for (int i = 0; i < n; ++i) {
        const strata_request r = greedy_request(prompts[static_cast<size_t>(i)], 200, collect, &g[static_cast<size_t>(i)]);
        strata_status st{};
        ASSERT_EQ(api.submit(api.engine, &r, &ids[static_cast<size_t>(i)], &st), STRATA_OK) << st.message;
    }
    for (strata_request_id id : ids) api.cancel(api.engine, id);
    for (int i = 0; i < n; ++i) {
        strata_status st{};
        strata_request_result res{};
        api.wait(api.engine, ids[static_cast<size_t>(i)], &res, &st);
        EXPECT_EQ(res.finish, STRATA_FINISH_CANCELLED) << "request " << i;
    }
}

TEST(DataParallel, ReplicasOfPipelineRanksGiveOneEnginesTokens) {
    two_threads cpu;
    constexpr int32_t max_tokens = 24;
    std::vector<std::vector<int32_t>> prompts, want;
    {
        engine::replica_set one(test_registry(), test_host(), options(cpu, 1));
        for (int i = 0; i < 6; ++i) prompts.push_back(story_prompt(one.front(), i));
        for (const auto &p : prompts) want.push_back(run_all(one.front(), {p}, max_tokens)[0]);
    }
    engine::replica_set two(test_registry(), test_host(), options(cpu, 2, {2, 3}));
    for (int32_t d = 0; d < 2; ++d) ASSERT_EQ(two.replica(d).pipeline_stages().size(), 2u);
    EXPECT_EQ(run_through_api(engine::make_engine_api(two), prompts, max_tokens), want);
}

TEST(DataParallel, MoreReplicasThanCpuThreadsAreRefusedNamingTheReplica) {
    two_threads cpu;
    try {
        engine::replica_set three(test_registry(), test_host(), options(cpu, 3));
        FAIL() << "three replicas on two threads started";
    } catch (const std::exception &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("data-parallel replica 0 of 3 could not start"), std::string::npos) << what;
        EXPECT_NE(what.find("3 data-parallel replicas need a thread each"), std::string::npos) << what;
        EXPECT_NE(what.find("--data-parallel-size"), std::string::npos) << what;
    }
}
