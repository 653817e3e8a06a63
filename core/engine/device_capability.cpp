#include "engine/device_capability.hpp"

#include "common/error.hpp"
#include "model_file/model_file.hpp"

#include <strata/kv_layout.hpp>

#include <fmt/format.h>

#include <vector>

#include <cstddef>

namespace strata::engine {

namespace {

// The ABI minor that added strata_tensor_view.input_order (GPTQ act-order): older device and model plugins drop it.
constexpr uint32_t k_input_order_minor = 19;
// The ABI minor that added strata_paged_kv.kv_type (16-bit KV caches): older plugins lay KV out in float32 only.
constexpr uint32_t k_kv_type_minor = 20;
// The ABI minor that added the FP8 KV types: a model plugin built before it does not know their element size.
constexpr uint32_t k_fp8_kv_type_minor = 21;
// The q8_0 KV type (groups of 32 values) came with ABI 1.23.
constexpr uint32_t k_q8_0_kv_type_minor = 23;

struct op_slot {
    int32_t op;
    const char *name;
    const char *since;
    bool (*offered)(const strata_device_desc *d);
    const char *offered_by = "the cpu and cuda plugins of this release do"; // for the refusal's advice
};

constexpr op_slot k_op_slots[] = {
    {STRATA_DEVICE_OP_ROPE_EXT, "rope_ext", "1.11",
     [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, rope_ext); }},
    {STRATA_DEVICE_OP_ADD_ROWS, "add_rows", "1.12",
     [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, add_rows); }},
    {STRATA_DEVICE_OP_ROPE_SCALED, "rope_scaled", "1.13",
     [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, rope_scaled); }},
    {STRATA_DEVICE_OP_SCALE, "scale", "1.14", [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, scale); }},
    {STRATA_DEVICE_OP_GEGLU, "geglu", "1.14", [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, geglu); }},
    {STRATA_DEVICE_OP_SOFTCAP, "softcap", "1.14",
     [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, softcap); }},
    // A device built against 1.14 reads attention's softcap and window; its descriptor reaches the 1.14 slots
    // whether or not it fills them.
    {STRATA_DEVICE_OP_ATTENTION_TERMS, "attention with softcap and window", "1.14",
     [](const strata_device_desc *d) {
         return d != nullptr && d->header.struct_size >= offsetof(strata_device_desc, softcap) + sizeof(d->softcap);
     }},
    {STRATA_DEVICE_OP_MOE, "moe_route, matmul_id and moe_combine", "1.16",
     [](const strata_device_desc *d) {
         return STRATA_HAS_SLOT(d, moe_route) && STRATA_HAS_SLOT(d, matmul_id) && STRATA_HAS_SLOT(d, moe_combine);
     }},
    {STRATA_DEVICE_OP_SHARED_EXPERT, "sigmoid_gate_add", "1.16",
     [](const strata_device_desc *d) { return STRATA_HAS_SLOT(d, sigmoid_gate_add); }},
};

const op_slot *find_op(int32_t op) {
    for (const op_slot &s : k_op_slots)
        if (s.op == op) return &s;
    return nullptr;
}

} // namespace

const char *device_op_name(int32_t op) {
    const op_slot *s = find_op(op);
    return s != nullptr ? s->name : nullptr;
}

bool device_offers(const strata_device_desc &device, int32_t op) {
    const op_slot *s = find_op(op);
    return s != nullptr && s->offered(&device);
}

std::string missing_model_op(const strata_model_arch_desc &arch, const strata_model *model,
                             const strata_device_desc &device, const std::string &role, const std::string &path,
                             int32_t skip_op) {
    if (arch.header.struct_size < offsetof(strata_model_arch_desc, device_op_need) + sizeof(arch.device_op_need) ||
        arch.device_op_need == nullptr)
        return {};
    const char *device_name = device.header.name != nullptr ? device.header.name : "(unnamed)";
    for (int32_t i = 0; i < 64; ++i) {
        int32_t op = 0;
        const char *what = nullptr;
        if (arch.device_op_need(model, i, &op, &what) == 0) return {};
        if (op == skip_op) continue;
        const std::string needed_by = what != nullptr ? what : "the model";
        const op_slot *s = find_op(op);
        if (s == nullptr)
            return fmt::format("{}: model_arch '{}' needs device op #{} for {}, which this runtime does not know (a "
                               "plugin newer than the runtime); update the runtime",
                               path, arch.header.name, op, needed_by);
        if (!s->offered(&device))
            return fmt::format("{}: {} needs the device op '{}' (plugin ABI {}), which {} '{}' does not offer; run it "
                               "on a device that has it ({}) or update the '{}' plugin",
                               path, needed_by, s->name, s->since, role, device_name, s->offered_by, device_name);
    }
    return {};
}

