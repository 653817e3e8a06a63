// Carries out a memory plan for the weights: creates the tier plugins it names, copies each offloaded tensor into
// its tier, and gives every tensor the address the device computes from — the mmap for resident tensors, the tier's
// own memory for in-place ones, a prefetch-ring slot for streamed ones.
#pragma once

#include "engine/prefetch_ring.hpp"
#include "model_file/model_file.hpp"
#include "planner/memory_planner.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata::engine {

// Everything about weight placement the user can set ([memory] and each tier's own table).
struct offload_options {
    // Whether the pages of an offloaded tensor's source memory may be dropped once it is in its tier (set by the
    // worker, not by the user): empty means every one (this worker alone reads the file). With several ranks in one
    // process another rank may still read the same bytes — dropping anonymous pages (--no-mmap, an HF folder's
    // widened vectors) would zero them — so only memory the rank owns alone is dropped.
    std::function<bool(const gguf::tensor_info &)> may_drop_pages;
    std::optional<uint64_t> device_memory;
    std::optional<double> cpu_offload_gb;
    std::optional<int32_t> cpu_offload_layers;
    std::optional<int32_t> n_gpu_layers; // llama.cpp -ngl: becomes cpu_offload_layers = n_layer - it (plan inputs)
    std::vector<std::string> override_tensor; // llama.cpp -ot "PATTERN=TARGET" items (plan inputs: tensor_overrides)
    int32_t n_cpu_moe = 0; // llama.cpp --n-cpu-moe N: the routed experts of layers 0..N-1 in host RAM (-ot ...=CPU)
    bool cpu_moe = false;  // llama.cpp --cpu-moe: every layer's routed experts in host RAM
    bool enable_cpu_offload = false;
    std::optional<double> gpu_memory_utilization;
    std::optional<uint64_t> limit_gpu_memory;
    std::optional<uint64_t> kv_cache_memory;
    int32_t prefetch_depth = 2;
    bool stream_weights = false;                  // stream even from tiers the CPU could compute on in place
    std::vector<std::string> tiers{"numa_ram"};   // preference order; re-sorted by measured read bandwidth
    std::map<std::string, const strata_config_view *> tier_configs; // each tier's table (borrowed)
    int32_t io_threads = 2;
    bool measure_bandwidth = true;
    bool remeasure = false;
    std::string bandwidth_cache_path; // "" = the default cache file
    // Set by the engine for the KV cache: bytes of host tier a sequence's KV may use in place (planner input), and
    // bytes each tier must hold for KV besides weights (one tier instance serves both).
    uint64_t kv_spill_bytes = 0;
    std::map<std::string, uint64_t> kv_tier_bytes;
    std::optional<bool> device_reads_host; // set by the engine from the device it created
    int32_t rank = 0; // the pipeline rank whose tier instances these are (strata_tier_create_args.rank, ABI 1.26)
    int32_t device_share = 1; // pipeline ranks in this process sharing the device: each plans 1/N of its memory
    std::optional<uint64_t> device_total;  // the device's own memory size (mem_info), for GPU budgets
    // Hybrid placement ([memory] offload_compute, op_offload, op_offload_min_batch), decided by the engine from
    // measurements: layers planned on_cpu are computed by the CPU where they live; when the plan sized a ring for
    // them (on_cpu_ring_bytes), large batches stream them to the device through it.
    std::string offload_compute = "auto";
    std::string offload_device = "cpu"; // the device plugin computing them (by name, like [engine] device)
    bool op_offload = true;
    std::optional<int32_t> op_offload_min_batch;
};

// Builds one tier instance; capacity 0 lets the tier use its own `size` key.
plugins::plugin_ptr<strata_tier> create_tier(const plugins::registry &registry, const strata_host_services *host,
                                             const std::string &name, const strata_config_view *config,
                                             uint64_t capacity, int32_t rank = 0);

class tiered_weights {
  public:
    // The plan's placements name tensors of `file`; `tensor_layers` gives each tensor's layer (for the ring).
    // When the device cannot read host memory (a GPU), resident tensors are uploaded into device memory and
    // streamed layers are staged through host buffers into device slots.
    tiered_weights(const model_file &file, const plugins::registry &registry, const strata_host_services *host,
                   const offload_options &opts, const planner::plan &plan, int32_t n_layer,
                   const strata_device_desc *device_desc, strata_device *device, bool device_reads_host = true);
    ~tiered_weights();
    tiered_weights(const tiered_weights &) = delete;
    tiered_weights &operator=(const tiered_weights &) = delete;

    // The instance of a tier created for weights and KV (kv_tier_bytes), or {nullptr, nullptr} when none.
    std::pair<const strata_tier_desc *, strata_tier *> tier(const std::string &name) const;
    // True when resident tensors were copied into device memory (the model must be re-resolved).
    bool uploaded() const { return resident_ != nullptr; }
    // Address the device should compute from, or nullptr when the tensor stays where the file maps it.
    const void *address_of(const std::string &tensor) const;
    // Host memory the host device computes from for a tensor of a host layer (hybrid placement), or nullptr.
    const void *host_address_of(const std::string &tensor) const;
    prefetch_ring *ring() { return ring_.get(); }
    // The ring that streams the host layers for batches of op_offload_min_batch+ tokens (nullptr when none).
    prefetch_ring *host_layer_ring() { return host_ring_.get(); }
    // Counters of the prefetch ring (empty when nothing is streamed).
    ring_stats stats() const { return ring_ ? ring_->stats() : ring_stats{}; }
    // One line per tier: bytes held, bytes streamed per token, achieved read bandwidth; plus stall time.
    std::string report() const;

  private:
    struct tier_instance {
        plugins::handle<strata_tier_desc> handle;
        plugins::plugin_ptr<strata_tier> tier;
        uint64_t bytes = 0;
    };
    struct tensor_home {
        std::string tier;
        uint64_t region = 0;
    };

    std::map<std::string, tier_instance> tiers_;
    std::unordered_map<std::string, const void *> address_;
    std::unordered_map<std::string, const void *> host_address_;
    std::vector<std::pair<std::string, tensor_home>> regions_;
    const strata_device_desc *device_desc_;
    strata_device *device_;
    void *slots_ = nullptr, *host_slots_ = nullptr;
    void *resident_ = nullptr; // device copy of the resident tensors (devices that cannot read host memory)
    using streamed_tensors = std::map<int32_t, std::vector<std::pair<const planner::placement *, uint64_t>>>;
    void upload_resident(const model_file &file, const planner::plan &plan);
    std::unique_ptr<prefetch_ring> make_ring(const model_file &file, const streamed_tensors &streamed, int32_t n_layer,
                                             const offload_options &opts, bool device_reads_host, void *&slots);
    std::unique_ptr<prefetch_ring> ring_, host_ring_;
};

} // namespace strata::engine
