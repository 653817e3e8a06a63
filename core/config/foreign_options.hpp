// Options of vLLM and llama.cpp that have no meaning in this runtime, with the reason: a user who passes one (as a
// flag or a YAML key) learns why instead of reading "unknown option". Options that do mean something are schema keys
// with aliases (core_schema.cpp), never entries here.
#pragma once

#include <optional>
#include <string_view>

namespace strata::config {

// `flag` as written with dashes ("--trust-remote-code", "-sm"). nullopt when the option is not a known foreign one.
std::optional<std::string_view> why_not_here(std::string_view flag);

} // namespace strata::config
