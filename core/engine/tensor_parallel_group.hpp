// Tensor-parallel ranks in this process (#16 item 3; vLLM's --tensor-parallel-size): each worker holds its heads and
// feed-forward columns of every layer (tensor_parallel_shard) and its heads' KV; a step runs on all of them at once —
// rank 0 on the calling thread, the others on a thread each, started once — and after each row-parallel matmul
// (attn_output, ffn_down) the model calls all_reduce, which sums the ranks' partial products in rank order, so every
// rank gets the same bits in every run. A rank that fails breaks the group's barrier: the others' all_reduce returns
// an error instead of waiting, the step fails with the first rank's reason, and the next step starts afresh.
#pragma once

#include "engine/step_input.hpp"
#include "engine/worker.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace strata::engine {

class tensor_parallel_group {
  public:
    // Borrows the workers (rank order) for its lifetime, gives each its all_reduce, and starts a thread per rank past
    // the first. max_floats: the largest partial sum (max_num_batched_tokens x n_embd); the step's logits are up to
    // max_rows rows of n_vocab, each rank's piece of the vocabulary (strata_split_piece) joined here. A pipeline
    // stage before the last (stream_floats > 0: the largest residual stream) has no logits: its ranks end the step
    // with the same residual stream, rank 0's goes on and the others' into a buffer each.
    tensor_parallel_group(std::vector<worker *> ranks, size_t max_floats, int32_t n_vocab, int32_t max_rows,
                          size_t stream_floats = 0);
    ~tensor_parallel_group();
    // The floats the group holds for those arguments (the reduced sum, the joined logits rows, the streams of ranks
    // past the first), for the memory plan.
    static size_t held_floats(size_t max_floats, int32_t n_vocab, int32_t max_rows, size_t n_ranks = 1,
                              size_t stream_floats = 0) {
        return max_floats + static_cast<size_t>(max_rows) * static_cast<size_t>(n_vocab) +
               (n_ranks - 1) * stream_floats;
    }
    tensor_parallel_group(const tensor_parallel_group &) = delete;
    tensor_parallel_group &operator=(const tensor_parallel_group &) = delete;

    // Runs the step on every rank at once and joins the ranks' pieces of each logits row. Throws the first failing
    // rank's error. Inside pipeline stages: a stage past the first reads hidden_in, one before the last writes its
    // residual stream to hidden_out (and returns no logits).
    step_output execute_model(const step_input &step, const float *hidden_in = nullptr, float *hidden_out = nullptr);

  private:
    struct rank_context {
        tensor_parallel_group *group;
        int32_t rank;
    };
    static int32_t all_reduce(void *user, float *data, int64_t n, strata_status *st);
    int32_t reduce(int32_t rank, float *data, int64_t n, strata_status *st);
    // Every rank waits here for the others; false when the group is broken (a rank failed).
    bool barrier();
    // Whether the barrier of `generation` is complete (true), broken or abandoned (false), or still open (nullopt).
    std::optional<bool> barrier_state(uint64_t generation);
    void run_rank(int32_t rank);
    void serve(int32_t rank);
    void record_failure(std::exception_ptr e);
    void stop_threads();

    std::vector<worker *> ranks_;
    std::vector<rank_context> contexts_;
    std::vector<std::thread> threads_;
    std::vector<float> sum_;           // the reduced values, written a slice per rank
    std::vector<float *> partial_;     // each rank's data in the current all_reduce
    std::vector<step_output> outputs_; // each rank's step output
    std::vector<const float *> pieces_; // their logits pieces, rank by rank
    int32_t n_vocab_;
    std::vector<float> logits_; // the step's logits rows, joined from the ranks' pieces (with sum_: held_floats)
    size_t stream_floats_;
    std::vector<float> streams_; // ranks past the first: the residual stream each writes (a stage before the last)

    std::mutex mu_;
    std::condition_variable cv_;
    const step_input *step_ = nullptr;
    const float *hidden_in_ = nullptr;
    float *hidden_out_ = nullptr;
    uint64_t step_generation_ = 0; // a new step for the rank threads
    int32_t ranks_done_ = 0;       // rank threads finished with the current step
    bool stopping_ = false;
    // The barrier: how many arrived in this generation, and whether a failure broke it for this step. A rank spins
    // briefly on the generation (the ranks reach each all_reduce microseconds apart) before it sleeps on cv_.
    alignas(64) std::atomic<int32_t> arrived_{0};
    alignas(64) std::atomic<uint64_t> barrier_generation_{0};
    std::atomic<bool> broken_{false};
    // Ranks whose forward returned this step: one still waiting in a barrier then waits for a rank that will not
    // come (a model that called all_reduce fewer times on one rank), which breaks the step instead of hanging it.
    std::atomic<int32_t> finished_{0};
    std::exception_ptr failure_; // the first rank's error in this step (mu_)
};

} // namespace strata::engine
