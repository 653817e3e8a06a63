#include "config/yaml_config.hpp"

#include "common/error.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

namespace strata::config {

namespace {

int line_of(const YAML::Node &n) { return n.Mark().line + 1; }

std::string scalar_text(const YAML::Node &n, const std::string &where, const std::string &name) {
    if (n.IsNull()) fail("{}:{}: '{}' has no value; give one or delete the line", where, line_of(n), name);
    if (!n.IsScalar()) fail("{}:{}: '{}' must be a single value here", where, line_of(n), name);
    return n.Scalar();
}

void add_entry(std::vector<yaml_entry> &out, const std::string &name, const YAML::Node &value, int line,
               const std::string &where) {
    for (const yaml_entry &e : out)
        if (e.name == name) fail("{}:{}: '{}' is given twice (first on line {})", where, line, name, e.line);
    if (value.IsNull()) fail("{}:{}: '{}' has no value; give one or delete the line", where, line, name);
    yaml_entry e;
    e.name = name;
    e.line = line;
    if (value.IsSequence()) {
        e.is_list = true;
        for (const YAML::Node &item : value) {
            const std::string text = scalar_text(item, where, name);
            if (text.find(',') != std::string::npos)
                fail("{}:{}: an item of '{}' contains ',' ({}), which a list value cannot hold", where,
                     line_of(item), name, text);
            e.value += (e.value.empty() ? "" : ",") + text;
        }
    } else {
        e.value = scalar_text(value, where, name);
    }
    out.push_back(std::move(e));
}

} // namespace

bool is_yaml_path(const std::string &path) {
    std::string lower(path);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    const auto ends = [&](std::string_view suffix) {
        return lower.size() >= suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends(".yaml") || ends(".yml");
}

std::vector<yaml_entry> read_yaml_config(std::string_view text, const std::string &source_name) {
    YAML::Node root;
    try {
        root = YAML::Load(std::string(text));
    } catch (const YAML::Exception &e) {
        fail("{}:{}:{}: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg);
    }
    std::vector<yaml_entry> out;
    if (root.IsNull()) return out; // an empty file sets nothing
    if (!root.IsMap())
        fail("{}:{}: a YAML config is a mapping of option names to values (e.g. max_model_len: 4096)", source_name,
             line_of(root));
    try {
        for (const auto &kv : root) {
            const std::string name = scalar_text(kv.first, source_name, "a key");
            const int line = line_of(kv.first);
            if (kv.second.IsMap()) {
                // A Strata table: memory: {swap_space: 8}
                for (const auto &inner : kv.second) {
                    const std::string key = scalar_text(inner.first, source_name, "a key");
                    if (inner.second.IsMap())
                        fail("{}:{}: '{}.{}' is a mapping; tables hold values, not further tables", source_name,
                             line_of(inner.first), name, key);
                    add_entry(out, name + "." + key, inner.second, line_of(inner.first), source_name);
                }
                continue;
            }
            add_entry(out, name, kv.second, line, source_name);
        }
    } catch (const YAML::Exception &e) {
        fail("{}:{}:{}: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg);
    }
    return out;
}

} // namespace strata::config
