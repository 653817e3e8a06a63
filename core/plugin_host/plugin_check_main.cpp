// strata_plugin_check <file.so>...: loads each plugin with the real host checks and prints what it provides.
// Exit status 1 when any file is refused, so CI can assert that plugins (e.g. the SDK examples) are accepted.
#include "common/error.hpp"
#include "plugin_host/registry.hpp"

#include <cstdio>
#include <thread>

namespace {

void log_to_stderr(void *, int32_t level, const char *plugin, const char *message) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    const char *lvl = level >= 0 && level <= 3 ? names[level] : "?";
    std::fprintf(stderr, "[%s] %s: %s\n", lvl, plugin != nullptr ? plugin : "?", message != nullptr ? message : "");
}

int32_t hardware_threads(void *) { return static_cast<int32_t>(std::thread::hardware_concurrency()); }

// Pins nothing: the check never creates workers.
int32_t no_pinning(void *, int32_t *, int32_t) { return 0; }

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <libstrata_x.so>...\n"
                             "Loads each plugin as the runtime would and prints kind/name/version/abi; exits 1 if "
                             "any is refused.\n",
                     argv[0]);
        return 2;
    }
    const strata_host_services host{sizeof(strata_host_services), STRATA_ABI_MAJOR, STRATA_ABI_MINOR, nullptr,
                                    &log_to_stderr,               &hardware_threads, &hardware_threads, &no_pinning};
    strata::plugins::registry reg(&host);
    int refused = 0;
    for (int i = 1; i < argc; ++i) {
        try {
            reg.load_file(argv[i]);
        } catch (const strata::error &e) {
            std::fprintf(stderr, "REFUSED %s\n", e.what());
            ++refused;
        }
    }
    for (const auto &row : reg.list()) {
        std::printf("ok kind=%s name=%s version=%s abi=%s file=%s\n", row.kind.c_str(), row.name.c_str(),
                    row.version.c_str(), row.abi.c_str(), row.path.c_str());
    }
    std::printf("%d loaded, %d refused\n", argc - 1 - refused, refused);
    return refused == 0 ? 0 : 1;
}
