// The engine's waiting-queue limit ([scheduler] max_waiting_requests) through the engine API a frontend uses: at the
// limit submit refuses with STRATA_ERR_BUSY and queues nothing; below it again, requests are accepted.
#include "engine/engine_api.hpp"
#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>

namespace {

using namespace strata;
using namespace strata::testing;

// Holds the engine's worker thread in its first token callback until released, so the queue does not move.
struct gate {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, released = false;

    static void on_token(void *user, const strata_token_event *ev) {
        auto &g = *static_cast<gate *>(user);
        if (ev->token < 0) return;
        std::unique_lock<std::mutex> lock(g.mu);
        g.entered = true;
        g.cv.notify_all();
        g.cv.wait(lock, [&] { return g.released; });
    }
    void wait_entered() {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return entered; });
    }
    void release() {
        std::lock_guard<std::mutex> lock(mu);
        released = true;
        cv.notify_all();
    }
};

TEST(EngineAdmission, SubmitRefusesWithBusyAtTheWaitingQueueLimit) {
    engine::engine_options o;
    o.model_path = shared_path("models/stories260K-f32.gguf");
    o.prefill_chunk = 256;
    o.scheduler.max_num_batched_tokens = 256;
    o.scheduler.max_num_seqs = 1;
    o.scheduler.max_waiting_requests = 1;
    o.device = "cpu";
    o.print_plan = false;
    o.kv.swap_space_gib = 0; // no host KV tier needed here
    o.offload.kv_cache_memory = uint64_t{16} << 20; // not the CPU default of 1 GiB, touched at start-up
    o.offload.measure_bandwidth = false;
    o.offload.bandwidth_cache_path = std::string(STRATA_BINARY_DIR) + "/test-bandwidth.json";
    engine::engine e(test_registry(), test_host(), o);
    engine::replica_set alone(e);
    const strata_engine_api api = engine::make_engine_api(alone);

    const std::vector<int32_t> prompt = e.tokenizer().encode("Lily", true);
    gate g;
    auto make = [&](void (*cb)(void *, const strata_token_event *), void *user) {
        strata_request r{};
        r.struct_size = sizeof r;
        r.prompt_tokens = prompt.data();
        r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
        r.sampling = greedy(4);
        r.on_token = cb;
        r.user = user;
        return r;
    };

    // A runs (the one sequence) and its first token holds the worker: nothing moves from the queue meanwhile.
    strata_status st{};
    strata_request_id a = 0, b = 0, c = 0, d = 0;
    const strata_request ra = make(gate::on_token, &g);
    ASSERT_EQ(api.submit(api.engine, &ra, &a, &st), STRATA_OK) << st.message;
    g.wait_entered();
    generation_result gb, gd;
    const strata_request rb = make(collect, &gb);
    ASSERT_EQ(api.submit(api.engine, &rb, &b, &st), STRATA_OK) << st.message; // B waits: the queue is at its limit
    const strata_request rc = make(collect, nullptr);
    EXPECT_EQ(api.submit(api.engine, &rc, &c, &st), STRATA_ERR_BUSY);
    EXPECT_EQ(st.code, STRATA_ERR_BUSY);
    EXPECT_NE(std::string(st.message).find("max_waiting_requests = 1"), std::string::npos) << st.message;
    EXPECT_EQ(c, 0u) << "a refused submit leaves its output untouched";
    strata_engine_stats s{};
    s.struct_size = sizeof s;
    api.get_stats(api.engine, &s);
    EXPECT_EQ(s.requests_waiting, 1);

    g.release();
    strata_request_result res{};
    res.struct_size = sizeof res;
    ASSERT_EQ(api.wait(api.engine, a, &res, &st), STRATA_OK) << st.message;
    ASSERT_EQ(api.wait(api.engine, b, &res, &st), STRATA_OK) << st.message;
    EXPECT_EQ(gb.tokens.size(), 4u);

    // The queue is empty again: accepted.
    const strata_request rd = make(collect, &gd);
    ASSERT_EQ(api.submit(api.engine, &rd, &d, &st), STRATA_OK) << st.message;
    ASSERT_EQ(api.wait(api.engine, d, &res, &st), STRATA_OK) << st.message;
    EXPECT_EQ(gd.tokens, gb.tokens);
    api.get_stats(api.engine, &s);
    EXPECT_EQ(s.requests_waiting, 0);
    EXPECT_EQ(s.requests_finished, 3);

    // submit_all counts the whole batch against the limit: two at once can never fit under a limit of one, and
    // the message says so instead of "retry later"; none of them is queued.
    const std::vector<strata_request> two{make(collect, nullptr), make(collect, nullptr)};
    try {
        e.submit_all(two);
        FAIL() << "a batch of two was queued under max_waiting_requests = 1";
    } catch (const std::exception &ex) {
        EXPECT_NE(std::string(ex.what()).find("2 requests submitted together exceed max_waiting_requests = 1"),
                  std::string::npos)
            << ex.what();
    }
    api.get_stats(api.engine, &s);
    EXPECT_EQ(s.requests_waiting, 0);
    EXPECT_EQ(e.unfinished(), 0);
}

TEST(EngineAdmission, AWaitingQueueLimitBelowOneIsRefusedAtStartUp) {
    engine::engine_options o;
    o.model_path = shared_path("models/stories260K-f32.gguf");
    o.scheduler.max_waiting_requests = 0;
    o.device = "cpu";
    o.print_plan = false;
    o.kv.swap_space_gib = 0; // no host KV tier needed here
    o.offload.kv_cache_memory = uint64_t{16} << 20; // not the CPU default of 1 GiB, touched at start-up
    o.offload.measure_bandwidth = false;
    o.offload.bandwidth_cache_path = std::string(STRATA_BINARY_DIR) + "/test-bandwidth.json";
    try {
        engine::engine e(test_registry(), test_host(), o);
        FAIL() << "an engine started with max_waiting_requests = 0";
    } catch (const strata::error &err) {
        EXPECT_NE(std::string(err.what()).find("max_waiting_requests 0 must be at least 1"), std::string::npos) << err.what();
    }
}

} // namespace
