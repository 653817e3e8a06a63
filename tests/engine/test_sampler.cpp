// Sampler: greedy, seeding, each filter, penalties, and that draws follow the softmax distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "engine/sampler.hpp"

namespace strata {
namespace {

sampling_config plain(float temperature, uint64_t seed = 1) {
    sampling_config c;
    c.temperature = temperature;
    c.top_k = 0;
    c.top_p = 1.f;
    c.min_p = 0.f;
    c.seed = seed;
    return c;
}

// Smooth logits with a clear winner at `peak`, so filters have something to cut.
std::vector<float> ramp(int32_t n, int32_t peak) {
    std::vector<float> l(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) l[static_cast<size_t>(i)] = -0.05f * static_cast<float>(std::abs(i - peak));
    l[static_cast<size_t>(peak)] += 1.f;
    return l;
}

std::vector<int32_t> draw_many(sampler &s, const std::vector<float> &logits, int n) {
    std::vector<int32_t> out;
    std::vector<float> work;
    for (int i = 0; i < n; ++i) {
        work = logits;
        out.push_back(s.sample(work.data(), {}));
    }
    return out;
}

TEST(sampler, greedy_picks_argmax) {
    sampler s(100, plain(0.f));
    auto l = ramp(100, 37);
    EXPECT_EQ(s.sample(l.data(), {}), 37);
    std::vector<float> ties(100, 0.f);
    ties[80] = 2.f;
    ties[12] = 2.f;
    EXPECT_EQ(s.sample(ties.data(), {}), 12); // lowest id on ties
}

TEST(sampler, greedy_ignores_filters) {
    sampling_config c = plain(-1.f);
    c.top_k = 3;
    c.top_p = 0.01f;
    c.min_p = 0.9f;
    sampler s(50, c);
    auto l = ramp(50, 44);
    EXPECT_EQ(s.sample(l.data(), {}), 44);
}

TEST(sampler, same_seed_same_sequence_different_seed_differs) {
    const auto l = ramp(64, 20);
    sampler a(64, plain(1.5f, 123)), b(64, plain(1.5f, 123)), c(64, plain(1.5f, 124));
    const auto sa = draw_many(a, l, 500), sb = draw_many(b, l, 500), sc = draw_many(c, l, 500);
    EXPECT_EQ(sa, sb);
    EXPECT_NE(sa, sc);
    a.reset(123);
    EXPECT_EQ(draw_many(a, l, 500), sa);
}

TEST(sampler, seeded_draws_are_portable) {
    // The draw uses only mt19937_64 (fully specified by the standard) and our own mapping to [0, 1), so these
    // ids are the same with any standard library. Seeded with 0: the first output of mt19937_64 is specified.
    std::mt19937_64 reference(0);
    const double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    std::vector<float> two = {0.f, 0.f}; // p = 0.5 each: token 0 iff u < 0.5
    sampler s(2, plain(1.f, 0));
    EXPECT_EQ(s.sample(two.data(), {}), u < 0.5 ? 0 : 1);
    std::mt19937_64 ten_thousandth(5489u);
    ten_thousandth.discard(9999);
    EXPECT_EQ(ten_thousandth(), 9981545732273789042ull); // the standard's check value for mt19937_64
}

TEST(sampler, top_k_1_is_greedy) {
    sampling_config c = plain(2.f, 9);
    c.top_k = 1;
    sampler s(200, c);
    const auto l = ramp(200, 150);
    for (const int32_t t : draw_many(s, l, 200)) ASSERT_EQ(t, 150);
}

TEST(sampler, tiny_top_p_is_greedy) {
    sampling_config c = plain(2.f, 9);
    c.top_p = 1e-4f;
    sampler s(200, c);
    const auto l = ramp(200, 3);
    for (const int32_t t : draw_many(s, l, 200)) ASSERT_EQ(t, 3);
}

TEST(sampler, top_k_limits_the_choices) {
    sampling_config c = plain(5.f, 3);
    c.top_k = 3;
    sampler s(100, c);
    const auto l = ramp(100, 50); // the top 3 are 50, then 49 and 51
    std::vector<int> seen(100, 0);
    for (const int32_t t : draw_many(s, l, 2000)) ++seen[static_cast<size_t>(t)];
    EXPECT_GT(seen[49], 0);
    EXPECT_GT(seen[50], 0);
    EXPECT_GT(seen[51], 0);
    EXPECT_EQ(seen[49] + seen[50] + seen[51], 2000);
}

TEST(sampler, min_p_filters_unlikely_tokens) {
    // p ∝ e^logit: tokens 0 and 1 are within a factor 2 of the best, token 2 is 1/e^3 of it.
    std::vector<float> l = {0.f, -0.5f, -3.f, -3.f};
    sampling_config c = plain(1.f, 5);
    c.min_p = 0.1f;
    sampler s(4, c);
    std::vector<int> seen(4, 0);
    for (const int32_t t : draw_many(s, l, 3000)) ++seen[static_cast<size_t>(t)];
    EXPECT_EQ(seen[2] + seen[3], 0);
    EXPECT_GT(seen[0], 0);
    EXPECT_GT(seen[1], 0);
    // Without min_p the tail does show up.
    sampler open(4, plain(1.f, 5));
    std::vector<int> seen_open(4, 0);
    for (const int32_t t : draw_many(open, l, 3000)) ++seen_open[static_cast<size_t>(t)];
    EXPECT_GT(seen_open[2] + seen_open[3], 0);
}

TEST(sampler, repetition_penalty_changes_argmax) {
    std::vector<float> l = {0.f, 2.0f, 1.5f, -1.f};
    sampling_config c = plain(0.f);
    c.repetition_penalty = 1.5f; // 2.0 / 1.5 = 1.33 < 1.5
    sampler s(4, c);
    const std::vector<int32_t> history = {3, 1, 3};
    auto work = l;
    EXPECT_EQ(s.sample(work.data(), history), 2);
    EXPECT_FLOAT_EQ(work[1], 2.f / 1.5f);
    EXPECT_FLOAT_EQ(work[3], -1.5f); // negative logits are multiplied
    EXPECT_FLOAT_EQ(work[0], 0.f);   // not in the history
    work = l;
    EXPECT_EQ(s.sample(work.data(), {}), 1); // nothing to penalise
}

TEST(sampler, penalty_window_is_the_last_n_tokens) {
    std::vector<float> l = {0.f, 2.0f, 1.5f};
    sampling_config c = plain(0.f);
    c.repetition_penalty = 2.f;
    c.repetition_last_n = 2;
    sampler s(3, c);
    auto work = l;
    EXPECT_EQ(s.sample(work.data(), std::vector<int32_t>{1, 0, 0}), 1); // token 1 is outside the window
    work = l;
    EXPECT_EQ(s.sample(work.data(), std::vector<int32_t>{0, 0, 1}), 2);
}

TEST(sampler, presence_and_frequency_penalties) {
    std::vector<float> l = {1.f, 1.f, 1.f};
    sampling_config c = plain(0.f);
    c.presence_penalty = 0.5f;
    c.frequency_penalty = 0.25f;
    sampler s(3, c);
    const std::vector<int32_t> history = {0, 0, 0, 1};
    s.sample(l.data(), history);
    EXPECT_FLOAT_EQ(l[0], 1.f - 0.5f - 3 * 0.25f);
    EXPECT_FLOAT_EQ(l[1], 1.f - 0.5f - 0.25f);
    EXPECT_FLOAT_EQ(l[2], 1.f);
    // Counts are per call: a second call with the same history penalises by the same amount again, not more.
    std::vector<float> again = {1.f, 1.f, 1.f};
    s.sample(again.data(), history);
    EXPECT_FLOAT_EQ(again[0], l[0]);
}

TEST(sampler, frequencies_match_softmax) {
    const std::vector<float> l = {1.0f, 0.5f, 0.f, -0.5f, -1.f, -2.f, 0.25f, -4.f};
    double z = 0;
    for (const float x : l) z += std::exp(static_cast<double>(x));
    sampler s(static_cast<int32_t>(l.size()), plain(1.f, 2024));
    const int n = 200000;
    std::vector<int> seen(l.size(), 0);
    for (const int32_t t : draw_many(s, l, n)) ++seen[static_cast<size_t>(t)];
    for (size_t i = 0; i < l.size(); ++i) {
        const double p = std::exp(static_cast<double>(l[i])) / z;
        const double sigma = std::sqrt(p * (1 - p) / n);
        EXPECT_NEAR(static_cast<double>(seen[i]) / n, p, 5 * sigma + 1e-4) << "token " << i;
    }
}

TEST(sampler, temperature_sharpens) {
    const std::vector<float> l = {1.f, 0.f};
    sampler hot(2, plain(4.f, 7)), cold(2, plain(0.25f, 7));
    int hot0 = 0, cold0 = 0;
    for (const int32_t t : draw_many(hot, l, 4000)) hot0 += t == 0;
    for (const int32_t t : draw_many(cold, l, 4000)) cold0 += t == 0;
    EXPECT_LT(hot0, 2800);  // p0 = 0.56 at T=4
    EXPECT_GT(cold0, 3800); // p0 = 0.98 at T=0.25
}

TEST(sampler, bad_input_is_an_error) {
    EXPECT_THROW(sampler(0, sampling_config{}), error);
    sampling_config c;
    c.top_p = 1.5f;
    EXPECT_THROW(sampler(10, c), error);
    c = sampling_config{};
    c.repetition_penalty = 0.f;
    EXPECT_THROW(sampler(10, c), error);
    c = sampling_config{};
    c.repetition_penalty = 1.2f;
    sampler s(4, c);
    std::vector<float> l(4, 0.f);
    EXPECT_THROW(s.sample(l.data(), std::vector<int32_t>{1, 9}), error);
    EXPECT_THROW(s.sample(nullptr, {}), error);
    // A failed call leaves no stale counts behind: the next one penalises token 1 for one occurrence only.
    sampling_config f = plain(0.f);
    f.frequency_penalty = 1.f;
    sampler g(4, f);
    std::vector<float> fresh = {0.5f, 0.5f, 0.f, 0.f};
    EXPECT_THROW(g.sample(fresh.data(), std::vector<int32_t>{1, 9}), error);
    EXPECT_EQ(g.sample(fresh.data(), std::vector<int32_t>{1}), 0);
    EXPECT_FLOAT_EQ(fresh[1], -0.5f);
}

TEST(sampler, all_filters_together_stay_in_the_top_k) {
    sampling_config c; // the defaults: T 0.8, top_k 40, top_p 0.95, min_p 0.05
    c.seed = 77;
    sampler s(32000, c);
    std::vector<float> l(32000);
    for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>((i * 7919) % 1000) / 100.f;
    std::vector<float> sorted = l;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const float kth = sorted[39];
    for (const int32_t t : draw_many(s, l, 300)) ASSERT_GE(l[static_cast<size_t>(t)], kth);
}

// Without top-k the sampler sorts only as far as top-p needs, in growing prefixes: a nucleus of ~600 of 5000
// tokens needs several. Every draw must be in the nucleus computed by brute force, and its tail must be reached.
TEST(sampler, top_p_without_top_k_keeps_exactly_the_nucleus) {
    sampling_config c = plain(1.f, 5);
    c.top_p = 0.9f;
    const int32_t n = 5000;
    std::vector<float> l(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) l[static_cast<size_t>(i)] = -0.004f * static_cast<float>((i * 2477) % n);
    std::vector<std::pair<float, int32_t>> order;
    for (int32_t i = 0; i < n; ++i) order.push_back({l[static_cast<size_t>(i)], i});
    std::sort(order.begin(), order.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    double sum = 0, cum = 0;
    for (const auto &o : order) sum += std::exp(static_cast<double>(o.first - order[0].first));
    std::vector<char> in_nucleus(static_cast<size_t>(n), 0);
    size_t nucleus = 0;
    for (const auto &o : order) {
        in_nucleus[static_cast<size_t>(o.second)] = 1;
        ++nucleus;
        cum += std::exp(static_cast<double>(o.first - order[0].first)) / sum;
        if (cum >= 0.9) break;
    }
    ASSERT_GT(nucleus, 300u) << "the nucleus must need more than one growth of the sorted prefix";
    sampler s(n, c);
    float lowest_drawn = 0.f;
    for (const int32_t t : draw_many(s, l, 3000)) {
        ASSERT_TRUE(in_nucleus[static_cast<size_t>(t)]) << "token " << t << " is outside the top-p nucleus";
        lowest_drawn = std::min(lowest_drawn, l[static_cast<size_t>(t)]);
    }
    EXPECT_LT(lowest_drawn, order[256].first) << "draws never reached the nucleus beyond the first sorted prefixes";
}

// min-p without top-k keeps its survivors without sorting the vocabulary: nothing below the threshold is drawn.
TEST(sampler, min_p_without_top_k_draws_only_survivors) {
    sampling_config c = plain(1.f, 6);
    c.min_p = 0.2f;
    const auto l = ramp(4000, 1234);
    const float threshold = l[1234] + std::log(0.2f);
    sampler s(4000, c);
    int above_peak_neighbours = 0;
    for (const int32_t t : draw_many(s, l, 2000)) {
        ASSERT_GE(l[static_cast<size_t>(t)], threshold) << "token " << t;
        above_peak_neighbours += t != 1234;
    }
    EXPECT_GT(above_peak_neighbours, 0) << "only the peak was drawn: the survivors were lost";
}

} // namespace
} // namespace strata
