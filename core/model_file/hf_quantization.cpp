#include "model_file/hf_quantization.hpp"

#include "gguf/gguf_types.hpp"
#include "model_file/hf_fp8.hpp"

#include "common/error.hpp"
#include "common/half.hpp"
#include "common/progress.hpp"
#include "model_file/json_input.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <strata/plugin_abi.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace strata {

namespace {

using json = nlohmann::json;

// Keys of quantization_config that describe how the checkpoint was made, not how to run it (AutoGPTQ, GPTQModel,
// AutoAWQ and transformers' GPTQConfig / AwqConfig write them); vLLM ignores them too.
const std::set<std::string, std::less<>> k_inert_quant_keys = {
    "damp_percent", "damp_auto_increment", "true_sequential", "model_name_or_path",
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
        q.static_groups = k.flag("static_groups").value_or(false);
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
    } else if (*method == "fp8" || *method == "compressed-tensors") {
        read_fp8_config(k, *method, q, origin);
    } else {
        fail("{}: quantization_config.quant_method '{}' is not implemented; Strata reads GPTQ (gptq), AWQ (awq) and "
             "FP8 (compressed-tensors, fp8) checkpoints and unquantized BF16/F16/F32 ones", origin, *method);
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

uint32_t repacked_type(const hf_quantization &q, int64_t cols) {
    if (q.is_fp8()) return fp8_type(cols, q.fp8_scales == "block" ? q.block_cols : 0);
    return group_int_type(q.bits, q.group_size, cols);
}

uint64_t repacked_bytes(uint32_t type, int64_t rows, int64_t cols, bool input_order) {
    const gguf::type_traits *tr = gguf::ggml_type_traits(type);
    if (tr == nullptr || tr->block_elems == 0) return 0;
    return static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols / tr->block_elems) * tr->block_bytes +
           (input_order ? static_cast<uint64_t>(cols) * sizeof(int32_t) : 0);
}

bool hf_quantization::ignores(const std::string &module) const {
    for (const std::string &entry : ignore)
        if (entry == module) return true;
    for (const std::regex &pattern : ignore_patterns) // Python's re.match: anchored at the start
        if (std::regex_search(module, pattern, std::regex_constants::match_continuous)) return true;
    return false;
}

repacked_weight repack_quantized_linear(const hf_quantization &q, const quantized_linear &p, const std::string &where) {
    if (q.is_fp8()) return repack_fp8_linear(q, p, where);
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
    // Act-order (desc_act): g_idx gives each input its group, the groups a permutation of the inputs. The repacked
    // rows hold the inputs sorted by group (stable), so every block lies in one group again, and the sorted order is
    // kept beside the rows for the devices to gather the activations through (input_order).
    std::vector<int32_t> order;  // sorted position -> input; empty: the identity
    std::vector<int64_t> pos;    // input -> sorted position, when order is set
    if (p.g_idx != nullptr) {
        expect_shape(*p.g_idx, "I32", {in}, where, "g_idx");
        std::vector<int64_t> members(static_cast<size_t>(n_groups), 0);
        bool identity = true;
        for (int64_t i = 0; i < in; ++i) {
            const int32_t grp = static_cast<int32_t>(word_at(*p.g_idx, i));
            if (grp < 0 || grp >= n_groups)
                fail("{}: '{}' puts input {} in group {}, outside the {} groups of its scales", where, p.g_idx->name, i,
                     grp, n_groups);
            ++members[static_cast<size_t>(grp)];
            identity = identity && grp == i / group;
        }
        for (int64_t grp = 0; grp < n_groups; ++grp)
            if (members[static_cast<size_t>(grp)] != group)
                fail("{}: '{}' puts {} inputs in group {}; GPTQ's groups hold group_size ({}) inputs each", where,
                     p.g_idx->name, members[static_cast<size_t>(grp)], grp, group);
        if (!identity && !q.desc_act)
            fail("{}: '{}' permutes the inputs among the groups (act-order), but quantization_config.desc_act is false "
                 "(vLLM would then ignore g_idx); the checkpoint and its config.json disagree",
                 where, p.g_idx->name);
        if (!identity) {
            std::vector<int64_t> next(static_cast<size_t>(n_groups));
            for (int64_t grp = 0; grp < n_groups; ++grp) next[static_cast<size_t>(grp)] = grp * group;
            order.resize(static_cast<size_t>(in));
            pos.resize(static_cast<size_t>(in));
            for (int64_t i = 0; i < in; ++i) {
                const int64_t at = next[word_at(*p.g_idx, i)]++;
                order[static_cast<size_t>(at)] = static_cast<int32_t>(i);
                pos[static_cast<size_t>(i)] = at;
            }
        }
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
    r.input_order = !order.empty();
    r.bytes.assign(static_cast<size_t>(out * row_bytes) + order.size() * sizeof(int32_t), 0);
    if (r.input_order) std::memcpy(r.bytes.data() + out * row_bytes, order.data(), order.size() * sizeof(int32_t));
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
        const int64_t at = r.input_order ? pos[static_cast<size_t>(i)] : i; // the input's place in the repacked row
        const int64_t b = at / g, e = at % g;
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

std::vector<repacked_weight> repack_quantized_linears(const hf_quantization &q,
                                                      const std::vector<std::pair<quantized_linear, std::string>> &layers,
                                                      unsigned threads) {
    const size_t n = layers.size();
    if (n == 0) return {};
    std::vector<repacked_weight> out(n);
    std::vector<std::exception_ptr> errors(n);
    uint64_t total = 0;
    for (const auto &[parts, where] : layers) total += parts.packed() != nullptr ? parts.packed()->n_bytes : 0;
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(n, 1)));
    progress bar(fmt::format("repacking {} {} layers ({:.1f} MiB)", n, q.method, static_cast<double>(total) / 1048576.0),
                 total);
    std::mutex bar_mutex;
    uint64_t done = 0;
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i = next++; i < n; i = next++) {
            const auto &[parts, where] = layers[i];
            try {
                out[i] = repack_quantized_linear(q, parts, where);
            } catch (...) {
                errors[i] = std::current_exception();
            }
            std::lock_guard lock(bar_mutex);
            done += parts.packed() != nullptr ? parts.packed()->n_bytes : 0;
            bar.update(done);
        }
    };
    {
        std::vector<std::jthread> pool;
        for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
        work();
    }
    for (const std::exception_ptr &e : errors)
        if (e) std::rethrow_exception(e);
    bar.finish();
    return out;
}

} // namespace strata
