// A worker (vLLM v1's Worker with its model runner): owns one device, the model created on it, where each of the
// model's weights lives (device, tiers in place, streamed through the prefetch ring, or computed by the CPU: hybrid
// placement), the memory of the KV blocks it attends, and the buffers of a step; it runs a step's forward pass. It
// decides nothing about requests: the engine's scheduler decides a step and the executor hands it here.
//
// Start-up runs in phases the engine calls in order, as vLLM's init_device / load_model / determine memory /
// initialize_kv_cache: init_device, load_model, place_weights (the memory plan), allocate_step_memory, then the KV
// pools (allocate_device_kv, allocate_tier_kv) and bind_kv. The destructor releases whatever the phases made, so a
// start-up that fails part way leaves nothing behind.
#pragma once

#include "engine/model_source.hpp"
#include "engine/pipeline_rank.hpp"
#include "engine/step_input.hpp"
#include "engine/tiered_weights.hpp"
#include "kv/block_storage.hpp"
#include "kv/kv_cache.hpp"
#include "model_file/open_model_file.hpp"
#include "planner/memory_planner.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace strata::engine {

class config_override_view;
struct engine_options;
struct model_shape;

class worker final : public pipeline_rank {
  public:
    // Borrows the registry, the host services, the options and the model file for its whole life.
    worker(const plugins::registry &registry, const strata_host_services *host, const engine_options &opts,
           const model_file &file, plugins::handle<strata_model_arch_desc> arch);
    ~worker();
    worker(const worker &) = delete;
    worker &operator=(const worker &) = delete;

    // Chooses and starts the device ([engine] device: by name, or "auto": the best scoring one that starts) for
    // pipeline stage `pipeline_rank` of `n_pipeline_ranks` (ABI 1.28: a device with memory of its own gives each stage
    // a device of its own, cuda a GPU each; the split of the layers comes later, set_stage). `device` names the device
    // plugin instead of [engine] device (the later ranks take rank 0's choice by name: no fallback of their own).
    void init_device(int32_t pipeline_rank = 0, int32_t n_pipeline_ranks = 1, const std::string &device = {});
    // Tensor-parallel rank `rank` of `size` (#16 item 3; before init_device): its file is that rank's part of the
    // weights (tensor_parallel_shard), its model is created as the part (ABI 1.29), its device is that share of the
    // hardware (a device instance of its own: the CPU's threads divided, since the ranks compute at the same time), and
    // each step's forward joins the ranks' partial sums through `all_reduce` (tensor_parallel_group).
    struct tensor_parallel_link {
        int32_t rank = 0, size = 1;
        int32_t n_vocab = 0; // the whole model's vocabulary (its part's embedding may hold a piece, ABI 1.30)
        int32_t (*all_reduce)(void *user, float *data, int64_t n, strata_status *st) = nullptr;
        void *user = nullptr;
    };
    void set_tensor_parallel(const tensor_parallel_link &link) { tp_ = link; }
    const tensor_parallel_link &tensor_parallel() const { return tp_; }
    // Creates the model on the file and asks the device, at load, for every op, shape and KV type it will need.
    void load_model();
    // A pipeline rank: the layers this worker runs and keeps the KV of (after load_model; the model must run as
    // stages). Without it the worker runs every layer.
    void set_stage(const pipeline_stage &stage);
    const pipeline_stage &stage() const override { return stage_; }
    // The model's weight bytes by slot (plan_inputs.hpp, layer_slot_bytes), for splitting the layers among ranks.
    std::vector<uint64_t> layer_slot_bytes() const;
    bool last_stage() const { return stage_.layer_end == hp_.n_layer; }
    // Plans every weight's place (printed unless quiet) and, unless planning only, moves what leaves the device to
    // its tier and re-creates the model on the new addresses. `offload` is [memory] with the KV tiers' bytes added.
    void place_weights(offload_options offload, int32_t max_model_len);
    // The step's workspace and logits buffer: up to max_num_batched_tokens tokens and max_num_seqs logits rows.
    void allocate_step_memory();
    // The bytes of one KV block of this worker's layers (the whole model's block for a worker of every layer).
    uint64_t kv_block_bytes() const override;
    uint64_t device_kv_budget() const override { return plan_.device_kv; }
    // The KV pools' memory: n_blocks of block_bytes (kv_block_bytes()) in device memory, reserved (touched) now, or
    // in a region of tier `name`, each block at a stride of block_bytes rounded up to `align`. The worker finds a
    // step's blocks in these storages (block_ref: pool `t`, index); whoever holds the storages keeps them alive.
    std::unique_ptr<kv::block_storage> allocate_device_kv(uint64_t n_blocks, uint64_t block_bytes) override;
    std::unique_ptr<kv::block_storage> allocate_tier_kv(kv::tier t, const std::string &name, uint64_t n_blocks,
                                                        uint64_t align, uint64_t block_bytes) override;
    // The step buffers for steps of up to max_step_blocks block references (step_block_reserve: no allocation per step).
    void bind_kv(size_t max_step_blocks);

