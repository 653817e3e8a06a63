// Hybrid placement (issue #6, llama.cpp's -ngl): a layer whose weights were offloaded to a host tier the CPU can read
// may be computed there by the CPU instead of being streamed to the device for every step. Which is faster depends
// on the machine, so the choice is made from measurements taken at start-up:
//
//   streaming a layer costs  bytes / h2d_bytes_per_second                    (the link; compute on the GPU is small)
//   the CPU computing it     bytes x (cpu_fixed_s_per_byte + n x cpu_token_s_per_byte)   for a batch of n tokens
//                            + k_copies_per_cpu_layer x link_latency_s  (activations to and from the device's KV)
//
// (a matrix-vector product reads every weight once, so the fixed part is memory bandwidth; each further token adds
// arithmetic). A layer is computed on the CPU when that is cheaper for one token (decode), layer by layer. Batches of
// at least `min_batch` tokens — where the CPU's arithmetic overtakes the link — stream those layers to the device
// instead (llama.cpp's "op offload"); the smallest such batch over the CPU layers is the threshold.
// Pure logic: the measurements come in, the decision goes out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::engine {

enum class offload_compute { auto_choose, device, cpu };
// "auto", "device" or "cpu"; throws strata::error naming the key and the accepted values otherwise.
offload_compute parse_offload_compute(const std::string &text);

struct hybrid_layer {
    int32_t layer = 0;
    uint64_t bytes = 0;     // the layer's weight bytes
    bool host_readable = false; // every tensor of the layer is in a tier the CPU can compute on in place
};

struct hybrid_inputs {
    offload_compute mode = offload_compute::auto_choose;
    std::vector<hybrid_layer> streamed; // layers the plan streams to the device, in layer order
    double h2d_bytes_per_second = 0;    // measured; 0 = unknown
    double link_latency_s = 0;          // one small synchronous copy to or from the device (measured)
    double cpu_fixed_s_per_byte = 0;    // measured CPU cost of one token, less the per-token part; 0 = unknown
    double cpu_token_s_per_byte = 0;    // measured CPU cost of each further token of a batch
    bool op_offload = true;             // large batches may stream host layers to the device (--no-op-offload: no)
    std::optional<int32_t> min_batch;   // user's threshold (--op-offload-min-batch)
};

struct hybrid_decision {
    std::vector<int32_t> host_layers; // layers the CPU computes (ascending)
    int32_t min_batch = 0;            // batches of >= min_batch tokens stream host_layers instead; 0 = never
    std::vector<std::string> notes;   // why, for the log and the plan
};

// llama.cpp's default batch size from which host-resident weights are offloaded to the GPU for one op.
constexpr int32_t k_default_op_offload_min_batch = 32;
// Synchronous copies per CPU-computed layer: Q, K and V to the device, the attention output back.
constexpr int32_t k_copies_per_cpu_layer = 4;

hybrid_decision decide_hybrid(const hybrid_inputs &in);

} // namespace strata::engine
