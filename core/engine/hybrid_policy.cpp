#include "engine/hybrid_policy.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace strata::engine {

offload_compute parse_offload_compute(const std::string &text) {
    if (text == "auto") return offload_compute::auto_choose;
    if (text == "device") return offload_compute::device;
    if (text == "cpu") return offload_compute::cpu;
    fail("[memory] offload_compute = '{}' is not one of auto, device, cpu (--offload-compute): 'device' streams "
         "offloaded layers to the device, 'cpu' computes them where they live, 'auto' measures which is faster",
         text);
}

namespace {

bool measured(const hybrid_inputs &in) {
    return in.h2d_bytes_per_second > 0 && in.cpu_fixed_s_per_byte + in.cpu_token_s_per_byte > 0;
}

// "layer 3" or "layers 2-4, 7".
std::string layer_list(const std::vector<int32_t> &layers) {
    std::string out = layers.size() == 1 ? "layer " : "layers ";
    for (size_t i = 0; i < layers.size();) {
        size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
        if (i > 0) out += ", ";
        out += i == j ? fmt::format("{}", layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
        i = j + 1;
    }
    return out;
}

} // namespace

hybrid_decision decide_hybrid(const hybrid_inputs &in) {
    hybrid_decision d;
    if (in.mode == offload_compute::device || in.streamed.empty()) return d;
    const bool known = measured(in);
    // Per byte: streaming and one token on the CPU. Both scale with the layer's bytes, so the choice is the same for
    // every layer in a host-readable tier; layers elsewhere (NVMe) always stream.
    const double stream_s = known ? 1.0 / in.h2d_bytes_per_second : 0;
    const double cpu1_s = in.cpu_fixed_s_per_byte + in.cpu_token_s_per_byte;
    bool to_cpu = in.mode == offload_compute::cpu;
    if (in.mode == offload_compute::auto_choose) {
        if (!known) {
            d.notes.push_back("offload_compute = auto: link or CPU speed unknown, offloaded layers stream to the device");
            return d;
        }
        to_cpu = cpu1_s < stream_s;
        d.notes.push_back(fmt::format(
            "offload_compute = auto: one token over an offloaded layer costs {:.2f} ms/GB on the CPU vs {:.2f} ms/GB "
            "streamed at {:.1f} GB/s: {}",
            cpu1_s * 1e12, stream_s * 1e12, in.h2d_bytes_per_second / 1e9,
            to_cpu ? "computing them on the CPU" : "streaming them"));
    }
    if (!to_cpu) return d;
    std::vector<int32_t> elsewhere;
    for (const hybrid_layer &l : in.streamed) {
        if (l.host_readable) d.host_layers.push_back(l.layer);
        else elsewhere.push_back(l.layer);
    }
    if (!elsewhere.empty())
        d.notes.push_back(fmt::format("{} not wholly in a tier the CPU can compute on in place (NVMe): streamed",
                                      layer_list(elsewhere)));
    if (d.host_layers.empty()) return d;
    if (!in.op_offload) {
        d.min_batch = 0;
    } else if (in.min_batch) {
        d.min_batch = *in.min_batch;
    } else if (!known || in.cpu_token_s_per_byte <= 0) {
        d.min_batch = k_default_op_offload_min_batch;
    } else {
        // Smallest n with fixed + n x token >= stream: from there the CPU's arithmetic costs more than the link.
        const double n = std::ceil((stream_s - in.cpu_fixed_s_per_byte) / in.cpu_token_s_per_byte);
        d.min_batch = static_cast<int32_t>(std::clamp(n, 2.0, 65536.0));
    }
    d.notes.push_back(fmt::format("{} computed on the CPU where the weights live{}", layer_list(d.host_layers),
                                  d.min_batch > 0 ? fmt::format("; batches of {}+ tokens stream them to the device",
                                                                d.min_batch)
                                                  : std::string(" for every batch (op_offload off)")));
    return d;
}

} // namespace strata::engine
