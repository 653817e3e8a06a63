#include "engine/token_logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace strata::engine {

token_logprobs::token_logprobs(int32_t n_vocab, int32_t n_top)
    : n_vocab_(n_vocab), n_top_(std::clamp(n_top, 0, std::max(n_vocab, 0))) {
    logits_.resize(static_cast<size_t>(std::max(n_vocab, 0)));
    top_ids_.resize(static_cast<size_t>(n_top_));
    top_lp_.resize(static_cast<size_t>(n_top_));
}

void token_logprobs::capture(const float *logits) {
    if (n_vocab_ <= 0) return;
    std::memcpy(logits_.data(), logits, sizeof(float) * static_cast<size_t>(n_vocab_));
    float mx = -std::numeric_limits<float>::infinity();
    for (const float l : logits_) mx = std::max(mx, l);
    double sum = 0.0;
    for (const float l : logits_) sum += std::exp(static_cast<double>(l) - static_cast<double>(mx));
    log_norm_ = static_cast<double>(mx) + std::log(sum);

    // Top n by insertion into a short sorted list: n <= 20, so this beats a partial sort over the vocabulary and
    // needs no scratch. Higher logit first; equal logits keep the lower id first (the greedy sampler's tie rule).
    int32_t filled = 0;
    for (int32_t id = 0; id < n_vocab_ && n_top_ > 0; ++id) {
        const float l = logits_[static_cast<size_t>(id)];
        if (filled == n_top_ && !(l > top_lp_[static_cast<size_t>(filled - 1)])) continue;
        int32_t pos = filled < n_top_ ? filled++ : n_top_ - 1;
        while (pos > 0 && l > top_lp_[static_cast<size_t>(pos - 1)]) {
            top_lp_[static_cast<size_t>(pos)] = top_lp_[static_cast<size_t>(pos - 1)];
            top_ids_[static_cast<size_t>(pos)] = top_ids_[static_cast<size_t>(pos - 1)];
            --pos;
        }
        top_lp_[static_cast<size_t>(pos)] = l; // raw logits while selecting; normalised below
        top_ids_[static_cast<size_t>(pos)] = id;
    }
    for (float &v : top_lp_) v = static_cast<float>(static_cast<double>(v) - log_norm_);
}

float token_logprobs::of(int32_t token) const {
    if (token < 0 || token >= n_vocab_) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(static_cast<double>(logits_[static_cast<size_t>(token)]) - log_norm_);
}

} // namespace strata::engine
