// JSON Schema -> GBNF for response_format {"type": "json_schema"} (and "json_object"), following the conventions of
// llama.cpp's json-schema-to-grammar: one rule per schema location named after its path (`name-kv`, `tags-item`, ...),
// shared primitive rules (`string`, `number`, `value`, ...), required properties in `properties` order and then the
// optional ones, no extra properties unless additionalProperties asks for them, and a `space` rule that allows a small
// bounded run of whitespace between tokens (so generation cannot loop on whitespace):
//   space ::= "" | " " | "\n"{1,2} [ \t]{0,20}
//
// The grammar generates only valid instances. Where that cannot be guaranteed the keyword is refused with a
// strata::error that names it and its location (a JSON pointer such as #/properties/price/multipleOf); keywords that
// do not constrain values (title, description, examples, $schema, ...) and unknown (vendor) keywords are ignored, as
// JSON Schema prescribes for unknown keywords. The exact subset is listed at the top of json_schema_grammar.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace strata::grammar {

// Most nesting of a schema (objects and arrays inside one another), checked before conversion.
inline constexpr size_t max_schema_depth = 128;

// Throws strata::error naming the path of an unsupported or invalid keyword.
std::string json_schema_to_gbnf(const nlohmann::ordered_json &schema);
// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();
// Any JSON value.
std::string json_value_gbnf();

} // namespace strata::grammar
