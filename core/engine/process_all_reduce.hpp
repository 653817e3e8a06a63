// The all_reduce of tensor-parallel ranks that are processes (#16 item 3 under mpirun: `mpirun -np T runtime ... -tp
// T`): each process's forward calls it after every row-parallel matmul (ABI 1.29 strata_forward_args.all_reduce); it
// gathers every rank's partial sums through the transport and adds them up in rank order, as tensor_parallel_group
// does for ranks that are threads, so every rank gets the same bits in every run, and the same bits as one process's
// ranks. A rank whose partial sums do not arrive within the rank timeout fails the forward, naming the rank.
#pragma once

#include "distributed/transport.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <vector>

namespace strata::engine {

class process_all_reduce {
  public:
    // max_floats: the largest partial sum (max_num_batched_tokens x n_embd); timeout_s: [parallel] rank_timeout_s.
    process_all_reduce(distributed::transport &link, size_t max_floats, double timeout_s);

    // strata_forward_args.all_reduce, with `user` this object. Never throws (it is called through the plugin ABI).
    static int32_t all_reduce(void *user, float *data, int64_t n, strata_status *st);

  private:
    int32_t reduce(float *data, int64_t n, strata_status *st);

    distributed::transport &link_;
    size_t max_floats_;
    double timeout_s_;
    std::vector<float> gathered_; // every rank's partial sums, rank by rank (size x max_floats)
};

} // namespace strata::engine
