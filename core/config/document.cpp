#include "config/document.hpp"

#include "common/error.hpp"
#include "config/foreign_options.hpp"
#include "config/units.hpp"
#include "config/value_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace strata::config {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::string table_suggestion(const schema &s, std::string_view table) {
    std::vector<std::string> names;
    for (const table_spec &t : s.tables()) names.push_back(t.name);
    const std::string best = closest(table, names);
    if (!best.empty()) return fmt::format("; did you mean [{}]?", best);
    std::string list;
    for (const std::string &n : names) list += (list.empty() ? "" : ", ") + n;
    return list.empty() ? std::string() : fmt::format(" (known tables: {})", list);
}

std::string key_suggestion(const table_spec &t, std::string_view key) {
    std::vector<std::string> names;
    for (const key_spec &k : t.keys) names.push_back(k.name);
    const std::string best = closest(key, names);
    if (!best.empty()) return fmt::format("; did you mean '{}'?", best);
    std::string list;
    for (const std::string &n : names) list += (list.empty() ? "" : ", ") + n;
    return list.empty() ? fmt::format(" ([{}] has no keys)", t.name) : fmt::format(" (known keys: {})", list);
}

// Problems with one (table, key, value) regardless of where it was written; "" when fine.
std::string problem_with(const schema &s, std::string_view table, std::string_view key, const toml::node *value) {
    const table_spec *t = s.find_table(table);
    if (t == nullptr) return fmt::format("unknown table [{}]{}", table, table_suggestion(s, table));
    const key_spec *k = s.find_key(table, key);
    if (k == nullptr) return fmt::format("unknown key '{}' in [{}]{}", key, table, key_suggestion(*t, key));
    if (!k->not_supported.empty()) return fmt::format("[{}] {} is not supported yet: {}", table, key, k->not_supported);
    if (value == nullptr) return "";
    const std::string bad = check_value(*k, *value);
    return bad.empty() ? "" : fmt::format("[{}] {} {}", table, key, bad);
}

std::vector<std::string> split_commas(std::string_view s) {
    std::vector<std::string> out;
    while (true) {
        const size_t comma = s.find(',');
        const std::string_view item = trim(s.substr(0, comma));
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
    }
    return out;
}

} // namespace

document document::from_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read config file '{}': {}; check the path given to --config", path, std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) fail("error while reading config file '{}': {}", path, std::strerror(errno));
    document doc = is_yaml_path(path) ? from_yaml_string(text.str(), path) : from_string(text.str(), path);
    doc.base_dir_ = std::filesystem::absolute(path).parent_path();
    return doc;
}

document document::from_yaml_string(std::string_view yaml, std::string source_name) {
    document doc;
    doc.pending_yaml_ = read_yaml_config(yaml, source_name);
    doc.source_name_ = std::move(source_name);
    doc.base_dir_ = std::filesystem::current_path();
    return doc;
}

