// A strata_config_view that answers one INT key with a value the engine chose and passes every other question to the
// user's view (which may be null). How the engine hands a tier a setting the user left unset without changing the
// user's config or the tier ABI.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <string>

namespace strata::engine {

class config_override_view {
  public:
    config_override_view(const strata_config_view *base, std::string key, int64_t value);
    config_override_view(const config_override_view &) = delete; // view_.ctx points at this object
    config_override_view &operator=(const config_override_view &) = delete;

    const strata_config_view *view() const { return &view_; }

  private:
    static int32_t get_bool(void *ctx, const char *key, int32_t *out);
    static int32_t get_int(void *ctx, const char *key, int64_t *out);
    static int32_t get_float(void *ctx, const char *key, double *out);
    static int32_t get_string(void *ctx, const char *key, const char **out);
    static int32_t get_list_size(void *ctx, const char *key);
    static const char *get_list_item(void *ctx, const char *key, int32_t index);

    const strata_config_view *base_;
    std::string key_;
    int64_t value_;
    strata_config_view view_{};
};

} // namespace strata::engine
