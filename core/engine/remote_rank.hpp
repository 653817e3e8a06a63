// A pipeline or tensor-parallel rank that is a process of its own (#16; rank 0's view of it): start-up, its KV pools
// and its part of every step go to it through the transport (pipeline_protocol.hpp); the process runs
// serve_pipeline_rank (rank_server.hpp). Its KV pools are remote_block_storage: the KV cache swaps, spills and persists its part of a
// block through messages, as it does a local rank's through that rank's memory.
#pragma once

#include "engine/pipeline_protocol.hpp"
#include "engine/pipeline_rank.hpp"

#include <cstdint>
#include <string>

namespace strata::distributed {
class transport;
}

namespace strata::engine {

// When a rank that is a process does not answer within the rank timeout (hung, or dead where mpirun let the others
// run), the pipeline cannot go on: `fail_pipeline` logs why, arranges for every rank to end two seconds later (time for
// the frontends to answer the failed requests with the reason) and throws it; from then on `check_pipeline` throws it
// too, so later steps fail at once instead of waiting again.
[[noreturn]] void fail_pipeline(distributed::transport &link, const std::string &why);
void check_pipeline();
// Sends to a rank, failing the pipeline (fail_pipeline) when the rank takes nothing within timeout_s seconds.
void send_to_rank(distributed::transport &link, int rank, int tag, const void *data, size_t bytes, double timeout_s);

class remote_rank final : public pipeline_rank {
  public:
    // timeout_s: [parallel] rank_timeout_s, for the rank's answers to KV block moves. A tensor-parallel rank's stage
    // is every layer (its share of each: the rank serves with its own -tp).
    remote_rank(distributed::transport &link, const pipeline_stage &stage, double timeout_s,
                bool tensor_parallel = false);
    ~remote_rank() override; // stops the rank when it was started and not stopped
    remote_rank(const remote_rank &) = delete;
    remote_rank &operator=(const remote_rank &) = delete;

    // Start-up, in two halves so that the ranks load their models while rank 0 loads its own: begin_start sends the
    // stage, the context length, the model's fingerprint and rank 0's device name; finish_start waits until the rank
    // has loaded its layers and placed them (its memory plan), and throws its error naming the rank, or a timeout after
    // timeout_s seconds ([parallel] rank_start_timeout_s).
    void begin_start(const std::string &device, int32_t n_ctx, uint64_t fingerprint,
                     const pipeline_protocol::shared_options &options);
    void finish_start(double timeout_s);

    const pipeline_stage &stage() const override { return stage_; }
    // "pipeline rank 1", "tensor-parallel rank 1": how errors name it.
    const std::string &name() const { return name_; }
    uint64_t kv_block_bytes() const override { return kv_block_bytes_; }
    uint64_t device_kv_budget() const override { return device_kv_; }
    std::unique_ptr<kv::block_storage> allocate_device_kv(uint64_t n_blocks, uint64_t block_bytes) override;
    std::unique_ptr<kv::block_storage> allocate_tier_kv(kv::tier t, const std::string &name, uint64_t n_blocks,
                                                        uint64_t align, uint64_t block_bytes) override;
    // The step buffers for steps of up to max_step_blocks block references, max_tokens tokens and max_seqs sequences.
    void bind(size_t max_step_blocks, int32_t max_tokens, int32_t max_seqs);
    // Sends a step (packed: pipeline_protocol::pack_step); the rank's part runs when its residual stream arrives.
    void send_step(const int32_t *words, size_t n);
    // Ends the rank's process cleanly (it releases its device, weights and KV memory).
    void stop();

  private:
    std::unique_ptr<kv::block_storage> allocate(kv::tier t, const std::string &name, uint64_t n_blocks, uint64_t align,
                                                uint64_t block_bytes);

    distributed::transport &link_;
    pipeline_stage stage_;
    double timeout_s_;
    std::string name_;
    bool tensor_parallel_;
    bool started_ = false, stopped_ = false;
    uint64_t kv_block_bytes_ = 0, device_kv_ = 0;
};

} // namespace strata::engine
