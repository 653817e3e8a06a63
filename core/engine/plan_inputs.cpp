#include "engine/plan_inputs.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "planner/bandwidth_cache.hpp"
#include "topology/topology.hpp"


#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>
#include <vector>

namespace strata::engine {

namespace {

std::optional<int64_t> config_int(const strata_config_view *v, const char *key) {
    int64_t out = 0;
    if (v != nullptr && v->get_int != nullptr && v->get_int(v->ctx, key, &out)) return out;
    return std::nullopt;
}

std::optional<std::string> config_string(const strata_config_view *v, const char *key) {
    const char *out = nullptr;
    if (v != nullptr && v->get_string != nullptr && v->get_string(v->ctx, key, &out) && out) return std::string(out);
    return std::nullopt;
}

// Best-of-three read bandwidth of a 64 MiB region of a fresh instance of the tier.
planner::bandwidth_entry measure_tier(const plugins::registry &registry, const strata_host_services *host,
                                      const std::string &name, const strata_config_view *cfg, const std::string &key,
                                      int32_t rank) {
    constexpr uint64_t bytes = 64ull << 20;
    auto tier = create_tier(registry, host, name, cfg, bytes + (1 << 20), rank);
    auto h = registry.find_tier(name);
    strata_status st{};
    uint64_t region = 0;
    if (h.desc->region_alloc(tier.get(), bytes, &region, &st) != STRATA_OK) {
        fail("measuring tier '{}': {}", name, st.message);
    }
    std::vector<uint8_t> buf(bytes, 0x5a);
    planner::bandwidth_entry e;
    e.key = key;
    e.write_bps = planner::measure([&](uint64_t off, uint64_t n) {
        if (h.desc->write(tier.get(), region, off, buf.data() + off, n, &st) != STRATA_OK) fail("measuring tier '{}': {}", name, st.message);
    }, bytes, 8ull << 20);
    e.read_bps = planner::measure([&](uint64_t off, uint64_t n) {
        if (h.desc->read(tier.get(), region, off, buf.data() + off, n, &st) != STRATA_OK) fail("measuring tier '{}': {}", name, st.message);
    }, bytes, 8ull << 20);
    e.measured_at = planner::utc_timestamp();
    h.desc->region_free(tier.get(), region);
    return e;
}

} // namespace

uint64_t activation_bytes(const strata_model_arch_desc *arch, const strata_model *model, const strata_model_hparams &hp,
                          const scheduler_config &sc) {
    return arch->workspace_bytes(model, sc.max_num_batched_tokens) +
           sizeof(float) * static_cast<uint64_t>(hp.n_vocab) * static_cast<uint64_t>(sc.max_num_seqs);
}

namespace {

// llama.cpp's -ot "PATTERN=TARGET" items as (pattern, home): TARGET is a tier name or "device" as the planner knows
// them, or llama.cpp's buffer names: CPU is host RAM (the device itself when it computes in host RAM, as the cpu
// device does, else the first tier the CPU reads in place), CUDA0 / CUDA / GPU the device when it is a GPU.
std::vector<std::pair<std::string, std::string>> tensor_overrides(const std::vector<std::string> &items,
                                                                  const std::vector<planner::tier_info> &tiers,
                                                                  const std::string &device_kind,
                                                                  bool device_reads_host) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string &item : items) {
        const size_t eq = item.rfind('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
            fail("override_tensor '{}': write PATTERN=TARGET, e.g. -ot \"blk\\.1[0-9]\\.ffn_.*=numa_ram\" (TARGET: "
                 "device, a tier, or llama.cpp's CPU / CUDA0)",
                 item);
        std::string target = item.substr(eq + 1);
        if (target == "CPU") {
            if (device_reads_host) {
                target = "device";
            } else {
                const auto ram = std::find_if(tiers.begin(), tiers.end(), [](const planner::tier_info &t) { return t.addressable; });
                if (ram == tiers.end())
                    fail("override_tensor '{}': CPU means host RAM, but no configured tier is RAM the CPU reads "
                         "(add numa_ram or pinned_ram to --tiers)",
                         item);
                target = ram->name;
            }
        } else if (target == "GPU" || target.rfind("CUDA", 0) == 0) {
            if (device_kind == "cpu")
                fail("override_tensor '{}': {} names a GPU, but the model runs on the cpu device", item, target);
            target = "device";
        }
        out.emplace_back(item.substr(0, eq), target);
    }
    return out;
}

// llama.cpp's name for the routed experts' weights (LLM_FFN_EXPS_REGEX): what --cpu-moe and --n-cpu-moe move.
constexpr const char *k_routed_experts = "\\.ffn_(up|down|gate)_(ch|)exps";

// llama.cpp's --cpu-moe / --n-cpu-moe N as the -ot items it adds: the routed experts of every layer, or of layers
// 0..N-1, in host RAM (CPU). They follow the user's own -ot items, whose first match wins. On a dense model they
// change nothing, which is said.
std::string expert_flag(const offload_options &opts) {
    return opts.cpu_moe ? std::string("--cpu-moe") : fmt::format("--n-cpu-moe {}", opts.n_cpu_moe);
}

// model_n_layer: the model's layers (the tensors' names number them so; a pipeline rank's plan holds some of them).
std::vector<std::string> expert_overrides(const offload_options &opts, const planner::inputs &in, int32_t model_n_layer) {
    if (!opts.cpu_moe && opts.n_cpu_moe <= 0) return {};
    const std::string flag = expert_flag(opts);
    if (std::none_of(in.tensors.begin(), in.tensors.end(), [](const planner::tensor_req &t) { return t.routed_expert; })) {
        log::warn("engine", "{}: the model has no MoE experts (a dense model), so it changes nothing", flag);
        return {};
    }
    if (in.device_reads_host.value_or(in.device_kind == "cpu")) {
        log::warn("engine", "{}: device '{}' computes in host RAM itself, so the experts already live there and it "
                  "changes nothing", flag, in.device_kind);
        return {};
    }
    if (opts.cpu_moe) return {std::string(k_routed_experts) + "=CPU"};
    std::vector<std::string> items;
    for (int32_t l = 0; l < std::min(opts.n_cpu_moe, model_n_layer); ++l)
        items.push_back(fmt::format("blk\\.{}{}=CPU", l, k_routed_experts));
    return items;
}

} // namespace