std::string unsupported_model_shapes(const strata_model_arch_desc &arch, const strata_model *model,
                                     const strata_model_hparams &hp,
                                     const plugins::handle<strata_device_desc> &device_handle, strata_device *dev,
                                     const std::string &role, const std::string &path,
                                     const std::function<bool(const std::string &tensor)> &ask_tensor,
                                     bool ask_attention) {
    const strata_device_desc &device = *device_handle.desc;
    const strata_device_desc *d = &device; // STRATA_HAS_SLOT tests its pointer: a reference's address is never NULL
    const strata_model_arch_desc *a = &arch;
    const uint32_t device_minor = device_handle.lib ? device_handle.lib->info->abi_minor : STRATA_ABI_MINOR;
    const bool asks = STRATA_HAS_SLOT(d, supports);
    if (!asks && device_minor >= k_input_order_minor) return {};
    const char *device_name = device.header.name != nullptr ? device.header.name : "(unnamed)";
    std::vector<std::string> refusals;
    auto ask = [&](strata_support_query q, const std::string &what) {
        if (!asks) return;
        q.struct_size = sizeof q;
        char why[512] = {0};
        if (device.supports(dev, &q, why, sizeof why) == 0) refusals.push_back(fmt::format("{}: {}", what, why));
    };
    if (STRATA_HAS_SLOT(a, tensor_count) && STRATA_HAS_SLOT(a, tensor_at)) {
        const int32_t n = arch.tensor_count(model);
        for (int32_t i = 0; i < n; ++i) {
            strata_tensor_view v{};
            v.struct_size = sizeof v;
            int32_t layer = 0;
            if (arch.tensor_at(model, i, &v, &layer) != STRATA_OK) continue;
            const std::string name = v.name != nullptr ? v.name : "(unnamed)";
            if (ask_tensor && !ask_tensor(name)) continue;
            if (v.input_order != nullptr && device_minor < k_input_order_minor) {
                refusals.push_back(fmt::format("tensor '{}': its columns meet the activations in an input order "
                                               "(GPTQ act-order, plugin ABI 1.{}), which this plugin (ABI 1.{}) does "
                                               "not read; update the '{}' plugin",
                                               name, k_input_order_minor, device_minor, device_name));
                continue;
            }
            strata_support_query q{};
            q.kind = STRATA_SUPPORT_WEIGHT;
            q.weight = &v;
            ask(q, fmt::format("tensor '{}'", name));
        }
    }
    strata_support_query attention{};
    attention.kind = STRATA_SUPPORT_ATTENTION;
    attention.n_heads = hp.n_head;
    attention.n_kv_heads = hp.n_head_kv;
    attention.head_dim = hp.head_dim;
    if (ask_attention)
        ask(attention, fmt::format("attention of {} heads ({} KV) of {}", hp.n_head, hp.n_head_kv, hp.head_dim));
    strata_support_query rope = attention;
    rope.kind = STRATA_SUPPORT_ROPE;
    rope.rot_dims = hp.rope_dims;
    ask(rope, fmt::format("RoPE over {} of {} dimensions", hp.rope_dims, hp.head_dim));
    if (refusals.empty()) return {};
    std::string list;
    for (size_t i = 0; i < refusals.size() && i < 8; ++i) list += "\n  " + refusals[i];
    if (refusals.size() > 8) list += fmt::format("\n  ... and {} more", refusals.size() - 8);
    return fmt::format("{}: {} '{}' cannot run this model:{}\nrun it on a device that can (--device cpu computes "
                       "every type a quant plugin reads)",
                       path, role, device_name, list);
}