    // Runs one step's forward pass over this worker's layers and returns its logits rows (host memory, valid until
    // the next step; none before the last pipeline stage). A later pipeline stage takes the residual stream from
    // hidden_in, a stage before the last leaves it in hidden_out (host memory, n_tokens x n_embd floats each).
    step_output execute_model(const step_input &step, const float *hidden_in = nullptr, float *hidden_out = nullptr);
    // Releases everything, in reverse order of creation (the KV cache holding its pools is gone already); a clean
    // shutdown logs the offload report first.
    void release(bool clean_shutdown);

    const strata_model_hparams &hparams() const { return hp_; }
    bool device_reads_host() const { return device_reads_host_; }
    // Whether this pipeline stage has a device of its own (a device with memory of its own started for its stage,
    // ABI 1.28), so that it plans the whole device; stages on the CPU, or an older device, share one.
    bool has_device_per_stage() const;
    const std::string &device_name() const { return device_name_; }
    int32_t device_threads() const;
    const planner::plan &memory_plan() const { return plan_; }
    const planner::inputs &memory_plan_inputs() const { return plan_inputs_; }
    std::string offload_report() const { return weights_ ? weights_->report() : std::string(); }
    ring_stats offload_stats() const { return weights_ ? weights_->stats() : ring_stats{}; }
    struct hybrid_report {
        std::vector<int32_t> host_layers;
        std::vector<int32_t> expert_layers; // layers whose routed experts the CPU computes (--n-cpu-moe)
        int32_t min_batch = 0;
        uint64_t cpu_steps = 0, streamed_steps = 0;
    };
    hybrid_report hybrid() const;

  private:
    void bind_pinned_staging();
    void plan_hybrid(planner::inputs in);
    void plan_cpu_experts(planner::inputs &in);
    void plan_for_gpu(const model_shape &shape);
    void prepare_host_compute();
    bool experts_on_cpu_planned() const;
    bool can_host_experts() const;
    void check_device_computes_experts() const;
    bool start_host_device(bool required);
    void stop_host_device();
    void measure_link();
    void measure_link_latency();
    std::pair<double, double> measure_cpu_layer(int32_t layer);
    void prefault_weights();
    void *allocate(uint64_t bytes, const char *what);
    void forward(const step_input &step, const float *hidden_in, float *hidden_out);
    void fetch_logits(int32_t n_logits);
    void copy_to_device(void *dst, const void *src, uint64_t bytes);
    void copy_from_device(void *dst, const void *src, uint64_t bytes);

    const plugins::registry &registry_;
    const strata_host_services *host_;
    const engine_options &opts_;
    offload_options offload_; // place_weights' copy, with the pinned tiers bound near the GPU
    const model_file &file_;
    plugins::handle<strata_model_arch_desc> arch_;
    std::unique_ptr<model_source> source_;
    plugins::handle<strata_device_desc> device_desc_;
    strata_device *device_ = nullptr;
    strata_model *model_ = nullptr;
    strata_model_hparams hp_{};
    planner::plan plan_;
    planner::inputs plan_inputs_;
    std::unique_ptr<tiered_weights> weights_;
    std::string device_name_;
    int32_t max_model_len_ = 0;
    bool device_reads_host_ = false;
    // [pinned_ram] with numa_node set to the GPU's nearest node (offload_.tier_configs points at it).
    std::vector<std::unique_ptr<config_override_view>> staging_configs_; // tiers bound near the GPU

    // Hybrid placement (worker_hybrid.cpp): the CPU computes layer_on_host_ layers where they live, except in steps
    // of hybrid_min_batch_+ tokens (when > 0), which stream them to the device.
    plugins::handle<strata_device_desc> host_desc_;
    strata_device *host_device_ = nullptr;
    std::vector<uint8_t> layer_on_host_;
    std::vector<uint8_t> experts_on_host_; // layers whose routed experts the host device computes (empty: none)
    int32_t hybrid_min_batch_ = 0;
    int32_t host_workspace_tokens_ = 0;    // the largest step the host device computes layers of
    std::vector<unsigned char> host_workspace_;
    double link_h2d_ = 0, link_d2h_ = 0; // measured link to a device with its own memory (bytes/s, 0 = unknown)
    double link_latency_ = 0;            // one small synchronous copy (s), measured at each start
    std::atomic<uint64_t> hybrid_steps_{0}, hybrid_streamed_steps_{0};

    pipeline_stage stage_;
    tensor_parallel_link tp_;
    int32_t device_stage_ = 0, device_stages_ = 1; // the pipeline stage the device was started for (init_device)

    // Buffers allocated once; nothing is allocated per token or per step.
    kv::block_storage *kv_storage_[kv::n_tiers] = {}; // the KV pools' memory, by pool (allocate_*_kv)
    std::vector<void *> device_allocations_;
    std::vector<void *> registered_; // host memory page-locked for the device (host_register)
    void *workspace_ = nullptr;
    uint64_t workspace_size_ = 0;
    float *logits_ = nullptr;          // device memory: max_num_seqs rows of n_vocab
    std::vector<float> logits_host_;   // host mirror when the device has its own memory
    std::vector<void *> block_base_;   // the step's block addresses
    float *hidden_in_ = nullptr, *hidden_out_ = nullptr; // a pipeline stage's residual stream in device memory
};

} // namespace strata::engine
