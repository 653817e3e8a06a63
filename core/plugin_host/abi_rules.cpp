#include "plugin_host/abi_rules.hpp"

#include "common/error.hpp"

#include <cstring>
#include <set>
#include <span>
#include <string>

namespace strata::plugins {

namespace {

// A required function-pointer slot of a descriptor, by name and byte offset.
struct fn_slot {
    const char *name;
    size_t offset;
};

#define STRATA_FN_SLOT(type, field) fn_slot{#field, offsetof(type, field)}

constexpr fn_slot quant_slots[] = {
    STRATA_FN_SLOT(strata_quant_desc, dequantize_row),
    STRATA_FN_SLOT(strata_quant_desc, quantize_row),
    STRATA_FN_SLOT(strata_quant_desc, dot_f32),
};
constexpr fn_slot device_slots[] = {
    STRATA_FN_SLOT(strata_device_desc, score),     STRATA_FN_SLOT(strata_device_desc, create),
    STRATA_FN_SLOT(strata_device_desc, destroy),   STRATA_FN_SLOT(strata_device_desc, mem_alloc),
    STRATA_FN_SLOT(strata_device_desc, mem_free),  STRATA_FN_SLOT(strata_device_desc, matmul),
    STRATA_FN_SLOT(strata_device_desc, embedding), STRATA_FN_SLOT(strata_device_desc, rms_norm),
    STRATA_FN_SLOT(strata_device_desc, rope),      STRATA_FN_SLOT(strata_device_desc, attention),
    STRATA_FN_SLOT(strata_device_desc, swiglu),    STRATA_FN_SLOT(strata_device_desc, add),
    STRATA_FN_SLOT(strata_device_desc, softmax),
};
constexpr fn_slot model_arch_slots[] = {
    STRATA_FN_SLOT(strata_model_arch_desc, matches),         STRATA_FN_SLOT(strata_model_arch_desc, create),
    STRATA_FN_SLOT(strata_model_arch_desc, destroy),         STRATA_FN_SLOT(strata_model_arch_desc, get_hparams),
    STRATA_FN_SLOT(strata_model_arch_desc, workspace_bytes), STRATA_FN_SLOT(strata_model_arch_desc, forward),
};
constexpr fn_slot tier_slots[] = {
    STRATA_FN_SLOT(strata_tier_desc, create),       STRATA_FN_SLOT(strata_tier_desc, destroy),
    STRATA_FN_SLOT(strata_tier_desc, capacity),     STRATA_FN_SLOT(strata_tier_desc, region_alloc),
    STRATA_FN_SLOT(strata_tier_desc, region_free),  STRATA_FN_SLOT(strata_tier_desc, write),
    STRATA_FN_SLOT(strata_tier_desc, read),
};
constexpr fn_slot frontend_slots[] = {
    STRATA_FN_SLOT(strata_frontend_desc, create),
    STRATA_FN_SLOT(strata_frontend_desc, run),
    STRATA_FN_SLOT(strata_frontend_desc, request_stop),
    STRATA_FN_SLOT(strata_frontend_desc, destroy),
};

#undef STRATA_FN_SLOT

std::span<const fn_slot> required_slots(uint32_t kind) {
    switch (kind) {
    case STRATA_KIND_MODEL_ARCH: return model_arch_slots;
    case STRATA_KIND_QUANT: return quant_slots;
    case STRATA_KIND_DEVICE: return device_slots;
    case STRATA_KIND_TIER: return tier_slots;
    case STRATA_KIND_FRONTEND: return frontend_slots;
    default: return {};
    }
}

// Function pointers are read through memcpy so the check works on any descriptor type without a cast per kind.
bool slot_is_set(const strata_descriptor_header *desc, size_t offset) {
    void (*fn)(void) = nullptr;
    std::memcpy(&fn, reinterpret_cast<const char *>(desc) + offset, sizeof fn);
    return fn != nullptr;
}

// The plugin's name becomes a TOML table name and a log prefix, so keep it to a bare-key-safe alphabet.
bool is_valid_plugin_name(const char *name) {
    if (name == nullptr || name[0] == '\0') return false;
    for (const char *p = name; *p != '\0'; ++p) {
        const char c = *p;
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

// Size of strata_plugin_info as ABI 1.0 defined it: later minors only append, so this is the floor forever.
constexpr size_t info_size_abi_1_0 = offsetof(strata_plugin_info, n_config_keys) + sizeof(uint32_t);
// The version fields must be readable before anything else is interpreted.
constexpr size_t info_version_fields_end = offsetof(strata_plugin_info, abi_minor) + sizeof(uint32_t);

} // namespace

std::string_view kind_name(uint32_t kind) {
    switch (kind) {
    case STRATA_KIND_MODEL_ARCH: return "model_arch";
    case STRATA_KIND_QUANT: return "quant";
    case STRATA_KIND_DEVICE: return "device";
    case STRATA_KIND_TIER: return "tier";
    case STRATA_KIND_FRONTEND: return "frontend";
    default: return "unknown";
    }
}

size_t host_required_size(uint32_t kind) {
    switch (kind) {
    case STRATA_KIND_MODEL_ARCH: return offsetof(strata_model_arch_desc, tensor_count);
    case STRATA_KIND_QUANT: return offsetof(strata_quant_desc, kernel_name);
    case STRATA_KIND_DEVICE: return offsetof(strata_device_desc, thread_count);
    case STRATA_KIND_TIER: return offsetof(strata_tier_desc, map);
    case STRATA_KIND_FRONTEND: return offsetof(strata_frontend_desc, destroy) + sizeof(void (*)(void));
    default: return 0;
    }
}

void check_plugin_info(const strata_plugin_info &info) {
    if (info.struct_size < info_version_fields_end) {
        fail("plugin info struct_size {} is too small to hold the ABI version (corrupt plugin?)", info.struct_size);
    }
    if (info.abi_major != STRATA_ABI_MAJOR) {
        fail("built for Strata ABI {}.x, this runtime is {}.x: rebuild the plugin against this SDK", info.abi_major,
             STRATA_ABI_MAJOR);
    }
    if (info.abi_minor > STRATA_ABI_MINOR) {
        fail("needs ABI {}.{}, this runtime provides {}.{}: upgrade Strata", info.abi_major, info.abi_minor,
             STRATA_ABI_MAJOR, STRATA_ABI_MINOR);
    }
    if (info.struct_size < info_size_abi_1_0) {
        fail("plugin info struct_size {} is smaller than ABI {}.0's {} bytes: rebuild the plugin against this SDK",
             info.struct_size, STRATA_ABI_MAJOR, info_size_abi_1_0);
    }
    if (!is_valid_plugin_name(info.name)) {
        fail("plugin info name '{}' is missing or not made of [A-Za-z0-9_-] (it names the plugin's config table)",
             info.name != nullptr ? info.name : "(null)");
    }
    if (info.n_descriptors == 0 || info.descriptors == nullptr) {
        fail("plugin '{}' provides no descriptors (n_descriptors {}, descriptors {})", info.name, info.n_descriptors,
             info.descriptors == nullptr ? "NULL" : "set");
    }
    check_config_keys(info.config_keys, info.n_config_keys);
}

void check_descriptor(const strata_descriptor_header *desc, uint32_t index) {
    if (desc == nullptr) fail("descriptor #{} is NULL", index);
    if (desc->struct_size < sizeof(strata_descriptor_header)) {
        fail("descriptor #{} struct_size {} is smaller than its header ({} bytes)", index, desc->struct_size,
             sizeof(strata_descriptor_header));
    }
    if (desc->name == nullptr || desc->name[0] == '\0') fail("descriptor #{} has no name", index);
    const std::string_view kind = kind_name(desc->kind);
    const size_t needed = host_required_size(desc->kind);
    if (needed == 0) {
        fail("descriptor '{}' has unknown kind {} (known: 1 model_arch .. 5 frontend): the plugin is newer than this "
             "runtime or corrupt",
             desc->name, desc->kind);
    }
    if (desc->struct_size < desc->required_size) {
        fail("{} descriptor '{}' struct_size {} is smaller than its own required_size {}", kind, desc->name,
             desc->struct_size, desc->required_size);
    }
    if (desc->required_size < needed) {
        fail("{} descriptor '{}' required_size {} is smaller than the {} bytes this runtime requires: rebuild the "
             "plugin against this SDK",
             kind, desc->name, desc->required_size, needed);
    }
    for (const fn_slot &slot : required_slots(desc->kind)) {
        if (!slot_is_set(desc, slot.offset)) {
            fail("{} descriptor '{}' lacks required slot '{}'", kind, desc->name, slot.name);
        }
    }
    if (desc->kind == STRATA_KIND_QUANT) {
        const auto *q = reinterpret_cast<const strata_quant_desc *>(desc);
        if (q->block_elems == 0 || q->block_bytes == 0) {
            fail("quant descriptor '{}' has block_elems {} and block_bytes {}; both must be > 0", desc->name,
                 q->block_elems, q->block_bytes);
        }
    }
}

void check_config_keys(const strata_config_key *keys, uint32_t n) {
    if (n == 0) return;
    if (keys == nullptr) fail("plugin declares {} config keys but config_keys is NULL", n);
    std::set<std::string, std::less<>> seen;
    for (uint32_t i = 0; i < n; ++i) {
        const strata_config_key &key = keys[i];
        if (key.name == nullptr || key.name[0] == '\0') fail("config key #{} has no name", i);
        if (key.type < STRATA_CONFIG_BOOL || key.type > STRATA_CONFIG_STRING_LIST) {
            fail("config key '{}' has invalid type {} (valid: 1 bool .. 6 string list)", key.name, key.type);
        }
        if (!seen.emplace(key.name).second) fail("config key '{}' is declared twice", key.name);
    }
}

} // namespace strata::plugins
