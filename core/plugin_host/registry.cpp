#include "plugin_host/registry.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <exception>
#include <system_error>

namespace strata::plugins {

namespace {

constexpr std::string_view log_component = "plugins";

bool is_plugin_file_name(const std::filesystem::path &p) {
    const std::string name = p.filename().string();
    return name.starts_with("libstrata_") && p.extension() == ".so";
}

std::filesystem::path canonical_or_same(const std::filesystem::path &p) {
    std::error_code ec;
    auto c = std::filesystem::weakly_canonical(p, ec);
    return ec ? p : c;
}

} // namespace

registry::registry(const strata_host_services *host) : host_(host) {}

void registry::load_file(const std::filesystem::path &so) {
    const std::filesystem::path path = canonical_or_same(so);
    try {
        for (const auto &lib : libraries_) {
            if (lib->path == path) fail("already loaded");
        }
        admit(open_library(path, host_));
    } catch (const strata::error &e) {
        rejections_.push_back({path.string(), e.what()});
        fail("{}: {}", path.string(), e.what());
    }
}

size_t registry::load_directory(const std::filesystem::path &dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        log::debug(log_component, "plugin directory {} does not exist; no plugins loaded from it", dir.string());
        return 0;
    }
    std::vector<std::filesystem::path> files;
    for (const auto &item : std::filesystem::directory_iterator(dir, ec)) {
        std::error_code type_ec;
        if (!item.is_regular_file(type_ec)) continue;
        if (!is_plugin_file_name(item.path())) {
            log::debug(log_component, "skipping {}: not named libstrata_*.so", item.path().string());
            continue;
        }
        files.push_back(item.path());
    }
    if (ec) log::warn(log_component, "could not list plugin directory {}: {}", dir.string(), ec.message());
    std::sort(files.begin(), files.end()); // deterministic load order, so "first loaded wins" is reproducible

    size_t loaded = 0;
    for (const auto &file : files) {
        try {
            load_file(file);
            ++loaded;
        } catch (const strata::error &e) {
            log::warn(log_component, "plugin refused: {}", e.what());
        }
    }
    return loaded;
}

// Checks every descriptor and every uniqueness rule before registering anything, so a library is all-or-nothing.
void registry::admit(std::shared_ptr<const library> lib) {
    const strata_plugin_info &info = *lib->info;
    for (const auto &other : libraries_) {
        if (std::string_view(other->info->name) == info.name) {
            fail("plugin library name '{}' is already used by {}", info.name, other->path.string());
        }
    }
    std::vector<entry> fresh;
    for (uint32_t i = 0; i < info.n_descriptors; ++i) {
        const strata_descriptor_header *desc = info.descriptors[i];
        check_descriptor(desc, i);
        const std::string_view kind = kind_name(desc->kind);
        if (const entry *existing = find(desc->kind, desc->name)) {
            fail("{} '{}' is already provided by {}", kind, desc->name, existing->lib->path.string());
        }
        for (const entry &e : fresh) {
            if (e.kind == desc->kind && e.name == desc->name) fail("{} '{}' is declared twice", kind, desc->name);
        }
        if (desc->kind == STRATA_KIND_QUANT) {
            const uint32_t type = reinterpret_cast<const strata_quant_desc *>(desc)->ggml_type;
            if (auto h = find_quant_by_type(type)) {
                fail("quant '{}' handles ggml type {}, which quant '{}' from {} already handles", desc->name, type,
                     h.desc->header.name, h.lib->path.string());
            }
        }
        fresh.push_back(entry{desc->kind, desc->name, desc, lib});
    }
    for (auto &e : fresh) {
        log::debug(log_component, "loaded {} '{}' from {}", kind_name(e.kind), e.name, lib->path.string());
        entries_.push_back(std::move(e));
    }
    libraries_.push_back(std::move(lib));
}

const registry::entry *registry::find(uint32_t kind, std::string_view name) const {
    for (const entry &e : entries_) {
        if (e.kind == kind && e.name == name) return &e;
    }
    return nullptr;
}

