#include "config/schema.hpp"

#include "common/error.hpp"
#include "config/value_rules.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace strata::config {

namespace {

std::string_view strip_dashes(std::string_view flag) {
    while (!flag.empty() && flag.front() == '-') flag.remove_prefix(1);
    return flag;
}

bool valid_type(uint32_t t) { return t >= STRATA_CONFIG_BOOL && t <= STRATA_CONFIG_STRING_LIST; }

// Catches mistakes in a table declaration (core code or a plugin) when it is registered, not when a user trips on it.
void check_declaration(const table_spec &table) {
    if (table.name.empty()) fail("config table with an empty name");
    for (size_t i = 0; i < table.keys.size(); ++i) {
        const key_spec &key = table.keys[i];
        const std::string where = fmt::format("config key [{}] {}", table.name, key.name);
        if (key.name.empty()) fail("config table [{}] declares a key with an empty name", table.name);
        if (!valid_type(static_cast<uint32_t>(key.type))) fail("{} has an unknown type {}", where, static_cast<int>(key.type));
        for (size_t j = 0; j < i; ++j)
            if (table.keys[j].name == key.name) fail("{} is declared twice", where);
        if (!key.choices.empty() && key.type != STRATA_CONFIG_STRING) fail("{}: choices are only for string keys", where);
        if (!key.flag.empty() && strip_dashes(key.flag.substr(0, key.flag.find('|'))).empty())
            fail("{}: flag \"{}\" has no name", where, key.flag);
        if (key.default_value) {
            const auto parsed = parse_value(*key.default_value);
            if (!parsed) fail("{}: default {} is not a TOML value", where, *key.default_value);
            const std::string problem = check_value(key, *parsed->get("v"));
            if (!problem.empty()) fail("{}: the default {}", where, problem);
        }
    }
}

// "--threads|-t|!--x" -> flag "--threads" (one spelling: two dashes, so lookups and messages agree), aliases as
// written. Every alias starts with '-' (after an optional '!'); only a boolean key has inverted ones.
void split_spellings(key_spec &key) {
    std::vector<std::string> parts;
    std::string_view rest = key.flag;
    while (true) {
        const size_t bar = rest.find('|');
        parts.emplace_back(rest.substr(0, bar));
        if (bar == std::string_view::npos) break;
        rest.remove_prefix(bar + 1);
    }
    if (strip_dashes(parts[0]).empty()) fail("config key {}: flag \"{}\" has no name", key.name, key.flag);
    if (parts[0].front() == '!') fail("config key {}: the first spelling of \"{}\" cannot be inverted", key.name, key.flag);
    key.flag = "--" + std::string(strip_dashes(parts[0]));
    for (size_t i = 1; i < parts.size(); ++i) {
        const std::string &a = parts[i];
        const bool inverted = !a.empty() && a.front() == '!';
        const std::string_view spelling = inverted ? std::string_view(a).substr(1) : std::string_view(a);
        if (spelling.size() < 2 || spelling.front() != '-' || strip_dashes(spelling).empty())
            fail("config key {}: alias \"{}\" of {} must start with '-'", key.name, a, key.flag);
        if (inverted && key.type != STRATA_CONFIG_BOOL)
            fail("config key {}: only a boolean key can have an inverted alias (\"{}\")", key.name, a);
        key.aliases.push_back(a);
    }
}

std::string type_hint(const key_spec &key) {
    if (key.type == STRATA_CONFIG_STRING && !key.choices.empty()) return key.choices;
    if (key.min_value < key.max_value && key.type != STRATA_CONFIG_BYTES)
        return fmt::format("{} in [{}, {}]", type_name(key.type), key.min_value, key.max_value);
    return std::string(type_name(key.type));
}

} // namespace

std::string_view type_name(strata_config_type type) {
    switch (type) {
    case STRATA_CONFIG_BOOL: return "boolean";
    case STRATA_CONFIG_INT: return "integer";
    case STRATA_CONFIG_FLOAT: return "float";
    case STRATA_CONFIG_STRING: return "string";
    case STRATA_CONFIG_BYTES: return "byte size";
    case STRATA_CONFIG_STRING_LIST: return "string list";
    }
    return "unknown";
}

void schema::add_table(table_spec table) {
    if (find_table(table.name) != nullptr) fail("config table [{}] is declared twice", table.name);
    check_declaration(table);
    for (size_t i = 0; i < table.keys.size(); ++i) {
        key_spec &key = table.keys[i];
        if (key.flag.empty()) continue;
        split_spellings(key);
        static constexpr std::string_view reserved[] = {"config", "set", "help", "json", "version", "h"};
        std::vector<std::string> spellings{key.flag};
        for (const std::string &a : key.aliases) spellings.push_back(a.front() == '!' ? a.substr(1) : a);
        for (const std::string &sp : spellings) {
            for (const std::string_view r : reserved)
                if (strip_dashes(sp) == r) fail("flag {} of [{}] {} is reserved by the runtime", sp, table.name, key.name);
            std::string owner;
            if (find_flag(sp, &owner) != nullptr)
                fail("flag {} of [{}] {} is already used by [{}]", sp, table.name, key.name, owner);
            for (size_t j = 0; j < i; ++j) {
                const key_spec &other = table.keys[j];
                if (other.flag == sp || std::find(other.aliases.begin(), other.aliases.end(), sp) != other.aliases.end())
                    fail("flag {} is declared twice in [{}]", sp, table.name);
            }
        }
    }
    tables_.push_back(std::move(table));
}

