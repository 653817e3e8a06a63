// libFuzzer target for the HF checkpoint readers (core/model_file): the first byte picks what the rest is:
//   0: a .safetensors file (header length, JSON header, data) through safetensors_file::parse;
//   1: a config.json through map_hf_config (architecture table, key mapping, rope_scaling, refusals);
//   2: a model.safetensors.index.json through parse_weight_map;
//   3: a settings byte (method, bits, group size, v1 zeros, desc_act), then a .safetensors file whose qweight /
//      qzeros / scales / g_idx are repacked as one GPTQ or AWQ layer (repack_quantized_linear): its bytes must be
//      the size of its type and shape (and input order), and an input order a permutation of the columns;
//   4: a settings byte (scale layout, static activations, compressed-tensors or fp8), then a .safetensors file whose
//      weight / weight_scale(_inv) / input_scale are repacked as one FP8 layer: its bytes must be the size of its type
//      and shape, every block's scale finite.
// Each must succeed or throw strata::error; a crash, a sanitizer report or another exception is a bug. A parsed
// safetensors file's tensors must lie inside the input.
#include "common/error.hpp"
#include "model_file/hf_checkpoint.hpp"
#include "model_file/hf_config.hpp"
#include "model_file/hf_fp8.hpp"
#include "model_file/hf_quantization.hpp"
#include "model_file/safetensors_file.hpp"

#include <strata/plugin_abi.h>

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0] % 5;
    const uint8_t *rest = data + 1;
    const size_t n = size - 1;
    try {
        if (mode == 0) {
            const auto f = strata::safetensors_file::parse(rest, n, "fuzz.safetensors");
            uint64_t total = 0;
            for (const auto &t : f.tensors()) {
                check(t.data >= rest && t.data + t.n_bytes <= rest + n);
                uint64_t elements = 1;
                for (const int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
                check(t.n_bytes == elements * strata::safetensors_file::dtype_bytes(t.dtype)); // no wrapped size
                total += t.n_bytes;
            }
            check(total <= n);
        } else if (mode == 1) {
            strata::metadata_table meta("fuzz/config.json");
            const auto cfg = strata::map_hf_config(std::string_view(reinterpret_cast<const char *>(rest), n),
                                                   "fuzz/config.json", meta);
            check(cfg.architecture != nullptr);
            for (size_t i = 0; i < meta.kv_count(); ++i) (void)meta.kv_summary(i, 60);
        } else if (mode == 3) {
            if (n < 1) return 0;
            strata::hf_quantization q;
            q.method = rest[0] & 1 ? "awq" : "gptq";
            q.bits = !(rest[0] & 1) && (rest[0] & 2) ? 8 : 4;
            const int g = (rest[0] >> 2) & 3;
            q.group_size = g == 3 ? -1 : int64_t{32} << g;
            q.zeros_minus_one = (rest[0] & 0x40) != 0;
            q.desc_act = (rest[0] & 0x80) != 0;
            const auto f = strata::safetensors_file::parse(rest + 1, n - 1, "fuzz.safetensors");
            strata::quantized_linear layer;
            layer.prefix = "l";
            for (const auto &t : f.tensors()) {
                if (t.name.ends_with(".qweight")) layer.qweight = &t;
                else if (t.name.ends_with(".qzeros")) layer.qzeros = &t;
                else if (t.name.ends_with(".scales")) layer.scales = &t;
                else if (t.name.ends_with(".g_idx")) layer.g_idx = &t;
            }
            const auto r = strata::repack_quantized_linear(q, layer, "fuzz.safetensors");
            check(r.bytes.size() == strata::repacked_bytes(r.type, r.rows, r.cols, r.input_order));
            if (r.input_order) {
                const uint64_t rows_end = strata::repacked_bytes(r.type, r.rows, r.cols);
                std::vector<bool> seen(static_cast<size_t>(r.cols), false);
                for (int64_t j = 0; j < r.cols; ++j) {
                    int32_t c;
                    std::memcpy(&c, r.bytes.data() + rows_end + 4 * j, 4);
                    check(c >= 0 && c < r.cols && !seen[static_cast<size_t>(c)]);
                    seen[static_cast<size_t>(c)] = true;
                }
            }
        } else if (mode == 4) {
            if (n < 1) return 0;
            strata::hf_quantization q;
            q.method = rest[0] & 8 ? "fp8" : "compressed-tensors";
            q.bits = 8;
            static constexpr const char *layouts[] = {"tensor", "channel", "block", "block"};
            q.fp8_scales = layouts[rest[0] & 3];
            if (q.fp8_scales == "block") q.block_rows = q.block_cols = (rest[0] & 3) == 2 ? 64 : 128;
            q.static_input_scale = (rest[0] & 4) != 0;
            const auto f = strata::safetensors_file::parse(rest + 1, n - 1, "fuzz.safetensors");
            strata::quantized_linear layer;
            layer.prefix = "l";
            for (const auto &t : f.tensors()) {
                if (t.name.ends_with(".weight")) layer.weight = &t;
                else if (t.name.ends_with(".weight_scale") || t.name.ends_with(".weight_scale_inv")) layer.weight_scale = &t;
                else if (t.name.ends_with(".input_scale")) layer.input_scale = &t;
            }
            const auto r = strata::repack_quantized_linear(q, layer, "fuzz.safetensors");
            check(r.type == strata::fp8_type(r.cols, q.block_cols) && r.type != 0);
            check(r.bytes.size() == strata::repacked_bytes(r.type, r.rows, r.cols));
            const size_t block_bytes = r.type == STRATA_TYPE_F8_E4M3_B128 ? 132 : 36;
            for (size_t at = 0; at < r.bytes.size(); at += block_bytes) {
                float scale;
                std::memcpy(&scale, r.bytes.data() + at, 4);
                check(std::isfinite(scale));
            }
        } else {
            const auto map = strata::parse_weight_map(std::string_view(reinterpret_cast<const char *>(rest), n),
                                                      "fuzz/model.safetensors.index.json");
            for (const auto &[shard, names] : map) check(shard.find('/') == std::string::npos && !names.empty());
        }
    } catch (const strata::error &) {
    }
    return 0;
}
