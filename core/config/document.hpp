// One configuration: a parsed TOML file plus command-line overrides, checked against a schema and read with typed
// getters. Precedence: override (last one wins) > file > schema default.
#pragma once

#include "config/schema.hpp"
#include "config/yaml_config.hpp"

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
    // Parse errors become strata::error "path:line:col: <toml++ message>". A path ending in .yaml / .yml is read as a
    // vLLM-style YAML config (from_yaml_string).
    static document from_file(const std::string &path);
    static document from_string(std::string_view toml, std::string source_name);
    // vLLM's YAML: option names (max_model_len, tensor-parallel-size, cpu_offload_gb) resolved through the schema's
    // flags and aliases, or table.key from nested mappings. The entries wait until resolve_yaml knows the schema;
    // they rank below --set and flags, as a file does.
    static document from_yaml_string(std::string_view yaml, std::string source_name);
    static document empty();

    // "table.key=value". The value is parsed as one TOML value ("0.5", "true", "\"x\"", "[1,2]") and, when that
    // fails, taken as a plain string. For a STRING key a non-string value keeps its raw text (--set model.name=123),
    // and for a STRING_LIST key a plain string is split at commas (--devices cpu,cuda). `origin` names where it came
    // from in messages ("--set", "--threads"). Throws strata::error when the assignment is malformed.
    void set_override(std::string_view assignment, std::string_view origin);

    // Turns the YAML entries whose names the schema knows into assignments ("file.yaml:3 (max_model_len)" in
    // messages). With final = false the others wait (plugins have not added their tables yet); with final = true
    // they are an error: "file.yaml:9: unknown option 'max_modle_len'; did you mean 'max_model_len'?".
    void resolve_yaml(const schema &s, bool final);

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

    // Every key set in the file or by an override, with its effective value (TOML text) and where that came from
    // ("serve.yaml:4 (cpu_offload)", "-ngl", "x.toml:12"), sorted by table.key: `runtime plan --json`'s settings.
    struct setting {
        std::string key; // "memory.enable_cpu_offload"
        std::string value;
        std::string origin;
    };
    std::vector<setting> settings(const schema &s) const;

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

    // The value parsed as one TOML value, or kept as plain text (always when plain_text).
    static override_entry make_override(std::string table, std::string key, std::string raw_text, std::string origin,
                                        bool plain_text);
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
    std::vector<override_entry> overrides_; // YAML entries first (n_yaml_overrides_), then --set and flags
    size_t n_yaml_overrides_ = 0;
    std::vector<yaml_entry> pending_yaml_;
    std::string source_name_;
    std::filesystem::path base_dir_;
};

} // namespace strata::config
