// The C strata_config_view a plugin receives for its own table.
#pragma once

#include "config/document.hpp"
#include "config/schema.hpp"

#include <strata/plugin_abi.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace strata::config {

// Lifetime: the document and schema must outlive this object, and this object must outlive every plugin object
// created with view() (the ABI lets a plugin keep the view for its lifetime). Strings handed out stay valid as long
// as this object does. Getters are thread-safe, never throw, and return 0 for unknown keys, keys of another type and
// keys without a value. get_int also reads BYTES keys (the ABI has no byte getter); get_float also reads INT keys.
class plugin_config_view {
  public:
    plugin_config_view(const document &doc, const schema &s, std::string table);
    plugin_config_view(const plugin_config_view &) = delete; // view_.ctx points at this object
    plugin_config_view &operator=(const plugin_config_view &) = delete;

    const strata_config_view *view() const { return &view_; }
    const std::string &table() const { return table_; }

  private:
    static int32_t get_bool(void *ctx, const char *key, int32_t *out);
    static int32_t get_int(void *ctx, const char *key, int64_t *out);
    static int32_t get_float(void *ctx, const char *key, double *out);
    static int32_t get_string(void *ctx, const char *key, const char **out);
    static int32_t get_list_size(void *ctx, const char *key);
    static const char *get_list_item(void *ctx, const char *key, int32_t index);

    const std::vector<std::string> *list(const char *key); // cached; nullptr when unset

    const document &doc_;
    const schema &schema_;
    std::string table_;
    strata_config_view view_{};
    std::mutex mutex_;
    // Node-based maps: addresses of stored strings never move, so borrowed pointers stay valid.
    std::map<std::string, std::string, std::less<>> strings_;
    std::map<std::string, std::vector<std::string>, std::less<>> lists_;
};

} // namespace strata::config
