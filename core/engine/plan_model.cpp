#include "engine/plan_model.hpp"

#include "common/error.hpp"
#include "engine/model_source.hpp"
#include "engine/plan_inputs.hpp"

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
    const int32_t chunk = std::min(opts.prefill_chunk > 0 ? opts.prefill_chunk : 256, shape.max_model_len);
    shape.activation_bytes = arch_h.desc->workspace_bytes(model, chunk) + sizeof(float) * static_cast<uint64_t>(shape.hp.n_vocab);
    offload_options o = opts.offload;
    o.measure_bandwidth = o.remeasure; // `plan` reads the cache; it measures only when asked to
    model_plan out;
    try {
        out.inputs = make_plan_inputs(shape, o, registry, host, device_kind);
        out.plan = planner::make_plan(out.inputs);
    } catch (...) {
        arch_h.desc->destroy(model);
        throw;
    }
    arch_h.desc->destroy(model);
    return out;
}

} // namespace strata::engine
