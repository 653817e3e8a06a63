// The C `strata_engine_api` table over the engine's replicas (one, or data parallel's N), handed to frontend plugins.
#pragma once

#include "engine/replica_set.hpp"

namespace strata::engine {

// The returned table borrows `e`, which must outlive every frontend using it.
strata_engine_api make_engine_api(replica_set &e);

} // namespace strata::engine
