#include "engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"

namespace strata {

namespace {

// Descending logit; equal logits keep the lower id first, so the result never depends on the sort algorithm.
bool higher_logit(float la, int32_t ia, float lb, int32_t ib) { return la > lb || (la == lb && ia < ib); }

} // namespace

sampler::sampler(int32_t n_vocab, sampling_config cfg) : n_vocab_(n_vocab), cfg_(cfg), rng_(cfg.seed) {
    if (n_vocab <= 0) fail("sampler: n_vocab is {}; it must be the model's vocabulary size (> 0)", n_vocab);
    if (!std::isfinite(cfg.temperature))
        fail("sampler: temperature is {}; use a finite value (<= 0 for greedy)", cfg.temperature);
    if (!(cfg.top_p >= 0.f && cfg.top_p <= 1.f)) fail("sampler: top_p is {}; it must be in [0, 1]", cfg.top_p);
    if (!(cfg.min_p >= 0.f && cfg.min_p <= 1.f)) fail("sampler: min_p is {}; it must be in [0, 1]", cfg.min_p);
    if (!(cfg.repetition_penalty > 0.f) || !std::isfinite(cfg.repetition_penalty))
        fail("sampler: repetition_penalty is {}; it must be > 0 (1 turns it off)", cfg.repetition_penalty);
    if (!std::isfinite(cfg.presence_penalty) || !std::isfinite(cfg.frequency_penalty))
        fail("sampler: presence_penalty {} / frequency_penalty {} must be finite", cfg.presence_penalty,
             cfg.frequency_penalty);
    candidates_.resize(static_cast<size_t>(n_vocab));
    probs_.resize(static_cast<size_t>(n_vocab));
    mass_.resize(static_cast<size_t>(n_vocab));
    counts_.assign(static_cast<size_t>(n_vocab), 0);
}

void sampler::reset(uint64_t seed) {
    cfg_.seed = seed;
    rng_.seed(seed);
}

double sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void sampler::apply_penalties(float *logits, std::span<const int32_t> history) {
    if (cfg_.repetition_last_n == 0) return;
    if (cfg_.repetition_penalty == 1.f && cfg_.presence_penalty == 0.f && cfg_.frequency_penalty == 0.f) return;
    size_t window = history.size();
    if (cfg_.repetition_last_n > 0) window = std::min(window, static_cast<size_t>(cfg_.repetition_last_n));
    const std::span<const int32_t> recent = history.last(window);
    for (const int32_t t : recent) {
        if (t < 0 || t >= n_vocab_) {
            for (const int32_t u : recent) // undo the partial count so the next call starts clean
                if (u >= 0 && u < n_vocab_) counts_[static_cast<size_t>(u)] = 0;
            fail("sampler: history holds token id {}, outside the vocabulary (0..{})", t, n_vocab_ - 1);
        }
        ++counts_[static_cast<size_t>(t)];
    }
    // Each distinct token is penalised once (by its count), then its counter goes back to zero.
    for (const int32_t t : recent) {
        int32_t &count = counts_[static_cast<size_t>(t)];
        if (count == 0) continue;
        float &l = logits[t];
        // Dividing a negative logit would raise it, so negative ones are multiplied (as llama.cpp does).
        l = l <= 0.f ? l * cfg_.repetition_penalty : l / cfg_.repetition_penalty;
        l -= static_cast<float>(count) * cfg_.frequency_penalty + cfg_.presence_penalty;
        count = 0;
    }
}

int32_t sampler::argmax(const float *logits) const {
    int32_t best = 0;
    float best_logit = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n_vocab_; ++i) {
        if (logits[i] > best_logit) { // strict: the lowest id wins ties; NaN never wins
            best_logit = logits[i];
            best = i;
        }
    }
    return best;
}

int32_t sampler::sample(float *logits, std::span<const int32_t> history) {
    if (logits == nullptr) fail("sampler: logits pointer is null");
    apply_penalties(logits, history);
    return draw(logits);
}

