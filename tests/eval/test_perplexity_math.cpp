// Perplexity and KL-divergence math on synthetic logits (core/eval/perplexity_math.hpp): values known in closed form
// or computed by hand here, and llama-perplexity's chunking rules.
#include "error_of.hpp"
#include "eval/perplexity_math.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace strata::eval;

namespace {

using strata::testing::error_of;

std::vector<float> log_probs_of(const std::vector<float> &logits) {
    std::vector<float> out(logits.size());
    log_softmax(logits.data(), static_cast<int32_t>(logits.size()), out.data());
    return out;
}

} // namespace

TEST(PerplexityMath, UniformDistributionHasPerplexityEqualToTheVocabularySize) {
    for (const int32_t n_vocab : {2, 7, 512, 32000}) {
        const std::vector<float> logits(static_cast<size_t>(n_vocab), 0.37f);
        EXPECT_NEAR(token_nll(logits.data(), n_vocab, n_vocab - 1), std::log(n_vocab), 1e-9);
        nll_accumulator a;
        for (int i = 0; i < 100; ++i) a.add(token_nll(logits.data(), n_vocab, i % n_vocab));
        EXPECT_NEAR(a.ppl(), n_vocab, 1e-6 * n_vocab) << n_vocab;
    }
}

TEST(PerplexityMath, LogSoftmaxSumsToOneAndIsShiftInvariant) {
    const std::vector<float> logits{1.f, -2.f, 3.5f, 0.f, 100.f};
    const std::vector<float> shifted{1001.f, 998.f, 1003.5f, 1000.f, 1100.f};
    std::vector<float> a(5), b(5);
    log_softmax(logits.data(), 5, a.data());
    log_softmax(shifted.data(), 5, b.data());
    double sum = 0;
    for (int i = 0; i < 5; ++i) {
        sum += std::exp(static_cast<double>(a[static_cast<size_t>(i)]));
        EXPECT_NEAR(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)], 1e-4);
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    // In place.
    std::vector<float> c = logits;
    log_softmax(c.data(), 5, c.data());
    EXPECT_EQ(c, a);
    EXPECT_EQ(argmax(logits.data(), 5), 4);
    const std::vector<float> tie{1.f, 3.f, 3.f};
    EXPECT_EQ(argmax(tie.data(), 3), 1); // the first of equals
}

TEST(PerplexityMath, ErrorEstimateIsLlamaPerplexityFormula) {
    // NLLs 0.5, 1.0, ..., 6.0: PPL = exp(mean), error = PPL * sqrt((E[x^2] - E[x]^2) / (n - 1)).
    nll_accumulator a;
    std::vector<double> xs;
    for (int i = 1; i <= 12; ++i) xs.push_back(0.5 * i);
    for (double x : xs) a.add(x);
    double mean = 0, mean2 = 0;
    for (double x : xs) mean += x, mean2 += x * x;
    mean /= 12, mean2 /= 12;
    const double ppl = std::exp(mean);
    const double err = ppl * std::sqrt((mean2 - mean * mean) / 11);
    EXPECT_EQ(a.count(), 12u);
    EXPECT_NEAR(a.ppl(), ppl, 1e-9 * ppl);
    EXPECT_NEAR(a.ppl_error(), err, 1e-9 * err);
    EXPECT_EQ(final_estimate_line(a), fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}", ppl, err));
    EXPECT_EQ(running_ppl_item(3, a), fmt::format("[3]{:.4f},", ppl));
}

TEST(PerplexityMath, NoSpreadMeansNoErrorEstimate) {
    nll_accumulator a;
    a.add(1.0);
    EXPECT_LT(a.ppl_error(), 0);
    a.add(1.0);
    EXPECT_LT(a.ppl_error(), 0); // every token equally likely: variance 0
    EXPECT_NE(final_estimate_line(a).find("no error estimate"), std::string::npos) << final_estimate_line(a);
    EXPECT_NE(final_estimate_line(a).find("PPL = 2.7183"), std::string::npos) << final_estimate_line(a);
}

TEST(PerplexityMath, MeanAndUncertaintyNeedsMoreThanTenValues) {
    const estimate few = mean_and_uncertainty(10.0, 30.0, 10);
    EXPECT_DOUBLE_EQ(few.value, 1.0);
    EXPECT_EQ(few.error, 0.0);
    // 11 values: 0 x5, 2 x6 -> mean 12/11, E[x^2] = 24/11.
    const estimate e = mean_and_uncertainty(12.0, 24.0, 11);
    const double m = 12.0 / 11;
    EXPECT_NEAR(e.value, m, 1e-12);
    EXPECT_NEAR(e.error, std::sqrt((24.0 / 11 - m * m) / 10), 1e-12);
    EXPECT_EQ(mean_and_uncertainty(0, 0, 0).value, 0.0);
}

