// FP8 checkpoints: quantization_config as compressed-tensors (llm-compressor's float-quantized W8A8 / W8A16, e.g.
// RedHatAI's *-FP8-dynamic) and vLLM's / transformers' fp8 (AutoFP8, FineGrainedFP8 with weight_block_size) write
// it, and each layer's e4m3 weight with its per-tensor, per-channel or per-block scales repacked once into
// STRATA_TYPE_F8_E4M3_B{32,128} (an f32 scale per block of a row, the e4m3 bytes as they are). The weights run as
// FP8 and the activations stay f32 (weight-only, as vLLM's Marlin FP8 path runs these checkpoints on GPUs without
// FP8 compute): a static input_scale is read and checked, not applied.
#pragma once

#include "model_file/hf_quantization.hpp"
#include "model_file/json_input.hpp"

namespace strata {

// Reads an FP8 quantization_config (`method` "fp8" or "compressed-tensors") from `k` into `q`, refusing any scheme,
// strategy or key Strata does not implement, naming it. `origin` is config.json's path.
void read_fp8_config(json_keys &k, const std::string &method, hf_quantization &q, const std::string &origin);

// The FP8 type for rows of `cols` elements whose scales change every `block_cols` columns (0: never along a row):
// blocks of 128 where they fit, else 32; 0 when neither divides.
uint32_t fp8_type(int64_t cols, int64_t block_cols);

// Checks the layer's weight (F8_E4M3 [out, in]), its scale tensor's dtype and shape for q.fp8_scales and its
// input_scale against q.static_input_scale (naming the tensor), and rewrites it as rows of FP8 blocks.
repacked_weight repack_fp8_linear(const hf_quantization &q, const quantized_linear &parts, const std::string &where);

} // namespace strata
