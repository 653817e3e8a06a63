// Worker: hybrid placement (issue #6). On a device that cannot read host memory (a GPU), offloaded layers living in a
// RAM tier may be computed by the CPU where they live instead of being streamed over the link every step; large
// batches stream them anyway. The choice comes from two measurements taken here at start-up — the link's H2D
// bandwidth (cached with the tiers' bandwidths, --remeasure) and the CPU's time for one offloaded layer at 1 and 16
// tokens — and is made by decide_hybrid (hybrid_policy.hpp).
#include "engine/worker.hpp"
#include "engine/engine_options.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/device_capability.hpp"
#include "engine/engine_util.hpp"
#include "engine/hybrid_policy.hpp"
#include "engine/model_source.hpp"
#include "engine/plan_inputs.hpp"
#include "planner/bandwidth_cache.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>

namespace strata::engine {

using namespace detail;

namespace {

// Best of three timings of fn().
template <class Fn> double best_seconds(const Fn &fn) {
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        best = std::min(best, seconds_since(t0));
    }
    return best;
}

} // namespace

// H2D and D2H bandwidth of the device's link from page-locked memory, best of three passes over 64 MiB each way;
// cached per device (and PCI bus id), measured again with --remeasure. Sets link_h2d_/link_d2h_ (0 = unknown).
void worker::measure_link() {
    link_h2d_ = link_d2h_ = 0;
    measure_link_latency();
    planner::bandwidth_cache cache(offload_.bandwidth_cache_path.empty()
                                       ? planner::default_bandwidth_cache_path()
                                       : std::filesystem::path(offload_.bandwidth_cache_path));
    std::string key = "link:" + device_name_;
    char bus[64] = {0};
    if (STRATA_HAS_SLOT(device_desc_.desc, pci_bus_id) && device_desc_.desc->pci_bus_id(device_, bus, sizeof bus) == 1)
        key += std::string(":") + bus;
    if (!offload_.remeasure) {
        if (auto e = cache.get(key)) {
            link_h2d_ = e->write_bps;
            link_d2h_ = e->read_bps;
            return;
        }
    }
    if (!offload_.measure_bandwidth) return;
    constexpr uint64_t bytes = uint64_t{64} << 20;
    strata_status st{};
    auto host = std::make_unique<unsigned char[]>(bytes);
    std::fill_n(host.get(), bytes, static_cast<unsigned char>(0x5a));
    const bool registered = STRATA_HAS_SLOT(device_desc_.desc, host_register) &&
                            device_desc_.desc->host_register(device_, host.get(), bytes, &st) == STRATA_OK;
    void *dev = device_desc_.desc->mem_alloc(device_, bytes, &st);
    if (dev == nullptr) {
        if (registered) device_desc_.desc->host_unregister(device_, host.get());
        log::warn("engine", "could not measure the link to device '{}': {}", device_name_, status_text(st));
        return;
    }
    planner::bandwidth_entry e;
    e.key = key;
    std::string error;
    auto copy = [&](int32_t kind) {
        return [&, kind](uint64_t off, uint64_t n) {
            void *d = static_cast<unsigned char *>(dev) + off;
            void *h = host.get() + off;
            if (device_desc_.desc->copy(device_, kind == STRATA_COPY_H2D ? d : h, kind == STRATA_COPY_H2D ? h : d, n,
                                        kind, &st) != STRATA_OK && error.empty())
                error = status_text(st);
        };
    };
    e.write_bps = planner::measure(copy(STRATA_COPY_H2D), bytes, uint64_t{8} << 20);
    e.read_bps = planner::measure(copy(STRATA_COPY_D2H), bytes, uint64_t{8} << 20);
    e.measured_at = planner::utc_timestamp();
    device_desc_.desc->mem_free(device_, dev);
    if (registered) device_desc_.desc->host_unregister(device_, host.get());
    if (!error.empty()) {
        log::warn("engine", "could not measure the link to device '{}': {}", device_name_, error);
        return;
    }
    cache.put(e);
    std::string where = "cached in " + cache.path().string();
    try {
        cache.save();
    } catch (const std::exception &ex) {
        where = std::string("not cached: ") + ex.what();
    }
    log::info("engine", "measured the link to device '{}': {:.1f} GB/s host to device, {:.1f} GB/s back ({})",
              device_name_, e.write_bps / 1e9, e.read_bps / 1e9, where);
    link_h2d_ = e.write_bps;
    link_d2h_ = e.read_bps;
}

