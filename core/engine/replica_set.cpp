#include "engine/replica_set.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <cstdint>

namespace strata::engine {

replica_set::replica_set(const plugins::registry &registry, const strata_host_services *host,
                         const engine_options &opts) {
    const int32_t n = opts.data_parallel_size;
    if (n < 1) fail("data_parallel_size {} must be at least 1", n);
    for (int32_t d = 0; d < n; ++d) {
        engine_options o = opts;
        o.data_parallel_rank = d;
        o.data_parallel_size = n;
        if (n > 1) log::info("engine", "data-parallel replica {} of {}: starting", d, n);
        try {
            owned_.push_back(std::make_unique<engine>(registry, host, std::move(o)));
        } catch (const std::exception &e) {
            if (n == 1) throw;
            fail("data-parallel replica {} of {} could not start: {}", d, n, e.what());
        }
        replicas_.push_back(owned_.back().get());
        choosing_.push_back(0);
        if (owned_.back()->fingerprint() != owned_.front()->fingerprint())
            fail("data-parallel replica {} loaded a different model than replica 0 (fingerprints {:016x} and {:016x}); "
                 "was {} replaced while starting?",
                 d, owned_.back()->fingerprint(), owned_.front()->fingerprint(), opts.model_path);
    }
}

replica_set::replica_set(engine &one) : replicas_{&one}, choosing_{0} {}

strata_request_id replica_set::submit(const strata_request &req) {
    const auto n = static_cast<strata_request_id>(replicas_.size());
    if (n == 1) return replicas_.front()->submit(req); // one replica: the engine's own submit, nothing serialised
    // The replica is chosen under the lock, counting submits chosen but not yet queued, and the submit itself
    // (tokenizing, building a grammar) runs outside it, so concurrent frontends' threads neither wait on each other
    // nor all pick the same replica.
    size_t best = 0;
    {
        std::lock_guard<std::mutex> lock(choose_mu_);
        int64_t least = INT64_MAX;
        for (size_t d = 0; d < replicas_.size(); ++d) {
            const int64_t load = replicas_[d]->unfinished() + choosing_[d];
            if (load < least) least = load, best = d;
        }
        ++choosing_[best];
    }
    struct chosen {
        replica_set &set;
        size_t d;
        ~chosen() {
            std::lock_guard<std::mutex> lock(set.choose_mu_);
            --set.choosing_[d];
        }
    } hold{*this, best};
    return replicas_[best]->submit(req); // replica d's ids are d mod N (engine_requests.cpp)
}

engine &replica_set::holder(strata_request_id id) const {
    return *replicas_[static_cast<size_t>(id % static_cast<strata_request_id>(replicas_.size()))];
}

strata_request_result replica_set::wait(strata_request_id id) { return holder(id).wait(id); }

void replica_set::cancel(strata_request_id id) { holder(id).cancel(id); }

// Counts and token totals add up; the block size is every replica's; each tier's blocks are the replicas' together.
strata_engine_stats replica_set::stats() const {
    strata_engine_stats sum = replicas_.front()->stats();
    for (size_t d = 1; d < replicas_.size(); ++d) {
        const strata_engine_stats s = replicas_[d]->stats();
        sum.requests_running += s.requests_running;
        sum.requests_waiting += s.requests_waiting;
        sum.requests_finished += s.requests_finished;
        sum.prompt_tokens_total += s.prompt_tokens_total;
        sum.generation_tokens_total += s.generation_tokens_total;
        for (int t = 0; t < 3; ++t) {
            sum.kv_blocks_total[t] += s.kv_blocks_total[t];
            sum.kv_blocks_used[t] += s.kv_blocks_used[t];
            sum.kv_blocks_cached[t] += s.kv_blocks_cached[t];
            sum.prefix_hits[t] += s.prefix_hits[t];
        }
        sum.preemptions_swap += s.preemptions_swap;
        sum.preemptions_recompute += s.preemptions_recompute;
        sum.prefix_queries += s.prefix_queries;
        sum.kv_bytes_swapped_out += s.kv_bytes_swapped_out;
        sum.kv_bytes_swapped_in += s.kv_bytes_swapped_in;
    }
    return sum;
}

} // namespace strata::engine
