#include "planner/memory_planner.hpp"

#include "common/error.hpp"

#include <strata/kv_layout.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <set>

namespace strata::planner {

namespace {

constexpr uint64_t kib = 1024;
constexpr uint64_t mib = kib * 1024;
constexpr uint64_t gib = mib * 1024;

// Sizes in messages: one decimal is enough to act on ("512.0 MiB", "23.4 GiB").
std::string human(uint64_t bytes) {
    if (bytes < kib) return fmt::format("{} B", bytes);
    if (bytes < mib) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / kib);
    if (bytes < gib) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / mib);
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / gib);
}

// Budgets near UINT64_MAX (unlimited) must not wrap around.
uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t mul_sat(uint64_t a, uint64_t b) {
    uint64_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
int32_t clamp_i32(int64_t v) {
    return static_cast<int32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<int32_t>::max()));
}

bool is_cpu(const inputs &in) { return in.device_kind == "cpu"; }
// Tiers whose bytes come out of the machine's RAM (and so are bounded by it).

// What moves weights off the device, for messages: a mixture's experts first (--n-cpu-moe), as llama.cpp users do.
std::string offload_knobs(const inputs &in) {
    const bool experts = std::any_of(in.tensors.begin(), in.tensors.end(), [](const tensor_req &t) { return t.routed_expert; });
    return experts ? "keep experts in host RAM with --n-cpu-moe N / --cpu-moe, or offload layers with "
                     "--cpu-offload-layers"
                   : "offload layers with --cpu-offload-layers";
}

std::string budget_knobs(const inputs &in) {
    return is_cpu(in) ? "--device-memory" : "--gpu-memory-utilization/--limit-gpu-memory";
}

void validate_model(const inputs &in) {
    if (in.n_layer < 1) fail("the model has n_layer {}; a model needs at least one layer", in.n_layer);
    (void)kv_bytes_per_token(in.n_layer, in.n_head_kv, in.head_dim, in.kv_type);
    if (in.max_model_len < 0)
        fail("max_model_len {} is negative: use 0 for the model's trained context or a positive token count",
             in.max_model_len);
    if (in.max_model_len == 0 && in.model_context_length <= 0)
        fail("max_model_len is 0 (the model's trained context) but the model does not say its context length: set "
             "--max-model-len");
    if (in.max_num_seqs < 1) fail("max_num_seqs {} must be at least 1 (--max-num-seqs)", in.max_num_seqs);
    if (in.prefetch_depth < 0 || in.prefetch_depth > in.n_layer)
        fail("prefetch_depth {} must be between 0 and the model's {} layers (--prefetch-depth)", in.prefetch_depth,
             in.n_layer);
    if (in.tensors.empty()) fail("the model lists no weight tensors to place");
    for (const auto &t : in.tensors)
        if (t.layer < -1 || t.layer > in.n_layer)
            fail("tensor '{}' has layer {}, outside -1 (embedding) .. {} (output) for a {}-layer model", t.name,
                 t.layer, in.n_layer, in.n_layer);
}