void document::resolve_yaml(const schema &s, bool final) {
    std::vector<yaml_entry> waiting;
    std::vector<std::string> problems;
    for (yaml_entry &e : pending_yaml_) {
        std::string table, key, value = e.value;
        if (const size_t dot = e.name.find('.'); dot != std::string::npos) {
            table = e.name.substr(0, dot);
            key = e.name.substr(dot + 1);
            if (s.find_table(table) == nullptr && !final) {
                waiting.push_back(std::move(e));
                continue;
            }
        } else {
            std::string flag = "--" + e.name;
            std::replace(flag.begin(), flag.end(), '_', '-');
            const flag_match m = s.match_flag(flag);
            if (m.key == nullptr) {
                if (!final) {
                    waiting.push_back(std::move(e));
                    continue;
                }
                if (auto why = why_not_here(flag)) {
                    problems.push_back(fmt::format("{}:{}: '{}' has no meaning here: {}", source_name_, e.line, e.name, *why));
                    continue;
                }
                std::vector<std::string> names;
                for (std::string f : s.all_flags()) {
                    if (f.rfind("--", 0) != 0) continue; // llama.cpp's short spellings are not YAML names
                    f = f.substr(2);
                    std::replace(f.begin(), f.end(), '-', '_');
                    names.push_back(std::move(f));
                }
                for (const table_spec &t : s.tables()) names.push_back(t.name);
                const std::string best = closest(e.name, names);
                problems.push_back(best.empty()
                                       ? fmt::format("{}:{}: unknown option '{}'; run runtime --help for the options "
                                                     "(YAML names are the flags without dashes, - or _)",
                                                     source_name_, e.line, e.name)
                                       : fmt::format("{}:{}: unknown option '{}'; did you mean '{}'?", source_name_,
                                                     e.line, e.name, best));
                continue;
            }
            table = m.table;
            key = m.key->name;
            if (m.inverted && (value == "true" || value == "false")) value = value == "true" ? "false" : "true";
        }
        // A sequence arrives comma-joined, as plain text, and is split again for a list key.
        overrides_.insert(overrides_.begin() + static_cast<std::ptrdiff_t>(n_yaml_overrides_++),
                          make_override(table, key, value, fmt::format("{}:{} ({})", source_name_, e.line, e.name),
                                        e.is_list));
    }
    pending_yaml_ = std::move(waiting);
    if (!problems.empty()) {
        std::string message;
        for (const std::string &p : problems) message += (message.empty() ? "" : "\n") + p;
        throw error(message);
    }
}

document document::from_string(std::string_view toml_text, std::string source_name) {
    document doc;
    try {
        doc.root_ = toml::parse(toml_text, source_name);
    } catch (const toml::parse_error &e) {
        fail("{}:{}:{}: {}", source_name, e.source().begin.line, e.source().begin.column, e.description());
    }
    doc.source_name_ = std::move(source_name);
    doc.base_dir_ = std::filesystem::current_path();
    return doc;
}

document document::empty() {
    document doc;
    doc.source_name_ = "<defaults>";
    doc.base_dir_ = std::filesystem::current_path();
    return doc;
}

document::override_entry document::make_override(std::string table, std::string key, std::string raw_text,
                                                  std::string origin, bool plain_text) {
    override_entry entry;
    entry.table = std::move(table);
    entry.key = std::move(key);
    entry.raw_text = std::move(raw_text);
    entry.origin = std::move(origin);
    if (auto parsed = plain_text ? std::nullopt : parse_value(trim(entry.raw_text))) {
        entry.holder = std::move(*parsed);
        entry.parsed_as_toml = true;
    } else {
        entry.holder.insert_or_assign("v", entry.raw_text);
        entry.parsed_as_toml = false;
    }
    return entry;
}

void document::set_override(std::string_view assignment, std::string_view origin) {
    const auto malformed = [&] {
        fail("{} {}: expected table.key=value, e.g. --set sampling.temperature=0.7", origin, assignment);
    };
    const size_t eq = assignment.find('=');
    if (eq == std::string_view::npos) malformed();
    const std::string_view name = trim(assignment.substr(0, eq));
    const size_t dot = name.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size()) malformed();

    overrides_.push_back(make_override(std::string(trim(name.substr(0, dot))), std::string(trim(name.substr(dot + 1))),
                                       std::string(assignment.substr(eq + 1)), std::string(origin), false));
}

