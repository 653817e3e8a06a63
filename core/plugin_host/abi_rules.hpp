// The checks the host applies to what a plugin's entry point returns, derived from sdk/include/strata/plugin_abi.h.
// Every function throws strata::error with a reason that does not include the file path (the caller adds it).
#pragma once

#include <strata/plugin_abi.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata::plugins {

// "model_arch", "quant", "device", "tier", "frontend"; "unknown" for anything else.
std::string_view kind_name(uint32_t kind);

// Bytes of the kind's descriptor the host requires: the offset of its first optional slot (or its end when it has
// none). 0 for an unknown kind.
size_t host_required_size(uint32_t kind);

// Version, size, names, descriptor list and config keys of the info an entry point returned.
void check_plugin_info(const strata_plugin_info &info);

// One descriptor: known kind, sizes, every required function slot set, non-empty name, kind-specific fields.
void check_descriptor(const strata_descriptor_header *desc, uint32_t index);

// Config keys: non-empty unique names, a valid type.
void check_config_keys(const strata_config_key *keys, uint32_t n);

} // namespace strata::plugins
