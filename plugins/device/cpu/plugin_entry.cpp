// The module's one exported symbol (only the MODULE target compiles this file; tests link the impl library).
#include "cpu_device.hpp"

#include <strata/plugin.hpp>

STRATA_PLUGIN_DEFINE(*strata_cpu_plugin_info())