int32_t sampler::draw(const float *logits) {
    if (cfg_.temperature <= 0.f) return argmax(logits);

    constexpr float neg_inf = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n_vocab_; ++i)
        candidates_[static_cast<size_t>(i)] = {std::isnan(logits[i]) ? neg_inf : logits[i], i};
    const auto order = [](const candidate &a, const candidate &b) { return higher_logit(a.logit, a.id, b.logit, b.id); };

    // top-k; the survivors end up sorted, which top-p and min-p rely on.
    size_t n = candidates_.size();
    if (cfg_.top_k > 0 && static_cast<size_t>(cfg_.top_k) < n) {
        n = static_cast<size_t>(cfg_.top_k);
        std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n), candidates_.end(),
                          order);
    } else {
        // No top-k (what OpenAI clients send by default): sorting the whole vocabulary per token would cost more
        // than the draw, so only the best candidate goes first; top-p sorts as far as it needs below, min-p keeps
        // its survivors, and a plain draw walks the rest in id order.
        const auto best = std::min_element(candidates_.begin(), candidates_.end(), order);
        std::rotate(candidates_.begin(), best, best + 1);
    }
    // All -inf: nothing is possible; +inf: certain. Either way softmax would be NaN, so take the first.
    if (!std::isfinite(candidates_[0].logit)) return candidates_[0].id;
    bool sorted = n < candidates_.size();

    // top-p on the untempered distribution: the smallest prefix (by descending logit) whose mass reaches top_p.
    // A peaked distribution gets there within the best 64, sorted first. Otherwise the cut is found by selection on
    // mass (nth_element halves the range each round, O(n) in all) and only the kept prefix is sorted: a long tail then
    // costs a fraction of sorting the vocabulary.
    if (cfg_.top_p < 1.f) {
        // Mass in fixed point (2^40 per unit of probability relative to the best token), so sums do not depend on
        // the order the selection leaves candidates in: the cut is the same with every standard library.
        const float max_logit = candidates_[0].logit;
        uint64_t total = 0;
        for (size_t i = 0; i < n; ++i) {
            const candidate &c = candidates_[i];
            const auto w = static_cast<uint64_t>(std::ldexp(std::exp(static_cast<double>(c.logit - max_logit)), 40));
            mass_[static_cast<size_t>(c.id)] = w;
            total += w;
        }
        const auto target = static_cast<uint64_t>(std::ceil(static_cast<double>(cfg_.top_p) * static_cast<double>(total)));
        auto weight = [&](size_t i) { return mass_[static_cast<size_t>(candidates_[i].id)]; };
        auto at = [&](size_t i) { return candidates_.begin() + static_cast<std::ptrdiff_t>(i); };
        const size_t head = sorted ? n : std::min<size_t>(n, 64);
        if (!sorted) std::partial_sort(at(0), at(head), at(n), order);
        uint64_t mass = 0;
        size_t cut = 0;
        for (size_t i = 0; i < head && cut == 0; ++i)
            if ((mass += weight(i)) >= target) cut = i + 1;
        if (cut == 0 && head < n) {
            size_t lo = head, hi = n; // the cut lies in [lo, hi); [head, lo) is all kept
            while (hi - lo > 64) {
                const size_t mid = lo + (hi - lo) / 2;
                std::nth_element(at(lo), at(mid), at(hi), order);
                uint64_t half = 0;
                for (size_t i = lo; i < mid; ++i) half += weight(i);
                if (mass + half >= target) {
                    hi = mid;
                } else {
                    mass += half;
                    lo = mid;
                }
            }
            std::sort(at(lo), at(hi), order);
            for (size_t i = lo; i < hi && cut == 0; ++i)
                if ((mass += weight(i)) >= target) cut = i + 1;
            std::sort(at(head), at(lo), order);
        }
        if (cut != 0) n = cut; // else the whole (sorted) set is needed to reach top_p
        sorted = true;
    }

    // min-p: keep tokens with p >= min_p * p_max, i.e. logit >= max_logit + log(min_p).
    if (cfg_.min_p > 0.f) {
        const float threshold = candidates_[0].logit + std::log(cfg_.min_p);
        if (sorted) {
            size_t keep = 1;
            while (keep < n && candidates_[keep].logit >= threshold) ++keep;
            n = keep;
        } else {
            // Survivors first (the best stays at 0), in descending order like the sorted path.
            const auto end = std::partition(candidates_.begin() + 1, candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                                            [&](const candidate &c) { return c.logit >= threshold; });
            n = static_cast<size_t>(end - candidates_.begin());
            std::sort(candidates_.begin() + 1, end, order);
        }
    }

    // temperature, softmax, draw.
    const double inv_temp = 1.0 / static_cast<double>(cfg_.temperature);
    const double max_scaled = static_cast<double>(candidates_[0].logit) * inv_temp;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i)
        sum += probs_[i] = std::exp(static_cast<double>(candidates_[i].logit) * inv_temp - max_scaled);
    const double target = uniform01() * sum;
    double cumulative = 0.0;
    for (size_t i = 0; i < n; ++i) {
        cumulative += probs_[i];
        if (target < cumulative) return candidates_[i].id;
    }
    return candidates_[n - 1].id; // rounding left target at the very top
}

} // namespace strata
