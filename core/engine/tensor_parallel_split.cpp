#include "engine/tensor_parallel_split.hpp"

#include "common/error.hpp"
#include "engine/engine_util.hpp"
#include "engine/model_source.hpp"

#include <memory>

namespace strata::engine {

using namespace detail;

tensor_splits read_tensor_splits(const model_file &file, const plugins::registry &registry,
                                 const strata_host_services *host, const plugins::handle<strata_model_arch_desc> &arch,
                                 const std::string &model_path, int32_t size) {
    const strata_model_arch_desc *desc = arch.desc;
    const uint32_t minor = arch.lib ? arch.lib->info->abi_minor : STRATA_ABI_MINOR;
    if (minor < 29 || !STRATA_HAS_SLOT(desc, tensor_parallel) || !STRATA_HAS_SLOT(desc, tensor_split) ||
        !STRATA_HAS_SLOT(desc, tensor_count) || !STRATA_HAS_SLOT(desc, tensor_at))
        fail("{}: model plugin '{}' cannot split a model among tensor-parallel ranks (no tensor_parallel / tensor_split "
             "slot, ABI 1.29); run it with tensor_parallel_size 1", model_path, desc->header.name);
    model_source source(file, registry, host);
    strata_status st{};
    std::unique_ptr<strata_model, void (*)(strata_model *)> model(desc->create(source.view(), &st), desc->destroy);
    if (!model) fail("{}: {}", model_path, status_text(st));
    if (desc->tensor_parallel(model.get()) != 1)
        fail("{}: model plugin '{}' cannot split this model among tensor-parallel ranks (it answered no: a mixture of "
             "experts, say, from a plugin that does not split experts); run it with tensor_parallel_size 1 (pipeline stages, -pp {}, "
             "split it by layers)", model_path, desc->header.name, size);
    tensor_splits out;
    out.whole.struct_size = sizeof out.whole;
    desc->get_hparams(model.get(), &out.whole);
    std::map<std::string, tensor_split_rule> &rules = out.rules;
    // A tensor listed twice (a tied classifier is the embedding) must be split the same way each time.
    auto add = [&](const char *name, tensor_split_rule rule) {
        auto [it, fresh] = rules.emplace(name, rule);
        if (!fresh && (it->second.along != rule.along || it->second.groups != rule.groups))
            fail("{}: model plugin '{}' splits tensor '{}' two ways", model_path, desc->header.name, name);
    };
    const int32_t n = desc->tensor_count(model.get());
    for (int32_t i = 0; i < n; ++i) {
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        int32_t layer = 0;
        if (desc->tensor_at(model.get(), i, &v, &layer) != STRATA_OK || v.name == nullptr)
            fail("{}: model plugin '{}' lists no tensor at index {} of {}", model_path, desc->header.name, i, n);
        strata_tensor_split s{};
        s.struct_size = sizeof s;
        if (desc->tensor_split(model.get(), i, &s) != STRATA_OK)
            fail("{}: model plugin '{}' gives no tensor-parallel split for tensor '{}'", model_path, desc->header.name,
                 v.name);
        if (minor < 30) s.repeat = 0; // `reserved` before 1.30, never required to be 0
        std::optional<tensor_split_rule> rule = split_rule_of(s);
        if (!rule)
            fail("{}: model plugin '{}' splits tensor '{}' along axis {} in {} parts repeated {} times; the ABI knows "
                 "rows or columns in 1 to 4 parts repeated 0 to 65536 times", model_path, desc->header.name, v.name,
                 s.axis, s.n_parts, s.repeat);
        add(v.name, std::move(*rule));
    }
    return out;
}

tensor_parallel_shard::block_lookup quant_blocks(const plugins::registry &registry) {
    return [&registry](uint32_t type) -> std::pair<int64_t, int64_t> {
        if (auto q = registry.find_quant_by_type(type); q.desc != nullptr) return {q.desc->block_elems, q.desc->block_bytes};
        if (const gguf::type_traits *t = gguf::ggml_type_traits(type)) return {t->block_elems, t->block_bytes};
        return {0, 0};
    };
}

} // namespace strata::engine
