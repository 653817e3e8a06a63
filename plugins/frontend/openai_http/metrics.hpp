// Counters and latency histograms the frontend records itself, and the Prometheus text of GET /metrics (vLLM's metric
// names, so existing dashboards work). observe() is lock-free and allocation-free (it runs per token).
#pragma once

#include <strata/plugin_abi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace strata::openai_http {

class latency_histogram {
  public:
    static constexpr std::array<double, 12> k_bounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5};
    void observe(double seconds);
    // Appends the _bucket/_sum/_count lines of metric `name` with the model label.
    void append_prometheus(std::string &out, const std::string &name, const std::string &help, const std::string &labels) const;

  private:
    std::array<std::atomic<uint64_t>, k_bounds.size() + 1> counts_{}; // last one is +Inf
    std::atomic<uint64_t> sum_micros_{0};
};

struct frontend_metrics {
    latency_histogram time_to_first_token;
    latency_histogram inter_token_latency;
    std::atomic<uint64_t> request_success{0};
    std::atomic<uint64_t> request_failure{0};
    std::atomic<uint64_t> requests_refused_busy{0}; // 503: the engine's waiting queue was full
    std::atomic<uint64_t> connections_evicted{0};   // idle or header-pending connections closed for a new one
    std::atomic<uint64_t> connections_refused{0};   // 503: max_connections reached and none could be closed
};

// Whether the engine filled the ABI 1.5 KV tail of its stats (get_stats copies only what both sides know and says
// how much in struct_size).
bool engine_stats_have_kv(const strata_engine_stats &e);

// The whole /metrics body. `model` labels every sample (model_name="..."). The KV series (vllm:gpu_cache_usage_perc,
// strata_kv_blocks{tier,state}, ...) appear only when engine_stats_have_kv(engine).
std::string prometheus_text(const frontend_metrics &m, const strata_engine_stats &engine, const std::string &model);

} // namespace strata::openai_http
