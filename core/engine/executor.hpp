// The executor (vLLM v1's Executor): where a step the scheduler decided crosses to the workers that run it. One worker
// runs the whole model (vLLM's UniProcExecutor); with pipeline_parallel_size N, N workers in this process each run a
// contiguous range of the layers over KV blocks of their own, and each step passes the residual stream rank to rank
// (the in-process form of a pipeline across processes). The engine above does not change.
#pragma once

#include "engine/step_input.hpp"
#include "engine/worker.hpp"

#include <memory>
#include <utility>
#include <vector>

namespace strata::engine {

class executor {
  public:
    explicit executor(std::vector<std::unique_ptr<worker>> workers) : workers_(std::move(workers)) {}

    // The worker that reports for start-up (rank 0: the device, the plan, the hyperparameters).
    worker &driver_worker() { return *workers_.front(); }
    const worker &driver_worker() const { return *workers_.front(); }
    // Every worker, rank by rank (one unless pipeline parallel).
    const std::vector<std::unique_ptr<worker>> &workers() const { return workers_; }

    // The residual stream between ranks: max_tokens x n_embd floats of host memory, allocated once.
    void allocate_step_memory(int32_t max_tokens, int32_t n_embd) {
        for (auto &w : workers_) w->allocate_step_memory();
        if (workers_.size() > 1) stream_.resize(static_cast<size_t>(max_tokens) * static_cast<size_t>(n_embd));
    }

    // Runs one step on the workers, rank after rank, and returns the logits rows the last rank holds.
    step_output execute_model(const step_input &step) {
        if (workers_.size() == 1) return workers_.front()->execute_model(step);
        step_output out;
        for (size_t r = 0; r < workers_.size(); ++r) {
            const bool last = r + 1 == workers_.size();
            out = workers_[r]->execute_model(step, r > 0 ? stream_.data() : nullptr, last ? nullptr : stream_.data());
        }
        return out;
    }

    void release(bool clean_shutdown) {
        for (auto it = workers_.rbegin(); it != workers_.rend(); ++it) (*it)->release(clean_shutdown);
    }

  private:
    std::vector<std::unique_ptr<worker>> workers_;
    std::vector<float> stream_;
};

} // namespace strata::engine
