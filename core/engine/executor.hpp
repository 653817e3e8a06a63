// The executor (vLLM v1's Executor): where a step the scheduler decided crosses to the workers that run it. Today it
// holds one worker in this process, which runs the whole model (vLLM's UniProcExecutor); pipeline- and tensor-parallel
// executors hand each step to several workers (ranks) instead, and the engine above does not change.
#pragma once

#include "engine/step_input.hpp"
#include "engine/worker.hpp"

#include <memory>
#include <utility>

namespace strata::engine {

class executor {
  public:
    explicit executor(std::unique_ptr<worker> w) : worker_(std::move(w)) {}

    // The worker that loads, plans and reports for start-up (rank 0: with one worker, the only one).
    worker &driver_worker() { return *worker_; }
    const worker &driver_worker() const { return *worker_; }

    // Runs one step on the workers and returns the logits rows the driver worker holds.
    step_output execute_model(const step_input &step) { return worker_->execute_model(step); }

    void release(bool clean_shutdown) { worker_->release(clean_shutdown); }

  private:
    std::unique_ptr<worker> worker_;
};

} // namespace strata::engine
