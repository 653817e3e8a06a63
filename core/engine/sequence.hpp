// One request as the scheduler and the engine's step loop see it: its tokens, how many have KV, its blocks, and its
// per-request sampling state (allocated once, when the request is admitted).
#pragma once

#include "engine/output_constraint.hpp"
#include "engine/sampler.hpp"
#include "engine/token_logprobs.hpp"
#include "kv/kv_cache.hpp"
#include "tokenizer/tokenizer.hpp"

#include <strata/plugin_abi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace strata::engine {

enum class seq_state { waiting, running, swapped, finished };

struct sequence {
    strata_request_id id = 0;
    uint64_t arrival = 0;          // admission order (FCFS); lower = older
    std::vector<int32_t> tokens;   // prompt, then generated tokens appended
    int32_t n_prompt = 0;
    int32_t n_computed = 0;        // tokens whose K/V are in the blocks
    kv::seq_blocks kv;
    seq_state state = seq_state::waiting;
    bool prefix_looked_up = false;
    bool spill_logged = false;

    // Request parameters.
    strata_sampling_params sampling{};
    int32_t logprobs = 0;          // 0: none, -1: the chosen token's only, n > 0: also the top n
    strata_token_callback on_token = nullptr;
    void *user = nullptr;
    std::atomic<bool> cancelled{false};

    // Generation state (created on first schedule).
    std::unique_ptr<sampler> smp;
    std::unique_ptr<token_logprobs> lp;
    std::unique_ptr<output_constraint> constraint; // constrained decoding, when the request asked for it
    token_text_stream text; // the generated tokens' text, with the tokenizer's leading-space rule
    int32_t generated = 0;
    int32_t max_tokens = 0;
    std::chrono::steady_clock::time_point t_submit, t_first_token;

    // Completion (guarded by the engine's mutex once the step loop hands it over).
    bool done = false;
    bool waited = false;
    strata_request_result result{};
    std::string error;

    int32_t pending() const { return static_cast<int32_t>(tokens.size()) - n_computed; }
};

} // namespace strata::engine
