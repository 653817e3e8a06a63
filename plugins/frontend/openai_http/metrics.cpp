#include "metrics.hpp"

#include <cstdio>

namespace strata::openai_http {

void latency_histogram::observe(double seconds) {
    size_t i = 0;
    while (i < k_bounds.size() && seconds > k_bounds[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_micros_.fetch_add(static_cast<uint64_t>(seconds > 0 ? seconds * 1e6 : 0), std::memory_order_relaxed);
}

void latency_histogram::append_prometheus(std::string &out, const std::string &name, const std::string &help,
                                          const std::string &labels) const {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    uint64_t cumulative = 0;
    char le[32];
    for (size_t i = 0; i <= k_bounds.size(); ++i) {
        cumulative += counts_[i].load(std::memory_order_relaxed);
        if (i < k_bounds.size()) std::snprintf(le, sizeof le, "%g", k_bounds[i]);
        else std::snprintf(le, sizeof le, "+Inf");
        out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
    }
    char sum[64];
    std::snprintf(sum, sizeof sum, "%.6f", static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6);
    out += name + "_sum{" + labels + "} " + sum + "\n";
    out += name + "_count{" + labels + "} " + std::to_string(cumulative) + "\n";
}

namespace {

void sample(std::string &out, const char *name, const char *type, const char *help, const std::string &labels, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    out += std::string(name) + "{" + labels + "} " + std::to_string(v) + "\n";
}

std::string escape_label(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

} // namespace

std::string prometheus_text(const frontend_metrics &m, const strata_engine_stats &e, const std::string &model) {
    const std::string labels = "model_name=\"" + escape_label(model) + "\"";
    std::string out;
    sample(out, "vllm:num_requests_running", "gauge", "Requests currently generating.", labels, e.requests_running);
    sample(out, "vllm:num_requests_waiting", "gauge", "Requests queued in the engine.", labels, e.requests_waiting);
    sample(out, "vllm:prompt_tokens_total", "counter", "Prompt tokens processed.", labels, e.prompt_tokens_total);
    sample(out, "vllm:generation_tokens_total", "counter", "Tokens generated.", labels, e.generation_tokens_total);
    sample(out, "vllm:request_success_total", "counter", "Generations (one per choice) that finished with stop or length.", labels,
           static_cast<int64_t>(m.request_success.load()));
    sample(out, "strata:request_failure_total", "counter", "Generations that failed or were cancelled (client gone, shutdown).", labels,
           static_cast<int64_t>(m.request_failure.load()));
    m.time_to_first_token.append_prometheus(out, "vllm:time_to_first_token_seconds",
                                            "Seconds from request arrival to its first token.", labels);
    m.inter_token_latency.append_prometheus(out, "vllm:inter_token_latency_seconds", "Seconds between tokens.", labels);
    return out;
}

} // namespace strata::openai_http
