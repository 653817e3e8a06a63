// Shared set-up for tests that run real models: a registry over the built plugins and an engine on a GGUF file.
#pragma once

#include "engine/engine.hpp"
#include "made_model.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace strata::testing {

inline std::string shared_path(const std::string &rel) { return std::string(STRATA_SHARED_DIR) + "/" + rel; }

// run.c's greedy stories260K text: the fenced block under "### Public greedy reference" in the shared README.
inline std::string stories_reference_text() {
    std::ifstream in(shared_path("models/README.md"));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    const size_t section = all.find("### Public greedy reference");
    if (section == std::string::npos) return {};
    const size_t open = all.find("```\n", section);
    const size_t close = all.find("\n```", open + 4);
    if (open == std::string::npos || close == std::string::npos) return {};
    return all.substr(open + 4, close - (open + 4));
}

inline const strata_host_services *test_host() {
    static strata_host_services h = [] {
        strata_host_services x{};
        x.struct_size = sizeof x;
        x.host_abi_major = STRATA_ABI_MAJOR;
        x.host_abi_minor = STRATA_ABI_MINOR;
        return x;
    }();
    return &h;
}

inline plugins::registry &test_registry() {
    static plugins::registry r = [] {
        plugins::registry reg(test_host());
        reg.load_directory(STRATA_PLUGIN_DIR);
        return reg;
    }();
    return r;
}

struct generation_result {
    std::vector<int32_t> prompt;
    std::vector<int32_t> tokens;
    std::string text;
    strata_request_result result{};
};

inline void collect(void *user, const strata_token_event *ev) {
    auto *g = static_cast<generation_result *>(user);
    if (ev->token < 0) return;
    g->tokens.push_back(ev->token);
    g->text.append(ev->piece, static_cast<size_t>(ev->piece_len));
}

inline strata_sampling_params greedy(int32_t max_tokens) {
    strata_sampling_params p{};
    p.struct_size = sizeof p;
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repetition_penalty = 1.0f;
    p.max_tokens = max_tokens;
    return p;
}

inline generation_result generate(engine::engine &e, const std::string &prompt, strata_sampling_params sp) {
    generation_result g;
    g.prompt = e.tokenizer().encode(prompt, true);
    strata_request req{};
    req.struct_size = sizeof req;
    req.prompt_tokens = g.prompt.data();
    req.n_prompt_tokens = static_cast<int32_t>(g.prompt.size());
    req.sampling = sp;
    req.on_token = collect;
    req.user = &g;
    g.result = e.wait(e.submit(req));
    return g;
}

// What every test engine sets: the model, its context and prefill chunk, the CPU device, no printed plan and no
// bandwidth measurement (start-up stays fast and the user's bandwidth cache is left alone).
inline engine::engine_options test_engine_options(const std::string &model, int32_t max_model_len, int32_t prefill_chunk) {
    engine::engine_options o;
    o.model_path = model;
    o.max_model_len = max_model_len;
    o.prefill_chunk = prefill_chunk;
    o.device = "cpu";
    o.print_plan = false;
    o.offload.measure_bandwidth = false;
    o.offload.bandwidth_cache_path = std::string(STRATA_BINARY_DIR) + "/test-bandwidth.json";
    return o;
}

inline std::unique_ptr<engine::engine> make_engine(const std::string &model, int32_t max_model_len = 0,
                                                   int32_t prefill_chunk = 256,
                                                   engine::offload_options offload = engine::offload_options{},
                                                   const strata_config_view *device_config = nullptr,
                                                   const std::vector<int32_t> &pipeline_layers = {}) {
    engine::engine_options o = test_engine_options(model, max_model_len, prefill_chunk);
    // Pipeline ranks in this process, with these layers each (empty: one worker).
    o.pipeline_parallel_size = std::max<int32_t>(1, static_cast<int32_t>(pipeline_layers.size()));
    o.pipeline_layer_partition = pipeline_layers;
    // One sequence at a time in these tests: a step is at most one prefill chunk, and few logits rows are needed.
    o.scheduler.max_num_batched_tokens = prefill_chunk;
    o.scheduler.max_num_seqs = 4;
    o.device_config = device_config;
    // 64 MiB of KV where a test sets no memory budget (the CPU default of 1 GiB is touched at start-up: seconds per
    // engine under ThreadSanitizer); tests of budgets leave the planner its own sizing.
    if (!offload.kv_cache_memory && !offload.device_memory && !offload.limit_gpu_memory && device_config == nullptr)
        offload.kv_cache_memory = uint64_t{64} << 20;
    offload.measure_bandwidth = o.offload.measure_bandwidth;
    offload.bandwidth_cache_path = o.offload.bandwidth_cache_path;
    o.offload = std::move(offload);
    return std::make_unique<engine::engine>(test_registry(), test_host(), o);
}

// A greedy request for exactly max_tokens tokens of `prompt` (EOS ignored), its events sent to on_token(user, ...).
inline strata_request greedy_request(const std::vector<int32_t> &prompt, int32_t max_tokens,
                                     void (*on_token)(void *, const strata_token_event *), void *user) {
    strata_request req{};
    req.struct_size = sizeof req;
    req.prompt_tokens = prompt.data();
    req.n_prompt_tokens = static_cast<int32_t>(prompt.size());
    req.sampling = greedy(max_tokens);
    req.sampling.ignore_eos = 1;
    req.on_token = on_token;
    req.user = user;
    return req;
}

