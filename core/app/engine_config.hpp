// The config document read into what the engine and frontends take: engine options, default sampling. Every core key
// is read here (or in runtime_main for the process-wide ones: log level, plugin paths, NUMA binding), including the
// keys users bring from vLLM and llama.cpp that change nothing here: each of those is refused or said at start-up.
#pragma once

#include "config/config_view.hpp"
#include "config/document.hpp"
#include "engine/engine.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <memory>
#include <string>
#include <vector>

namespace strata::app {

// `model_argument` is the model as the user wrote it ("" = the config's [model] path as written). `views` keeps the
// plugin tables' views alive as long as the options.
engine::engine_options engine_options_from(const plugins::registry &registry, const config::document &doc,
                                           const config::schema &s, const std::string &model_argument,
                                           std::vector<std::unique_ptr<config::plugin_config_view>> &views);

// [sampling], with --generation-config's file under the keys the config does not set.
strata_sampling_params sampling_from(const config::document &doc, const config::schema &s,
                                     const std::string &model_path);

} // namespace strata::app
