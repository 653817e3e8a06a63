// Whether an MPI launcher started this process, from the environment variables OpenMPI and MPICH (Hydra) set, and
// how many processes it started (0 when none says).
#pragma once

#include <cstdlib>
#include <string>

namespace strata::distributed {

inline int launched_world_size() {
    for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
        if (const char *s = std::getenv(v); s != nullptr && *s != '\0') {
            char *end = nullptr;
            const long n = std::strtol(s, &end, 10);
            if (end != s && n > 0 && n < 1 << 20) return static_cast<int>(n);
        }
    }
    return 0;
}

} // namespace strata::distributed
