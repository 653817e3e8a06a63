// bench-sampler: the time to draw one token from a 32000-entry vocabulary (Llama 2's) under each filter the OpenAI
// API and llama.cpp expose, next to the floor of any sampler — one pass that finds the best logit (argmax) — and to
// sorting the whole vocabulary, which is what every draw without top-k cost before the sampler learnt to sort only
// as far as top-p needs. Google Benchmark; results with the exact command in docs/BENCHMARKS.md.
//
//   bench-sampler [--benchmark_repetitions=3 --benchmark_report_aggregates_only=true]
#include "engine/sampler.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

namespace {

constexpr int32_t n_vocab = 32000;

// Logits shaped like a language model's: a few clear candidates over a long Gaussian tail.
const std::vector<float> &logits() {
    static const std::vector<float> l = [] {
        std::vector<float> v(n_vocab);
        std::mt19937 rng(7);
        std::normal_distribution<float> tail(0.f, 2.f);
        for (auto &x : v) x = tail(rng);
        for (int i = 0; i < 8; ++i) v[static_cast<size_t>(rng() % n_vocab)] = 12.f - static_cast<float>(i);
        return v;
    }();
    return l;
}

strata::sampling_config config(float temperature, int32_t top_k, float top_p, float min_p) {
    strata::sampling_config c;
    c.temperature = temperature;
    c.top_k = top_k;
    c.top_p = top_p;
    c.min_p = min_p;
    c.seed = 1;
    return c;
}

void run(benchmark::State &state, const strata::sampling_config &c) {
    strata::sampler s(n_vocab, c);
    std::vector<float> work = logits(); // no penalties: sample() leaves the logits as they are
    for (auto _ : state) benchmark::DoNotOptimize(s.sample(work.data(), {}));
    state.SetItemsProcessed(state.iterations());
}

void BM_Argmax(benchmark::State &state) { run(state, config(0.f, 0, 1.f, 0.f)); }
void BM_Temperature(benchmark::State &state) { run(state, config(1.f, 0, 1.f, 0.f)); }
void BM_TopP09(benchmark::State &state) { run(state, config(1.f, 0, 0.9f, 0.f)); }
void BM_MinP005(benchmark::State &state) { run(state, config(1.f, 0, 1.f, 0.05f)); }
void BM_LlamaCppDefaults(benchmark::State &state) { run(state, config(0.8f, 40, 0.95f, 0.05f)); }

// What a draw without top-k cost before: sorting every candidate by logit.
void BM_FullSortReference(benchmark::State &state) {
    struct cand {
        float logit;
        int32_t id;
    };
    std::vector<cand> c(n_vocab);
    for (auto _ : state) {
        for (int32_t i = 0; i < n_vocab; ++i) c[static_cast<size_t>(i)] = {logits()[static_cast<size_t>(i)], i};
        std::sort(c.begin(), c.end(), [](const cand &a, const cand &b) {
            return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
        });
        benchmark::DoNotOptimize(c.data());
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_Argmax);
BENCHMARK(BM_Temperature);
BENCHMARK(BM_TopP09);
BENCHMARK(BM_MinP005);
BENCHMARK(BM_LlamaCppDefaults);
BENCHMARK(BM_FullSortReference);

} // namespace

BENCHMARK_MAIN();
