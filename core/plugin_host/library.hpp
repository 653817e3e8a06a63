// One loaded plugin library: the dlopen handle, the plugin's static info and where it came from.
#pragma once

#include <strata/plugin_abi.h>

#include <boost/dll/shared_library.hpp>

#include <filesystem>
#include <memory>
#include <string>

namespace strata::plugins {

struct library {
    boost::dll::shared_library so;           // unloaded (dlclose) when the last shared_ptr to this library dies
    const strata_plugin_info *info = nullptr; // static storage inside `so`; valid while `so` is loaded
    std::filesystem::path path;               // canonical path of the .so

    // "libstrata_cpu.so": what messages name.
    std::string file_name() const { return path.filename().string(); }
};

// dlopens `so` (RTLD_LOCAL | RTLD_NOW), calls its strata_plugin_entry with `host` and checks the returned info
// (struct size, ABI version, library name, descriptor list, config keys) — but not the descriptors themselves.
// Throws strata::error with the bare reason (no path) when the file is refused.
std::shared_ptr<const library> open_library(const std::filesystem::path &so, const strata_host_services *host);

} // namespace strata::plugins