void validate_device(const inputs &in) {
    if (in.device_kind.empty()) fail("the planner needs a device kind (cpu or cuda)");
    if (in.gpu_memory_utilization) {
        const double u = *in.gpu_memory_utilization;
        if (!std::isfinite(u) || u <= 0.0 || u > 1.0)
            fail("gpu_memory_utilization {} must be in (0, 1], a fraction of the GPU's memory "
                 "(--gpu-memory-utilization 0.9)",
                 u);
    }
    if (in.limit_gpu_memory && *in.limit_gpu_memory == 0)
        fail("limit_gpu_memory is 0: give a size such as 8GiB (--limit-gpu-memory) or leave it unset");
    if (in.device_memory && *in.device_memory == 0)
        fail("device_memory is 0: give a size such as 8GiB (--device-memory) or leave it unset to use all RAM");
    if (is_cpu(in)) {
        const uint64_t ram = in.physical_ram ? in.physical_ram : in.device_total;
        if (in.device_memory && ram && *in.device_memory > ram)
            fail("device_memory {} exceeds the machine's {} of RAM: lower --device-memory or leave it unset to use "
                 "all RAM",
                 human(*in.device_memory), human(ram));
        if (!in.device_memory && ram == 0)
            fail("the machine's RAM is unknown: set device_memory (--device-memory) for the CPU device");
    } else {
        if (in.device_total == 0) fail("the {} device reports no memory; cannot plan without its size", in.device_kind);
        if (in.limit_gpu_memory && *in.limit_gpu_memory > in.device_total)
            fail("limit_gpu_memory {} exceeds the {} of memory the {} device has: lower --limit-gpu-memory",
                 human(*in.limit_gpu_memory), human(in.device_total), in.device_kind);
    }
}

void validate_tiers(const inputs &in) {
    std::set<std::string> seen;
    for (const auto &t : in.tiers) {
        if (t.name.empty()) fail("a tier has no name; tiers are named after their plugin (pinned_ram, numa_ram, nvme)");
        if (!seen.insert(t.name).second) fail("tier '{}' is configured twice; list each tier once", t.name);
        if (t.limit != 0 && t.capacity > t.limit) {
            fail("{}.size {} exceeds what the {} tier can hold here: {}, set by {}; lower {}.size", t.name,
                 human(t.capacity), t.name, human(t.limit), t.limit_reason.empty() ? "the tier" : t.limit_reason,
                 t.name);
        }
        if (!std::isfinite(t.read_bandwidth) || t.read_bandwidth < 0)
            fail("tier '{}' has read bandwidth {}; it must be a non-negative number of bytes/s (0 = unknown)", t.name,
                 t.read_bandwidth);
    }
}

void validate_knobs(const inputs &in) {
    if (in.cpu_offload_layers && (*in.cpu_offload_layers < 0 || *in.cpu_offload_layers > in.n_layer))
        fail("cpu_offload_layers {} must be between 0 and the model's {} layers (--cpu-offload-layers)",
             *in.cpu_offload_layers, in.n_layer);
    if (in.cpu_offload_gb && (!std::isfinite(*in.cpu_offload_gb) || *in.cpu_offload_gb < 0))
        fail("cpu_offload_gb {} must be a non-negative number of GiB (--cpu-offload-gb)", *in.cpu_offload_gb);
}

uint64_t device_budget(const inputs &in, std::vector<std::string> &notes) {
    if (is_cpu(in)) {
        if (in.gpu_memory_utilization || in.limit_gpu_memory)
            notes.emplace_back("gpu_memory_utilization/limit_gpu_memory apply to GPUs; ignored for the CPU device "
                               "(use device_memory)");
        if (in.device_memory) return *in.device_memory;
        return in.device_total ? in.device_total : in.physical_ram;
    }
    if (in.device_memory)
        notes.emplace_back(fmt::format("device_memory applies to the CPU device; ignored for {} (use "
                                       "gpu_memory_utilization or limit_gpu_memory)",
                                       in.device_kind));
    const double fraction = in.gpu_memory_utilization.value_or(0.9);
    uint64_t budget = static_cast<uint64_t>(fraction * static_cast<double>(in.device_total));
    if (in.limit_gpu_memory) budget = std::min(budget, *in.limit_gpu_memory);
    return budget;
}

// Bytes of each transformer layer 0..n_layer-1.
std::vector<uint64_t> layer_bytes(const inputs &in) {
    std::vector<uint64_t> bytes(static_cast<size_t>(in.n_layer), 0);
    for (const auto &t : in.tensors)
        if (t.layer >= 0 && t.layer < in.n_layer)
            bytes[static_cast<size_t>(t.layer)] = add_sat(bytes[static_cast<size_t>(t.layer)], t.bytes);
    return bytes;
}