bool is_routed_expert(const std::string &name) {
    static const std::regex pattern(k_routed_experts);
    return std::regex_search(name, pattern);
}

std::vector<uint64_t> layer_slot_bytes(const strata_model_arch_desc *arch, const strata_model *model, int32_t n_layer) {
    std::vector<uint64_t> slots(static_cast<size_t>(n_layer) + 2, 0);
    if (!STRATA_HAS_SLOT(arch, tensor_at) || !STRATA_HAS_SLOT(arch, tensor_count)) return slots;
    const int32_t n = arch->tensor_count(model);
    for (int32_t i = 0; i < n; ++i) {
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        int32_t layer = 0;
        if (arch->tensor_at(model, i, &v, &layer) != STRATA_OK || layer < -1 || layer > n_layer) continue;
        slots[static_cast<size_t>(layer + 1)] += weight_bytes(v);
    }
    return slots;
}

planner::inputs make_plan_inputs(const model_shape &m, const offload_options &opts, const plugins::registry &registry,
                                 const strata_host_services *host, const std::string &device_kind,
                                 const topology::machine *known) {
    const topology::machine machine = known != nullptr ? *known : topology::discover();
    planner::inputs in;
    // A pipeline rank's layers, renumbered from 0: its plan, KV and offload choices are its own.
    const int32_t first = m.layer_end > 0 ? m.layer_first : 0, end = m.layer_end > 0 ? m.layer_end : m.hp.n_layer;
    in.n_layer = end - first;
    in.n_head_kv = m.hp.n_head_kv;
    in.head_dim = m.hp.head_dim;
    in.kv_type = m.kv_type;
    in.max_model_len = m.max_model_len;
    in.model_context_length = m.hp.n_ctx_train;
    in.activation_bytes = m.activation_bytes;
    // A GPU context costs tens of MiB before any tensor; the CPU device's own bookkeeping is small.
    in.overhead_bytes = device_kind == "cpu" ? (4ull << 20) : (64ull << 20);
    if (!STRATA_HAS_SLOT(m.arch, tensor_at) || !STRATA_HAS_SLOT(m.arch, tensor_count)) {
        fail("model_arch '{}' does not list its tensors (tensor_count/tensor_at), so its weights cannot be planned",
             m.arch->header.name);
    }
    const int32_t n = m.arch->tensor_count(m.model);
    std::vector<std::string> seen;
    for (int32_t i = 0; i < n; ++i) {
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        int32_t layer = 0;
        if (m.arch->tensor_at(m.model, i, &v, &layer) != STRATA_OK || v.name == nullptr) continue;
        if (m.layer_end > 0) { // a pipeline rank: another rank's tensors are not in its plan
            if (layer == -1 ? first > 0 : layer == m.hp.n_layer ? end < m.hp.n_layer : layer < first || layer >= end)
                continue;
            if (layer >= 0) layer -= first;
        }
        // A tied classifier is the embedding again: count its bytes once.
        if (std::find(seen.begin(), seen.end(), v.name) != seen.end()) continue;
        seen.emplace_back(v.name);
        in.tensors.push_back({v.name, layer, weight_bytes(v), is_routed_expert(v.name)});
    }
    in.device_kind = device_kind;
    in.device_total = opts.device_total.value_or(machine.available_ram) / static_cast<uint64_t>(std::max(1, opts.device_share));
    in.device_memory = opts.device_memory;
    in.gpu_memory_utilization = opts.gpu_memory_utilization;
    in.limit_gpu_memory = opts.limit_gpu_memory;
    in.cpu_offload_gb = opts.cpu_offload_gb;
    in.cpu_offload_layers = opts.cpu_offload_layers;
    if (opts.n_gpu_layers) {
        if (opts.cpu_offload_layers)
            fail("n_gpu_layers {} and cpu_offload_layers {} both say how many layers leave the device: set only one "
                 "(-ngl / --n-gpu-layers or --cpu-offload-layers)",
                 *opts.n_gpu_layers, *opts.cpu_offload_layers);
        const int32_t ngl = *opts.n_gpu_layers;
        in.cpu_offload_layers = ngl < 0 || ngl >= in.n_layer ? 0 : in.n_layer - ngl;
    }
    // A pipeline rank applies the offload keys to its own layers, as vLLM applies cpu_offload_gb per GPU: at most all
    // of them leave its device.
    if (m.layer_end > 0 && in.cpu_offload_layers) in.cpu_offload_layers = std::min(*in.cpu_offload_layers, in.n_layer);
    in.enable_cpu_offload = opts.enable_cpu_offload;
    in.kv_cache_memory = opts.kv_cache_memory;
    in.kv_spill_bytes = opts.kv_spill_bytes;
    in.device_reads_host = opts.device_reads_host;
    // Reading ahead more layers than the model has reads them all: a 1-layer model runs with the default depth 2.
    in.prefetch_depth = std::min(opts.prefetch_depth, in.n_layer);
    in.prefer_streaming = opts.stream_weights;
    in.physical_ram = machine.total_ram;

    std::vector<std::string> overrides = opts.override_tensor;
    const std::vector<std::string> experts = expert_overrides(opts, in, m.hp.n_layer);
    overrides.insert(overrides.end(), experts.begin(), experts.end());
    const bool offloading = opts.cpu_offload_gb.value_or(0) > 0 || in.cpu_offload_layers.value_or(0) > 0 ||
                            !overrides.empty() || opts.enable_cpu_offload;
    // Before any tier is measured: the experts need RAM the CPU reads beside a device that does not.
    if (!experts.empty() && !in.device_reads_host.value_or(device_kind == "cpu") &&
        std::none_of(opts.tiers.begin(), opts.tiers.end(), [&](const std::string &name) {
            const auto h = registry.find_tier(name);
            return h.desc != nullptr && STRATA_HAS_SLOT(h.desc, map);
        }))
        fail("{}: the experts stay in host RAM, but no configured tier is RAM the CPU reads (add numa_ram or "
             "pinned_ram to --tiers)",
             expert_flag(opts));
    planner::bandwidth_cache cache(opts.bandwidth_cache_path.empty() ? planner::default_bandwidth_cache_path()
                                                                     : std::filesystem::path(opts.bandwidth_cache_path));
    bool cache_dirty = false;
    for (const std::string &name : opts.tiers) {
        auto h = registry.find_tier(name);
        if (!h) {
            fail("[memory] tiers names '{}', which no loaded plugin provides (available: {})", name,
                 fmt::join(registry.names(STRATA_KIND_TIER), ", "));
        }
        auto it = opts.tier_configs.find(name);
        const strata_config_view *cfg = it == opts.tier_configs.end() ? nullptr : it->second;
        planner::tier_info t;
        t.name = name;
        t.addressable = STRATA_HAS_SLOT(h.desc, map);
        // The tier knows its own limit (locked-memory limit, NUMA node memory, free disk space); core knows no tier.
        if (STRATA_HAS_SLOT(h.desc, capacity_limit)) {
            strata_tier_create_args args{};
            args.struct_size = sizeof args;
            args.host = host;
            args.config = cfg;
            char why[256] = {0};
            t.limit = h.desc->capacity_limit(&args, why, sizeof why);
            t.limit_reason = why;
        }
        // Capacity: the tier's `size` when set, else all it can hold here (RAM available when it cannot say).
        if (auto size = config_int(cfg, "size"); size && *size > 0) t.capacity = static_cast<uint64_t>(*size);
        else t.capacity = t.limit != 0 ? t.limit : machine.available_ram;
        // Bandwidth matters only when something is offloaded; measuring costs a second or two, once per machine.
        // A tier backed by a path (a file or device) is measured per path.
        const std::optional<std::string> path = config_string(cfg, "path");
        const std::string key = name + (path ? ":" + *path : "");
        std::optional<planner::bandwidth_entry> e = opts.remeasure ? std::nullopt : cache.get(key);
        if (!e && opts.measure_bandwidth && (offloading || opts.remeasure)) {
            log::info("planner", "measuring the read bandwidth of tier '{}' (cached in {})", name, cache.path().string());
            e = measure_tier(registry, host, name, cfg, key, opts.rank);
            cache.put(*e);
            cache_dirty = true;
        }
        if (e) t.read_bandwidth = e->read_bps;
        in.tiers.push_back(t);
    }
    if (cache_dirty) {
        try {
            cache.save();
        } catch (const std::exception &ex) {
            log::warn("planner", "could not save measured bandwidths: {}", ex.what());
        }
    }
    // Fastest tier first: the planner fills tiers in order.
    std::stable_sort(in.tiers.begin(), in.tiers.end(),
                     [](const planner::tier_info &a, const planner::tier_info &b) { return a.read_bandwidth > b.read_bandwidth; });
    const bool reads_host = in.device_reads_host.value_or(device_kind == "cpu");
    in.tensor_overrides = tensor_overrides(overrides, in.tiers, device_kind, reads_host);
    return in;
}

} // namespace strata::engine