void document::validate(const schema &s) const {
    std::vector<std::pair<uint32_t, std::string>> file_problems;
    const auto at = [&](const toml::node &n, std::string message) {
        file_problems.emplace_back(n.source().begin.line,
                                   fmt::format("{}:{}: {}", source_name_, n.source().begin.line, message));
    };
    for (const auto &[table_key, table_node] : root_) {
        const std::string_view table = table_key.str();
        const toml::table *t = table_node.as_table();
        if (t == nullptr) {
            // A key above every [table] header: say which table it probably belongs to.
            std::string owner;
            for (const table_spec &ts : s.tables())
                if (s.find_key(ts.name, table) != nullptr) {
                    owner = ts.name;
                    break;
                }
            if (s.find_table(table) != nullptr)
                at(table_node, fmt::format("[{}] must be a table, got {}", table, describe_value(table_node)));
            else if (!owner.empty())
                at(table_node, fmt::format("key '{}' is outside any table; did you mean to put it under [{}]?", table, owner));
            else
                at(table_node, fmt::format("key '{}' is outside any table; config keys belong under a [table] header", table));
            continue;
        }
        if (s.find_table(table) == nullptr) {
            at(table_node, problem_with(s, table, "", nullptr));
            continue;
        }
        for (const auto &[key, value] : *t) {
            const std::string problem = problem_with(s, table, key.str(), &value);
            if (!problem.empty()) at(value, problem);
        }
    }
    std::stable_sort(file_problems.begin(), file_problems.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });

    std::vector<std::string> problems;
    for (auto &p : file_problems) problems.push_back(std::move(p.second));
    for (const override_entry &o : overrides_) {
        const key_spec *spec = s.find_key(o.table, o.key);
        toml::table scratch;
        const toml::node *value = spec != nullptr ? override_value(o, *spec, scratch) : nullptr;
        const std::string problem = problem_with(s, o.table, o.key, value);
        if (problem.empty()) continue;
        const std::string where = o.origin == "--set" ? fmt::format("--set {}.{}", o.table, o.key) : o.origin;
        problems.push_back(fmt::format("{}: {}", where, problem));
    }
    if (problems.empty()) return;
    std::string message;
    for (const std::string &p : problems) message += (message.empty() ? "" : "\n") + p;
    throw error(message);
}

const toml::node *document::file_value(std::string_view table, std::string_view key) const {
    const toml::table *t = root_.get_as<toml::table>(table);
    return t == nullptr ? nullptr : t->get(key);
}

const toml::node *document::override_value(const override_entry &o, const key_spec &spec, toml::table &scratch) {
    const toml::node *v = o.holder.get("v");
    if (spec.type == STRATA_CONFIG_STRING && !v->is_string()) {
        scratch.insert_or_assign("v", o.raw_text);
        return scratch.get("v");
    }
    if (spec.type == STRATA_CONFIG_STRING_LIST && !o.parsed_as_toml) {
        toml::array items;
        for (std::string &item : split_commas(o.raw_text)) items.push_back(std::move(item));
        scratch.insert_or_assign("v", std::move(items));
        return scratch.get("v");
    }
    return v;
}

const toml::node *document::effective(std::string_view table, std::string_view key, const key_spec &spec,
                                      toml::table &scratch) const {
    for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
        if (it->table != table || it->key != key) continue;
        return override_value(*it, spec, scratch);
    }
    if (const toml::node *v = file_value(table, key)) return v;
    if (spec.default_value) {
        auto parsed = parse_value(*spec.default_value);
        if (!parsed) fail("internal: default of [{}] {} is not a TOML value", table, key);
        scratch = std::move(*parsed);
        return scratch.get("v");
    }
    return nullptr;
}

const key_spec &document::require_key(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec *k = s.find_key(table, key);
    if (k == nullptr) fail("internal: config key [{}] {} is read but not declared in the schema", table, key);
    return *k;
}

namespace {

// A getter of the wrong kind for the key's declared type is a programming error, not a user one.
void require_type(const key_spec &k, std::string_view table, std::initializer_list<strata_config_type> allowed,
                  std::string_view getter) {
    if (std::find(allowed.begin(), allowed.end(), k.type) == allowed.end())
        fail("internal: [{}] {} is a {} key, read with {}", table, k.name, type_name(k.type), getter);
}

} // namespace

const toml::node *document::checked(std::string_view table, std::string_view key, const key_spec &spec,
                                    toml::table &scratch) const {
    const toml::node *v = effective(table, key, spec, scratch);
    if (v == nullptr) return nullptr;
    const std::string bad = check_value(spec, *v);
    if (!bad.empty()) fail("[{}] {} {} (in {})", table, key, bad, where_set(table, key));
    return v;
}

