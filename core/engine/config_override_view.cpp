#include "engine/config_override_view.hpp"

#include <utility>

namespace strata::engine {

namespace {

const config_override_view &self_of(void *ctx) { return *static_cast<const config_override_view *>(ctx); }

} // namespace

config_override_view::config_override_view(const strata_config_view *base, std::string key, int64_t value)
    : base_(base), key_(std::move(key)), value_(value) {
    view_.struct_size = sizeof view_;
    view_.ctx = this;
    view_.get_bool = &get_bool;
    view_.get_int = &get_int;
    view_.get_float = &get_float;
    view_.get_string = &get_string;
    view_.get_list_size = &get_list_size;
    view_.get_list_item = &get_list_item;
}

int32_t config_override_view::get_int(void *ctx, const char *key, int64_t *out) {
    const auto &self = self_of(ctx);
    if (key != nullptr && self.key_ == key) {
        if (out == nullptr) return 0;
        *out = self.value_;
        return 1;
    }
    const strata_config_view *b = self.base_;
    return b != nullptr && b->get_int != nullptr ? b->get_int(b->ctx, key, out) : 0;
}

// The overridden key is an INT: asked as another type it reads "not set", as the host's own view does.
int32_t config_override_view::get_bool(void *ctx, const char *key, int32_t *out) {
    const auto &self = self_of(ctx);
    if (key != nullptr && self.key_ == key) return 0;
    const strata_config_view *b = self.base_;
    return b != nullptr && b->get_bool != nullptr ? b->get_bool(b->ctx, key, out) : 0;
}

int32_t config_override_view::get_float(void *ctx, const char *key, double *out) {
    const auto &self = self_of(ctx);
    if (key != nullptr && self.key_ == key) {
        if (out == nullptr) return 0;
        *out = static_cast<double>(self.value_);
        return 1;
    }
    const strata_config_view *b = self.base_;
    return b != nullptr && b->get_float != nullptr ? b->get_float(b->ctx, key, out) : 0;
}

int32_t config_override_view::get_string(void *ctx, const char *key, const char **out) {
    const auto &self = self_of(ctx);
    if (key != nullptr && self.key_ == key) return 0;
    const strata_config_view *b = self.base_;
    return b != nullptr && b->get_string != nullptr ? b->get_string(b->ctx, key, out) : 0;
}

int32_t config_override_view::get_list_size(void *ctx, const char *key) {
    const auto &self = self_of(ctx);
    if (key != nullptr && self.key_ == key) return 0;
    const strata_config_view *b = self.base_;
    return b != nullptr && b->get_list_size != nullptr ? b->get_list_size(b->ctx, key) : 0;
}

const char *config_override_view::get_list_item(void *ctx, const char *key, int32_t index) {
    const auto &self = self_of(ctx);
    if (key != nullptr && self.key_ == key) return nullptr;
    const strata_config_view *b = self.base_;
    return b != nullptr && b->get_list_item != nullptr ? b->get_list_item(b->ctx, key, index) : nullptr;
}

} // namespace strata::engine
