// The set of known config tables and keys: core tables declared in code plus one table per plugin (from the C ABI).
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::config {

struct key_spec {
    std::string name;
    strata_config_type type = STRATA_CONFIG_STRING;
    std::optional<std::string> default_value; // TOML text, e.g. "0.8", "\"text\"", "[]"
    double min_value = 0, max_value = 0;      // inclusive range for INT/FLOAT/BYTES when min_value < max_value
    std::string help;
    // Command-line flag including the dashes, e.g. "--threads"; "" = only --set. Declared as "--threads|-t": the
    // spellings after the first land in `aliases` (a leading '!' marks a boolean alias of the opposite meaning).
    std::string flag;
    std::string choices; // STRING only: "a|b|c"
    // Non-empty: the key is reserved for a mechanism not built yet, and setting it is an error
    // "not supported yet: <this text>".
    std::string not_supported;
    std::vector<std::string> aliases; // the flag's other spellings as written: "-t", "--ctx-size", "!--disable-x"
};

// What one spelling of a flag names: the key, its table, and whether a boolean value is inverted.
struct flag_match {
    const key_spec *key = nullptr;
    std::string table;
    bool inverted = false; // "!--disable-x": true means the key is false
};

struct table_spec {
    std::string name;
    std::string help;
    std::vector<key_spec> keys;
    bool is_plugin = false;
};

// Name of a strata_config_type for messages: "boolean", "integer", "float", "string", "byte size", "string list".
std::string_view type_name(strata_config_type type);

class schema {
  public:
    // Throws strata::error on a duplicate table, a duplicate key or flag, or a default that does not match its type.
    void add_table(table_spec table);
    // The table [plugin_name] from a plugin's strata_plugin_info (keys are copied; the plugin's storage is not kept).
    void add_plugin_table(const std::string &plugin_name, const strata_config_key *keys, uint32_t n);

    const table_spec *find_table(std::string_view table) const;
    const key_spec *find_key(std::string_view table, std::string_view key) const;
    const std::vector<table_spec> &tables() const { return tables_; }
    // `flag` with or without leading dashes; writes the owning table's name to *table_out when given. Aliases are
    // matched as written ("-t", "--ctx-size"); an inverted alias is found too (use match_flag to learn that).
    const key_spec *find_flag(std::string_view flag, std::string *table_out) const;
    flag_match match_flag(std::string_view flag) const;
    // Every flag and alias ("--threads", "-t"), for suggestions.
    std::vector<std::string> all_flags() const;

    // All flags and keys with types, defaults and help, grouped by table, for `runtime --help`.
    std::string help_text() const;

  private:
    std::vector<table_spec> tables_;
};

} // namespace strata::config
