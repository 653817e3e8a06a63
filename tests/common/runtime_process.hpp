// Runs the built `runtime` executable as a user would, for end-to-end tests of user-facing behaviour and errors.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace strata::testing {

struct runtime_result {
    int exit_code;
    std::string all; // stdout and stderr
};

// `runtime ARGS` with stdin from /dev/null, a private cache folder, a 16 MiB KV cache (start-up touches the KV
// memory; the CPU default is 1 GiB) and warnings only; waits for it and returns its exit code and output.
inline runtime_result run_runtime(const std::string &args) {
    const std::string cmd = "XDG_CACHE_HOME=" STRATA_BINARY_DIR "/test-xdg-default " STRATA_BINARY_DIR
                            "/bin/runtime " + args + " --kv-cache-memory 16MiB --log-level warn </dev/null 2>&1";
    runtime_result r{};
    FILE *p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return {-1, "popen failed"};
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.all.append(buf.data(), n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

} // namespace strata::testing