// The time of one small synchronous copy (the fastest of 32 round trips of 4 KiB, halved): what each activation copy
// of a CPU-computed layer costs besides its bytes. Cheap enough to measure at every start.
void worker::measure_link_latency() {
    link_latency_ = 0;
    constexpr uint64_t bytes = 4096;
    strata_status st{};
    void *dev = device_desc_.desc->mem_alloc(device_, bytes, &st);
    if (dev == nullptr) return;
    std::vector<unsigned char> host(bytes, 0);
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 32; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (device_desc_.desc->copy(device_, dev, host.data(), bytes, STRATA_COPY_H2D, &st) != STRATA_OK ||
            device_desc_.desc->copy(device_, host.data(), dev, bytes, STRATA_COPY_D2H, &st) != STRATA_OK) {
            best = 0;
            break;
        }
        best = std::min(best, seconds_since(t0) / 2);
    }
    device_desc_.desc->mem_free(device_, dev);
    link_latency_ = std::isfinite(best) ? best : 0;
}

// The host device: [memory] offload_device (the `cpu` plugin by default) with its own table — none when it is the
// main device's plugin (the CPU device's separate_memory test mode), whose table is for the emulated GPU.
bool worker::start_host_device(bool required) {
    if (host_device_ != nullptr) return true; // already started (for the experts, then for whole layers)
    const std::string &name = offload_.offload_device;
    host_desc_ = registry_.find_device(name);
    if (host_desc_.desc == nullptr) {
        if (!required) return false;
        fail("[memory] offload_device = '{}' is not a loaded device plugin (available: {}); it computes the offloaded "
             "layers for offload_compute = \"cpu\" (or set --offload-compute device)",
             name, fmt::join(registry_.names(STRATA_KIND_DEVICE), ", "));
    }
    strata_device_create_args args{};
    args.struct_size = sizeof args;
    args.host = host_;
    auto it = opts_.device_configs.find(name);
    args.config = device_name_ != name && it != opts_.device_configs.end() ? it->second : nullptr;
    args.instance = opts_.data_parallel_rank; // a replica's CPU layers run on its share of the cores
    args.n_instances = opts_.data_parallel_size;
    args.pipeline_rank = stage_.rank; // the CPU serves every stage from the replica's share (one runs at a time)
    args.n_pipeline_ranks = stage_.n_ranks;
    strata_status st{};
    host_device_ = host_desc_.desc->create(&args, &st);
    if (host_device_ == nullptr)
        fail("offload_device '{}' (for offloaded layers) failed to start: {}", name, status_text(st));
    // It runs the model's layers: it must offer every op they call (asked at load, as for the main device).
    std::string why = missing_model_op(*arch_.desc, model_, *host_desc_.desc, "offload_device", opts_.model_path);
    if (why.empty())
        why = unsupported_model_shapes(*arch_.desc, model_, hp_, host_desc_, host_device_, "offload_device",
                                       opts_.model_path, nullptr, false); // attention stays on the device
    if (!why.empty()) {
        if (required) fail("{}", why);
        log::info("engine", "offloaded layers stream instead of running on the offload device: {}", why);
        stop_host_device();
        return false;
    }
    return true;
}

