// Worker: choosing and starting the device. By name it must run (else an error with the plugin's reason); "auto"
// takes the best scoring device that starts and names once every device it skipped and why, but stops at one that
// refuses what it was asked (an invalid argument) rather than run the request elsewhere.
#include "engine/worker.hpp"
#include "engine/engine_options.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "distributed/transport.hpp"
#include "engine/engine_util.hpp"

#include <algorithm>

namespace strata::engine {

using namespace detail;

void worker::init_device(int32_t pipeline_rank, int32_t n_pipeline_ranks, const std::string &device) {
    device_stage_ = pipeline_rank;
    device_stages_ = n_pipeline_ranks;
    // Device: by name (an error that says why when it cannot run), or "auto": the best scoring one, falling back to
    // the next (the CPU) with one warning when it is missing, unusable here or fails to start, and an error when it
    // refuses the configuration (STRATA_ERR_INVALID_ARGUMENT).
    const std::string &wanted = device.empty() ? opts_.device : device;
    strata_status st{};
    auto start = [&](const plugins::handle<strata_device_desc> &h, strata_status *why) -> strata_device * {
        strata_device_create_args dargs{};
        dargs.struct_size = sizeof dargs;
        dargs.host = host_;
        auto it = opts_.device_configs.find(h.desc->header.name);
        dargs.config = it != opts_.device_configs.end() ? it->second : opts_.device_config;
        // Replicas and tensor-parallel ranks compute at the same time: each a device instance of its own. Ranks that
        // are processes (under mpirun) divide their host among the processes on it.
        const distributed::transport *link = opts_.pipeline_transport;
        const bool rank_process = link != nullptr && tp_.size > 1;
        dargs.instance = rank_process ? link->local_rank() : opts_.data_parallel_rank * tp_.size + tp_.rank;
        dargs.n_instances = rank_process ? link->local_size() : opts_.data_parallel_size * tp_.size;
        dargs.pipeline_rank = pipeline_rank;
        dargs.n_pipeline_ranks = n_pipeline_ranks;
        return h.desc->create(&dargs, why);
    };
    if (wanted == "auto") {
        std::vector<plugins::handle<strata_device_desc>> ranked;
        for (const std::string &name : registry_.names(STRATA_KIND_DEVICE)) ranked.push_back(registry_.find_device(name));
        std::stable_sort(ranked.begin(), ranked.end(),
                         [](const auto &a, const auto &b) { return a.desc->score() > b.desc->score(); });
        std::string skipped;
        // Devices that cannot run here are named with their reason (a GPU plugin without a GPU or driver).
        for (const auto &h : ranked) {
            if (h.desc->score() > 0) continue;
            strata_status why{};
            strata_device *d = start(h, &why); // for its reason; a device that scores 0 refuses to start
            if (d != nullptr) h.desc->destroy(d);
            skipped += fmt::format("{}'{}' ({})", skipped.empty() ? "" : ", ", h.desc->header.name,
                                   why.message[0] ? std::string(why.message) : std::string("not usable here"));
        }
        for (const auto &h : ranked) {
            if (h.desc->score() <= 0) continue;
            strata_status why{};
            device_ = start(h, &why);
            if (device_ == nullptr) {
                // A device that runs here but refuses what was asked of it (its [cuda] or [cpu] table, more GPUs for the
                // pipeline ranks or replicas than there are) is not skipped: the next one down, the CPU, would run
                // something else than was asked, only slower.
                if (why.code == STRATA_ERR_INVALID_ARGUMENT) {
                    // The devices `auto` would have gone on to are the ways to run without this one.
                    std::string others;
                    for (auto next = std::find_if(ranked.begin(), ranked.end(),
                                                  [&](const auto &r) { return r.desc == h.desc; }) + 1;
                         next != ranked.end(); ++next) {
                        if (next->desc->score() <= 0) continue;
                        others += fmt::format("{}[engine] device = \"{}\" (--device {})", others.empty() ? "" : " or ",
                                              next->desc->header.name, next->desc->header.name);
                    }
                    fail("device = \"auto\": '{}' can run on this machine but refused this configuration: {}{}",
                         h.desc->header.name, status_text(why),
                         others.empty() ? std::string()
                                        : "; change what it names, or set " + others + " to run without it");
                }
                skipped += fmt::format("{}'{}' ({})", skipped.empty() ? "" : ", ", h.desc->header.name, status_text(why));
                continue;
            }
            device_desc_ = h;
            break;
        }
        if (device_ == nullptr) {
            fail("no usable device plugin found (device = \"auto\"){}; is the cpu plugin in [plugins] paths?",
                 skipped.empty() ? std::string() : ": " + skipped);
        }
        if (!skipped.empty()) {
            log::warn("engine", "device = \"auto\": using '{}'; skipped {}", device_desc_.desc->header.name, skipped);
        }
    } else {
        device_desc_ = registry_.find_device(wanted);
        if (device_desc_.desc == nullptr) {
            fail("device '{}' is not provided by any loaded plugin (available: {}); set [engine] device",
                 wanted, fmt::join(registry_.names(STRATA_KIND_DEVICE), ", "));
        }
        device_ = start(device_desc_, &st);
        if (device_desc_.desc->score() <= 0 || device_ == nullptr) {
            if (device_ != nullptr) device_desc_.desc->destroy(device_);
            device_ = nullptr;
            fail("device '{}' cannot run on this machine: {}; set [engine] device = \"auto\" or \"cpu\"", wanted,
                 st.message[0] ? status_text(st) : std::string("the plugin scores 0 here"));
        }
    }
    device_name_ = device_desc_.desc->header.name;
    // A device without its own memory (no copy slot) or one that says so reads host tiers in place.
    device_reads_host_ = STRATA_HAS_SLOT(device_desc_.desc, host_addressable)
                             ? device_desc_.desc->host_addressable(device_) != 0
                             : !STRATA_HAS_SLOT(device_desc_.desc, copy);
}

} // namespace strata::engine
