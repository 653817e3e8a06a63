// Untrusted JSON (config.json, a shard index, a safetensors header): parsed with a nesting limit, so nothing later
// recurses over an attacker's depth, and shown in messages briefly.
#pragma once

#include "common/error.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

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

} // namespace strata