template <class Desc> handle<Desc> registry::to_handle(const entry *e) {
    if (e == nullptr) return {};
    // Every kind descriptor starts with its header, so the header's address is the descriptor's.
    return handle<Desc>{reinterpret_cast<const Desc *>(e->desc), e->lib};
}

handle<strata_quant_desc> registry::find_quant_by_type(uint32_t ggml_type) const {
    for (const entry &e : entries_) {
        if (e.kind == STRATA_KIND_QUANT && reinterpret_cast<const strata_quant_desc *>(e.desc)->ggml_type == ggml_type) {
            return to_handle<strata_quant_desc>(&e);
        }
    }
    return {};
}

handle<strata_device_desc> registry::find_device(std::string_view name) const {
    return to_handle<strata_device_desc>(find(STRATA_KIND_DEVICE, name));
}

handle<strata_device_desc> registry::best_device() const {
    const entry *best = nullptr;
    int32_t best_score = 0;
    for (const entry &e : entries_) {
        if (e.kind != STRATA_KIND_DEVICE) continue;
        const auto *dev = reinterpret_cast<const strata_device_desc *>(e.desc);
        int32_t score = 0;
        try {
            score = call_guarded(*e.lib, "score", [&] { return dev->score(); });
        } catch (const strata::error &err) {
            log::warn(log_component, "{}; treating device '{}' as unable to run", err.what(), e.name);
            continue;
        }
        if (score > best_score) {
            best = &e;
            best_score = score;
        }
    }
    return to_handle<strata_device_desc>(best);
}

handle<strata_model_arch_desc> registry::find_model_arch_for(std::string_view gguf_arch) const {
    const std::string arch(gguf_arch); // matches() wants a NUL-terminated string
    for (const entry &e : entries_) {
        if (e.kind != STRATA_KIND_MODEL_ARCH) continue;
        const auto *desc = reinterpret_cast<const strata_model_arch_desc *>(e.desc);
        if (call_guarded(*e.lib, "matches", [&] { return desc->matches(arch.c_str()); }) != 0) {
            return to_handle<strata_model_arch_desc>(&e);
        }
    }
    return {};
}

handle<strata_tier_desc> registry::find_tier(std::string_view name) const {
    return to_handle<strata_tier_desc>(find(STRATA_KIND_TIER, name));
}

handle<strata_frontend_desc> registry::find_frontend(std::string_view name) const {
    return to_handle<strata_frontend_desc>(find(STRATA_KIND_FRONTEND, name));
}

std::vector<std::string> registry::names(strata_kind kind) const {
    std::vector<std::string> out;
    for (const entry &e : entries_) {
        if (e.kind == static_cast<uint32_t>(kind)) out.push_back(e.name);
    }
    return out;
}

std::vector<listing_row> registry::list() const {
    auto text = [](const char *s) { return s != nullptr && s[0] != '\0' ? std::string(s) : std::string("-"); };
    std::vector<listing_row> rows;
    rows.reserve(entries_.size());
    for (const entry &e : entries_) {
        const strata_plugin_info &info = *e.lib->info;
        rows.push_back(listing_row{std::string(kind_name(e.kind)), e.name, text(info.version),
                                   fmt::format("{}.{}", info.abi_major, info.abi_minor), text(info.license),
                                   e.lib->path.string(), text(info.description)});
    }
    return rows;
}

std::vector<std::pair<std::string, std::pair<const strata_config_key *, uint32_t>>> registry::config_tables() const {
    std::vector<std::pair<std::string, std::pair<const strata_config_key *, uint32_t>>> out;
    out.reserve(libraries_.size());
    for (const auto &lib : libraries_) {
        const uint32_t n = lib->info->n_config_keys;
        out.emplace_back(lib->info->name, std::make_pair(n > 0 ? lib->info->config_keys : nullptr, n));
    }
    return out;
}

} // namespace strata::plugins