// Whole layers from the end until at least `gb` GiB are offloaded.
int32_t layers_for_gb(double gb, const std::vector<uint64_t> &bytes) {
    const double target = gb * static_cast<double>(gib);
    double offloaded = 0;
    int32_t k = 0;
    const auto n = static_cast<int32_t>(bytes.size());
    while (k < n && offloaded < target) {
        offloaded += static_cast<double>(bytes[static_cast<size_t>(n - 1 - k)]);
        ++k;
    }
    return k;
}

struct offload_choice {
    int32_t layers = 0; // the last `layers` layers leave the device
    bool edges = false; // embedding and output leave too
};

// Each tensor's home fixed by tensor_overrides ("" = none), in the order of in.tensors; notes for patterns that match
// nothing.
std::vector<std::string> forced_homes(const inputs &in, std::vector<std::string> &notes) {
    std::vector<std::string> homes(in.tensors.size());
    for (const auto &override_item : in.tensor_overrides) {
        const std::string &pattern = override_item.first, &target = override_item.second;
        const bool known = target == "device" || std::any_of(in.tiers.begin(), in.tiers.end(),
                                                              [&](const tier_info &t) { return t.name == target; });
        if (!known) {
            std::string tiers;
            for (const auto &t : in.tiers) tiers += ", " + t.name;
            fail("override_tensor '{}={}': '{}' is not device or a configured tier (device{}); add it to --tiers or "
                 "fix the name",
                 pattern, target, target, tiers);
        }
    }
    std::vector<std::regex> patterns;
    for (const auto &[pattern, target] : in.tensor_overrides) {
        try {
            patterns.emplace_back(pattern, std::regex::ECMAScript);
        } catch (const std::regex_error &e) {
            fail("override_tensor '{}={}': the pattern is not a valid regular expression ({})", pattern, target,
                 e.what());
        }
    }
    std::vector<bool> used(patterns.size(), false);
    for (size_t i = 0; i < in.tensors.size(); ++i)
        for (size_t k = 0; k < patterns.size(); ++k)
            if (std::regex_search(in.tensors[i].name, patterns[k])) {
                homes[i] = in.tensor_overrides[k].second;
                used[k] = true;
                break;
            }
    for (size_t k = 0; k < patterns.size(); ++k)
        if (!used[k])
            notes.push_back(fmt::format("override_tensor '{}={}' matches no tensor of the model (or only tensors an "
                                        "earlier pattern placed)",
                                        in.tensor_overrides[k].first, in.tensor_overrides[k].second));
    return homes;
}