TEST(PerplexityMath, ChunksFollowLlamaPerplexity) {
    const chunk_plan p = plan_chunks(1000, 100, -1);
    EXPECT_EQ(p.n_ctx, 100);
    EXPECT_EQ(p.n_chunk, 10);
    EXPECT_EQ(p.first, 50);
    EXPECT_EQ(p.n_scored(), 49); // positions 50..98 predict tokens 51..99
    EXPECT_EQ(plan_chunks(1099, 100, -1).n_chunk, 10); // a partial chunk is not evaluated
    EXPECT_EQ(plan_chunks(1000, 100, 3).n_chunk, 3);
    EXPECT_EQ(plan_chunks(1000, 100, 50).n_chunk, 10);
    EXPECT_EQ(plan_chunks(200, 100, -1).n_chunk, 2);
    const chunk_plan odd = plan_chunks(100, 7, -1);
    EXPECT_EQ(odd.first, 3);
    EXPECT_EQ(odd.n_scored(), 3);

    const std::string short_text = error_of([] { plan_chunks(199, 100, -1); });
    EXPECT_NE(short_text.find("tokenizes to 199 tokens"), std::string::npos) << short_text;
    EXPECT_NE(short_text.find("needs at least 200"), std::string::npos) << short_text;
    EXPECT_NE(short_text.find("smaller --ctx"), std::string::npos) << short_text;
    EXPECT_NE(error_of([] { plan_chunks(1000, 3, -1); }).find("at least 4 tokens"), std::string::npos);
    EXPECT_NE(error_of([] { plan_chunks(1000, 100, 0); }).find("--chunks 0"), std::string::npos);
}

TEST(PerplexityMath, ChunkTokensReplaceTheFirstByBos) {
    std::vector<int32_t> tokens(40);
    for (int32_t i = 0; i < 40; ++i) tokens[static_cast<size_t>(i)] = 100 + i;
    const chunk_plan p = plan_chunks(tokens.size(), 10, -1);
    std::vector<int32_t> out;
    chunk_tokens(tokens, p, 2, 1, out);
    ASSERT_EQ(out.size(), 10u);
    EXPECT_EQ(out[0], 1);
    for (size_t i = 1; i < 10; ++i) EXPECT_EQ(out[i], 120 + static_cast<int32_t>(i));
    chunk_tokens(tokens, p, 3, -1, out); // a vocabulary without BOS keeps the text's token
    EXPECT_EQ(out[0], 130);
    EXPECT_THROW(chunk_tokens(tokens, p, 4, 1, out), strata::error);
}

TEST(PerplexityMath, KlOfIdenticalDistributionsIsZeroWithFullTopOneAgreement) {
    kl_accumulator kl;
    std::vector<float> logits(300);
    for (int r = 0; r < 40; ++r) {
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * static_cast<float>(i * (r + 3)));
        const std::vector<float> base = log_probs_of(logits);
        kl.add(logits.data(), base.data(), 300, r * 7 % 300);
    }
    EXPECT_EQ(kl.count(), 40u);
    EXPECT_EQ(kl.kld().value, 0.0);
    EXPECT_EQ(kl.same_top().value, 1.0);
    EXPECT_EQ(kl.same_top().error, 0.0);
    EXPECT_NEAR(kl.ppl().value, kl.ppl_base().value, 1e-5 * kl.ppl().value);
    EXPECT_NEAR(kl.ln_ppl_ratio().value, 0.0, 1e-6);
    EXPECT_EQ(kl.p_diff_rms().value, 0.0);
    const std::string report = kl.report();
    EXPECT_EQ(report.find("nan"), std::string::npos) << report;
    EXPECT_EQ(report.find("inf"), std::string::npos) << report;
    EXPECT_NE(report.find("Mean    KLD:   0.000000"), std::string::npos) << report;
    EXPECT_NE(report.find("Same top p: 100.000"), std::string::npos) << report;
    EXPECT_NE(report.find("Cor(ln(PPL(Q)), ln(PPL(base))): 100.00%"), std::string::npos) << report;
}

