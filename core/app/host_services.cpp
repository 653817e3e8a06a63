#include "app/host_services.hpp"

#include "common/log.hpp"

#include <algorithm>

namespace strata::app {

namespace {

const topology::machine &machine_of(void *ctx) { return *static_cast<const topology::machine *>(ctx); }

void host_log(void *, int32_t level, const char *plugin, const char *message) {
    const log::level l = level <= STRATA_LOG_DEBUG  ? log::level::debug
                         : level == STRATA_LOG_INFO ? log::level::info
                         : level == STRATA_LOG_WARN ? log::level::warn
                                                    : log::level::error;
    if (log::get_level() <= l) log::write(l, plugin ? plugin : "plugin", message ? message : "");
}

int32_t host_physical_cores(void *ctx) { return machine_of(ctx).cores; }
int32_t host_logical_cpus(void *ctx) { return machine_of(ctx).pus; }

int32_t host_pinning_cpus(void *ctx, int32_t *cpus, int32_t cap) {
    const auto &pus = machine_of(ctx).one_pu_per_core;
    const int32_t n = std::min<int32_t>(cap, static_cast<int32_t>(pus.size()));
    for (int32_t i = 0; i < n; ++i) cpus[i] = pus[static_cast<size_t>(i)];
    return n;
}

} // namespace

strata_host_services make_host_services(const topology::machine *machine) {
    strata_host_services h{};
    h.struct_size = sizeof h;
    h.host_abi_major = STRATA_ABI_MAJOR;
    h.host_abi_minor = STRATA_ABI_MINOR;
    h.ctx = const_cast<topology::machine *>(machine);
    h.log = host_log;
    h.physical_cores = host_physical_cores;
    h.logical_cpus = host_logical_cpus;
    h.pinning_cpus = host_pinning_cpus;
    return h;
}

} // namespace strata::app
