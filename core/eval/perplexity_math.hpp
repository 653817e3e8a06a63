// Perplexity and KL divergence as llama.cpp's llama-perplexity defines them, on logits the caller supplies: how a
// tokenized text is cut into chunks, which positions are scored, log-softmax, the perplexity estimate with its error,
// and the KL-divergence statistics of `--kl-divergence` (mean KLD, PPL of both models, "Same top p", Δp). No model
// here: `runtime perplexity` (core/app/perplexity_command.cpp) runs the engine and feeds the rows in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::eval {

// Chunk k of the text is tokens [k * n_ctx, (k + 1) * n_ctx), evaluated from an empty context with its first token
// replaced by BOS when the vocabulary adds one. Its first n_ctx / 2 positions are context only; the logits of
// positions first .. n_ctx - 2 are scored against the token that follows (n_ctx - 1 - first tokens per chunk).
struct chunk_plan {
    int32_t n_ctx = 0;
    int32_t n_chunk = 0; // chunks evaluated
    int32_t first = 0;   // n_ctx / 2: the first scored position

    int32_t n_scored() const { return n_ctx - 1 - first; }
};

// The smallest chunk that scores more than one token per chunk.
constexpr int32_t k_min_ctx = 4;

// llama-perplexity's rules: the text must hold at least 2 * n_ctx tokens; it makes tokens / n_ctx chunks, at most
// `max_chunks` of them (< 0: no limit). Throws strata::error saying what to change when the text is too short,
// n_ctx is below k_min_ctx or max_chunks is 0.
chunk_plan plan_chunks(size_t n_tokens, int32_t n_ctx, int32_t max_chunks);

// The tokens chunk k is evaluated on, into `out` (n_ctx of them): the text's, with the first replaced by `bos` when
// bos >= 0 (pass -1 for a vocabulary that adds no BOS).
void chunk_tokens(const std::vector<int32_t> &tokens, const chunk_plan &plan, int32_t k, int32_t bos,
                  std::vector<int32_t> &out);

// log Z = max + log(sum exp(logit - max)) of one row (the sum in double, as llama.cpp).
double log_normalizer(const float *logits, int32_t n_vocab);

// -log softmax(logits)[token].
double token_nll(const float *logits, int32_t n_vocab, int32_t token);

// out[i] = logits[i] - log Z (out may be logits itself). Returns log Z.
double log_softmax(const float *logits, int32_t n_vocab, float *out);

// The index of the largest value; the first one on a tie.
int32_t argmax(const float *values, int32_t n);

// A value and its one-sigma uncertainty.
struct estimate {
    double value = 0;
    double error = 0;
};

// llama-perplexity's mean of a sample with the standard error of that mean: sum / count and
// sqrt((sum2 / count - mean^2) / (count - 1)); the error is 0 with 10 values or fewer (and when the variance is not
// positive).
estimate mean_and_uncertainty(double sum, double sum2, size_t count);

// Running sums of the scored tokens' negative log-likelihoods: PPL = exp(mean NLL).
class nll_accumulator {
  public:
    void add(double nll);
    size_t count() const { return count_; }
    double mean_nll() const;
    double ppl() const;
    // llama-perplexity's "Final estimate" error: ppl * sqrt((E[nll^2] - E[nll]^2) / (count - 1)). Negative when the
    // variance is not positive (one token, or every token equally likely), which llama.cpp reports as an error.
    double ppl_error() const;

  private:
    double sum_ = 0, sum2_ = 0;
    size_t count_ = 0;
};

// llama-perplexity's final line: "Final estimate: PPL = 12.3456 +/- 0.12345".
std::string final_estimate_line(const nll_accumulator &a);

// The running value after each chunk, as llama-perplexity prints it: "[3]12.3456,".
std::string running_ppl_item(int32_t chunk_number, const nll_accumulator &a);

// KL divergence of the evaluated model Q from a base model over the scored tokens, with the other statistics of
// llama-perplexity --kl-divergence. Per token: KLD = sum over i with log p_base(i) > -16 of
// p_base(i) * (log p_base(i) - log q(i)) (llama.cpp's cut-off), NLL of both models, Δp = q(token) - p_base(token),
// and whether both rank the same token first.
class kl_accumulator {
  public:
    // `logits`: Q's logits for one position; `base_log_probs`: the base model's log-probabilities for the same
    // position (exact, or read back from a base file); `token`: the token that follows.
    void add(const float *logits, const float *base_log_probs, int32_t n_vocab, int32_t token);

    size_t count() const { return count_; }
    estimate ppl() const;      // PPL(Q)
    estimate ppl_base() const; // PPL(base)
    estimate ln_ppl_ratio() const;
    double ln_ppl_correlation() const; // Cor(ln PPL(Q), ln PPL(base)); 0 when undefined
    estimate kld() const;
    estimate p_diff() const;     // mean Δp
    estimate p_diff_rms() const; // RMS Δp
    estimate same_top() const;   // fraction of tokens whose top-1 token is the same
    // The same among the tokens where the base is decided: its top-1 probability exceeds its second by more than
    // decided_margin (elsewhere a near-tie goes either way on one rounding). decided_count() says how many.
    static constexpr double decided_margin = 1e-3;
    estimate same_top_decided() const;
    size_t decided_count() const { return n_decided_; }
    // The KLD and Δp of every token added, in order.
    const std::vector<float> &kld_values() const { return kld_values_; }
    const std::vector<float> &p_diff_values() const { return p_diff_values_; }

    // The table llama-perplexity prints while it runs: its header, and one row after each chunk.
    static std::string table_header();
    std::string table_row(int32_t chunk_number) const;
    // The final statistics (perplexity, KL divergence with percentiles, token probability).
    std::string report() const;

  private:
    double sum_nll_ = 0, sum_nll2_ = 0, sum_nll_base_ = 0, sum_nll_base2_ = 0, sum_nll_nll_base_ = 0;
    double sum_kld_ = 0, sum_kld2_ = 0, sum_p_diff_ = 0, sum_p_diff2_ = 0, sum_p_diff4_ = 0;
    size_t n_same_top_ = 0, count_ = 0, n_decided_ = 0, n_decided_same_top_ = 0;
    std::vector<float> kld_values_, p_diff_values_;
    std::vector<float> q_log_probs_; // scratch
};

// llama-perplexity's percentile of sorted values (linear interpolation between neighbours).
float percentile(const std::vector<float> &sorted, float fraction);

} // namespace strata::eval
