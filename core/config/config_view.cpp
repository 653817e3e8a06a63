#include "config/config_view.hpp"

#include <limits>

namespace strata::config {

namespace {

// No exception may cross into plugin code: any failure reads as "not set".
template <class F> int32_t guarded(F &&f) noexcept {
    try {
        return f();
    } catch (...) {
        return 0;
    }
}

} // namespace

plugin_config_view::plugin_config_view(const document &doc, const schema &s, std::string table)
    : doc_(doc), schema_(s), table_(std::move(table)) {
    view_.struct_size = sizeof(strata_config_view);
    view_.ctx = this;
    view_.get_bool = &get_bool;
    view_.get_int = &get_int;
    view_.get_float = &get_float;
    view_.get_string = &get_string;
    view_.get_list_size = &get_list_size;
    view_.get_list_item = &get_list_item;
}

int32_t plugin_config_view::get_bool(void *ctx, const char *key, int32_t *out) {
    return guarded([&]() -> int32_t {
        auto *self = static_cast<plugin_config_view *>(ctx);
        const key_spec *k = key ? self->schema_.find_key(self->table_, key) : nullptr;
        if (k == nullptr || out == nullptr || k->type != STRATA_CONFIG_BOOL) return 0;
        const auto v = self->doc_.get_bool(self->table_, key, self->schema_);
        if (!v) return 0;
        *out = *v ? 1 : 0;
        return 1;
    });
}

int32_t plugin_config_view::get_int(void *ctx, const char *key, int64_t *out) {
    return guarded([&]() -> int32_t {
        auto *self = static_cast<plugin_config_view *>(ctx);
        const key_spec *k = key ? self->schema_.find_key(self->table_, key) : nullptr;
        if (k == nullptr || out == nullptr) return 0;
        if (k->type == STRATA_CONFIG_INT) {
            const auto v = self->doc_.get_int(self->table_, key, self->schema_);
            if (!v) return 0;
            *out = *v;
            return 1;
        }
        if (k->type == STRATA_CONFIG_BYTES) {
            const auto v = self->doc_.get_bytes(self->table_, key, self->schema_);
            if (!v || *v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return 0;
            *out = static_cast<int64_t>(*v);
            return 1;
        }
        return 0;
    });
}

int32_t plugin_config_view::get_float(void *ctx, const char *key, double *out) {
    return guarded([&]() -> int32_t {
        auto *self = static_cast<plugin_config_view *>(ctx);
        const key_spec *k = key ? self->schema_.find_key(self->table_, key) : nullptr;
        if (k == nullptr || out == nullptr || (k->type != STRATA_CONFIG_FLOAT && k->type != STRATA_CONFIG_INT)) return 0;
        const auto v = self->doc_.get_float(self->table_, key, self->schema_);
        if (!v) return 0;
        *out = *v;
        return 1;
    });
}

int32_t plugin_config_view::get_string(void *ctx, const char *key, const char **out) {
    return guarded([&]() -> int32_t {
        auto *self = static_cast<plugin_config_view *>(ctx);
        const key_spec *k = key ? self->schema_.find_key(self->table_, key) : nullptr;
        if (k == nullptr || out == nullptr || k->type != STRATA_CONFIG_STRING) return 0;
        std::lock_guard<std::mutex> lock(self->mutex_);
        auto it = self->strings_.find(std::string_view(key));
        if (it == self->strings_.end()) {
            auto v = self->doc_.get_string(self->table_, key, self->schema_);
            if (!v) return 0;
            it = self->strings_.emplace(key, std::move(*v)).first;
        }
        *out = it->second.c_str();
        return 1;
    });
}

const std::vector<std::string> *plugin_config_view::list(const char *key) {
    const key_spec *k = key ? schema_.find_key(table_, key) : nullptr;
    if (k == nullptr || k->type != STRATA_CONFIG_STRING_LIST) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lists_.find(std::string_view(key));
    if (it == lists_.end()) it = lists_.emplace(key, doc_.get_string_list(table_, key, schema_)).first;
    return &it->second;
}

int32_t plugin_config_view::get_list_size(void *ctx, const char *key) {
    return guarded([&]() -> int32_t {
        const std::vector<std::string> *items = static_cast<plugin_config_view *>(ctx)->list(key);
        return items ? static_cast<int32_t>(items->size()) : 0;
    });
}

const char *plugin_config_view::get_list_item(void *ctx, const char *key, int32_t index) {
    try {
        const std::vector<std::string> *items = static_cast<plugin_config_view *>(ctx)->list(key);
        if (items == nullptr || index < 0 || static_cast<size_t>(index) >= items->size()) return nullptr;
        return (*items)[static_cast<size_t>(index)].c_str();
    } catch (...) {
        return nullptr;
    }
}

} // namespace strata::config