void schema::add_plugin_table(const std::string &plugin_name, const strata_config_key *keys, uint32_t n) {
    if (n > 0 && keys == nullptr) fail("plugin '{}' declares {} config keys but no key array", plugin_name, n);
    table_spec table;
    table.name = plugin_name;
    table.help = fmt::format("Options of the plugin '{}'", plugin_name);
    table.is_plugin = true;
    for (uint32_t i = 0; i < n; ++i) {
        const strata_config_key &k = keys[i];
        if (k.name == nullptr) fail("plugin '{}' config key #{} has no name", plugin_name, i);
        // The plugin's integer is checked before it becomes an enum: a value outside the enumerators must not be
        // loaded as a strata_config_type.
        if (!valid_type(k.type)) fail("plugin '{}': config key [{}] {} has an unknown type {}", plugin_name, plugin_name, k.name, k.type);
        key_spec key;
        key.name = k.name;
        key.type = static_cast<strata_config_type>(k.type);
        if (k.default_value != nullptr) key.default_value = k.default_value;
        key.min_value = k.min_value;
        key.max_value = k.max_value;
        if (k.help != nullptr) key.help = k.help;
        if (k.flag != nullptr) key.flag = k.flag;
        if (k.choices != nullptr) key.choices = k.choices;
        table.keys.push_back(std::move(key));
    }
    try {
        add_table(std::move(table));
    } catch (const error &e) {
        fail("plugin '{}': {}", plugin_name, e.what());
    }
}

const table_spec *schema::find_table(std::string_view table) const {
    const auto it = std::find_if(tables_.begin(), tables_.end(), [&](const table_spec &t) { return t.name == table; });
    return it == tables_.end() ? nullptr : &*it;
}

const key_spec *schema::find_key(std::string_view table, std::string_view key) const {
    const table_spec *t = find_table(table);
    if (t == nullptr) return nullptr;
    const auto it = std::find_if(t->keys.begin(), t->keys.end(), [&](const key_spec &k) { return k.name == key; });
    return it == t->keys.end() ? nullptr : &*it;
}

flag_match schema::match_flag(std::string_view flag) const {
    flag_match m;
    const std::string_view wanted = strip_dashes(flag);
    if (wanted.empty()) return m;
    for (const table_spec &t : tables_)
        for (const key_spec &k : t.keys) {
            if (k.flag.empty()) continue;
            bool inverted = false;
            bool hit = strip_dashes(k.flag) == wanted;
            for (size_t i = 0; !hit && i < k.aliases.size(); ++i) {
                const std::string &a = k.aliases[i];
                inverted = a.front() == '!';
                hit = (inverted ? std::string_view(a).substr(1) : std::string_view(a)) == flag;
            }
            if (!hit) continue;
            m.key = &k;
            m.table = t.name;
            m.inverted = inverted;
            return m;
        }
    return m;
}

const key_spec *schema::find_flag(std::string_view flag, std::string *table_out) const {
    flag_match m = match_flag(flag);
    if (m.key != nullptr && table_out != nullptr) *table_out = std::move(m.table);
    return m.key;
}

std::vector<std::string> schema::all_flags() const {
    std::vector<std::string> out;
    for (const table_spec &t : tables_)
        for (const key_spec &k : t.keys) {
            if (k.flag.empty()) continue;
            out.push_back(k.flag);
            for (const std::string &a : k.aliases) out.push_back(a.front() == '!' ? a.substr(1) : a);
        }
    return out;
}

std::string schema::help_text() const {
    std::string out;
    for (const table_spec &t : tables_) {
        out += fmt::format("[{}]{}{}\n", t.name, t.help.empty() ? "" : "  ", t.help);
        for (const key_spec &k : t.keys) {
            const std::string how = k.flag.empty() ? fmt::format("--set {}.{}=VALUE", t.name, k.name)
                                    : k.type == STRATA_CONFIG_BOOL ? fmt::format("{}, --no-{}", k.flag, k.flag.substr(2))
                                                                   : fmt::format("{} VALUE", k.flag);
            out += fmt::format("  {:<22} {:<28} ({}", k.name, how, type_hint(k));
            if (k.default_value) out += fmt::format(", default {}", *k.default_value);
            out += ")\n";
            if (!k.aliases.empty()) {
                std::string also;
                for (const std::string &a : k.aliases)
                    also += (also.empty() ? "" : ", ") +
                            (a.front() == '!' ? fmt::format("{} (= {}=false)", a.substr(1), k.flag) : a);
                out += fmt::format("      also: {}\n", also);
            }
            if (!k.help.empty()) out += fmt::format("      {}\n", k.help);
            if (!k.not_supported.empty()) out += fmt::format("      not supported yet: {}\n", k.not_supported);
        }
        out += "\n";
    }
    return out;
}

} // namespace strata::config
