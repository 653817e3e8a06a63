// Untrusted JSON (config.json, a shard index, a safetensors header): parsed with a nesting limit, so nothing later
// recurses over an attacker's depth, and shown in messages briefly.
#pragma once

#include "common/error.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// Parses `text`; throws strata::error naming `origin` when it is not JSON or nests deeper than `max_depth`.
inline nlohmann::json parse_json_input(std::string_view text, const std::string &origin, int max_depth = 16) {
    const nlohmann::json::parser_callback_t limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json &) {
        if (depth > max_depth) fail("{}: the JSON nests deeper than {} levels; the file is not what it claims", origin, max_depth);
        return true;
    };
    try {
        return nlohmann::json::parse(text, limit);
    } catch (const nlohmann::json::exception &e) {
        fail("{}: not valid JSON: {}", origin, e.what());
    }
}

// A JSON value for a message: short, and never a walk over its nesting.
inline std::string brief_json(const nlohmann::json &v) {
    if (v.is_structured()) return std::string("a JSON ") + v.type_name();
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// Reads the keys of one JSON object (config.json, its quantization_config), remembering which were read, so that the
// caller can refuse every key nobody read. Messages name `origin` and the key as `prefix` + key.
class json_keys {
  public:
    json_keys(const nlohmann::json &j, const std::string &origin, std::string prefix = {})
        : j_(j), origin_(origin), prefix_(std::move(prefix)) {}

    // The value, or nullptr when the key is absent or null.
    const nlohmann::json *raw(std::string_view key) {
        used_.insert(std::string(key));
        const auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? nullptr : &*it;
    }
    // Whether the key is in the object at all (null included).
    bool present(std::string_view key) const { return j_.contains(key); }
    std::optional<uint64_t> count(std::string_view key) { return typed<uint64_t>(key, &nlohmann::json::is_number_unsigned, "a non-negative integer"); }
    std::optional<int64_t> integer(std::string_view key) { return typed<int64_t>(key, &nlohmann::json::is_number_integer, "an integer"); }
    std::optional<double> number(std::string_view key) { return typed<double>(key, &nlohmann::json::is_number, "a number"); }
    std::optional<bool> flag(std::string_view key) { return typed<bool>(key, &nlohmann::json::is_boolean, "true or false"); }
    std::optional<std::string> text(std::string_view key) { return typed<std::string>(key, &nlohmann::json::is_string, "a string"); }
    [[noreturn]] void wrong(std::string_view key, const nlohmann::json &v, const char *expected) const {
        fail("{}: '{}{}' is {}, expected {}", origin_, prefix_, key, brief_json(v), expected);
    }
    // The keys nobody read, except those in `inert`.
    std::vector<std::string> unread(const std::set<std::string, std::less<>> &inert) const {
        std::vector<std::string> left;
        for (auto it = j_.begin(); it != j_.end(); ++it)
            if (!used_.count(it.key()) && !inert.count(it.key())) left.push_back(it.key());
        return left;
    }
    const std::string &origin() const { return origin_; }

  private:
    template <class T> std::optional<T> typed(std::string_view key, bool (nlohmann::json::*is)() const noexcept,
                                              const char *expected) {
        const nlohmann::json *v = raw(key);
        if (v == nullptr) return std::nullopt;
        if (!(v->*is)()) wrong(key, *v, expected);
        return v->get<T>();
    }

    const nlohmann::json &j_;
    const std::string &origin_;
    std::string prefix_;
    std::set<std::string, std::less<>> used_;
};

} // namespace strata
