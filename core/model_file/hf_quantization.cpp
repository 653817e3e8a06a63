#include "model_file/hf_quantization.hpp"

#include "common/error.hpp"
#include "common/half.hpp"
#include "model_file/json_input.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <strata/plugin_abi.h>

#include <cstring>
#include <set>

namespace strata {

namespace {

using json = nlohmann::json;

// Keys of quantization_config that describe how the checkpoint was made, not how to run it (AutoGPTQ, GPTQModel,
// AutoAWQ and transformers' GPTQConfig / AwqConfig write them); vLLM ignores them too.
const std::set<std::string, std::less<>> k_inert_quant_keys = {
    "damp_percent", "damp_auto_increment", "true_sequential", "static_groups", "model_name_or_path",
    "model_file_base_name", "meta", "mse", "tokenizer", "dataset", "use_cuda_fp16", "model_seqlen",
    "block_name_to_quantize", "module_name_preceding_first_block", "batch_size", "pad_token_id", "use_exllama",
    "max_input_length", "exllama_config", "cache_block_outputs", "modules_in_block_to_quantize", "backend",
    "do_fuse", "fuse_max_seq_len", "modules_to_fuse", "quantizer", "act_group_aware", "v2", "v2_alpha"};

int64_t checked_group(int64_t g, const std::string &origin) {
    if (g != -1 && (g < 32 || g % 32 != 0))
        fail("{}: quantization_config.group_size {} is not implemented; Strata runs groups of a multiple of 32 "
             "elements (32, 64, 128, ...) or -1 (one group per row)", origin, g);
    return g;
}

// One element of a little-endian int32 tensor.
inline uint32_t word_at(const safetensors_tensor &t, int64_t i) {
    uint32_t w;
    std::memcpy(&w, t.data + 4 * i, 4);
    return w;
}

void expect_shape(const safetensors_tensor &t, const char *dtype, std::initializer_list<int64_t> shape,
                  const std::string &where, const char *what) {
    if (t.dtype != dtype || t.shape != std::vector<int64_t>(shape))
        fail("{}: '{}' is {} {}; {} needs {} [{}]", where, t.name, t.dtype, fmt::join(t.shape, "x"), what, dtype,
             fmt::join(shape, ", "));
}

// A group scale as the f16 the block stores: F16 as it is, BF16 or F32 only where f16 holds it exactly.
uint16_t scale_as_f16(const safetensors_tensor &s, int64_t i, const std::string &where) {
    uint16_t h = 0;
    if (s.dtype == "F16") {
        std::memcpy(&h, s.data + 2 * i, 2);
        return h;
    }
    float v;
    if (s.dtype == "BF16") {
        std::memcpy(&h, s.data + 2 * i, 2);
        v = bf16_to_f32(h);
    } else {
        std::memcpy(&v, s.data + 4 * i, 4);
    }
    h = f32_to_f16(v);
    if (f16_to_f32(h) != v)
        fail("{}: '{}' holds the scale {} ({}), which f16 does not hold exactly; Strata's group-integer blocks keep "
             "f16 scales", where, s.name, v, s.dtype);
    return h;
}

} // namespace

hf_quantization read_quantization_config(const json &qc, const std::string &origin) {
    if (!qc.is_object()) fail("{}: quantization_config is {}, expected an object", origin, brief_json(qc));
    json_keys k(qc, origin, "quantization_config.");
    hf_quantization q;
    const auto method = k.text("quant_method");
    if (!method) fail("{}: quantization_config has no quant_method", origin);
    if (*method == "gptq") {
        q.method = "gptq";
        q.bits = static_cast<int>(k.integer("bits").value_or(0));
        q.group_size = checked_group(k.integer("group_size").value_or(128), origin);
        q.desc_act = k.flag("desc_act").value_or(false);
        q.sym = k.flag("sym").value_or(true);
        const std::string format = k.text("checkpoint_format").value_or("gptq");
        if (format != "gptq" && format != "gptq_v2")
            fail("{}: quantization_config.checkpoint_format '{}' is not implemented (Strata reads AutoGPTQ's "
                 "'gptq' and GPTQModel's 'gptq_v2')", origin, format);
        q.zeros_minus_one = format == "gptq";
        q.quantized_lm_head = k.flag("lm_head").value_or(false);
        if (k.flag("is_marlin_format").value_or(false))
            fail("{}: is_marlin_format is true: the weights are packed for the Marlin kernel; use the plain GPTQ "
                 "checkpoint", origin);
        if (auto p = k.text("pack_dtype"); p && *p != "int32")
            fail("{}: quantization_config.pack_dtype '{}' is not implemented (int32 only)", origin, *p);
        if (const json *d = k.raw("dynamic"); d != nullptr && !d->empty())
            fail("{}: quantization_config.dynamic sets other bits or groups per module; not implemented", origin);
    } else if (*method == "awq") {
        q.method = "awq";
        q.bits = static_cast<int>(k.integer("bits").value_or(k.integer("w_bit").value_or(0)));
        q.group_size = checked_group(k.integer("group_size").value_or(k.integer("q_group_size").value_or(128)), origin);
        q.sym = false;
        if (!k.flag("zero_point").value_or(true))
            fail("{}: quantization_config.zero_point is false; AWQ without zero points is not implemented", origin);
        const std::string version = k.text("version").value_or("gemm");
        if (version != "gemm" && version != "GEMM")
            fail("{}: AWQ version '{}' is not implemented (Strata reads AutoAWQ's GEMM packing, the one vLLM reads)",
                 origin, version);
        k.raw("modules_to_not_convert"); // those layers keep a plain .weight, read as any other
        if (q.bits != 4) fail("{}: AWQ with {} bits is not implemented (4 bits only, as vLLM)", origin, q.bits);
    } else {
        fail("{}: quantization_config.quant_method '{}' is not implemented; Strata reads GPTQ (gptq) and AWQ (awq) "
             "checkpoints and unquantized BF16/F16/F32 ones (FP8 is not read yet)", origin, *method);
    }
    if (q.bits != 4 && q.bits != 8)
        fail("{}: quantization_config.bits {} is not implemented; Strata runs 4- and 8-bit {} checkpoints", origin,
             q.bits, q.method);
    if (const std::vector<std::string> left = k.unread(k_inert_quant_keys); !left.empty())
        fail("{}: quantization_config key(s) {} of this {} checkpoint are not implemented, so Strata cannot run it "
             "correctly", origin, fmt::join(left, ", "), q.method);
    return q;
}

uint32_t group_int_type(int bits, int64_t group_size, int64_t cols) {
    const int64_t g = group_size > 0 ? group_size : cols;
    const uint32_t base = bits == 4 ? STRATA_TYPE_Q4_G32 : STRATA_TYPE_Q8_G32;
    if (g <= 0 || cols % g != 0) return 0;
    if (g % 128 == 0) return base + 2;
    if (g % 64 == 0) return base + 1;
    if (g % 32 == 0) return base;
    return 0;
}

uint64_t group_int_bytes(uint32_t type, int64_t rows, int64_t cols) {
    const int64_t g = 32 << ((type - STRATA_TYPE_Q4_G32) % 3);
    const int bits = type >= STRATA_TYPE_Q8_G32 ? 8 : 4;
    return static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols / g) * static_cast<uint64_t>(4 + g * bits / 8);
}