// The full plan for one choice of what leaves the device.
plan build(const inputs &in, offload_choice choice, uint64_t budget, int32_t max_model_len,
           const std::vector<std::string> &forced) {
    plan p;
    p.device_kind = in.device_kind;
    p.device_budget = budget;
    p.device_activation = in.activation_bytes;
    p.device_overhead = in.overhead_bytes;
    p.kv_bytes_per_token = kv_bytes_per_token(in.n_layer, in.n_head_kv, in.head_dim, in.kv_type);
    p.max_model_len = max_model_len;
    p.max_num_seqs = in.max_num_seqs;
    p.embedding_output_offloaded = choice.edges;
    for (const auto &t : in.tiers) p.tier_used[t.name] = 0;

    const int32_t first_offloaded = in.n_layer - choice.layers;
    auto leaves_device = [&](int32_t layer) {
        if (layer == -1 || layer == in.n_layer) return choice.edges;
        return layer >= first_offloaded;
    };

    p.placements.reserve(in.tensors.size());
    std::vector<size_t> offloaded; // indices into placements, filled into tiers in layer order
    for (size_t i = 0; i < in.tensors.size(); ++i) {
        const tensor_req &t = in.tensors[i];
        placement pl{t.name, t.layer, t.bytes, "device", mode::resident, t.routed_expert};
        if (forced[i].empty() ? leaves_device(t.layer) : forced[i] != "device") {
            offloaded.push_back(p.placements.size());
            pl.home.clear();
            pl.how = mode::streamed;
        }
        p.placements.push_back(std::move(pl));
    }
    std::stable_sort(offloaded.begin(), offloaded.end(),
                     [&](size_t a, size_t b) { return p.placements[a].layer < p.placements[b].layer; });

    std::vector<uint64_t> room;
    for (const auto &t : in.tiers) room.push_back(t.capacity);
    uint64_t unplaced = 0;
    // Streamed bytes per layer slot (slot 0 = embedding, n_layer + 1 = output) size the staging ring.
    std::vector<uint64_t> streamed(static_cast<size_t>(in.n_layer) + 2, 0);
    for (size_t idx : offloaded) {
        auto &pl = p.placements[idx];
        p.offloaded_bytes = add_sat(p.offloaded_bytes, pl.bytes);
        const std::string &fixed_tier = forced[&pl - p.placements.data()];
        size_t tier = 0;
        if (!fixed_tier.empty()) {
            while (in.tiers[tier].name != fixed_tier) ++tier; // forced_homes checked the name
            if (room[tier] < pl.bytes) tier = room.size();
        } else {
            while (tier < room.size() && room[tier] < pl.bytes) ++tier;
        }
        if (tier == room.size()) {
            unplaced = add_sat(unplaced, pl.bytes);
            continue;
        }
        const auto &info = in.tiers[tier];
        room[tier] -= pl.bytes;
        p.tier_used[info.name] += pl.bytes;
        pl.home = info.name;
        pl.how = info.addressable && in.device_reads_host.value_or(is_cpu(in)) && !in.prefer_streaming ? mode::in_place
                                                                                                   : mode::streamed;
        if (pl.how == mode::streamed) {
            auto &slot = streamed[static_cast<size_t>(pl.layer + 1)];
            slot = add_sat(slot, pl.bytes);
            if (!fixed_tier.empty() && (pl.layer < 0 || pl.layer >= in.n_layer))
                p.problems.push_back(fmt::format(
                    "override_tensor puts '{}' in tier '{}', which the device would have to stream it from, but only "
                    "layer weights are streamed: keep it on the device or put it in a tier the device reads in place",
                    pl.tensor, pl.home));
        }
    }
    auto addressable = [&](const std::string &home) {
        const auto t = std::find_if(in.tiers.begin(), in.tiers.end(), [&](const tier_info &ti) { return ti.name == home; });
        return t != in.tiers.end() && t->addressable;
    };
    // Experts on the CPU: routed experts the device would stream from host RAM are computed there instead.
    if (in.experts_on_cpu)
        for (auto &pl : p.placements)
            if (pl.routed_expert && pl.how == mode::streamed && pl.layer >= 0 && pl.layer < in.n_layer &&
                addressable(pl.home)) {
                pl.how = mode::cpu_experts;
                streamed[static_cast<size_t>(pl.layer + 1)] -= pl.bytes;
            }
    // Hybrid: listed layers streamed wholly from addressable tiers are computed by the CPU where they live.
    std::vector<uint64_t> on_cpu(streamed.size(), 0);
    for (int32_t layer : in.on_cpu_layers) {
        if (layer < 0 || layer >= in.n_layer) continue;
        bool all = false;
        for (const auto &pl : p.placements) {
            if (pl.layer != layer) continue;
            if (pl.home == "device") { // the CPU cannot read a tensor kept in device memory (override_tensor)
                all = false;
                break;
            }
            all = (pl.how == mode::streamed || pl.how == mode::cpu_experts) && addressable(pl.home);
            if (!all) break;
        }
        if (!all) continue;
        // The layer's ring share for large batches: what it streamed, and its experts (the whole layer streams).
        std::swap(on_cpu[static_cast<size_t>(layer + 1)], streamed[static_cast<size_t>(layer + 1)]);
        for (auto &pl : p.placements)
            if (pl.layer == layer && pl.home != "device") {
                if (pl.how == mode::cpu_experts) on_cpu[static_cast<size_t>(layer + 1)] += pl.bytes;
                pl.how = mode::on_cpu;
            }
    }
    for (const auto &pl : p.placements) {
        if (pl.home == "device") p.device_weights = add_sat(p.device_weights, pl.bytes);
    }
    std::vector<bool> layer_out(static_cast<size_t>(in.n_layer), false);
    for (const auto &pl : p.placements)
        if (pl.home != "device" && pl.layer >= 0 && pl.layer < in.n_layer)
            layer_out[static_cast<size_t>(pl.layer)] = true;
    p.offloaded_layers = static_cast<int32_t>(std::count(layer_out.begin(), layer_out.end(), true));
    p.staging_ring_bytes =
        mul_sat(static_cast<uint64_t>(in.prefetch_depth) + 1, *std::max_element(streamed.begin(), streamed.end()));
    if (in.stream_on_cpu)
        p.on_cpu_ring_bytes =
            mul_sat(static_cast<uint64_t>(in.prefetch_depth) + 1, *std::max_element(on_cpu.begin(), on_cpu.end()));

    if (unplaced > 0) {
        if (in.tiers.empty())
            p.problems.push_back(fmt::format(
                "weights need {} more bytes ({}) off the device but no tier is configured: add a tier (pinned_ram, "
                "numa_ram or nvme with a size) or offload fewer layers",
                unplaced, human(unplaced)));
        else
            p.problems.push_back(fmt::format("weights need {} more bytes ({}) than the tiers hold: add a tier or raise "
                                             "{}.size",
                                             unplaced, human(unplaced), in.tiers.back().name));
    }

    // What the device must hold besides the KV cache.
    const uint64_t fixed = add_sat(add_sat(p.device_weights, p.device_activation),
                                   add_sat(p.device_overhead, add_sat(p.staging_ring_bytes, p.on_cpu_ring_bytes)));
    uint64_t left = 0;
    if (fixed > budget) {
        p.problems.push_back(fmt::format(
            "resident weights ({}), activations ({}), overhead ({}) and staging ring ({}) need {} but the device "
            "budget is {}: {}/--cpu-offload-gb/--enable-cpu-offload, shrink the "
            "activations with a lower --max-num-batched-tokens or --max-num-seqs, or raise {}",
            human(p.device_weights), human(p.device_activation), human(p.device_overhead),
            human(p.staging_ring_bytes + p.on_cpu_ring_bytes),
            human(fixed), human(budget), offload_knobs(in), budget_knobs(in)));
    } else {
        left = budget - fixed;
    }

    p.device_kv = left;
    if (in.kv_cache_memory) {
        if (*in.kv_cache_memory > left)
            p.problems.push_back(fmt::format(
                "kv_cache_memory {} does not fit: only {} is left on the device after weights, activations, overhead "
                "and staging ring; lower --kv-cache-memory, raise {}, or {}",
                human(*in.kv_cache_memory), human(left), budget_knobs(in), offload_knobs(in)));
        else
            p.device_kv = *in.kv_cache_memory;
    } else if (in.device_kind == "cpu") {
        // On the CPU "what is left" is all of RAM: take enough for 4 sequences of max_model_len, at least 1 GiB.
        const uint64_t want = std::max<uint64_t>(uint64_t{1} << 30, mul_sat(uint64_t{4} * static_cast<uint64_t>(max_model_len),
                                                                            p.kv_bytes_per_token));
        p.device_kv = std::min(left, want);
    }
    p.kv_capacity_tokens = static_cast<int64_t>(std::min<uint64_t>(p.device_kv / p.kv_bytes_per_token, INT64_MAX));

    const int64_t seqs = in.max_num_seqs;
    const int64_t needed_tokens = static_cast<int64_t>(max_model_len) * seqs;
    const int64_t length_cap = std::max(in.model_context_length, max_model_len);
    p.max_fitting_model_len = clamp_i32(std::min(p.kv_capacity_tokens / seqs, length_cap));
    p.max_fitting_concurrency = clamp_i32(p.kv_capacity_tokens / max_model_len);
    const int64_t spill_tokens = static_cast<int64_t>(in.kv_spill_bytes / p.kv_bytes_per_token);
    if (p.kv_capacity_tokens + spill_tokens < needed_tokens) {
        const uint64_t needed_bytes = mul_sat(static_cast<uint64_t>(needed_tokens), p.kv_bytes_per_token);
        const std::string what = seqs == 1 ? fmt::format("max_model_len {}", max_model_len)
                                           : fmt::format("max_model_len {} x max_num_seqs {}", max_model_len, seqs);
        const bool kv_fixed = in.kv_cache_memory && *in.kv_cache_memory <= left;
        const std::string where = kv_fixed ? fmt::format("kv_cache_memory is only {}", human(p.device_kv))
                                           : fmt::format("only {} is left on the device", human(p.device_kv));
        std::string largest =
            p.kv_capacity_tokens / seqs == 0
                ? std::string("not even one token per sequence fits")
                : fmt::format("the largest max_model_len that fits is {}", p.kv_capacity_tokens / seqs);
        if (seqs > 1 && p.max_fitting_concurrency > 0)
            largest += fmt::format(" (or {} sequences of {})", p.max_fitting_concurrency, max_model_len);
        const std::string lower = seqs == 1 ? "--max-model-len" : "--max-model-len or --max-num-seqs";
        const std::string raise = kv_fixed ? "--kv-cache-memory" : budget_knobs(in);
        p.problems.push_back(fmt::format("{} needs {} of KV cache but {}: {}; lower {}, raise {}, or {}", what,
                                         human(needed_bytes), where, largest, lower, raise, offload_knobs(in)));
    }
    p.fits = p.problems.empty();
    return p;
}

} // namespace

