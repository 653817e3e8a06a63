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
    std::vector<int32_t> elsewhere;
    std::vector<const hybrid_layer *> readable;
    for (const hybrid_layer &l : in.streamed) {
        if (l.host_readable) readable.push_back(&l);
        else elsewhere.push_back(l.layer);
    }
    if (!elsewhere.empty())
        d.notes.push_back(fmt::format("{} not wholly in a tier the CPU can compute on in place (NVMe): streamed",
                                      layer_list(elsewhere)));
    if (readable.empty()) return d;
    const bool known = measured(in);
    const double copies_s = k_copies_per_cpu_layer * in.link_latency_s;
    auto cpu_s = [&](const hybrid_layer &l, double n) {
        return static_cast<double>(l.bytes) * (in.cpu_fixed_s_per_byte + n * in.cpu_token_s_per_byte) + copies_s;
    };
    auto stream_s = [&](const hybrid_layer &l) { return static_cast<double>(l.bytes) / in.h2d_bytes_per_second; };
    std::vector<const hybrid_layer *> chosen;
    if (in.mode == offload_compute::cpu) {
        chosen = readable;
    } else if (!known) {
        d.notes.push_back("offload_compute = auto: link or CPU speed unknown, offloaded layers stream to the device");
        return d;
    } else {
        for (const hybrid_layer *l : readable)
            if (cpu_s(*l, 1) < stream_s(*l)) chosen.push_back(l);
        const hybrid_layer &first = *readable.front();
        d.notes.push_back(fmt::format(
            "offload_compute = auto: one token over layer {} ({:.1f} MiB) costs {:.3f} ms on the CPU (with {} copies of "
            "{:.0f} us) vs {:.3f} ms streamed at {:.1f} GB/s: {}",
            first.layer, static_cast<double>(first.bytes) / 1048576.0, cpu_s(first, 1) * 1e3, k_copies_per_cpu_layer,
            in.link_latency_s * 1e6, stream_s(first) * 1e3, in.h2d_bytes_per_second / 1e9,
            chosen.empty() ? "streaming them" : "computing them on the CPU"));
    }
    if (chosen.empty()) return d;
    for (const hybrid_layer *l : chosen) d.host_layers.push_back(l->layer);
    if (!in.op_offload) {
        d.min_batch = 0;
    } else if (in.min_batch) {
        d.min_batch = *in.min_batch;
    } else if (!known || in.cpu_token_s_per_byte <= 0) {
        d.min_batch = k_default_op_offload_min_batch;
    } else {
        // Per layer, the smallest n with cpu(n) >= stream: from there the CPU's arithmetic costs more than the link.
        // The smallest over the CPU layers, so no layer is computed on the CPU where streaming is cheaper.
        double best = 65536.0;
        for (const hybrid_layer *l : chosen) {
            const double per_token = static_cast<double>(l->bytes) * in.cpu_token_s_per_byte;
            const double n = std::ceil((stream_s(*l) - cpu_s(*l, 0)) / per_token - 1e-9); // 15.0000001 is 15
            best = std::min(best, n);
        }
        d.min_batch = static_cast<int32_t>(std::clamp(best, 2.0, 65536.0));
    }
    d.notes.push_back(fmt::format("{} computed on the CPU where the weights live{}", layer_list(d.host_layers),
                                  d.min_batch > 0 ? fmt::format("; batches of {}+ tokens stream them to the device",
                                                                d.min_batch)
                                                  : std::string(" for every batch (op_offload off)")));
    return d;
}

} // namespace strata::engine
