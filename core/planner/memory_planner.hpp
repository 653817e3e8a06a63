// The memory planner: for every weight tensor of a model, where it lives and how the device reaches it, and how much
// KV cache fits. vLLM's knobs (gpu_memory_utilization, cpu_offload_gb, kv_cache_memory, max_model_len) and
// llama.cpp's (-ngl, here cpu_offload_layers) are inputs to this one planner, not separate mechanisms.
//
// Rules (pure logic: no I/O, no allocation of device memory; make_plan is deterministic):
//
// Device budget
//   cuda (and any device kind other than "cpu"): min(gpu_memory_utilization x device_total, limit_gpu_memory);
//         utilization defaults to 0.9.
//   cpu:  device_memory; default = device_total (all RAM available), so nothing is offloaded unless asked.
//   Knobs of the other device kind are ignored with a note (one config file may serve both).
//
// Which layers leave the device (like llama.cpp -ngl N, which keeps the FIRST N layers on the device)
//   cpu_offload_layers = k   offloads the last k layers.
//   cpu_offload_gb = G       offloads whole layers from the end until at least G GiB are offloaded (rounds up to
//                            whole layers; all layers when G exceeds the layer weights).
//   both set                 allowed only when they name the same number of layers.
//   enable_cpu_offload       offloads the fewest layers (from the end) such that resident weights + KV for
//                            max_model_len x max_num_seqs (or kv_cache_memory) + activations + overhead + staging
//                            ring fit the device budget and the tiers hold the rest. Only when even offloading every
//                            layer does not fit do the embedding and output tensors (layer -1 and n_layer) leave
//                            too (said in the notes). Explicit cpu_offload_layers/_gb take precedence over it.
//   Embedding and output tensors otherwise stay on the device.
//
// Tensors placed by name (llama.cpp's -ot REGEX=TARGET, [memory] override_tensor)
//   tensor_overrides, in order: the first pattern found in a tensor's name (ECMAScript regex search, as llama.cpp
//   does) fixes its home: "device" keeps it resident whatever its layer, a tier name puts it in that tier whatever
//   the layer choice. A tensor no pattern matches follows the layer rules. A target that is neither "device" nor a
//   configured tier, or a bad pattern, is an error; a pattern that matches nothing is a note; an embedding or output
//   tensor sent to a tier it would have to be streamed from is a problem (only layers are streamed). A layer with any
//   tensor on the device is never computed on the CPU (hybrid): the CPU cannot read device memory.
//
// Where an offloaded tensor lives
//   The first tier in `tiers` (preference order) with room left for the whole tensor, filling in layer order and
//   spilling to the next tier. No tier with room -> problem "weights need N more bytes: add a tier or raise
//   <tier>.size".
//
// How the device reaches it
//   home is the device                                 -> resident (copied into device memory at load)
//   tier addressable, device reads host memory (the cpu device unless device_reads_host says otherwise),
//   !prefer_streaming                                  -> in_place (the CPU computes on the tier's bytes)
//   otherwise                                          -> streamed (copied into the staging ring before its layer
//                                                         runs; on a GPU the engine may then compute a RAM tier's
//                                                         layers on the CPU instead: on_cpu, hybrid_policy.hpp)
//   staging_ring_bytes = (prefetch_depth + 1) x the largest per-layer streamed bytes (0 if nothing is streamed).
//   on_cpu_layers (hybrid, set by the engine on a second pass): a streamed layer listed there with every tensor in an
//   addressable tier is on_cpu; its bytes size on_cpu_ring_bytes (same rule) when stream_on_cpu, else nothing.
//   experts_on_cpu (llama.cpp's --n-cpu-moe / -ot exps=CPU on a device that cannot read host memory): a routed
//   expert tensor (tensor_req::routed_expert) that would be streamed from an addressable tier is cpu_experts instead:
//   the CPU computes the layer's routed experts where they live while the rest of the layer runs on the device, and
//   it takes no room in any ring. A layer that is on_cpu as a whole stays on_cpu.
//
// KV cache
//   kv_bytes_per_token = 2 (K and V) x n_layer x the bytes of a row of n_head_kv x head_dim values of kv_type
//                        (strata/kv_layout.hpp: 4 per value for float32, 2 for 16-bit, 1 for FP8, 34 per 32 for q8_0).
//   device_kv = kv_cache_memory when set (a problem if it exceeds what is left; device_kv is then what is left),
//               else everything left after weights, activations, overhead and staging ring (on the cpu device, where
//               that is all of RAM, at most max(1 GiB, 4 x max_model_len tokens)).
//   kv_capacity_tokens = device_kv / kv_bytes_per_token.
//   max_model_len 0 -> model_context_length.
//   fits needs kv_capacity_tokens + kv_spill_bytes / kv_bytes_per_token >= max_model_len x max_num_seqs. Otherwise a problem names the largest
//   max_model_len that fits (kv_capacity_tokens / max_num_seqs) and the knobs to change.
//   max_fitting_model_len = min(kv_capacity_tokens / max_num_seqs, max(model_context_length, max_model_len));
//   max_fitting_concurrency = kv_capacity_tokens / max_model_len (sequences of the full length).
//
// Errors (strata::error naming the key) for invalid knobs: out-of-range counts and fractions, conflicting
// cpu_offload_gb/cpu_offload_layers, a budget above the machine's RAM or the GPU's memory, a tier's size above the
// limit the tier itself reports (RLIMIT_MEMLOCK for locked RAM, a NUMA node's memory,
// free disk space; no tier is known by name here). Physical limits of 0 mean "unknown"
// and are not checked. Things that are valid but do not fit are problems (fits == false), not errors.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::planner {

