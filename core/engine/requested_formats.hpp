// What the user asked of the model's formats and of the KV cache's home, checked against what the file holds and
// what the device is: vLLM's --quantization and --cpu-kv-cache. Start-up and `runtime plan` call the same checks.
#pragma once

#include "model_file/model_file.hpp"

#include <string>

namespace strata::engine {

// "auto" accepts any file; "gguf" requires a GGUF; the name of an HF quantization method (gptq, awq,
// compressed-tensors, fp8, or vLLM's gptq_marlin / awq_marlin) must be the checkpoint's own; anything else is refused
// with what the file holds and why.
void check_quantization(const model_file &file, const std::string &quantization, const std::string &path);

// The same check from config.json alone, before the checkpoint is opened (so a wrong --quantization is refused
// before minutes of repacking); silent where config.json is missing or unreadable (the full read reports that).
void check_quantization_before_load(const std::string &quantization, const std::string &path);

// --cpu-kv-cache: the KV cache in host RAM. A device that computes on host memory (cpu) always keeps it there; a
// device with its own memory keeps KV there, so the request is refused with what to use instead.
void check_cpu_kv_cache(bool cpu_kv_cache, bool device_reads_host, const std::string &device_kind);

} // namespace strata::engine
