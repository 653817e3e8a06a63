// The config tables core itself reads (plugins add theirs from their descriptors).
#pragma once

#include "config/schema.hpp"

namespace strata::app {

// [model], [engine], [plugins], [sampling], plus [memory] and [scheduler], whose keys are declared so that
// setting one says "not supported yet" instead of being accepted and ignored.
config::schema core_schema();

} // namespace strata::app
