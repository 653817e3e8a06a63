// What the engine is started with: the model, the device, where weights and KV may live, the scheduler's limits
// (filled from the config by core/app/engine_config.cpp). The engine and its workers read them.
#pragma once

#include "engine/scheduler.hpp"
#include "engine/tiered_weights.hpp"
#include "gguf/gguf_file.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace strata::topology {
struct machine;
}
namespace strata::distributed {
class transport;
}

namespace strata::engine {

// The paged KV cache and where its blocks may live ([scheduler] and the KV keys of [memory]).
struct kv_options {
    uint32_t kv_type = STRATA_KV_F32;     // [memory] kv_cache_dtype: the element type of every KV block (strata_kv_type)
    int32_t block_size = 16;
    bool enable_prefix_caching = true;
    double swap_space_gib = 4.0;          // host tier for swapped and spilled blocks (0 = none)
    std::string host_tier = "numa_ram";   // tier plugin holding them
    double nvme_space_gib = 0.0;          // NVMe ("nvme" tier) for swapped blocks when the host tier is full
    std::string prefix_store_dir;         // persistent prefix store ("" = none)
    double prefix_store_gib = 16.0;
};

struct engine_options {
    std::string model_path;
    std::string model_argument;   // the model as the user named it (--model / serve MODEL / [model] path), unchanged
    gguf::open_options file_open; // [memory] mmap, mlock
    std::string quantization = "auto"; // [model] quantization (check_quantization)
    bool check_tensors = false;        // [model] check_tensors (tensor_check.hpp)
    std::string chat_template;         // [model] chat_template: "" (the model's), a built-in name, a file, or Jinja
    std::string chat_template_base_dir; // where a relative chat_template file is looked for besides the working dir
    std::string chat_content_format = "auto"; // [model] chat_template_content_format
    bool cpu_kv_cache = false;         // [memory] cpu_kv_cache (check_cpu_kv_cache)
    int32_t max_model_len = 0;    // 0 = the model's trained context length
    int32_t prefill_chunk = 512;  // most prompt tokens of one sequence per step ([engine] prefill_chunk)
    std::string device = "auto";  // device plugin name, or "auto" for the best scoring one
    const strata_config_view *device_config = nullptr; // the device plugin's table (borrowed), or:
    std::map<std::string, const strata_config_view *> device_configs; // each device plugin's table by name
    offload_options offload;                           // [memory] and the tiers' tables
    scheduler_config scheduler;                        // [scheduler]; its prefill_chunk is set from the field above
    kv_options kv;
    // Pipeline ranks in this process (#16): each runs a contiguous range of the layers (pipeline_split.hpp: balanced
    // by bytes, or pipeline_layer_partition's layers per rank) with its own weights and KV, the residual stream
    // passing rank to rank: [parallel] pipeline_parallel_size and pipeline_layer_partition.
    int32_t pipeline_parallel_size = 1;
    // Tensor-parallel ranks in this process (#16 item 3): each holds its share of every layer's heads and
    // feed-forward columns (and its heads' KV), all computing each step at once, the partial sums joined after the
    // attention output and the feed-forward: [parallel] tensor_parallel_size.
    int32_t tensor_parallel_size = 1;
    std::vector<int32_t> pipeline_layer_partition;
    // Pipeline ranks as processes (#16): when mpirun started this process as one of pipeline_parallel_size, the link
    // to the others (borrowed; rank 0 runs the engine, the others serve_pipeline_rank); null: every rank in this one.
    distributed::transport *pipeline_transport = nullptr;
    // The longest a rank that is a process may take over its part of a step, a message or an answer ([parallel]
    // rank_timeout_s): past it the rank counts as hung or dead, the step's requests fail naming it, every rank exits.
    double rank_timeout_s = 300;
    // The longest rank 0 waits for a rank that is a process to load and place its share of the model at start-up
    // ([parallel] rank_start_timeout_s): past it start-up fails naming the rank, and the job ends.
    double rank_start_timeout_s = 600;
    // This engine is data-parallel replica `data_parallel_rank` of `data_parallel_size` in this process (#16,
    // replica_set.hpp): its device is that share of the hardware (ABI 1.27 device instances: the CPU's threads and
    // cores divided, a GPU each), it plans 1/N of the device's memory, and its tiers are instances of their own.
    int32_t data_parallel_rank = 0;
    int32_t data_parallel_size = 1;
    bool print_plan = true;                            // the memory plan table on stderr at start-up
    // `runtime plan`: start-up runs as for serving (the same device choice with its fallback, the same measurements
    // and hybrid decisions) and stops once the memory plan is made: no weight is copied or read, no KV or workspace
    // is allocated, no request can be submitted. memory_plan() and memory_plan_inputs() are what start-up prints.
    bool plan_only = false;
    // With plan_only: plan for a GPU of this many bytes ([memory] plan_gpu_memory) instead of the device found here.
    std::optional<uint64_t> plan_gpu_memory;
    // The app's start-up discovery (borrowed), for the GPU's nearest NUMA node; null: discovered here when needed.
    const topology::machine *machine = nullptr;
};

} // namespace strata::engine
