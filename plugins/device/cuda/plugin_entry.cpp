// The module's one exported symbol. Cheap by the ABI's rule: no CUDA call happens here (score() and create() are
// where the runtime is first touched).
#include "cuda_device.hpp"

#include <strata/plugin.hpp>

STRATA_PLUGIN_DEFINE(*strata_cuda_plugin_info())