// Seconds per weight byte the CPU spends on one layer: fixed (one token) and per further token of a batch.
std::pair<double, double> worker::measure_cpu_layer(int32_t layer) {
    const strata_model_source *src = source_->view();
    std::vector<strata_tensor_view> mats;
    uint64_t bytes = 0;
    int64_t max_cols = 0, max_rows = 0;
    for (const auto &p : plan_.placements) {
        if (p.layer != layer) continue;
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        if (!src->get_host_tensor(src->ctx, p.tensor.c_str(), &v) || v.rows < 2 || v.quant == nullptr) continue;
        mats.push_back(v);
        bytes += weight_bytes(v);
        max_cols = std::max(max_cols, v.cols);
        max_rows = std::max(max_rows, v.rows);
    }
    if (mats.empty() || bytes == 0) return {0, 0};
    constexpr int32_t batch = 16;
    std::vector<float> x(static_cast<size_t>(max_cols) * batch, 0.25f), y(static_cast<size_t>(max_rows) * batch);
    strata_status st{};
    bool ok = true;
    auto run = [&](int32_t n) {
        for (const auto &w : mats)
            ok = ok && host_desc_.desc->matmul(host_device_, &w, x.data(), n, y.data(), &st) == STRATA_OK;
    };
    run(1); // the first pass faults the weights in
    if (!ok) {
        // Unknown rather than fast: a failing matmul would otherwise look free.
        log::warn("engine", "the CPU cannot compute layer {} ({}): offloaded layers are not computed on the CPU", layer,
                  status_text(st));
        return {0, 0};
    }
    const double t1 = best_seconds([&] { run(1); });
    const double tn = best_seconds([&] { run(batch); });
    if (!ok) return {0, 0};
    const double per_token = std::max(0.0, (tn - t1) / (batch - 1)) / static_cast<double>(bytes);
    const double fixed = std::max(0.0, t1 / static_cast<double>(bytes) - per_token);
    log::info("engine", "CPU: {:.2f} ms for layer {} ({:.1f} MiB) at 1 token, {:.2f} ms at {}", t1 * 1e3, layer,
              static_cast<double>(bytes) / 1048576.0, tn * 1e3, batch);
    return {fixed, per_token};
}

void worker::stop_host_device() {
    if (host_device_ != nullptr) host_desc_.desc->destroy(host_device_);
    host_device_ = nullptr;
}

