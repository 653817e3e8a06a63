// A 64-bit identity of a model file for the prefix cache: KV computed by one model must never be reused by another,
// across restarts too. Hashes the metadata and tensor table, and samples of every tensor's bytes (a fine-tune with the
// same shapes differs there), without reading the whole file.
#pragma once

#include "model_file/model_file.hpp"

#include <cstdint>

namespace strata::engine {

uint64_t model_fingerprint(const model_file &file);

// The identity of KV computed by that model into a cache of kv_type (strata_kv_type): the model's fingerprint for
// float32 (so earlier prefix stores stay valid), another value for each other type, so a block stored in one type is
// never read as another (in memory or in the prefix store, whose folders are named by it). With tensor parallel
// (tensor_parallel_size > 1) a block holds each rank's heads in turn: another value for each size, so a store written
// by one split is never read by another.
uint64_t kv_fingerprint(uint64_t model, uint32_t kv_type, int32_t tensor_parallel_size = 1);

} // namespace strata::engine