std::string document::where_set(std::string_view table, std::string_view key) const {
    for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it)
        if (it->table == table && it->key == key) return it->origin;
    if (const toml::node *v = file_value(table, key)) return fmt::format("{}:{}", source_name_, v->source().begin.line);
    return "the built-in default";
}

std::optional<bool> document::get_bool(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec &k = require_key(table, key, s);
    require_type(k, table, {STRATA_CONFIG_BOOL}, "get_bool");
    toml::table scratch;
    const toml::node *v = checked(table, key, k, scratch);
    return v ? std::optional<bool>(v->as_boolean()->get()) : std::nullopt;
}

std::optional<int64_t> document::get_int(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec &k = require_key(table, key, s);
    require_type(k, table, {STRATA_CONFIG_INT}, "get_int");
    toml::table scratch;
    const toml::node *v = checked(table, key, k, scratch);
    return v ? std::optional<int64_t>(v->as_integer()->get()) : std::nullopt;
}

std::optional<double> document::get_float(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec &k = require_key(table, key, s);
    require_type(k, table, {STRATA_CONFIG_FLOAT, STRATA_CONFIG_INT}, "get_float");
    toml::table scratch;
    const toml::node *v = checked(table, key, k, scratch);
    return v ? v->value<double>() : std::nullopt;
}

std::optional<std::string> document::get_string(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec &k = require_key(table, key, s);
    require_type(k, table, {STRATA_CONFIG_STRING}, "get_string");
    toml::table scratch;
    const toml::node *v = checked(table, key, k, scratch);
    return v ? std::optional<std::string>(v->as_string()->get()) : std::nullopt;
}

std::optional<uint64_t> document::get_bytes(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec &k = require_key(table, key, s);
    require_type(k, table, {STRATA_CONFIG_BYTES, STRATA_CONFIG_INT}, "get_bytes");
    toml::table scratch;
    const toml::node *v = checked(table, key, k, scratch);
    return v ? std::optional<uint64_t>(bytes_of(*v)) : std::nullopt;
}

std::vector<std::string> document::get_string_list(std::string_view table, std::string_view key, const schema &s) const {
    const key_spec &k = require_key(table, key, s);
    require_type(k, table, {STRATA_CONFIG_STRING_LIST}, "get_string_list");
    toml::table scratch;
    const toml::node *v = checked(table, key, k, scratch);
    std::vector<std::string> out;
    if (v != nullptr)
        for (const toml::node &item : *v->as_array()) out.push_back(item.as_string()->get());
    return out;
}

std::vector<document::setting> document::settings(const schema &s) const {
    std::vector<std::pair<std::string, std::string>> keys; // (table, key), each once
    const auto add = [&](std::string_view t, std::string_view k) {
        for (const auto &p : keys)
            if (p.first == t && p.second == k) return;
        keys.emplace_back(t, k);
    };
    for (const auto &[table_key, table_node] : root_)
        if (const toml::table *t = table_node.as_table())
            for (const auto &[key, value] : *t) add(table_key.str(), key.str());
    for (const override_entry &o : overrides_) add(o.table, o.key);
    std::vector<setting> out;
    for (const auto &[table, key] : keys) {
        const key_spec *spec = s.find_key(table, key);
        if (spec == nullptr) continue; // validate() reports it
        toml::table scratch;
        const toml::node *v = effective(table, key, *spec, scratch);
        std::ostringstream text;
        if (v != nullptr && v->is_floating_point()) text << fmt::format("{}", v->as_floating_point()->get()); // 0.9
        else if (v != nullptr && v->is_string()) text << v->as_string()->get();
        else if (v != nullptr) v->visit([&](const auto &n) { text << n; });
        out.push_back({table + "." + key, text.str(), where_set(table, key)});
    }
    std::sort(out.begin(), out.end(), [](const setting &a, const setting &b) { return a.key < b.key; });
    return out;
}

bool document::is_set(std::string_view table, std::string_view key) const {
    for (const override_entry &o : overrides_)
        if (o.table == table && o.key == key) return true;
    return file_value(table, key) != nullptr;
}

} // namespace strata::config
