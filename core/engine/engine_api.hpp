// The C `strata_engine_api` table over an engine, handed to frontend plugins.
#pragma once

#include "engine/engine.hpp"

namespace strata::engine {

// The returned table borrows `e`, which must outlive every frontend using it.
strata_engine_api make_engine_api(engine &e);

} // namespace strata::engine
