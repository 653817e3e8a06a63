// A build without MPI (STRATA_WITH_MPI=OFF, or no MPI found): pipeline ranks run in one process only, and a start by
// mpirun is refused instead of running N unrelated copies of the whole model.
#include "distributed/launch_env.hpp"
#include "distributed/transport.hpp"

#include "common/error.hpp"

namespace strata::distributed {

transport *launched_transport(int *, char ***) {
    if (const int n = launched_world_size(); n > 1)
        fail("started by an MPI launcher as one of {} processes, but this runtime was built without MPI; install "
             "OpenMPI (Debian: libopenmpi-dev) and rebuild with -DSTRATA_WITH_MPI=ON, or run one process (pipeline "
             "ranks then run in it: -pp N)",
             n);
    return nullptr;
}

void finalize_transport() {}

} // namespace strata::distributed