std::string unsupported_kv_type(uint32_t kv_type, const strata_model_hparams &hp,
                                const plugins::handle<strata_device_desc> &device, strata_device *dev,
                                const plugins::handle<strata_model_arch_desc> &arch, const std::string &path) {
    if (kv_type == STRATA_KV_F32) return {};
    const char *type = kv_layout::type_name(kv_type);
    const std::string type_text = type != nullptr ? type : fmt::format("type {}", kv_type);
    const char *device_name = device.desc->header.name != nullptr ? device.desc->header.name : "(unnamed)";
    const uint32_t device_minor = device.lib ? device.lib->info->abi_minor : STRATA_ABI_MINOR;
    const uint32_t arch_minor = arch.lib ? arch.lib->info->abi_minor : STRATA_ABI_MINOR;
    if (arch_minor < k_kv_type_minor)
        return fmt::format("{}: --kv-cache-dtype {}: model_arch '{}' (built for plugin ABI 1.{}) lays the KV cache out "
                           "in float32 only (other types came with ABI 1.{}); update that plugin or use "
                           "--kv-cache-dtype auto",
                           path, type_text, arch.desc->header.name, arch_minor, k_kv_type_minor);
    const bool fp8 = kv_type == STRATA_KV_FP8_E4M3 || kv_type == STRATA_KV_FP8_E5M2;
    if (fp8 && arch_minor < k_fp8_kv_type_minor)
        return fmt::format("{}: --kv-cache-dtype {}: model_arch '{}' (built for plugin ABI 1.{}) does not know the FP8 "
                           "KV types (they came with ABI 1.{}); update that plugin or use --kv-cache-dtype float16",
                           path, type_text, arch.desc->header.name, arch_minor, k_fp8_kv_type_minor);
    if (kv_type == STRATA_KV_Q8_0 && arch_minor < k_q8_0_kv_type_minor)
        return fmt::format("{}: --kv-cache-dtype {}: model_arch '{}' (built for plugin ABI 1.{}) does not know the q8_0 "
                           "KV type (it came with ABI 1.{}); update that plugin or use --kv-cache-dtype float16",
                           path, type_text, arch.desc->header.name, arch_minor, k_q8_0_kv_type_minor);
    if (device_minor < k_kv_type_minor)
        return fmt::format("{}: --kv-cache-dtype {}: device '{}' (built for plugin ABI 1.{}) stores float32 KV only "
                           "(other types came with ABI 1.{}); update that plugin or use --kv-cache-dtype auto",
                           path, type_text, device_name, device_minor, k_kv_type_minor);
    const strata_device_desc *d = device.desc;
    if (!STRATA_HAS_SLOT(d, supports)) return {};
    strata_support_query q{};
    q.struct_size = sizeof q;
    q.kind = STRATA_SUPPORT_ATTENTION;
    q.n_heads = hp.n_head;
    q.n_kv_heads = hp.n_head_kv;
    q.head_dim = hp.head_dim;
    q.kv_type = kv_type;
    char why[512] = {0};
    if (d->supports(dev, &q, why, sizeof why) != 0) return {};
    return fmt::format("{}: --kv-cache-dtype {}: device '{}' cannot keep this KV cache: {}; use --kv-cache-dtype auto "
                       "(float32) or another device",
                       path, type_text, device_name, why);
}

void check_device_offers_model_ops(const strata_model_arch_desc &arch, const strata_model *model,
                                   const strata_device_desc &device, const std::string &role, const std::string &path,
                                   int32_t skip_op) {
    const std::string why = missing_model_op(arch, model, device, role, path, skip_op);
    if (!why.empty()) fail("{}", why);
}

void check_model_reads_input_order(const model_file &file, const plugins::handle<strata_model_arch_desc> &arch,
                                   const std::string &path) {
    const uint32_t minor = arch.lib ? arch.lib->info->abi_minor : STRATA_ABI_MINOR;
    if (minor >= k_input_order_minor) return;
    for (const auto &t : file.tensors())
        if (t.input_order)
            fail("{}: tensor '{}' meets the activations in an input order (a GPTQ act-order checkpoint, plugin ABI "
                 "1.{}), which model_arch '{}' (built for ABI 1.{}) does not pass on; update that plugin",
                 path, t.name, k_input_order_minor, arch.desc->header.name, minor);
}

std::string unsupported_pipeline_ranks(const plugins::handle<strata_model_arch_desc> &arch, const strata_model *model,
                                       const std::string &path) {
    const strata_model_arch_desc *desc = arch.desc;
    if (!(STRATA_HAS_SLOT(desc, pipeline_stages) && desc->pipeline_stages(model) == 1))
        return fmt::format("{}: model plugin '{}' cannot run this model as pipeline stages (its pipeline_stages slot, "
                           "ABI 1.24); run it with pipeline_parallel_size 1",
                           path, desc->header.name);
    const uint32_t minor = arch.lib ? arch.lib->info->abi_minor : STRATA_ABI_MINOR;
    if (minor < 25)
        return fmt::format("{}: model plugin '{}' was built for ABI 1.{}, before a rank's KV blocks could hold its "
                           "layers only (kv_first_layer, 1.25); rebuild it against this SDK or run with "
                           "pipeline_parallel_size 1",
                           path, desc->header.name, minor);
    return {};
}

} // namespace strata::engine