// Submits every prompt as one arrival (submit_all: the same schedule whatever the threads' timing, so a KV budget
// meant to force preemption does) and waits for all; returns each one's generated tokens.
inline std::vector<std::vector<int32_t>> run_all(engine::engine &e, const std::vector<std::vector<int32_t>> &prompts,
                                          int32_t max_tokens) {
    std::vector<generation_result> g(prompts.size());
    std::vector<strata_request> reqs;
    for (size_t i = 0; i < prompts.size(); ++i) reqs.push_back(greedy_request(prompts[i], max_tokens, collect, &g[i]));
    const std::vector<strata_request_id> ids = e.submit_all(reqs);
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < ids.size(); ++i) {
        e.wait(ids[i]);
        out.push_back(g[i].tokens);
    }
    return out;
}

// The engine of the batching tests: 256-token contexts, 32-token prefill chunks, up to 32 sequences and 64 tokens a
// step, `kv_bytes` of device KV, preemption by `mode` with `swap_gib` of host swap, prefix caching off.
inline engine::engine_options batching_options(const std::string &model, uint64_t kv_bytes, engine::preemption_mode mode,
                                               double swap_gib) {
    engine::engine_options o = test_engine_options(model, 256, 32);
    o.offload.kv_cache_memory = kv_bytes;
    o.scheduler.max_num_seqs = 32;
    o.scheduler.max_num_batched_tokens = 64;
    o.scheduler.mode = mode;
    o.kv.enable_prefix_caching = false;
    o.kv.swap_space_gib = swap_gib;
    return o;
}

inline std::unique_ptr<engine::engine> engine_from(const engine::engine_options &o) {
    return std::make_unique<engine::engine>(test_registry(), test_host(), o);
}

// The i-th of the batching tests' prompts: eight short story openings, and from the ninth on longer ones.
inline std::vector<int32_t> story_prompt(engine::engine &e, int i) {
    static const char *names[] = {"Lily", "Tom", "a big dog", "Sue", "the cat", "Ben", "a bird", "Mia"};
    std::string text = std::string("Once upon a time there was ") + names[i % 8];
    if (i >= 8) text += " who loved to play in the park with a red ball";
    return e.tokenizer().encode(text, true);
}

inline std::vector<std::vector<int32_t>> story_prompts(engine::engine &e, int n) {
    std::vector<std::vector<int32_t>> p;
    for (int i = 0; i < n; ++i) p.push_back(story_prompt(e, i));
    return p;
}

// Every block is back in its pool (only reclaimable prefix-cache blocks remain) and nothing runs or waits.
inline void expect_pools_full(const engine::engine &e) {
    const strata_engine_stats s = e.stats();
    for (int t = 0; t < 3; ++t)
        EXPECT_EQ(s.kv_blocks_used[t], s.kv_blocks_cached[t]) << "tier " << t << ": blocks still held by sequences";
    EXPECT_EQ(s.requests_running, 0);
    EXPECT_EQ(s.requests_waiting, 0);
}

// Prefix hits below the device: under `o` (a small device pool, a host tier, kv.prefix_store_dir set) the prompt's
// cached blocks give the tokens of `miss` from the host tier once eight other prompts of `filler_tokens` each pushed
// them down, and again after a restart from the persistent store a clean shutdown wrote.
inline void expect_host_and_store_prefix_hits(const engine::engine_options &o, const std::vector<int32_t> &prompt,
                                              const std::vector<int32_t> &miss, int32_t max_tokens,
                                              int32_t filler_tokens) {
    {
        auto host = engine_from(o);
        EXPECT_EQ(run_all(*host, {prompt}, max_tokens)[0], miss);
        std::vector<std::vector<int32_t>> fillers;
        for (int i = 0; i < 8; ++i) fillers.push_back(story_prompt(*host, i + 8));
        run_all(*host, fillers, filler_tokens);
        EXPECT_EQ(run_all(*host, {prompt}, max_tokens)[0], miss) << "host tier hit";
        EXPECT_GE(host->stats().prefix_hits[1], 16) << "the prefix came back from the host tier";
        expect_pools_full(*host);
    } // a clean shutdown writes the cached prefixes to the store
    auto restarted = engine_from(o);
    EXPECT_EQ(run_all(*restarted, {prompt}, max_tokens)[0], miss) << "store hit";
    EXPECT_GE(restarted->stats().prefix_hits[2], 32) << "the prefix came from the persistent store";
    expect_pools_full(*restarted);
}

// A plugin table for tests: the keys it holds, nothing else.
struct test_table {
    strata_config_view view{};
    std::map<std::string, bool> bools;
    std::map<std::string, int64_t> ints;
    std::map<std::string, std::string> strings;
    test_table() {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.get_bool = [](void *ctx, const char *key, int32_t *out) -> int32_t {
            auto &m = static_cast<test_table *>(ctx)->bools;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second ? 1 : 0;
            return 1;
        };
        view.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            auto &m = static_cast<test_table *>(ctx)->ints;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second;
            return 1;
        };
        view.get_float = [](void *, const char *, double *) -> int32_t { return 0; };
        view.get_string = [](void *ctx, const char *key, const char **out) -> int32_t {
            auto &m = static_cast<test_table *>(ctx)->strings;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second.c_str();
            return 1;
        };
        view.get_list_size = [](void *, const char *) -> int32_t { return 0; };
        view.get_list_item = [](void *, const char *, int32_t) -> const char * { return nullptr; };
    }
    test_table(const test_table &) = delete; // the view points at this object
    test_table &operator=(const test_table &) = delete;
};

// The [cpu] table of the separate_memory test mode.
struct cpu_table : test_table {
    cpu_table() { bools["separate_memory"] = true; }
};

} // namespace strata::testing
