#include "eval/perplexity_math.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace strata::eval {

chunk_plan plan_chunks(size_t n_tokens, int32_t n_ctx, int32_t max_chunks) {
    if (n_ctx < k_min_ctx)
        fail("--ctx {}: a chunk needs at least {} tokens (its first half is context, the rest is scored)", n_ctx,
             k_min_ctx);
    if (max_chunks == 0) fail("--chunks 0 evaluates nothing; give a positive number of chunks, or -1 for all of them");
    const uint64_t need = 2 * static_cast<uint64_t>(n_ctx);
    if (n_tokens < need)
        fail("the text tokenizes to {} tokens; perplexity with --ctx {} needs at least {} (twice the context, as "
             "llama-perplexity asks); give a longer text or a smaller --ctx",
             n_tokens, n_ctx, need);
    chunk_plan p;
    p.n_ctx = n_ctx;
    const uint64_t available = n_tokens / static_cast<uint64_t>(n_ctx);
    p.n_chunk = static_cast<int32_t>(max_chunks < 0 ? std::min<uint64_t>(available, INT32_MAX)
                                                    : std::min<uint64_t>(available, static_cast<uint64_t>(max_chunks)));
    p.first = n_ctx / 2;
    return p;
}

void chunk_tokens(const std::vector<int32_t> &tokens, const chunk_plan &plan, int32_t k, int32_t bos,
                  std::vector<int32_t> &out) {
    if (k < 0 || k >= plan.n_chunk) fail("internal: chunk {} outside [0, {})", k, plan.n_chunk);
    const size_t start = static_cast<size_t>(k) * static_cast<size_t>(plan.n_ctx);
    if (start + static_cast<size_t>(plan.n_ctx) > tokens.size())
        fail("internal: chunk {} ends past the {} tokens", k, tokens.size());
    out.assign(tokens.begin() + static_cast<std::ptrdiff_t>(start),
               tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(plan.n_ctx)));
    if (bos >= 0) out[0] = bos;
}

double log_normalizer(const float *logits, int32_t n_vocab) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(logits[i] - mx);
    return static_cast<double>(mx) + std::log(sum);
}

double token_nll(const float *logits, int32_t n_vocab, int32_t token) {
    return log_normalizer(logits, n_vocab) - static_cast<double>(logits[token]);
}

double log_softmax(const float *logits, int32_t n_vocab, float *out) {
    const double log_z = log_normalizer(logits, n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
    return log_z;
}

int32_t argmax(const float *values, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (values[i] > values[best]) best = i;
    return best;
}

// The largest value other than values[best].
float runner_up(const float *values, int32_t n, int32_t best) {
    float second = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n; ++i)
        if (i != best && values[i] > second) second = values[i];
    return second;
}

estimate binomial(size_t hits, size_t count) {
    if (count == 0) return {};
    const double p = static_cast<double>(hits) / static_cast<double>(count);
    return {p, count > 1 ? std::sqrt(std::max(0.0, p * (1 - p)) / static_cast<double>(count - 1)) : 0.0};
}

estimate mean_and_uncertainty(double sum, double sum2, size_t count) {
    if (count < 1) return {};
    const double n = static_cast<double>(count);
    const double mean = sum / n;
    const double var = sum2 / n - mean * mean;
    return {mean, var > 0 && count > 10 ? std::sqrt(var / (n - 1)) : 0.0};
}

void nll_accumulator::add(double nll) {
    sum_ += nll;
    sum2_ += nll * nll;
    ++count_;
}

double nll_accumulator::mean_nll() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }

double nll_accumulator::ppl() const { return std::exp(mean_nll()); }

double nll_accumulator::ppl_error() const {
    if (count_ < 2) return -1;
    const double n = static_cast<double>(count_);
    const double mean = sum_ / n;
    const double var = sum2_ / n - mean * mean;
    if (!(var > 0)) return -1;
    return std::sqrt(var / (n - 1)) * ppl();
}

std::string final_estimate_line(const nll_accumulator &a) {
    const double err = a.ppl_error();
    if (err < 0)
        return fmt::format("Final estimate: PPL = {:.4f} (no error estimate: the {} scored tokens' log-likelihoods "
                           "have no spread)",
                           a.ppl(), a.count());
    return fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}", a.ppl(), err);
}

std::string running_ppl_item(int32_t chunk_number, const nll_accumulator &a) {
    return fmt::format("[{}]{:.4f},", chunk_number, a.ppl());
}

