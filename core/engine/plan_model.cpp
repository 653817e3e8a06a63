#include "engine/plan_model.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "engine/model_source.hpp"
#include "engine/plan_inputs.hpp"

#include <optional>

namespace strata::engine {

model_plan plan_model(const plugins::registry &registry, const strata_host_services *host, const engine_options &opts) {
    if (opts.model_path.empty()) fail("no model given: set [model] path in the config or pass --model FILE.gguf");
    gguf::file file = gguf::file::open(opts.model_path);
    const std::string arch = std::string(file.get_string("general.architecture").value_or(""));
    auto arch_h = registry.find_model_arch_for(arch);
    if (!arch_h) fail("{}: no model_arch plugin handles architecture '{}'", opts.model_path, arch);
    std::string device_kind = opts.device;
    if (device_kind == "auto") {
        auto best = registry.best_device();
        if (!best) fail("no usable device plugin found (device = \"auto\")");
        device_kind = best.desc->header.name;
    }
    // The device says how much memory it has and whether it reads host memory: start it briefly (as the engine would)
    // and ask. One that cannot run here is an error with its reason, not a plan made up from host RAM.
    std::optional<uint64_t> device_total;
    std::optional<bool> device_reads_host;
    if (auto dev_h = registry.find_device(device_kind)) {
        strata_status dst{};
        strata_device_create_args dargs{};
        dargs.struct_size = sizeof dargs;
        dargs.host = host;
        auto it = opts.device_configs.find(device_kind);
        dargs.config = it != opts.device_configs.end() ? it->second : opts.device_config;
        strata_device *dev = dev_h.desc->score() > 0 ? dev_h.desc->create(&dargs, &dst) : nullptr;
        if (dev == nullptr && dst.message[0] == '\0') dev = dev_h.desc->create(&dargs, &dst);
        if (dev == nullptr) {
            fail("device '{}' cannot run on this machine: {}; plan with --device cpu or on a machine with the device",
                 device_kind, dst.message[0] ? dst.message : "the plugin scores 0 here");
        }
        uint64_t free_b = 0, total_b = 0;
        if (STRATA_HAS_SLOT(dev_h.desc, mem_info) && dev_h.desc->mem_info(dev, &free_b, &total_b, &dst) == STRATA_OK &&
            total_b > 0)
            device_total = total_b;
        if (STRATA_HAS_SLOT(dev_h.desc, host_addressable)) device_reads_host = dev_h.desc->host_addressable(dev) != 0;
        dev_h.desc->destroy(dev);
    }
    model_source source(file, registry, host);
    strata_status st{};
    strata_model *model = arch_h.desc->create(source.view(), &st);
    if (model == nullptr) fail("{}: {}", opts.model_path, st.message);
    model_shape shape;
    shape.arch = arch_h.desc;
    shape.model = model;
    shape.hp.struct_size = sizeof shape.hp;
    arch_h.desc->get_hparams(model, &shape.hp);
    shape.max_model_len = opts.max_model_len > 0 ? opts.max_model_len : shape.hp.n_ctx_train;
    shape.activation_bytes = activation_bytes(arch_h.desc, model, shape.hp, opts.scheduler);
    offload_options o = opts.offload;
    o.measure_bandwidth = o.remeasure; // `plan` reads the cache; it measures only when asked to
    if (device_total) o.device_total = device_total;
    if (device_reads_host) o.device_reads_host = device_reads_host;
    // As the engine does: the CPU device attends KV kept in the host tier in place, so swap_space counts for one long
    // context.
    if (device_kind == "cpu" && opts.kv.swap_space_gib > 0)
        o.kv_spill_bytes = static_cast<uint64_t>(opts.kv.swap_space_gib * 1073741824.0);
    model_plan out;
    try {
        out.inputs = make_plan_inputs(shape, o, registry, host, device_kind);
        out.plan = planner::make_plan(out.inputs);
        // Hybrid placement is decided at start-up from measurements of the weights themselves, which `plan` does not
        // load: say so where it could apply.
        const bool streamed = std::any_of(out.plan.placements.begin(), out.plan.placements.end(),
                                          [](const planner::placement &p) { return p.how == planner::mode::streamed; });
        if (!device_reads_host.value_or(device_kind == "cpu") && streamed && o.offload_compute != "device")
            out.plan.notes.push_back(fmt::format(
                "offload_compute = {}: at start-up, streamed layers in RAM tiers may be computed on the CPU instead "
                "(measured then; the start-up plan shows them as 'cpu')",
                o.offload_compute));
    } catch (...) {
        arch_h.desc->destroy(model);
        throw;
    }
    arch_h.desc->destroy(model);
    return out;
}

} // namespace strata::engine
