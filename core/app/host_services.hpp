// The strata_host_services table plugins receive: logging into core's log and topology facts from hwloc.
#pragma once

#include "topology/topology.hpp"

#include <strata/plugin_abi.h>

namespace strata::app {

// Borrows `machine`, which must outlive every plugin object.
strata_host_services make_host_services(const topology::machine *machine);

} // namespace strata::app