namespace {

// llama-perplexity's covariance of two means (0 with fewer than 10 values).
double covariance(double suma, double sumb, double sumab, size_t count) {
    if (count < 10) return 0.0;
    const double n = static_cast<double>(count);
    return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

double safe_sqrt(double x) { return x > 0 ? std::sqrt(x) : 0.0; }

} // namespace

void kl_accumulator::add(const float *logits, const float *base_log_probs, int32_t n_vocab, int32_t token) {
    q_log_probs_.resize(static_cast<size_t>(n_vocab));
    log_softmax(logits, n_vocab, q_log_probs_.data());
    // Both NLLs from the float log-probabilities (as llama.cpp's float NLL here), so identical models give identical
    // values, not two roundings of one.
    const double nll = -static_cast<double>(q_log_probs_[static_cast<size_t>(token)]);
    const double nll_base = -static_cast<double>(base_log_probs[token]);
    sum_nll_ += nll;
    sum_nll2_ += nll * nll;
    sum_nll_base_ += nll_base;
    sum_nll_base2_ += nll_base * nll_base;
    sum_nll_nll_base_ += nll * nll_base;

    double kld = 0;
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float b = base_log_probs[i];
        if (b > -16.f)
            kld += std::exp(static_cast<double>(b)) *
                   (static_cast<double>(b) - static_cast<double>(q_log_probs_[static_cast<size_t>(i)]));
    }
    sum_kld_ += kld;
    sum_kld2_ += kld * kld;
    const int32_t base_top = argmax(base_log_probs, n_vocab);
    const bool same = argmax(q_log_probs_.data(), n_vocab) == base_top;
    if (same) ++n_same_top_;
    const double margin = std::exp(static_cast<double>(base_log_probs[base_top])) -
                          std::exp(static_cast<double>(runner_up(base_log_probs, n_vocab, base_top)));
    if (margin > decided_margin) {
        ++n_decided_;
        if (same) ++n_decided_same_top_;
    }
    ++count_;

    const float p_diff = static_cast<float>(std::exp(-nll) - std::exp(-nll_base));
    const double d2 = static_cast<double>(p_diff) * static_cast<double>(p_diff);
    sum_p_diff_ += p_diff;
    sum_p_diff2_ += d2;
    sum_p_diff4_ += d2 * d2;
    kld_values_.push_back(static_cast<float>(kld));
    p_diff_values_.push_back(p_diff);
}

estimate kl_accumulator::ppl() const {
    const estimate l = mean_and_uncertainty(sum_nll_, sum_nll2_, count_);
    const double v = std::exp(l.value);
    return {v, v * l.error};
}

estimate kl_accumulator::ppl_base() const {
    const estimate l = mean_and_uncertainty(sum_nll_base_, sum_nll_base2_, count_);
    const double v = std::exp(l.value);
    return {v, v * l.error};
}

estimate kl_accumulator::ln_ppl_ratio() const {
    const estimate q = mean_and_uncertainty(sum_nll_, sum_nll2_, count_);
    const estimate b = mean_and_uncertainty(sum_nll_base_, sum_nll_base2_, count_);
    const double cov = covariance(sum_nll_, sum_nll_base_, sum_nll_nll_base_, count_);
    return {q.value - b.value, safe_sqrt(q.error * q.error + b.error * b.error - 2.0 * cov)};
}

double kl_accumulator::ln_ppl_correlation() const {
    const estimate q = mean_and_uncertainty(sum_nll_, sum_nll2_, count_);
    const estimate b = mean_and_uncertainty(sum_nll_base_, sum_nll_base2_, count_);
    if (q.error <= 0 || b.error <= 0) return 0.0;
    return covariance(sum_nll_, sum_nll_base_, sum_nll_nll_base_, count_) / (q.error * b.error);
}

estimate kl_accumulator::kld() const { return mean_and_uncertainty(sum_kld_, sum_kld2_, count_); }

estimate kl_accumulator::p_diff() const { return mean_and_uncertainty(sum_p_diff_, sum_p_diff2_, count_); }

estimate kl_accumulator::p_diff_rms() const {
    const estimate mse = mean_and_uncertainty(sum_p_diff2_, sum_p_diff4_, count_);
    const double rms = safe_sqrt(mse.value);
    return {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};
}

estimate kl_accumulator::same_top() const { return binomial(n_same_top_, count_); }

estimate kl_accumulator::same_top_decided() const { return binomial(n_decided_same_top_, n_decided_); }

std::string kl_accumulator::table_header() {
    return "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
           "            Same top p";
}

std::string kl_accumulator::table_row(int32_t chunk_number) const {
    const estimate p = ppl(), r = ln_ppl_ratio(), k = kld(), d = p_diff_rms(), s = same_top();
    return fmt::format("{:4d}    {:9.4f} ± {:9.4f}    {:10.5f} ± {:10.5f}    {:10.5f} ± {:10.5f}"
                       "    {:6.3f} ± {:6.3f} %    {:6.3f} ± {:6.3f} %",
                       chunk_number, p.value, p.error, r.value, r.error, k.value, k.error, 100.0 * d.value,
                       100.0 * d.error, 100.0 * s.value, 100.0 * s.error);
}

