// One configuration: a parsed TOML file plus command-line overrides, checked against a schema and read with typed
// getters. Precedence: override (last one wins) > file > schema default.
#pragma once

#include "config/schema.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::config {

class document {
  public:
    // Parse errors become strata::error "path:line:col: <toml++ message>".
    static document from_file(const std::string &path);
    static document from_string(std::string_view toml, std::string source_name);
    static document empty();

    // "table.key=value". The value is parsed as one TOML value ("0.5", "true", "\"x\"", "[1,2]") and, when that
    // fails, taken as a plain string. For a STRING key a non-string value keeps its raw text (--set model.name=123),
    // and for a STRING_LIST key a plain string is split at commas (--devices cpu,cuda). `origin` names where it came
    // from in messages ("--set", "--threads"). Throws strata::error when the assignment is malformed.
    void set_override(std::string_view assignment, std::string_view origin);

    // Throws one strata::error listing every problem, one per line, file problems by line number then overrides.
    void validate(const schema &s) const;

    // Typed getters (after validate). nullopt when the key has no value and no default. Throw strata::error for a key
    // the schema does not know or a value of the wrong type.
    std::optional<bool> get_bool(std::string_view table, std::string_view key, const schema &s) const;
    std::optional<int64_t> get_int(std::string_view table, std::string_view key, const schema &s) const;
    std::optional<double> get_float(std::string_view table, std::string_view key, const schema &s) const;
    std::optional<std::string> get_string(std::string_view table, std::string_view key, const schema &s) const;
    std::optional<uint64_t> get_bytes(std::string_view table, std::string_view key, const schema &s) const;
    std::vector<std::string> get_string_list(std::string_view table, std::string_view key, const schema &s) const;

    // Explicitly set in the file or by an override (defaults do not count).
    bool is_set(std::string_view table, std::string_view key) const;

    std::string source_name() const { return source_name_; }
    // Directory of the config file; relative paths written in it resolve against this (the working directory for
    // documents that did not come from a file).
    std::filesystem::path base_dir() const { return base_dir_; }

  private:
    struct override_entry {
        std::string table;
        std::string key;
        std::string raw_text;  // the text after '=' as given
        bool parsed_as_toml;   // false: raw_text was taken as a plain string
        toml::table holder;    // the value, under "v"
        std::string origin;
    };

    // The node a getter should read (override > file > default) with the adjustments described at set_override;
    // `scratch` holds values made up on the way. nullptr when none.
    const toml::node *effective(std::string_view table, std::string_view key, const key_spec &spec,
                                toml::table &scratch) const;
    static const toml::node *override_value(const override_entry &o, const key_spec &spec, toml::table &scratch);
    // effective() plus check_value: throws when the value is wrong (validate() was skipped).
    const toml::node *checked(std::string_view table, std::string_view key, const key_spec &spec,
                              toml::table &scratch) const;
    std::string where_set(std::string_view table, std::string_view key) const; // for messages
    const toml::node *file_value(std::string_view table, std::string_view key) const;
    const key_spec &require_key(std::string_view table, std::string_view key, const schema &s) const;

    toml::table root_;
    std::vector<override_entry> overrides_;
    std::string source_name_;
    std::filesystem::path base_dir_;
};

} // namespace strata::config
