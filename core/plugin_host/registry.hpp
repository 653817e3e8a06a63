// The plugin registry: loads plugin libraries with Boost.DLL, refuses the ones that break the ABI rules, and answers
// "which plugin does X" for core. Core never names a specific plugin; it asks this registry.
//
// ABI rules the host enforces when loading (sdk/include/strata/plugin_abi.h is the contract):
//  - A plugin is a shared object exporting one C symbol, strata_plugin_entry. It is opened RTLD_LOCAL | RTLD_NOW,
//    so unresolved symbols fail at load time and two plugins never see each other's symbols.
//  - The entry returns static info or NULL with a status ("this plugin cannot run here"); it must not throw. A
//    NULL return or an exception refuses the library with the plugin's message.
//  - Versioning: info.abi_major must equal STRATA_ABI_MAJOR (else "rebuild the plugin against this SDK");
//    info.abi_minor must be <= STRATA_ABI_MINOR (else "upgrade Strata"). A minor bump only appends optional slots.
//  - Sizes: info.struct_size must cover ABI 1.0's info. Each descriptor's struct_size must be >= its own
//    required_size, and required_size >= what this host requires for that kind (the offset of the kind's first
//    optional slot, computed here from the header). Optional slots past struct_size read as absent
//    (STRATA_HAS_SLOT).
//  - Every required function slot must be non-NULL; the refusal names the slot. Names must be non-empty; the
//    library name is [A-Za-z0-9_-] because it names the plugin's config table.
//  - (kind, name) is unique across all loaded libraries, and so is a quant's ggml_type and a library's name: the
//    second library claiming one is refused as a whole (a library is all-or-nothing).
//  - Config keys: non-empty unique names and a valid strata_config_type.
//  - Lifetime: a library stays loaded while any handle<> or plugin_ptr<> refers to it, also after the registry is
//    destroyed. Objects a plugin creates are destroyed through its own destroy (see adopt / create_guarded).
//
// Thread safety: load_* mutate and must not run concurrently with anything else; the const lookups may run
// concurrently with each other once loading is done.
#pragma once

#include "plugin_host/abi_rules.hpp"
#include "plugin_host/library.hpp"
#include "plugin_host/plugin_handle.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::plugins {

struct rejection {
    std::string path;
    std::string reason;
};

// One row of `runtime plugins`: one per descriptor (a library providing three quants gives three rows).
struct listing_row {
    std::string kind, name, version, abi, license, path, description;
};

class registry {
  public:
    // `host` is passed to every entry point; borrowed, must outlive the registry (may be NULL in tools).
    explicit registry(const strata_host_services *host);
    registry(const registry &) = delete;
    registry &operator=(const registry &) = delete;
    registry(registry &&) noexcept = default;
    registry &operator=(registry &&) noexcept = default;
    ~registry() = default;

    // Loads one plugin library. Throws strata::error "<path>: <reason>" when it is refused (the refusal is also
    // recorded in rejections()). Nothing of a refused library stays registered or loaded.
    void load_file(const std::filesystem::path &so);

    // Loads every regular file named libstrata_*.so in `dir` (sorted by name, not recursive); other files are
    // skipped. Refused libraries are recorded and logged as warnings, never thrown. A missing directory is not an
    // error (logged at debug). Returns the number of libraries loaded.
    size_t load_directory(const std::filesystem::path &dir);

    const std::vector<rejection> &rejections() const { return rejections_; }

    handle<strata_quant_desc> find_quant_by_type(uint32_t ggml_type) const;
    handle<strata_device_desc> find_device(std::string_view name) const;
    // The device whose score() is highest and > 0 (first loaded wins ties); desc is NULL when none can run here.
    handle<strata_device_desc> best_device() const;
    // The first model_arch (in load order) whose matches(gguf_arch) returns non-zero.
    handle<strata_model_arch_desc> find_model_arch_for(std::string_view gguf_arch) const;
    handle<strata_tier_desc> find_tier(std::string_view name) const;
    handle<strata_frontend_desc> find_frontend(std::string_view name) const;
    // Every desc is NULL when nothing matches.

    // Descriptor names of one kind, in load order.
    std::vector<std::string> names(strata_kind kind) const;

    std::vector<listing_row> list() const;
    // Aligned table with a header line: KIND NAME VERSION ABI LICENSE PATH.
    std::string format_listing() const;

    // Each loaded library's name (its config table) with its declared keys; keys may be NULL when the count is 0.
    // Pointers stay valid while this registry (or a handle into the library) lives.
    std::vector<std::pair<std::string, std::pair<const strata_config_key *, uint32_t>>> config_tables() const;

  private:
    struct entry {
        uint32_t kind;
        std::string name;
        const strata_descriptor_header *desc;
        std::shared_ptr<const library> lib;
    };

    void admit(std::shared_ptr<const library> lib);
    const entry *find(uint32_t kind, std::string_view name) const;
    template <class Desc> static handle<Desc> to_handle(const entry *e);

    const strata_host_services *host_;
    std::vector<std::shared_ptr<const library>> libraries_;
    std::vector<entry> entries_;
    std::vector<rejection> rejections_;
};

} // namespace strata::plugins