float percentile(const std::vector<float> &sorted, float fraction) {
    if (sorted.empty()) return 0.0f;
    if (fraction <= 0) return sorted.front();
    if (fraction >= 1) return sorted.back();
    float p = fraction * static_cast<float>(sorted.size() - 1);
    const size_t ip = static_cast<size_t>(p);
    p -= static_cast<float>(ip);
    return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

namespace {

float median(const std::vector<float> &sorted) {
    const size_t n = sorted.size();
    if (n == 0) return 0.0f;
    return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

} // namespace

std::string kl_accumulator::report() const {
    std::string out;
    auto line = [&out](const std::string &s) { out += s + "\n"; };
    if (count_ == 0) return "no tokens were scored\n";

    line("====== Perplexity statistics ======");
    const estimate q = ppl(), b = ppl_base(), r = ln_ppl_ratio();
    line(fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}", q.value, q.error));
    line(fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}", b.value, b.error));
    line(fmt::format("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%", 100.0 * ln_ppl_correlation()));
    line(fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}", r.value, r.error));
    const double ratio = std::exp(r.value);
    line(fmt::format("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}", ratio, ratio * r.error));
    const double log_cov = covariance(sum_nll_, sum_nll_base_, sum_nll_nll_base_, count_);
    const double ppl_cov = q.value * b.value * log_cov;
    line(fmt::format("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}", q.value - b.value,
                     safe_sqrt(q.error * q.error + b.error * b.error - 2.0 * ppl_cov)));
    line("");

    std::vector<float> kl = kld_values_;
    std::sort(kl.begin(), kl.end());
    const estimate k = kld();
    line("====== KL divergence statistics ======");
    line(fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}", k.value, k.error));
    line(fmt::format("Maximum KLD: {:10.6f}", kl.back()));
    line(fmt::format("99.9%   KLD: {:10.6f}", percentile(kl, 0.999f)));
    line(fmt::format("99.0%   KLD: {:10.6f}", percentile(kl, 0.990f)));
    line(fmt::format("95.0%   KLD: {:10.6f}", percentile(kl, 0.950f)));
    line(fmt::format("90.0%   KLD: {:10.6f}", percentile(kl, 0.900f)));
    line(fmt::format("Median  KLD: {:10.6f}", median(kl)));
    line(fmt::format("10.0%   KLD: {:10.6f}", percentile(kl, 0.100f)));
    line(fmt::format(" 5.0%   KLD: {:10.6f}", percentile(kl, 0.050f)));
    line(fmt::format(" 1.0%   KLD: {:10.6f}", percentile(kl, 0.010f)));
    line(fmt::format(" 0.1%   KLD: {:10.6f}", percentile(kl, 0.001f)));
    line(fmt::format("Minimum KLD: {:10.6f}", kl.front()));
    line("");

    std::vector<float> pd = p_diff_values_;
    std::sort(pd.begin(), pd.end());
    const estimate d = p_diff(), rms = p_diff_rms(), s = same_top();
    line("====== Token probability statistics ======");
    line(fmt::format("Mean    Δp: {:6.3f} ± {:5.3f} %", 100.0 * d.value, 100.0 * d.error));
    line(fmt::format("Maximum Δp: {:6.3f}%", 100.0 * pd.back()));
    line(fmt::format("99.9%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.999f)));
    line(fmt::format("99.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.990f)));
    line(fmt::format("95.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.950f)));
    line(fmt::format("90.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.900f)));
    line(fmt::format("75.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.750f)));
    line(fmt::format("Median  Δp: {:6.3f}%", 100.0 * median(pd)));
    line(fmt::format("25.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.250f)));
    line(fmt::format("10.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.100f)));
    line(fmt::format(" 5.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.050f)));
    line(fmt::format(" 1.0%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.010f)));
    line(fmt::format(" 0.1%   Δp: {:6.3f}%", 100.0 * percentile(pd, 0.001f)));
    line(fmt::format("Minimum Δp: {:6.3f}%", 100.0 * pd.front()));
    line(fmt::format("RMS Δp    : {:6.3f} ± {:5.3f} %", 100.0 * rms.value, 100.0 * rms.error));
    line(fmt::format("Same top p: {:6.3f} ± {:5.3f} %", 100.0 * s.value, 100.0 * s.error));
    // Not in llama-perplexity's report: top-1 agreement where the base's top two are more than a near-tie apart.
    const estimate sd = same_top_decided();
    line(fmt::format("Same top p, base top-2 margin > {}: {:6.3f} ± {:5.3f} % of {} tokens", decided_margin,
                     100.0 * sd.value, 100.0 * sd.error, n_decided_));
    return out;
}

} // namespace strata::eval
