// A 64-bit identity of a model file for the prefix cache: KV computed by one model must never be reused by another,
// across restarts too. Hashes the metadata and tensor table, and samples of every tensor's bytes (a fine-tune with the
// same shapes differs there), without reading the whole file.
#pragma once

#include "model_file/model_file.hpp"

#include <cstdint>

namespace strata::engine {

uint64_t model_fingerprint(const model_file &file);

} // namespace strata::engine