// Decides which streamed layers the CPU computes and plans again with that decision (the on_cpu layers' ring is sized
// only when large batches will use it), before the weights are placed so the rings are built for it. Every way out
// short of a decision leaves the first plan (everything offloaded streams), with the reason in the plan's notes.
void worker::plan_hybrid(planner::inputs in) {
    const offload_compute mode = parse_offload_compute(offload_.offload_compute);
    hybrid_inputs hi;
    hi.mode = mode;
    hi.op_offload = offload_.op_offload;
    hi.min_batch = offload_.op_offload_min_batch;
    hi.h2d_bytes_per_second = link_h2d_;
    hi.link_latency_s = link_latency_;
    std::map<int32_t, hybrid_layer> layers;
    for (const auto &p : plan_.placements) {
        if (p.how != planner::mode::streamed || p.layer < 0 || p.layer >= hp_.n_layer) continue;
        auto t = std::find_if(in.tiers.begin(), in.tiers.end(), [&](const auto &ti) { return ti.name == p.home; });
        auto [it, fresh] = layers.try_emplace(p.layer);
        hybrid_layer &l = it->second;
        if (fresh) {
            l.layer = p.layer;
            l.host_readable = true;
        }
        l.bytes += p.bytes;
        l.host_readable = l.host_readable && t != in.tiers.end() && t->addressable;
    }
    for (const auto &[layer, l] : layers) hi.streamed.push_back(l);
    if (mode == offload_compute::device || hi.streamed.empty()) return;
    std::vector<std::string> notes;
    auto keep_first_plan = [&](const std::string &why) {
        if (!experts_on_cpu_planned()) stop_host_device();
        for (const std::string &note : notes) plan_.notes.push_back(note);
        if (!why.empty()) plan_.notes.push_back(why);
        for (const std::string &note : plan_.notes) log::debug("engine", "hybrid placement: {}", note);
    };
    const auto first = std::find_if(hi.streamed.begin(), hi.streamed.end(),
                                    [](const hybrid_layer &l) { return l.host_readable; });
    // The CPU is measured only when its figure can change the answer.
    if (first != hi.streamed.end() && (mode == offload_compute::cpu || link_h2d_ > 0)) {
        if (!start_host_device(mode == offload_compute::cpu)) {
            keep_first_plan(fmt::format("offload_compute = auto: offload_device '{}' is not loaded, so offloaded "
                                        "layers stream",
                                        offload_.offload_device));
            return;
        }
        std::tie(hi.cpu_fixed_s_per_byte, hi.cpu_token_s_per_byte) = measure_cpu_layer(first->layer);
    }
    const hybrid_decision d = decide_hybrid(hi);
    notes = d.notes;
    if (d.host_layers.empty()) {
        keep_first_plan("");
        return;
    }
    // A threshold no step can reach (steps hold at most max_num_batched_tokens) needs no ring.
    const int32_t max_step = opts_.scheduler.max_num_batched_tokens;
    const bool stream_large = d.min_batch > 0 && d.min_batch <= max_step;
    if (d.min_batch > max_step)
        notes.push_back(fmt::format("no step reaches {} tokens (max_num_batched_tokens {}): they always run on the CPU",
                                    d.min_batch, max_step));
    in.on_cpu_layers = d.host_layers;
    in.stream_on_cpu = stream_large;
    planner::plan second = planner::make_plan(in);
    if (!second.fits) {
        keep_first_plan("computing offloaded layers on the CPU would not fit the device (a second staging ring): "
                        "they stream");
        return;
    }
    const bool any = std::any_of(second.placements.begin(), second.placements.end(),
                                 [](const planner::placement &p) { return p.how == planner::mode::on_cpu; });
    if (!any) {
        keep_first_plan("with the CPU layers' ring the plan splits the layers differently and streams them all");
        return;
    }
    if (second.kv_capacity_tokens < plan_.kv_capacity_tokens)
        notes.push_back(fmt::format("the ring for large batches costs {} tokens of device KV (--no-op-offload or a "
                                    "larger --op-offload-min-batch gives them back)",
                                    plan_.kv_capacity_tokens - second.kv_capacity_tokens));
    plan_ = std::move(second);
    for (const std::string &note : notes) plan_.notes.push_back(note);
    for (const std::string &note : notes) log::info("engine", "hybrid placement: {}", note);
    // The flags are by the model's layer number; a pipeline rank's plan numbers its layers from 0.
    layer_on_host_.assign(static_cast<size_t>(hp_.n_layer), 0);
    for (const auto &p : plan_.placements)
        if (p.how == planner::mode::on_cpu) layer_on_host_[static_cast<size_t>(p.layer + stage_.layer_first)] = 1;
    hybrid_min_batch_ = stream_large ? d.min_batch : 0;
    // Hybrid steps are smaller than the threshold: the host workspace needs no more.
    host_workspace_tokens_ = std::max(host_workspace_tokens_, stream_large ? d.min_batch - 1 : max_step);
}

// Whether the plan may leave routed experts in host RAM to the CPU: a device that cannot read host memory, a model
// plugin that runs them there (ABI 1.17 host_experts), and offload_compute other than "device".
bool worker::can_host_experts() const {
    return !device_reads_host_ && STRATA_HAS_SLOT(arch_.desc, host_experts) && arch_.desc->host_experts(model_) == 1 &&
           parse_offload_compute(offload_.offload_compute) != offload_compute::device;
}

// The expert ops and the expert weights' types were not asked of the device at load when the CPU could compute the
// experts (can_host_experts): they are now, unless the plan leaves every layer's experts to the CPU in every step.
void worker::check_device_computes_experts() const {
    if (!can_host_experts()) return;
    std::set<std::string> on_device;
    bool streamed_whole = false; // experts of layers the CPU computes, streamed to the device for large batches
    for (const auto &p : plan_.placements) {
        if (!p.routed_expert || p.how == planner::mode::cpu_experts) continue;
        if (p.how == planner::mode::on_cpu) {
            if (hybrid_min_batch_ == 0) continue;
            streamed_whole = true;
        }
        on_device.insert(p.tensor);
    }
    if (on_device.empty()) return;
    std::string why = missing_model_op(*arch_.desc, model_, *device_desc_.desc, "device", opts_.model_path);
    if (why.empty())
        why = unsupported_model_shapes(*arch_.desc, model_, hp_, device_desc_, device_, "device",
                                       opts_.model_path, [&](const std::string &t) { return on_device.count(t) > 0; },
                                       false);
    if (why.empty()) return;
    fail("{}\nthe plan leaves experts to device '{}' ({}): {}", why, device_name_, *on_device.begin(),
         streamed_whole ? "layers the CPU computes stream to it for large batches; --no-op-offload keeps them on the CPU"
                        : "keep every layer's experts in host RAM for the CPU with --cpu-moe");
}

