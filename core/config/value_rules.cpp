#include "config/value_rules.hpp"

#include "common/error.hpp"
#include "config/units.hpp"

#include <fmt/format.h>

#include <sstream>

namespace strata::config {

namespace {

std::string quoted(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default: out += c;
        }
    }
    return out + "\"";
}

std::string printed(const toml::node &value) {
    std::ostringstream os;
    value.visit([&os](const auto &v) { os << v; });
    return os.str();
}

std::string range_text(const key_spec &key) {
    if (key.type == STRATA_CONFIG_BYTES)
        return fmt::format("[{}, {}]", format_bytes(static_cast<uint64_t>(key.min_value)),
                           format_bytes(static_cast<uint64_t>(key.max_value)));
    return fmt::format("[{}, {}]", key.min_value, key.max_value);
}

bool has_range(const key_spec &key) { return key.min_value < key.max_value; }

bool in_range(const key_spec &key, double v) { return !has_range(key) || (v >= key.min_value && v <= key.max_value); }

std::string out_of_range(const key_spec &key, const toml::node &value) {
    return fmt::format("= {} is out of range {}", value_text(value), range_text(key));
}

} // namespace

std::string describe_value(const toml::node &value) {
    switch (value.type()) {
    case toml::node_type::string: return "string " + quoted(value.as_string()->get());
    case toml::node_type::integer: return fmt::format("integer {}", value.as_integer()->get());
    case toml::node_type::floating_point: return fmt::format("float {}", value.as_floating_point()->get());
    case toml::node_type::boolean: return value.as_boolean()->get() ? "boolean true" : "boolean false";
    case toml::node_type::array: return "array " + printed(value);
    case toml::node_type::table: return "table";
    default: return "date/time " + printed(value);
    }
}

std::string value_text(const toml::node &value) {
    if (const auto *s = value.as_string()) return quoted(s->get());
    if (const auto *f = value.as_floating_point()) return fmt::format("{}", f->get());
    if (value.is_table()) return "{...}";
    return printed(value);
}

std::string check_value(const key_spec &key, const toml::node &value) {
    const auto wrong = [&](std::string_view wanted) { return fmt::format("must be {}, got {}", wanted, describe_value(value)); };
    switch (key.type) {
    case STRATA_CONFIG_BOOL:
        return value.is_boolean() ? "" : wrong("true or false");
    case STRATA_CONFIG_INT:
        if (!value.is_integer()) return wrong("an integer");
        return in_range(key, static_cast<double>(value.as_integer()->get())) ? "" : out_of_range(key, value);
    case STRATA_CONFIG_FLOAT:
        if (!value.is_number()) return wrong("a number");
        return in_range(key, value.value<double>().value_or(0)) ? "" : out_of_range(key, value);
    case STRATA_CONFIG_STRING: {
        if (!value.is_string()) return wrong("a string");
        if (key.choices.empty()) return "";
        const std::string &s = value.as_string()->get();
        std::string_view rest = key.choices;
        while (true) {
            const size_t bar = rest.find('|');
            if (rest.substr(0, bar) == s) return "";
            if (bar == std::string_view::npos) break;
            rest.remove_prefix(bar + 1);
        }
        return fmt::format("= {} must be one of {}", quoted(s), key.choices);
    }
    case STRATA_CONFIG_BYTES: {
        uint64_t bytes = 0;
        if (const auto *i = value.as_integer()) {
            if (i->get() < 0) return wrong("a byte size (not negative)");
            bytes = static_cast<uint64_t>(i->get());
        } else if (const auto *s = value.as_string()) {
            try {
                bytes = parse_bytes(s->get());
            } catch (const error &e) {
                // parse_bytes repeats the text; drop that part, the message already shows it.
                std::string_view why = e.what();
                const std::string repeated = fmt::format("invalid byte size \"{}\": ", s->get());
                if (why.substr(0, repeated.size()) == repeated) why.remove_prefix(repeated.size());
                return fmt::format("= {} is not a byte size: {}", quoted(s->get()), why);
            }
        } else {
            return wrong("a byte count or a size string such as \"16GiB\"");
        }
        return in_range(key, static_cast<double>(bytes)) ? "" : out_of_range(key, value);
    }
    case STRATA_CONFIG_STRING_LIST: {
        const auto *arr = value.as_array();
        if (arr == nullptr) return wrong("an array of strings such as [\"a\", \"b\"]");
        for (const toml::node &item : *arr)
            if (!item.is_string()) return fmt::format("must be an array of strings, but holds {}", describe_value(item));
        return "";
    }
    }
    return fmt::format("has an unknown type {}", static_cast<int>(key.type));
}

std::optional<toml::table> parse_value(std::string_view text) {
    std::string doc = "v = ";
    doc += text;
    // A newline would let the text add keys of its own; one value means exactly one line.
    if (text.find_first_of("\r\n") != std::string_view::npos) return std::nullopt;
    try {
        toml::table t = toml::parse(doc);
        if (t.size() != 1 || !t.contains("v")) return std::nullopt;
        return t;
    } catch (const toml::parse_error &) {
        return std::nullopt;
    }
}

uint64_t bytes_of(const toml::node &value) {
    if (const auto *i = value.as_integer()) return static_cast<uint64_t>(i->get());
    if (const auto *s = value.as_string()) return parse_bytes(s->get());
    fail("internal: byte size requested from {}", describe_value(value));
}

} // namespace strata::config
