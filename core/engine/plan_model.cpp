#include "engine/plan_model.hpp"

namespace strata::engine {

model_plan plan_model(const plugins::registry &registry, const strata_host_services *host, engine_options opts) {
    opts.plan_only = true;
    opts.print_plan = false; // the caller prints it, as a table or JSON
    const engine planned(registry, host, std::move(opts));
    return {planned.memory_plan_inputs(), planned.memory_plan()};
}

} // namespace strata::engine