// on_cpu is never chosen by make_plan: the engine turns streamed layers into on_cpu when hybrid placement computes
// them on the CPU where they live (measured at start-up; engine/hybrid_policy.hpp).
// cpu_experts: a layer's routed experts computed by the CPU where they live, the rest of the layer on the device (the
// engine sets it through inputs::experts_on_cpu). Both CPU modes read "cpu".
enum class mode { resident, streamed, in_place, on_cpu, cpu_experts };
std::string_view to_string(mode m);

struct tensor_req {
    std::string name;
    int32_t layer = 0; // -1 = before the layers (embedding), n_layer = after them (output norm, lm head)
    uint64_t bytes = 0;
    bool routed_expert = false; // a mixture-of-experts layer's expert weights (not its router or shared expert)
};

struct tier_info {
    std::string name;             // plugin name: "pinned_ram", "numa_ram", "nvme"; also the config table (<name>.size)
    uint64_t capacity = 0;        // budget for this tier
    double read_bandwidth = 0;    // bytes/s measured (0 = unknown)
    bool addressable = false;     // the CPU can compute in place on it (map() != NULL)
    uint64_t limit = 0;           // the most it can hold here, from the tier itself (capacity_limit); 0 = unknown
    std::string limit_reason;     // what sets that limit, for messages ("the locked-memory limit RLIMIT_MEMLOCK")
};

struct inputs {
    // model
    int32_t n_layer = 0, n_head_kv = 0, head_dim = 0;
    uint32_t kv_type = STRATA_KV_F32; // strata_kv_type
    int32_t max_model_len = 0; // 0 = model_context_length
    int32_t max_num_seqs = 1;
    int32_t model_context_length = 0;
    std::vector<tensor_req> tensors;
    uint64_t activation_bytes = 0; // forward workspace
    uint64_t overhead_bytes = 64ull << 20;
    // device
    std::string device_kind;                      // "cpu" or "cuda"
    uint64_t device_total = 0;                    // CPU: physical RAM available; GPU: cudaMemGetInfo total
    std::optional<double> gpu_memory_utilization; // fraction of device_total (GPU)
    std::optional<uint64_t> limit_gpu_memory;     // absolute (GPU)
    std::optional<uint64_t> device_memory;        // CPU device: RAM compute may keep resident
    // knobs
    std::optional<double> cpu_offload_gb;
    std::optional<int32_t> cpu_offload_layers;
    bool enable_cpu_offload = false;
    std::optional<uint64_t> kv_cache_memory;
    std::vector<std::pair<std::string, std::string>> tensor_overrides; // (pattern, "device" or a tier name)
    // KV a sequence may keep in a host tier the device attends in place (swap_space on the CPU device): it counts
    // toward fitting max_model_len, so a context larger than the device KV still fits.
    uint64_t kv_spill_bytes = 0;
    // Whether the device computes on host memory in place (unset: the cpu device does, others do not).
    std::optional<bool> device_reads_host;
    int32_t prefetch_depth = 2;
    bool prefer_streaming = false; // stream even when in_place is possible
    // Hybrid placement, decided by the engine from measurements (engine/hybrid_policy.hpp) on a first plan: streamed
    // layers listed here whose every tensor is in an addressable tier become on_cpu; with stream_on_cpu they get a
    // staging ring of their own (for large batches), sized like the other one.
    std::vector<int32_t> on_cpu_layers;
    bool stream_on_cpu = true;
    // Routed experts streamed from an addressable tier are computed there by the CPU instead (cpu_experts).
    bool experts_on_cpu = false;
    std::vector<tier_info> tiers;  // configured tiers in preference order
    // physical limits to check budgets against (0 = unknown)
    uint64_t physical_ram = 0;
};

struct placement {
    std::string tensor;
    int32_t layer = 0;
    uint64_t bytes = 0;
    std::string home; // "device", a tier name, or "" when no tier had room (see plan::problems)
    mode how = mode::resident;
    bool routed_expert = false; // from tensor_req: the plan table gives experts rows of their own
};

struct plan {
    std::vector<placement> placements; // in the order of inputs::tensors
    std::string device_kind;
    uint64_t device_budget = 0, device_weights = 0, device_kv = 0, device_activation = 0, device_overhead = 0;
    uint64_t staging_ring_bytes = 0;           // (prefetch_depth + 1) x largest streamed layer; 0 if nothing streamed
    uint64_t on_cpu_ring_bytes = 0;            // the same for on_cpu layers when stream_on_cpu (else 0)
    std::map<std::string, uint64_t> tier_used; // bytes of weights per configured tier (0 included)
    uint64_t kv_bytes_per_token = 0;
    int64_t kv_capacity_tokens = 0; // KV tokens the device budget holds
    int32_t max_model_len = 0;      // effective
    int32_t max_num_seqs = 1;
    int32_t max_fitting_model_len = 0;
    int32_t max_fitting_concurrency = 0;
    uint64_t offloaded_bytes = 0; // weights not on the device ("Using CPU offload with N GiB")
    int32_t offloaded_layers = 0; // layers (0..n_layer-1) with any tensor off the device
    bool embedding_output_offloaded = false;
    bool fits = false;
    std::vector<std::string> problems; // when !fits: what does not fit and the knob to change
    std::vector<std::string> notes;
};

// 2 x n_layer x the bytes of one row of n_kv_heads x head_dim values of kv_type. Throws strata::error on
// non-positive inputs, an unknown type, heads the type cannot hold in whole groups, or overflow.
uint64_t kv_bytes_per_token(int32_t n_layer, int32_t n_kv_heads, int32_t head_dim, uint32_t kv_type);

// Throws strata::error for invalid knobs (see the rules above); everything else is reported in the plan.
plan make_plan(const inputs &in);

} // namespace strata::planner
