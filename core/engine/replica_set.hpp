// Data parallel in one process (#16 item 5, vLLM's --data-parallel-size): N replicas of the whole model, each an
// engine on its own share of the hardware (engine_options.data_parallel_rank: the CPU's threads and cores divided, a
// GPU each), behind the one engine API frontends see (engine_api.cpp). A request goes to the replica with the fewest
// unfinished requests (ties to the lowest, so one replica is exactly the engine); its id says which replica holds it
// (replica d's ids are d mod N, in token events too); stats are the replicas' sums; the model, tokenizer and chat
// templates are replica 0's (every replica loads the same file: their fingerprints are checked equal at start-up).
#pragma once

#include "engine/engine.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace strata::engine {

class replica_set {
  public:
    // Starts opts.data_parallel_size replicas of `opts`, one after another (each prints its memory plan); throws
    // strata::error naming the replica that could not start.
    replica_set(const plugins::registry &registry, const strata_host_services *host, const engine_options &opts);
    // One engine the caller owns, served alone.
    explicit replica_set(engine &one);
    replica_set(const replica_set &) = delete;
    replica_set &operator=(const replica_set &) = delete;

    int32_t size() const { return static_cast<int32_t>(replicas_.size()); }
    engine &replica(int32_t i) const { return *replicas_[static_cast<size_t>(i)]; }
    engine &front() const { return *replicas_.front(); }

    strata_request_id submit(const strata_request &req);
    strata_request_result wait(strata_request_id id);
    void cancel(strata_request_id id);
    strata_engine_stats stats() const;

  private:
    // The replica holding a request: replica d of N numbers its requests d mod N (engine_requests.cpp), so the id
    // a frontend holds, and every token event's id, is the engine's own.
    engine &holder(strata_request_id id) const;

    std::vector<std::unique_ptr<engine>> owned_;
    std::vector<engine *> replicas_;
    std::mutex choose_mu_;          // guards choosing_
    std::vector<int64_t> choosing_; // per replica: submits that chose it and have not returned yet
};

} // namespace strata::engine