bool worker::experts_on_cpu_planned() const {
    return std::any_of(plan_.placements.begin(), plan_.placements.end(),
                       [](const planner::placement &p) { return p.how == planner::mode::cpu_experts; });
}

// Experts on the CPU (llama.cpp's --n-cpu-moe / -ot exps=CPU): the first plan computes routed experts kept in host RAM
// on the host device (inputs::experts_on_cpu). That needs the offload device with the model's ops; without it they
// stream to the device each step (offload_compute = auto) or start-up stops (cpu).
void worker::plan_cpu_experts(planner::inputs &in) {
    if (!experts_on_cpu_planned()) return;
    const offload_compute mode = parse_offload_compute(offload_.offload_compute);
    if (!start_host_device(mode == offload_compute::cpu)) {
        in.experts_on_cpu = false;
        plan_ = planner::make_plan(in);
        plan_.notes.push_back(fmt::format("offload_device '{}' cannot compute the experts kept in host RAM, so they "
                                          "stream to the device every step",
                                          offload_.offload_device));
        return;
    }
}

// After hybrid placement and experts on the CPU are planned: the flags the forward reads and the host workspace
// (page-locked: activations cross the link several times per CPU-computed layer, and from page-locked memory those
// copies run at the link's speed without a bounce through the driver's staging).
void worker::prepare_host_compute() {
    if (host_device_ == nullptr) return;
    // Experts on the CPU run in every step, of any size (the whole-layer hybrid only in steps below its threshold).
    if (experts_on_cpu_planned())
        host_workspace_tokens_ = std::max(host_workspace_tokens_, opts_.scheduler.max_num_batched_tokens);
    if (experts_on_cpu_planned()) {
        experts_on_host_.assign(static_cast<size_t>(hp_.n_layer), 0);
        std::set<int32_t> layers;
        for (const auto &p : plan_.placements)
            if (p.how == planner::mode::cpu_experts) {
                experts_on_host_[static_cast<size_t>(p.layer + stage_.layer_first)] = 1;
                layers.insert(p.layer);
            }
        const std::string note = fmt::format("the CPU ('{}') computes the routed experts of {} layer{} where they live; "
                                             "attention, the router and any shared expert run on device '{}'",
                                             offload_.offload_device, layers.size(), layers.size() == 1 ? "" : "s",
                                             device_name_);
        plan_.notes.push_back(note);
        log::info("engine", "experts on the CPU: {}", note);
    }
    if (host_workspace_tokens_ <= 0 || opts_.plan_only) return; // `runtime plan` runs nothing
    host_workspace_.resize(arch_.desc->workspace_bytes(model_, host_workspace_tokens_) + 64);
    strata_status st{};
    if (STRATA_HAS_SLOT(device_desc_.desc, host_register)) {
        if (device_desc_.desc->host_register(device_, host_workspace_.data(), host_workspace_.size(), &st) == STRATA_OK)
            registered_.push_back(host_workspace_.data());
        else
            log::warn("engine", "could not page-lock the {} host workspace of CPU-computed layers: {}; their copies run "
                      "from pageable memory", human(host_workspace_.size()), status_text(st));
    }
}

worker::hybrid_report worker::hybrid() const {
    hybrid_report r;
    for (int32_t l = 0; l < static_cast<int32_t>(layer_on_host_.size()); ++l)
        if (layer_on_host_[static_cast<size_t>(l)] != 0) r.host_layers.push_back(l);
    for (int32_t l = 0; l < static_cast<int32_t>(experts_on_host_.size()); ++l)
        if (experts_on_host_[static_cast<size_t>(l)] != 0) r.expert_layers.push_back(l);
    r.min_batch = hybrid_min_batch_;
    r.cpu_steps = hybrid_steps_.load();
    r.streamed_steps = hybrid_streamed_steps_.load();
    return r;
}

} // namespace strata::engine
