// Two copies of one model (GGUF and HF, or quantized and dequantized) compared: greedy tokens and every position's
// logits.
#pragma once

#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace strata::testing {

// Same weights, two formats: the tokens must be equal, and every position's logits (teacher-forced over the prompt
// and the generated text) equal within `rel_tol` of the largest logit. 0 is bit for bit: the matrices are the same
// bytes. Llama-family Q/K rows are in another order in each format (pairs or rotate-half), so each head's Q.K sums
// run in another order: a few float ulps; Gemma's norms, stored as w - 1, come back through a float add.
inline void expect_same_model(const std::string &gguf, const std::string &hf, const char *prompt, int32_t n,
                       double rel_tol = 0.0) {
    ASSERT_FALSE(gguf.empty());
    ASSERT_FALSE(hf.empty());
    auto a = make_engine(gguf);
    auto b = make_engine(hf);
    strata_sampling_params sp = greedy(n);
    sp.ignore_eos = 1; // random weights may pick EOS early; compare all n
    const generation_result ga = generate(*a, prompt, sp);
    const generation_result gb = generate(*b, prompt, sp);
    EXPECT_EQ(ga.prompt, gb.prompt) << "tokenizer.json and the GGUF vocabulary disagree";
    ASSERT_EQ(ga.tokens.size(), static_cast<size_t>(n));
    EXPECT_EQ(ga.tokens, gb.tokens) << hf;
    std::vector<int32_t> text = ga.prompt;
    text.insert(text.end(), ga.tokens.begin(), ga.tokens.end());
    const auto rows = static_cast<int32_t>(text.size());
    const size_t n_vocab = static_cast<size_t>(a->tokenizer().n_vocab());
    std::vector<float> la(static_cast<size_t>(rows) * n_vocab), lb(la.size());
    a->forward_logits(text.data(), rows, 0, la.data());
    b->forward_logits(text.data(), rows, 0, lb.data());
    double largest = 0, worst = 0;
    for (size_t i = 0; i < la.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::fabs(la[i])));
        worst = std::max(worst, static_cast<double>(std::fabs(la[i] - lb[i])));
    }
    std::printf("%s: logits differ by at most %.3g (largest |logit| %.3g)\n", hf.c_str(), worst, largest);
    EXPECT_LE(worst, rel_tol * largest) << hf;
}

} // namespace strata::testing
