// Log-probabilities of one decoding step for the OpenAI `logprobs` fields: log-softmax of the model's raw logits
// (before penalties, temperature and filters, as vLLM reports by default) for the chosen token and the top n.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::engine {

// OpenAI's and vLLM's limit on alternatives per token.
inline constexpr int32_t max_top_logprobs = 20;

class token_logprobs {
  public:
    // n_vocab = 0 makes an inert object (logprobs not requested). Allocates everything here, once per request.
    token_logprobs(int32_t n_vocab, int32_t n_top);

    // Copies this step's logits (before the sampler changes them) and finds the log-normaliser and the top n.
    // Allocates nothing.
    void capture(const float *logits);

    float of(int32_t token) const; // the chosen token's logprob (<= 0)
    int32_t n_top() const { return n_top_; }
    const int32_t *top_tokens() const { return top_ids_.data(); }
    const float *top_logprobs() const { return top_lp_.data(); }

  private:
    int32_t n_vocab_;
    int32_t n_top_;
    std::vector<float> logits_;
    double log_norm_ = 0.0; // max + log(sum(exp(logit - max)))
    std::vector<int32_t> top_ids_;
    std::vector<float> top_lp_;
};

} // namespace strata::engine
