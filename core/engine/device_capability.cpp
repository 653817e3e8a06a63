#include "engine/device_capability.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <cstddef>

namespace strata::engine {

namespace {

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

void check_device_offers_model_ops(const strata_model_arch_desc &arch, const strata_model *model,
                                   const strata_device_desc &device, const std::string &role, const std::string &path,
                                   int32_t skip_op) {
    const std::string why = missing_model_op(arch, model, device, role, path, skip_op);
    if (!why.empty()) fail("{}", why);
}

} // namespace strata::engine
