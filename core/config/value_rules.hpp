// Checking one TOML value against its key_spec. Shared by schema (defaults) and document (file and overrides), so a
// value is judged the same wherever it comes from.
#pragma once

#include "config/schema.hpp"

#include <toml++/toml.h>

#include <optional>
#include <string>
#include <string_view>

namespace strata::config {

// The value as it would read in a message: string "abc", integer 5, float 1.5, boolean true, array [1, 2].
std::string describe_value(const toml::node &value);

// Short form for "key = <value>" messages: "abc" in quotes, numbers bare.
std::string value_text(const toml::node &value);

// "" when `value` is acceptable for `key`, else what is wrong, written to follow "[table] key", e.g.
// "must be an integer, got string \"abc\"" or "= 1.5 is out of range [0, 1]".
std::string check_value(const key_spec &key, const toml::node &value);

// Parses `text` as one TOML value ("0.5", "true", "\"x\"", "[1, 2]"); nullopt when it is not exactly one value.
// The returned table holds it under the key "v" (toml++ nodes live inside a container).
std::optional<toml::table> parse_value(std::string_view text);

// Bytes of an integer or size-string node (after check_value accepted it).
uint64_t bytes_of(const toml::node &value);

} // namespace strata::config
