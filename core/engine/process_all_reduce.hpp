// The all_reduce of tensor-parallel ranks that are processes (#16 item 3 under mpirun: `mpirun -np T runtime ... -tp
// T`): each process's forward calls it after every row-parallel matmul (ABI 1.29 strata_forward_args.all_reduce); it
// gathers every rank's partial sums through the transport and adds them up in rank order, as tensor_parallel_group
// does for ranks that are threads, so every rank gets the same bits in every run, and the same bits as one process's
// ranks.
//
// A step that fails on one rank fails on all, and only that step: every rank ends its step with end_step, which
// sends the others a one-byte end message (ok, failed, or stopped because another rank ended) and takes the others'
// remaining messages until their end. A rank still in its forward receives an end message in place of partial sums
// at its next all_reduce, which then fails (cancelled) instead of waiting for sums that will not come. Each rank sends
// each other one message per all_reduce it joins and one end message per step, and receives all of the other's, so
// the ranks start the next step in step. A rank whose messages do not arrive within the rank timeout is named (it hung
// or died): then the ranks cannot go on.
#pragma once

#include "distributed/transport.hpp"

#include <strata/plugin_abi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::engine {

class process_all_reduce {
  public:
    // How a rank's forward ended in a step.
    enum class ending : uint8_t { ok = 1, failed = 2, cancelled = 3 }; // cancelled: another rank ended first

    // max_floats: the largest partial sum (max_num_batched_tokens x n_embd); timeout_s: [parallel] rank_timeout_s.
    process_all_reduce(distributed::transport &link, size_t max_floats, double timeout_s);
    // The floats each process holds for a link of `ranks` (every rank's partial sums), for the memory plan.
    static size_t held_floats(int32_t ranks, size_t max_floats) {
        return static_cast<size_t>(ranks) * std::max<size_t>(max_floats, 1);
    }

    // strata_forward_args.all_reduce, with `user` this object. Never throws (it is called through the plugin ABI).
    static int32_t all_reduce(void *user, float *data, int64_t n, strata_status *st);

    // Before each step's forward (throws once the ranks cannot go on together, as end_step).
    void begin_step();
    // After it, on every rank, whether the forward returned (ok) or not: returns each rank's ending (this one's
    // included: cancelled when an all_reduce of this step was). Throws strata::error naming a rank whose messages did
    // not arrive within the timeout, here or in an all_reduce of the step (then at once: the ranks cannot go on).
    const std::vector<ending> &end_step(bool ok);

  private:
    int32_t reduce(float *data, int64_t n, strata_status *st);
    std::string timeout_text(int rank) const;

    distributed::transport &link_;
    size_t max_floats_;
    double timeout_s_;
    int me_;
    std::vector<float> gathered_;  // every rank's partial sums, rank by rank (size x max_floats)
    std::vector<size_t> received_; // the bytes each rank's message held
    std::vector<ending> endings_;  // this step's, by rank
    std::vector<char> ended_;      // ranks whose end message arrived in this step
    bool cancelled_ = false;       // an all_reduce of this step failed because another rank had ended
    std::string broken_;           // why the ranks cannot go on together (a rank's sums did not come in time)
};

} // namespace strata::engine