std::string_view to_string(mode m) {
    switch (m) {
    case mode::resident: return "resident";
    case mode::streamed: return "streamed";
    case mode::in_place: return "in_place";
    case mode::on_cpu: return "cpu";
    case mode::cpu_experts: return "cpu";
    }
    return "unknown";
}

uint64_t kv_bytes_per_token(int32_t n_layer, int32_t n_kv_heads, int32_t head_dim, uint32_t kv_type) {
    const char *type = kv_layout::type_name(kv_type);
    if (n_layer < 1 || n_kv_heads < 1 || head_dim < 1 || type == nullptr)
        fail("KV cache size needs positive n_layer, n_head_kv, head_dim and a known KV type (got {}, {}, {}, type {})",
             n_layer, n_kv_heads, head_dim, kv_type);
    if (!kv_layout::holds_heads_of(kv_type, head_dim))
        fail("a {} KV cache keeps each head in groups of {} values, but this model's heads have {}; use "
             "--kv-cache-dtype float16 (or another type without groups)",
             type, kv_layout::group_values(kv_type), head_dim);
    // kv_layout::row_bytes's product, checked: groups per row x bytes per group x K and V x layers.
    uint64_t bytes = static_cast<uint64_t>(int64_t{n_kv_heads} * head_dim / kv_layout::group_values(kv_type));
    for (uint64_t f : {kv_layout::group_bytes(kv_type), uint64_t{2}, static_cast<uint64_t>(n_layer)})
        if (__builtin_mul_overflow(bytes, f, &bytes))
            fail("KV bytes per token overflow 64 bits ({} layers x {} heads x {} values of {})", n_layer, n_kv_heads,
                 head_dim, type);
    return bytes;
}

