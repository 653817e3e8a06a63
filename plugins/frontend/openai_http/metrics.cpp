#include "metrics.hpp"

#include <algorithm>
#include <cstddef>
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

void family(std::string &out, const char *name, const char *type, const char *help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void line(std::string &out, const char *name, const std::string &labels, int64_t v) {
    out += std::string(name) + "{" + labels + "} " + std::to_string(v) + "\n";
}

void line(std::string &out, const char *name, const std::string &labels, double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", v);
    out += std::string(name) + "{" + labels + "} " + text + "\n";
}

// The engine's paged-KV figures (the ABI 1.5 tail of strata_engine_stats): vLLM's names where the meaning is the
// same, and Strata's own per tier.
void append_kv_metrics(std::string &out, const strata_engine_stats &e, const std::string &labels) {
    static constexpr const char *k_tier[3] = {"device", "host", "nvme"};
    // vLLM's "usage" counts blocks that requests hold; prefix-cache blocks nobody holds are free to it.
    auto held_fraction = [&](int t) {
        const int64_t total = e.kv_blocks_total[t];
        const int64_t held = e.kv_blocks_used[t] - e.kv_blocks_cached[t];
        return total > 0 ? static_cast<double>(std::max<int64_t>(held, 0)) / static_cast<double>(total) : 0.0;
    };
    family(out, "vllm:gpu_cache_usage_perc", "gauge",
           "Device KV-cache usage (1 = 100%): blocks held by requests over all device blocks.");
    line(out, "vllm:gpu_cache_usage_perc", labels, held_fraction(STRATA_KV_DEVICE));
    family(out, "vllm:cpu_cache_usage_perc", "gauge",
           "Host-memory KV-cache usage (1 = 100%): blocks held by requests over all host blocks.");
    line(out, "vllm:cpu_cache_usage_perc", labels, held_fraction(STRATA_KV_HOST));
    family(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions (swap and recompute).");
    line(out, "vllm:num_preemptions_total", labels, e.preemptions_swap + e.preemptions_recompute);
    family(out, "vllm:gpu_prefix_cache_queries_total", "counter", "Prefix cache queries, in full prompt blocks looked up.");
    line(out, "vllm:gpu_prefix_cache_queries_total", labels, e.prefix_queries);
    family(out, "vllm:gpu_prefix_cache_hits_total", "counter", "Prefix cache hits in device memory, in blocks.");
    line(out, "vllm:gpu_prefix_cache_hits_total", labels, e.prefix_hits[STRATA_KV_DEVICE]);

    family(out, "strata_kv_block_size", "gauge", "Tokens per KV block.");
    line(out, "strata_kv_block_size", labels, e.kv_block_size);
    family(out, "strata_kv_blocks", "gauge",
           "KV blocks per tier: total the tier holds, used (by requests or cached prefixes), cached (of used: held by no "
           "request, reclaimable).");
    for (int t = 0; t < 3; ++t) {
        const std::string tier = labels + ",tier=\"" + k_tier[t] + "\"";
        line(out, "strata_kv_blocks", tier + ",state=\"total\"", e.kv_blocks_total[t]);
        line(out, "strata_kv_blocks", tier + ",state=\"used\"", e.kv_blocks_used[t]);
        line(out, "strata_kv_blocks", tier + ",state=\"cached\"", e.kv_blocks_cached[t]);
    }
    family(out, "strata_kv_preemptions_total", "counter", "Preemptions by mode.");
    line(out, "strata_kv_preemptions_total", labels + ",mode=\"swap\"", e.preemptions_swap);
    line(out, "strata_kv_preemptions_total", labels + ",mode=\"recompute\"", e.preemptions_recompute);
    family(out, "strata_prefix_cache_hits_total", "counter", "Prefix cache hits, in blocks, by the tier they were found in.");
    for (int t = 0; t < 3; ++t) line(out, "strata_prefix_cache_hits_total", labels + ",tier=\"" + k_tier[t] + "\"", e.prefix_hits[t]);
    family(out, "strata_kv_swapped_bytes_total", "counter", "KV bytes moved between the device and lower tiers.");
    line(out, "strata_kv_swapped_bytes_total", labels + ",direction=\"out\"", e.kv_bytes_swapped_out);
    line(out, "strata_kv_swapped_bytes_total", labels + ",direction=\"in\"", e.kv_bytes_swapped_in);
}

} // namespace

bool engine_stats_have_kv(const strata_engine_stats &e) {
    return e.struct_size >= offsetof(strata_engine_stats, kv_bytes_swapped_in) + sizeof e.kv_bytes_swapped_in;
}

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
    sample(out, "strata:requests_refused_busy_total", "counter",
           "HTTP requests answered 503 because the engine's waiting queue was full (max_waiting_requests).", labels,
           static_cast<int64_t>(m.requests_refused_busy.load()));
    sample(out, "strata:http_connections_evicted_total", "counter",
           "Idle or header-pending connections closed to make room for a new one at max_connections.", labels,
           static_cast<int64_t>(m.connections_evicted.load()));
    sample(out, "strata:http_connections_refused_total", "counter",
           "Connections answered 503 at max_connections because none could be closed.", labels,
           static_cast<int64_t>(m.connections_refused.load()));
    m.time_to_first_token.append_prometheus(out, "vllm:time_to_first_token_seconds",
                                            "Seconds from request arrival to its first token.", labels);
    m.inter_token_latency.append_prometheus(out, "vllm:inter_token_latency_seconds", "Seconds between tokens.", labels);
    if (engine_stats_have_kv(e)) append_kv_metrics(out, e, labels);
    return out;
}

} // namespace strata::openai_http
