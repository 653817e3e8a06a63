// The ABI 1.4 tail of strata_request on a real model (stories260K): OpenAI presence/frequency penalties and
// per-token logprobs, checked against a log-softmax the test computes itself from the engine's logits.
#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

namespace {

using namespace strata::testing;

struct step {
    int32_t token = 0;
    float logprob = 0.f;
    std::vector<int32_t> top_tokens;
    std::vector<float> top_logprobs;
};

struct run_output {
    std::vector<int32_t> prompt;
    std::vector<step> steps;
    strata_request_result result{};
};

void collect_steps(void *user, const strata_token_event *ev) {
    auto *out = static_cast<run_output *>(user);
    if (ev->token < 0) return;
    step s;
    s.token = ev->token;
    s.logprob = ev->logprob;
    s.top_tokens.assign(ev->top_tokens, ev->top_tokens + ev->n_top);
    s.top_logprobs.assign(ev->top_logprobs, ev->top_logprobs + ev->n_top);
    out->steps.push_back(std::move(s));
}

run_output run(strata::engine::engine &e, const std::string &prompt, int32_t max_tokens, float presence,
               float frequency, int32_t logprobs) {
    run_output out;
    out.prompt = e.tokenizer().encode(prompt, true);
    strata_request req{};
    req.struct_size = sizeof req;
    req.prompt_tokens = out.prompt.data();
    req.n_prompt_tokens = static_cast<int32_t>(out.prompt.size());
    req.sampling = greedy(max_tokens);
    req.sampling.repetition_last_n = -1; // the penalties see the whole history
    req.on_token = collect_steps;
    req.user = &out;
    req.presence_penalty = presence;
    req.frequency_penalty = frequency;
    req.logprobs = logprobs;
    out.result = e.wait(e.submit(req));
    return out;
}

std::vector<int32_t> tokens_of(const run_output &o) {
    std::vector<int32_t> t;
    for (const step &s : o.steps) t.push_back(s.token);
    return t;
}

const char *k_prompt = "Once upon a time";

TEST(EnginePenalties, ZeroPenaltiesLeaveGreedyOutputIdentical) {
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"));
    const generation_result plain = generate(*e, k_prompt, greedy(60));
    const run_output zero = run(*e, k_prompt, 60, 0.f, 0.f, 0);
    EXPECT_EQ(tokens_of(zero), plain.tokens);
}

TEST(EnginePenalties, StrongPresencePenaltyChangesTheGreedyContinuation) {
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"));
    const run_output none = run(*e, k_prompt, 60, 0.f, 0.f, 0);
    const run_output presence = run(*e, k_prompt, 60, 2.f, 0.f, 0);
    ASSERT_EQ(none.steps.size(), 60u);
    EXPECT_NE(tokens_of(presence), tokens_of(none));
    // A repeated token costs 2 logits under the penalty, so the penalised text repeats fewer distinct tokens.
    auto repeats = [](const std::vector<int32_t> &t) {
        std::vector<int32_t> s = t;
        std::sort(s.begin(), s.end());
        return t.size() - static_cast<size_t>(std::unique(s.begin(), s.end()) - s.begin());
    };
    EXPECT_LT(repeats(tokens_of(presence)), repeats(tokens_of(none)));
    const run_output frequency = run(*e, k_prompt, 60, 0.f, 2.f, 0);
    EXPECT_NE(tokens_of(frequency), tokens_of(none));
}

TEST(EnginePenalties, OutOfRangePenaltyIsAClearError) {
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"));
    EXPECT_THROW(run(*e, k_prompt, 4, 2.5f, 0.f, 0), std::exception);
    EXPECT_THROW(run(*e, k_prompt, 4, 0.f, 0.f, 21), std::exception);
}

TEST(EngineLogprobs, ChosenTokenLogprobIsTheLogSoftmaxOfTheLogits) {
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"));
    const run_output o = run(*e, k_prompt, 12, 0.f, 0.f, 5);
    ASSERT_EQ(o.steps.size(), 12u);
    const int32_t n_vocab = e->tokenizer().n_vocab();
    std::vector<int32_t> seq = o.prompt;
    for (const step &s : o.steps) {
        // Re-run the whole sequence so far: the logits of its last position predicted this step's token.
        std::vector<int32_t> pos(seq.size());
        std::iota(pos.begin(), pos.end(), 0);
        const float *logits = e->forward_for_testing(seq.data(), pos.data(), static_cast<int32_t>(seq.size()));
        const double mx = *std::max_element(logits, logits + n_vocab);
        double sum = 0.0;
        for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
        const double expected = static_cast<double>(logits[s.token]) - mx - std::log(sum);
        EXPECT_NEAR(s.logprob, expected, 1e-4) << "step " << seq.size() - o.prompt.size();

        ASSERT_EQ(s.top_tokens.size(), 5u);
        EXPECT_EQ(s.top_tokens[0], s.token); // greedy picks the most likely token
        EXPECT_FLOAT_EQ(s.top_logprobs[0], s.logprob);
        double mass = 0.0;
        for (size_t k = 0; k < s.top_logprobs.size(); ++k) {
            EXPECT_LE(s.top_logprobs[k], 0.f);
            if (k > 0) {
                EXPECT_GE(s.top_logprobs[k - 1], s.top_logprobs[k]);
            }
            const double want = static_cast<double>(logits[s.top_tokens[k]]) - mx - std::log(sum);
            EXPECT_NEAR(s.top_logprobs[k], want, 1e-4);
            mass += std::exp(static_cast<double>(s.top_logprobs[k]));
        }
        EXPECT_LE(mass, 1.0 + 1e-5);
        seq.push_back(s.token);
    }
}

// forward_for_testing while a request is generating: the pass runs on the worker between steps, so neither sees the
// other's KV pools or step buffers (a pass on the caller's thread raced the worker's stats and corrupted both under
// ThreadSanitizer). Both results equal the ones each gives alone.
TEST(EngineLogprobs, ForwardForTestingWhileARequestRunsChangesNeitherResult) {
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"));
    const int32_t n_vocab = e->tokenizer().n_vocab();
    const std::vector<int32_t> seq = e->tokenizer().encode(k_prompt, true);
    std::vector<int32_t> pos(seq.size());
    std::iota(pos.begin(), pos.end(), 0);
    const float *alone = e->forward_for_testing(seq.data(), pos.data(), static_cast<int32_t>(seq.size()));
    const std::vector<float> expected(alone, alone + n_vocab);
    const run_output quiet = run(*e, k_prompt, 120, 0.f, 0.f, 0);

    run_output busy;
    std::thread generator([&] { busy = run(*e, k_prompt, 120, 0.f, 0.f, 0); });
    for (int i = 0; i < 40; ++i) {
        const float *logits = e->forward_for_testing(seq.data(), pos.data(), static_cast<int32_t>(seq.size()));
        ASSERT_TRUE(std::equal(expected.begin(), expected.end(), logits)) << "pass " << i;
    }
    generator.join();
    EXPECT_EQ(tokens_of(busy), tokens_of(quiet));
}

TEST(EngineLogprobs, MinusOneReportsOnlyTheChosenTokenAndZeroNothing) {
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"));
    const run_output chosen = run(*e, k_prompt, 6, 0.f, 0.f, -1);
    const run_output off = run(*e, k_prompt, 6, 0.f, 0.f, 0);
    ASSERT_EQ(chosen.steps.size(), 6u);
    EXPECT_EQ(tokens_of(chosen), tokens_of(off)); // asking for logprobs never changes the tokens
    for (const step &s : chosen.steps) {
        EXPECT_TRUE(s.top_tokens.empty());
        EXPECT_LT(s.logprob, 0.f);
    }
    for (const step &s : off.steps) EXPECT_EQ(s.logprob, 0.f);
}

} // namespace
