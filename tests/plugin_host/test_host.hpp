// Host services for the plugin host tests: the log callback records what plugins say.
#pragma once

#include <strata/plugin_abi.h>

#include <filesystem>
#include <string>
#include <vector>

namespace strata::test {

struct captured_host {
    std::vector<std::string> messages; // "<plugin>: <message>"
    strata_host_services services{};

    captured_host() {
        services.struct_size = sizeof services;
        services.host_abi_major = STRATA_ABI_MAJOR;
        services.host_abi_minor = STRATA_ABI_MINOR;
        services.ctx = this;
        services.log = [](void *ctx, int32_t, const char *plugin, const char *message) {
            static_cast<captured_host *>(ctx)->messages.push_back(std::string(plugin) + ": " + message);
        };
        services.physical_cores = [](void *) { return 1; };
        services.logical_cpus = [](void *) { return 1; };
        services.pinning_cpus = [](void *, int32_t *, int32_t) { return 0; };
    }
    captured_host(const captured_host &) = delete;
    captured_host &operator=(const captured_host &) = delete;

    const strata_host_services *get() const { return &services; }
};

inline std::string file_name(const char *path) { return std::filesystem::path(path).filename().string(); }

} // namespace strata::test