repacked_weight repack_quantized_linear(const hf_quantization &q, const quantized_linear &p, const std::string &where) {
    if (p.qweight == nullptr || p.qzeros == nullptr || p.scales == nullptr)
        fail("{}: '{}' lacks {}; a {} layer has qweight, qzeros and scales", where, p.prefix,
             p.qweight == nullptr ? "qweight" : p.qzeros == nullptr ? "qzeros" : "scales", q.method);
    const int pf = 32 / q.bits; // values per int32
    const uint32_t mask = (1u << q.bits) - 1;
    const bool awq = q.method == "awq";
    const auto &qw = p.qweight->shape;
    if (p.qweight->dtype != "I32" || qw.size() != 2 || qw[0] <= 0 || qw[1] <= 0)
        fail("{}: '{}' is {} {}; {} packs qweight as a 2-D I32 tensor", where, p.qweight->name, p.qweight->dtype,
             fmt::join(qw, "x"), q.method);
    // GPTQ packs along the input ([in / pf, out]), AWQ along the output ([in, out / pf]).
    const int64_t in = awq ? qw[0] : qw[0] * pf;
    const int64_t out = awq ? qw[1] * pf : qw[1];
    const int64_t group = q.group_size > 0 ? q.group_size : in;
    if (in % group != 0 || out % pf != 0)
        fail("{}: '{}' has {} inputs and {} outputs; group_size {} must divide the inputs", where, p.prefix, in, out,
             q.group_size);
    const int64_t n_groups = in / group;
    if (p.scales->shape != std::vector<int64_t>{n_groups, out} ||
        (p.scales->dtype != "F16" && p.scales->dtype != "BF16" && p.scales->dtype != "F32"))
        fail("{}: '{}' is {} {}; {} needs F16 [{}, {}] (groups x outputs)", where, p.scales->name, p.scales->dtype,
             fmt::join(p.scales->shape, "x"), q.method, n_groups, out);
    expect_shape(*p.qzeros, "I32", {n_groups, out / pf}, where, "the zero points");
    if (p.g_idx != nullptr) {
        expect_shape(*p.g_idx, "I32", {in}, where, "g_idx");
        for (int64_t i = 0; i < in; ++i)
            if (static_cast<int64_t>(static_cast<int32_t>(word_at(*p.g_idx, i))) != i / group)
                fail("{}: '{}' puts input {} in group {}, not {}: this act-order (desc_act) checkpoint permutes its "
                     "groups, which needs the activations permuted per layer; not implemented yet. Use a checkpoint "
                     "quantized with desc_act false", where, p.g_idx->name, i,
                     static_cast<int32_t>(word_at(*p.g_idx, i)), i / group);
    }
    repacked_weight r;
    r.type = group_int_type(q.bits, q.group_size, in);
    if (r.type == 0)
        fail("{}: '{}' has {} inputs, which no block of 32, 64 or 128 divides", where, p.prefix, in);
    r.rows = out;
    r.cols = in;
    const int64_t g = 32 << ((r.type - STRATA_TYPE_Q4_G32) % 3);
    const int64_t block_bytes = 4 + g * q.bits / 8;
    const int64_t row_bytes = in / g * block_bytes;
    r.bytes.assign(static_cast<size_t>(out * row_bytes), 0);
    // AWQ's order of eight 4-bit values in a word: value at shift 4 j is column order[j] of the eight.
    static constexpr int awq_shift_of_column[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    auto shift_of = [&](int64_t k) { return awq ? q.bits * awq_shift_of_column[k % pf] : q.bits * static_cast<int>(k % pf); };
    // Block headers: scale and zero of each (group, output).
    for (int64_t grp = 0; grp < n_groups; ++grp) {
        for (int64_t o = 0; o < out; ++o) {
            uint32_t zero = (word_at(*p.qzeros, grp * (out / pf) + o / pf) >> shift_of(o)) & mask;
            if (q.zeros_minus_one) zero += 1; // as AutoGPTQ's and vLLM's kernels add it back
            // vLLM's symmetric GPTQ kernels ignore qzeros and use the middle value: a checkpoint that says sym must
            // store exactly that, or the two runtimes would compute different weights.
            if (q.sym && q.method == "gptq" && zero != (mask + 1) / 2)
                fail("{}: '{}' stores the zero point {} for group {} of output {}, but quantization_config says sym "
                     "(every zero point {}); the checkpoint and its config.json disagree", where, p.qzeros->name, zero,
                     grp, o, (mask + 1) / 2);
            if (zero > 255)
                fail("{}: '{}' stores the zero point 256 (255 + 1 in AutoGPTQ's format) for group {} of output {}; "
                     "8-bit blocks hold zero points up to 255", where, p.qzeros->name, grp, o);
            const uint16_t scale = scale_as_f16(*p.scales, grp * out + o, where);
            for (int64_t b = grp * group / g; b < (grp + 1) * group / g; ++b) {
                uint8_t *blk = r.bytes.data() + o * row_bytes + b * block_bytes;
                std::memcpy(blk, &scale, 2);
                blk[2] = static_cast<uint8_t>(zero);
            }
        }
    }
    // The integers, input row by input row (the packed words' order, so the shard is read sequentially).
    for (int64_t i = 0; i < in; ++i) {
        const int64_t b = i / g, e = i % g;
        for (int64_t o = 0; o < out; ++o) {
            const uint32_t word = awq ? word_at(*p.qweight, i * (out / pf) + o / pf)
                                      : word_at(*p.qweight, (i / pf) * out + o);
            const uint32_t v = (word >> (awq ? shift_of(o) : shift_of(i))) & mask;
            uint8_t *qs = r.bytes.data() + o * row_bytes + b * block_bytes + 4;
            if (q.bits == 8) {
                qs[e] = static_cast<uint8_t>(v);
            } else {
                const int64_t chunk = e / 32, j = e % 32;
                qs[chunk * 16 + j % 16] |= static_cast<uint8_t>(j < 16 ? v : v << 4);
            }
        }
    }
    return r;
}

} // namespace strata
