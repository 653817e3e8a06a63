// Token sampler: penalties, then llama.cpp's default filter chain (top-k, top-p, min-p, temperature), then a
// seeded draw that gives the same tokens for the same seed on every platform and standard library.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace strata {

struct sampling_config {
    float temperature = 0.8f;         // <= 0: greedy argmax (lowest id on ties); the filters are then moot
    int32_t top_k = 40;               // <= 0: off
    float top_p = 0.95f;              // >= 1: off
    float min_p = 0.05f;              // <= 0: off; relative to the most likely token
    float repetition_penalty = 1.0f;  // 1: off; > 1 discourages tokens seen in the last repetition_last_n
    int32_t repetition_last_n = 64;   // window for all three penalties; 0: off, < 0: the whole history
    float presence_penalty = 0.f;     // OpenAI: subtracted once from every token seen in the window
    float frequency_penalty = 0.f;    // OpenAI: subtracted once per occurrence in the window
    uint64_t seed = 0;                // every value, 0 included, is a fixed seed
};

class sampler {
  public:
    // Validates the config (strata::error on nonsense such as a negative penalty) and allocates all scratch once.
    sampler(int32_t n_vocab, sampling_config cfg);

    // logits: n_vocab floats, modified in place by the penalties. history: previous tokens of this sequence
    // (prompt + generated), each in [0, n_vocab). Returns the chosen token id. Allocates nothing.
    int32_t sample(float *logits, std::span<const int32_t> history);
    // The draw alone, on logits sample() already penalised (constrained decoding masks them and draws again).
    int32_t draw(const float *logits);

    // Restarts the random stream, as if constructed with this seed.
    void reset(uint64_t seed);

    int32_t n_vocab() const { return n_vocab_; }
    const sampling_config &config() const { return cfg_; }

  private:
    struct candidate {
        float logit;
        int32_t id;
    };
    void apply_penalties(float *logits, std::span<const int32_t> history);
    int32_t argmax(const float *logits) const;
    double uniform01(); // [0, 1) from the top 53 bits of one mt19937_64 draw

    int32_t n_vocab_;
    sampling_config cfg_;
    std::mt19937_64 rng_;
    std::vector<candidate> candidates_;
    std::vector<double> probs_;
    std::vector<uint64_t> mass_; // top-p: each token's probability in fixed point, by id
    std::vector<int32_t> counts_; // per-token occurrences in the penalty window; all zero between calls
};

} // namespace strata
