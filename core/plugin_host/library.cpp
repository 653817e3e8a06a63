#include "plugin_host/library.hpp"

#include "common/error.hpp"
#include "plugin_host/abi_rules.hpp"

#include <dlfcn.h>

#include <exception>
#include <system_error>
#include <type_traits>

namespace strata::plugins {

namespace {

// Boost.DLL reports a generic "bad file descriptor"; the useful text ("invalid ELF header", "undefined symbol: x")
// is still waiting in dlerror(), which Boost leaves untouched after a failed dlopen.
std::string last_dlerror() {
    const char *msg = ::dlerror();
    return msg != nullptr ? std::string(msg) : std::string("unknown dlopen error");
}

boost::dll::shared_library load_shared_object(const std::filesystem::path &so) {
    std::error_code fs_ec;
    if (!std::filesystem::is_regular_file(so, fs_ec)) fail("not a regular file (missing, or a directory?)");
    ::dlerror(); // clear any stale message so the one we report belongs to this dlopen
    boost::dll::fs::error_code ec;
    boost::dll::shared_library lib(boost::dll::fs::path(so.native()),
                                   boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now, ec);
    if (ec || !lib.is_loaded()) fail("not a loadable shared object: {}", last_dlerror());
    return lib;
}

const strata_plugin_info *call_entry(const boost::dll::shared_library &so, const strata_host_services *host) {
    if (!so.has(STRATA_PLUGIN_ENTRY_SYMBOL)) {
        fail("no '{}' symbol: not a Strata plugin (define it with STRATA_PLUGIN_DEFINE and build with "
             "strata_add_plugin)",
             STRATA_PLUGIN_ENTRY_SYMBOL);
    }
    auto *entry = so.get<std::remove_pointer_t<strata_plugin_entry_fn>>(STRATA_PLUGIN_ENTRY_SYMBOL);
    strata_status status{};
    const strata_plugin_info *info = nullptr;
    // The ABI forbids exceptions here, but a C++ plugin can still leak one; refuse it instead of terminating.
    try {
        info = entry(host, &status);
    } catch (const std::exception &e) {
        fail("{} threw an exception (plugins must not throw across the C ABI): {}", STRATA_PLUGIN_ENTRY_SYMBOL,
             e.what());
    } catch (...) {
        fail("{} threw a non-standard exception (plugins must not throw across the C ABI)", STRATA_PLUGIN_ENTRY_SYMBOL);
    }
    if (info == nullptr) {
        status.message[sizeof status.message - 1] = '\0'; // never trust a plugin to terminate the buffer
        fail("{} returned NULL (the plugin declined to load): {} (code {})", STRATA_PLUGIN_ENTRY_SYMBOL,
             status.message[0] != '\0' ? status.message : "no message", status.code);
    }
    return info;
}

} // namespace

std::shared_ptr<const library> open_library(const std::filesystem::path &so, const strata_host_services *host) {
    auto lib = std::make_shared<library>();
    lib->path = so;
    lib->so = load_shared_object(so);
    lib->info = call_entry(lib->so, host);
    check_plugin_info(*lib->info);
    return lib;
}

} // namespace strata::plugins
