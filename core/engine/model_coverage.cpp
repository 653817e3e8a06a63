#include "engine/model_coverage.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <string_view>
#include <unordered_set>
#include <vector>

namespace strata::engine {

namespace {

std::string tensor_text(const gguf::tensor_info &t) {
    std::string shape;
    for (uint32_t i = 0; i < t.n_dims; ++i) shape += (i ? ", " : "") + std::to_string(t.ne[i]);
    const gguf::type_traits *tr = gguf::ggml_type_traits(t.type);
    return fmt::format("tensor '{}' [{}] {}", t.name, shape, tr ? std::string(tr->name) : fmt::format("type {}", t.type));
}

} // namespace

void check_model_covers_file(const model_file &file, const std::string &arch, const strata_model_arch_desc &desc,
                             const strata_model *model, const std::set<std::string> &keys_read,
                             const std::set<std::string> &tensors_read, const std::string &plugin,
                             const std::string &path) {
    std::unordered_set<std::string_view> used;
    const int32_t n = desc.tensor_count(model);
    for (int32_t i = 0; i < n; ++i) {
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        if (desc.tensor_at(model, i, &v, nullptr) == STRATA_OK && v.name != nullptr) used.insert(v.name);
    }
    std::vector<std::string> unused;
    const std::string prefix = arch + ".";
    for (size_t i = 0; i < file.kv_count(); ++i) {
        const std::string_view key = file.kv_key(i);
        // The family's keys and Strata's own (strata.rope.layout, set by the HF reader) must each be read.
        const bool must_read = key.substr(0, prefix.size()) == prefix || key.substr(0, 7) == "strata.";
        if (must_read && !keys_read.count(std::string(key)))
            unused.push_back(fmt::format("metadata key '{}' = {}", key, file.kv_summary(i)));
    }
    for (const gguf::tensor_info &t : file.tensors())
        if (!used.count(t.name) && !tensors_read.count(t.name)) unused.push_back(tensor_text(t));
    if (unused.empty()) return;

    constexpr size_t shown = 12;
    std::string list;
    for (size_t i = 0; i < unused.size() && i < shown; ++i) list += "\n  - " + unused[i];
    if (unused.size() > shown) list += fmt::format("\n  - ... and {} more", unused.size() - shown);
    fail("{}: the '{}' model plugin does not use {} part(s) of this '{}' file, so it cannot run it correctly:{}\n"
         "Strata refuses a file it would run wrongly. Use a file without these parts, or a model_arch plugin that "
         "implements them (docs/ARCHITECTURE.md, \"Adding a model family\").",
         path, plugin, unused.size(), arch, list);
}

} // namespace strata::engine
