// config.json's quantization_config (GPTQ, AWQ and FP8 checkpoints) read into what the repacking needs, and the
// repacking itself: each quantized linear layer's qweight / qzeros / scales (/ g_idx) as published by AutoGPTQ (and
// GPTQModel) and AutoAWQ (GEMM), rewritten once at load into one of Strata's group-integer formats (plugin_abi.h's
// STRATA_TYPE_Q{4,8}_G{32,64,128}): row-major like every other weight, the same integers, scales and zero points;
// an FP8 layer's e4m3 weight and its scales (hf_fp8.hpp) into STRATA_TYPE_F8_E4M3_B{32,128}.
#pragma once

#include "model_file/safetensors_file.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace strata {

struct hf_quantization {
    std::string method;           // "" (unquantized), "gptq", "awq", "fp8" or "compressed-tensors"
    int bits = 0;                 // 4 or 8 (FP8: 8)
    int64_t group_size = 0;       // elements per group along the input; -1: one group per row
    bool desc_act = false;        // GPTQ's act-order: g_idx may permute the inputs among the groups
    bool static_groups = false;   // GPTQ's groups fixed before act-order's permutation: g_idx then keeps them in place
    bool sym = true;              // GPTQ's symmetric zero points: qzeros must then all hold the middle value
    bool zeros_minus_one = false; // AutoGPTQ's checkpoint format "gptq" (v1) stores each zero point minus one
    bool quantized_lm_head = false; // a plan from config.json alone counts lm_head as quantized
    // FP8 (method "fp8" or "compressed-tensors", e4m3 weights): how weight_scale is laid out ("tensor": one scale,
    // "channel": one per output, "block": one per block_rows x block_cols tile), whether each layer carries a static
    // activation scale (input_scale: read and checked, not applied; the activations stay f32), and the modules the
    // checkpoint leaves unquantized (names, or "re:" patterns as compressed-tensors writes them).
    std::string fp8_scales;
    int64_t block_rows = 0, block_cols = 0;
    bool static_input_scale = false;
    std::vector<std::string> ignore;
    std::vector<std::regex> ignore_patterns; // the "re:" entries of `ignore`, compiled

    bool is_fp8() const { return method == "fp8" || method == "compressed-tensors"; }
    // Whether `module` ("lm_head", "model.layers.0.mlp.gate_proj") is one the checkpoint leaves unquantized.
    bool ignores(const std::string &module) const;
};

// Reads quantization_config; refuses a method, version or key Strata does not implement, naming it. `origin` is
// config.json's path for messages.
hf_quantization read_quantization_config(const nlohmann::json &qc, const std::string &origin);

// The parts of one quantized linear layer (pointers into the shards): GPTQ / AWQ's qweight, qzeros, scales (g_idx may
// be null), or FP8's weight, weight_scale (or fp8's weight_scale_inv) and input_scale (may be null).
struct quantized_linear {
    std::string prefix; // "model.layers.0.self_attn.q_proj"
    const safetensors_tensor *qweight = nullptr, *qzeros = nullptr, *scales = nullptr, *g_idx = nullptr;
    const safetensors_tensor *weight = nullptr, *weight_scale = nullptr, *input_scale = nullptr;
    // The tensor that holds the layer's integers or e4m3 bytes (qweight or weight), for sizes and messages.
    const safetensors_tensor *packed() const { return qweight != nullptr ? qweight : weight; }
};

// The group-integer type for rows of `cols` elements quantized in groups of `group_size` (-1: the whole row): the
// largest block of 128, 64 or 32 elements that divides the group, so each block lies in one group. 0 when none does.
uint32_t group_int_type(int bits, int64_t group_size, int64_t cols);

// The type a layer of `cols` inputs is repacked into for `q` (group-integer or FP8); 0 when no block fits.
uint32_t repacked_type(const hf_quantization &q, int64_t cols);

struct repacked_weight {
    uint32_t type = 0; // STRATA_TYPE_Q*_G*
    int64_t rows = 0, cols = 0; // output features, input features
    // rows x row bytes, then (input_order) cols int32: the input each repacked column holds (act-order's groups
    // sorted), as gguf::tensor_info::input_order and strata_tensor_view.input_order describe.
    std::vector<uint8_t> bytes;
    bool input_order = false;
};

// Checks every part's dtype and shape against the method's packing (naming the tensor and the expected shape) and
// rewrites the layer as rows of group-integer blocks; an act-order g_idx that permutes the inputs among the groups
// sorts them by group and keeps the order. `where` names the shard for messages.
repacked_weight repack_quantized_linear(const hf_quantization &q, const quantized_linear &parts, const std::string &where);

// repack_quantized_linear over many layers (each with the shard it is in, for messages) on up to `threads` threads
// (0: one per core), with a progress line over their packed bytes. Results in the layers' order; when layers fail,
// the first failing one's error (in that order) is thrown, so the message does not depend on thread timing.
std::vector<repacked_weight> repack_quantized_linears(const hf_quantization &q,
                                                      const std::vector<std::pair<quantized_linear, std::string>> &layers,
                                                      unsigned threads = 0);

// Bytes of a repacked [rows, cols] weight of a Strata type (for plans made from config.json alone), with its input
// order when `input_order`.
uint64_t repacked_bytes(uint32_t type, int64_t rows, int64_t cols, bool input_order = false);

} // namespace strata