TEST(PerplexityMath, KlMatchesAHandComputedCase) {
    // base p = (1/2, 1/2), Q q = (1/4, 3/4): KL(p || q) = 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3).
    const std::vector<float> base{std::log(0.5f), std::log(0.5f)};
    const std::vector<float> q{std::log(0.25f), std::log(0.75f)};
    kl_accumulator kl;
    kl.add(q.data(), base.data(), 2, 0);
    EXPECT_NEAR(kl.kld().value, 0.5 * std::log(4.0 / 3.0), 1e-6);
    EXPECT_EQ(kl.same_top().value, 0.0); // base's tie goes to token 0, Q ranks token 1 first
    EXPECT_EQ(kl.decided_count(), 0u);   // a tie is no decided position
    EXPECT_NEAR(kl.ppl().value, 4.0, 1e-5);      // Q gives the token 1/4
    EXPECT_NEAR(kl.ppl_base().value, 2.0, 1e-5); // the base 1/2
    EXPECT_NEAR(kl.p_diff().value, 0.25 - 0.5, 1e-6);
    ASSERT_EQ(kl.kld_values().size(), 1u);

    // Three tokens, logits on an arbitrary scale: KL = sum p (ln p - ln q).
    const std::vector<double> p3{0.7, 0.2, 0.1}, q3{0.5, 0.3, 0.2};
    std::vector<float> base3, q3_logits;
    double expected = 0;
    for (size_t i = 0; i < 3; ++i) {
        base3.push_back(static_cast<float>(std::log(p3[i])));
        q3_logits.push_back(static_cast<float>(std::log(q3[i]) + 5.0)); // unnormalized: log_softmax removes the 5
        expected += p3[i] * std::log(p3[i] / q3[i]);
    }
    kl_accumulator k3;
    k3.add(q3_logits.data(), base3.data(), 3, 2);
    EXPECT_NEAR(k3.kld().value, expected, 1e-6);
    EXPECT_EQ(k3.same_top().value, 1.0);
    EXPECT_EQ(k3.decided_count(), 1u); // 0.7 - 0.2 > 1e-3
    EXPECT_EQ(k3.same_top_decided().value, 1.0);
    EXPECT_NEAR(k3.ppl().value, 1 / 0.2, 1e-4);

    // A decided base (0.6 vs 0.4) that Q ranks the other way, then a near-tie (0.5004 vs 0.4996) Q also flips: the
    // decided agreement counts the first only.
    kl_accumulator k2;
    const std::vector<float> b_decided{std::log(0.6f), std::log(0.4f)}, b_tie{std::log(0.5004f), std::log(0.4996f)};
    const std::vector<float> q_flipped{0.f, 1.f};
    k2.add(q_flipped.data(), b_decided.data(), 2, 0);
    k2.add(q_flipped.data(), b_tie.data(), 2, 0);
    EXPECT_EQ(k2.same_top().value, 0.0);
    EXPECT_EQ(k2.decided_count(), 1u);
    EXPECT_EQ(k2.same_top_decided().value, 0.0);
    k2.add(b_decided.data(), b_decided.data(), 2, 0);
    EXPECT_EQ(k2.decided_count(), 2u);
    EXPECT_EQ(k2.same_top_decided().value, 0.5);
    EXPECT_NE(k2.report().find("Same top p, base top-2 margin > 0.001: 50.000"), std::string::npos) << k2.report();
}

TEST(PerplexityMath, KlIgnoresBaseTokensBelowTheCutOff) {
    // The base puts e^-20 on token 2: llama.cpp's sum skips log p <= -16, whatever Q says of it.
    const float tiny = -20.f;
    const float rest = static_cast<float>(std::log((1 - std::exp(-20.0)) / 2));
    const std::vector<float> base{rest, rest, tiny};
    const std::vector<float> q{0.f, 0.f, 5.f};
    kl_accumulator kl;
    kl.add(q.data(), base.data(), 3, 0);
    // q = softmax(0, 0, 5): ln q0 = -ln(2 + e^5).
    const double ln_q0 = -std::log(2 + std::exp(5.0));
    const double expected = 2 * std::exp(static_cast<double>(rest)) * (static_cast<double>(rest) - ln_q0);
    EXPECT_NEAR(kl.kld().value, expected, 1e-5);
}

TEST(PerplexityMath, KlTableRowAndUncertaintiesFollowLlamaPerplexity) {
    kl_accumulator kl;
    std::vector<float> q(50), b(50);
    for (int r = 0; r < 30; ++r) {
        for (size_t i = 0; i < 50; ++i) {
            q[i] = std::cos(0.1f * static_cast<float>(i + r));
            b[i] = std::cos(0.1f * static_cast<float>(i + r) + 0.05f);
        }
        log_softmax(b.data(), 50, b.data());
        kl.add(q.data(), b.data(), 50, (r * 13) % 50);
    }
    const estimate k = kl.kld();
    EXPECT_GT(k.value, 0.0);
    EXPECT_GT(k.error, 0.0);
    // Same top p's error is the binomial one.
    const double p = kl.same_top().value;
    EXPECT_NEAR(kl.same_top().error, std::sqrt(p * (1 - p) / 29), 1e-12);
    const std::string row = kl.table_row(7);
    EXPECT_EQ(row.rfind("   7    ", 0), 0u) << row;
    EXPECT_NE(row.find(fmt::format("{:10.5f} ± {:10.5f}", k.value, k.error)), std::string::npos) << row;
    EXPECT_NE(kl_accumulator::table_header().find("KL Divergence"), std::string::npos);
}

TEST(PerplexityMath, PercentileInterpolatesAsLlamaPerplexity) {
    const std::vector<float> v{0.f, 1.f, 2.f, 3.f, 4.f};
    EXPECT_FLOAT_EQ(percentile(v, 0.5f), 2.f);
    EXPECT_FLOAT_EQ(percentile(v, 0.9f), 3.6f);
    EXPECT_FLOAT_EQ(percentile(v, 0.f), 0.f);
    EXPECT_FLOAT_EQ(percentile(v, 1.f), 4.f);
}