plan make_plan(const inputs &in) {
    validate_model(in);
    validate_device(in);
    validate_tiers(in);
    validate_knobs(in);

    std::vector<std::string> notes;
    const uint64_t budget = device_budget(in, notes);
    const std::vector<std::string> forced = forced_homes(in, notes);
    const int32_t max_model_len = in.max_model_len > 0 ? in.max_model_len : in.model_context_length;
    if (in.max_model_len == 0)
        notes.push_back(fmt::format("max_model_len 0: using the model's trained context of {} tokens", max_model_len));
    else if (in.model_context_length > 0 && in.max_model_len > in.model_context_length)
        notes.push_back(fmt::format("max_model_len {} exceeds the model's trained context of {} tokens; output past "
                                    "it may degrade",
                                    in.max_model_len, in.model_context_length));

    const auto bytes = layer_bytes(in);
    auto offloaded_sum = [&](int32_t k) {
        uint64_t sum = 0;
        for (int32_t i = 0; i < k; ++i) sum = add_sat(sum, bytes[static_cast<size_t>(in.n_layer - 1 - i)]);
        return sum;
    };

    offload_choice choice;
    if (in.cpu_offload_gb) {
        choice.layers = layers_for_gb(*in.cpu_offload_gb, bytes);
        if (in.cpu_offload_layers && *in.cpu_offload_layers != choice.layers)
            fail("cpu_offload_gb {} offloads {} layer{} but cpu_offload_layers is {}: set only one of them",
                 *in.cpu_offload_gb, choice.layers, choice.layers == 1 ? "" : "s", *in.cpu_offload_layers);
        const double offloaded_gib = static_cast<double>(offloaded_sum(choice.layers)) / static_cast<double>(gib);
        if (offloaded_gib < *in.cpu_offload_gb)
            notes.push_back(fmt::format("cpu_offload_gb {} exceeds the {:.2f} GiB of layer weights: all {} layers "
                                        "offloaded",
                                        *in.cpu_offload_gb, offloaded_gib, in.n_layer));
        else if (offloaded_gib > *in.cpu_offload_gb)
            notes.push_back(fmt::format("cpu_offload_gb {} rounds up to {} whole layer{} ({:.2f} GiB)",
                                        *in.cpu_offload_gb, choice.layers, choice.layers == 1 ? "" : "s",
                                        offloaded_gib));
    } else if (in.cpu_offload_layers) {
        choice.layers = *in.cpu_offload_layers;
    }
    if (in.enable_cpu_offload && (in.cpu_offload_gb || in.cpu_offload_layers))
        notes.emplace_back("cpu_offload_layers/cpu_offload_gb given: enable_cpu_offload does not choose the layer "
                           "count");

    plan p;
    if (in.enable_cpu_offload && !in.cpu_offload_gb && !in.cpu_offload_layers) {
        // The fewest layers from the end; the embedding and output leave only when nothing else is enough.
        std::vector<offload_choice> candidates;
        for (int32_t k = 0; k <= in.n_layer; ++k) candidates.push_back({k, false});
        candidates.push_back({in.n_layer, true});
        for (const auto &c : candidates) {
            p = build(in, c, budget, max_model_len, forced);
            if (p.fits) break;
        }
        if (p.embedding_output_offloaded)
            notes.emplace_back(p.fits ? "enable_cpu_offload: even with every layer offloaded the device budget was "
                                        "exceeded, so the embedding and output tensors are offloaded too"
                                      : "enable_cpu_offload: nothing fits even with every weight offloaded");
        else
            notes.push_back(fmt::format("enable_cpu_offload: {} layer{} offloaded, the fewest that fit",
                                        p.offloaded_layers, p.offloaded_layers == 1 ? "" : "s"));
    } else {
        p = build(in, choice, budget, max_model_len, forced);
    }
    p.notes.insert(p.notes.begin(), notes.begin(), notes.end());
    return p;
}

} // namespace strata::planner
