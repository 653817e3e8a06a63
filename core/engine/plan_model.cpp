#include "engine/plan_model.hpp"

namespace strata::engine {

std::vector<rank_plan> plan_model(const plugins::registry &registry, const strata_host_services *host,
                                  engine_options opts) {
    opts.plan_only = true;
    opts.print_plan = false; // the caller prints it, as a table or JSON
    const engine planned(registry, host, std::move(opts));
    std::vector<rank_plan> out;
    for (const worker *w : planned.ranks())
        out.push_back({w->stage(), w->tensor_parallel().rank, w->tensor_parallel().size, w->memory_plan_inputs(),
                       w->memory_plan()});
    return out;
}

} // namespace strata::engine
