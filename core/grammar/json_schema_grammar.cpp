#include "grammar/json_schema_grammar.hpp"

#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/grammar.hpp"
#include "grammar/number_range_grammar.hpp"
#include "grammar/regex_grammar.hpp"
#include "grammar/utf8_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

// What is supported (everything else that constrains values is refused with an error naming it):
//   type (one or a list), enum, const, nullable (OpenAPI), anyOf / oneOf (oneOf's "exactly one" is not checked: its
//   branches are taken as alternatives), allOf (merged into one schema), $ref to "#" or "#/..." (e.g. #/$defs/Name,
//   #/definitions/Name; recursion allowed), $defs / definitions;
//   objects: properties, required, additionalProperties (absent = false when properties are given, as in llama.cpp;
//   true or a schema allows other keys, which never repeat a declared one), minProperties / maxProperties when the
//   declared properties already satisfy them, unevaluatedProperties: false;
//   arrays: items (schema or false), prefixItems (all generated, as llama.cpp does; a single schema there is read as
//   items, as llama.cpp does), draft-7 tuple items + additionalItems, minItems, maxItems, uniqueItems: false;
//   strings: minLength, maxLength, pattern (ECMAScript subset, see regex_grammar.hpp; a pattern is searched for, so
//   it matches anywhere unless anchored with ^ and $), format date / time / date-time / uuid (other formats are
//   annotations, as JSON Schema 2020-12 says by default, and get a plain string);
//   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (also draft-4 booleans);
//   numbers: the same bounds when they are whole numbers (bounded numbers are written without exponent).
// Refused: multipleOf, uniqueItems: true, contains / minContains / maxContains, patternProperties,
//   propertyNames, dependentRequired / dependentSchemas / dependencies, if / then / else, not, unevaluatedItems,
//   $dynamicRef / $recursiveRef, remote $ref.

namespace strata::grammar {

namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t max_expansion_depth = 256; // nested visits, counting $ref and allOf expansions
constexpr size_t max_name_length = 60;
constexpr uint64_t unbounded = UINT64_MAX;

struct primitive {
    const char *body;
    std::vector<std::string> deps;
};

const std::map<std::string, primitive> &primitives() {
    static const std::map<std::string, primitive> p = {
        {"space", {R"g("" | " " | "\n"{1,2} [ \t]{0,20})g", {}}},
        {"boolean", {R"g("true" | "false")g", {}}},
        {"null", {R"g("null")g", {}}},
        {"integral-part", {R"g([0] | [1-9] [0-9]{0,15})g", {}}},
        {"decimal-part", {R"g([0-9]{1,16})g", {}}},
        {"number",
         {R"g("-"? integral-part ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})?)g", {"integral-part", "decimal-part"}}},
        {"integer", {R"g("-"? integral-part)g", {"integral-part"}}},
        // \uXXXX escapes that JSON parsers accept: no lone UTF-16 surrogates.
        {"escape",
         {R"g("\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | )g"
          R"g([dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})))g",
          {}}},
        {"char", {R"g([^"\\\x7F\x00-\x1F] | escape)g", {"escape"}}},
        {"string", {R"g("\"" char* "\"")g", {"char"}}},
        {"value",
         {"object | array | string | number | boolean | null",
          {"object", "array", "string", "number", "boolean", "null"}}},
        {"object",
         {R"g("{" space ( string space ":" space value space )g"
          R"g(( "," space string space ":" space value space )* )? "}")g",
          {"space", "string", "value"}}},
        {"array", {R"g("[" space ( value space ( "," space value space )* )? "]")g", {"space", "value"}}},
        {"date", {R"g([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))g", {}}},
        {"time",
         {R"g(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? )g"
          R"g(( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))g",
          {}}},
        {"date-time", {R"g(date "T" time)g", {"date", "time"}}},
        {"uuid",
         {R"g([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})g", {}}},
    };
    return p;
}

// Keywords that do not change which values are valid.
const std::set<std::string> &annotations() {
    static const std::set<std::string> a = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                            "deprecated", "readOnly", "writeOnly", "$anchor", "$dynamicAnchor",
                                            "$recursiveAnchor", "$vocabulary", "contentEncoding", "contentMediaType",
                                            "contentSchema", "$defs", "definitions"};
    return a;
}

// Keywords that change validity and are not implemented, with the reason.
const std::map<std::string, const char *> &refused() {
    static const std::map<std::string, const char *> r = {
        {"multipleOf", "a grammar cannot check divisibility"},
        {"patternProperties", "object keys are only generated from properties (and additionalProperties)"},
        {"propertyNames", "object keys are only generated from properties (and additionalProperties)"},
        {"dependentRequired", "conditional requirements cannot be expressed as a grammar"},
        {"dependentSchemas", "conditional schemas cannot be expressed as a grammar"},
        {"dependencies", "conditional requirements cannot be expressed as a grammar"},
        {"if", "conditional schemas (if/then/else) cannot be expressed as a grammar"},
        {"then", "conditional schemas (if/then/else) cannot be expressed as a grammar"},
        {"else", "conditional schemas (if/then/else) cannot be expressed as a grammar"},
        {"not", "a grammar cannot exclude what a subschema matches"},
        {"contains", "a grammar cannot require that some item matches"},
        {"minContains", "a grammar cannot count matching items"},
        {"maxContains", "a grammar cannot count matching items"},
        {"unevaluatedItems", "use items / prefixItems instead"},
        {"$dynamicRef", "only $ref to a location in this schema (\"#/...\") is supported"},
        {"$recursiveRef", "only $ref to a location in this schema (\"#/...\") is supported"},
    };
    return r;
}

std::string pointer_token(std::string_view key) {
    std::string out;
    for (const char c : key) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
}

std::string child(const std::string &path, std::string_view key) { return path + "/" + pointer_token(key); }

std::string type_name(const ojson &v) {
    switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::boolean: return "a boolean";
    case ojson::value_t::string: return "a string";
    case ojson::value_t::array: return "an array";
    case ojson::value_t::object: return "an object";
    default: return "a number";
    }
}

// A GBNF string literal for the bytes of s.
std::string literal(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (u < 0x20 || u == 0x7F) out += fmt::format("\\x{:02X}", u);
        else out += c;
    }
    return out + "\"";
}

// A code point inside a GBNF character class.
std::string class_char(uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
        return std::string(1, static_cast<char>(cp));
    if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
    if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
    return fmt::format("\\U{:08X}", cp);
}

std::string repetition(const std::string &item, uint64_t min, uint64_t max) {
    if (max == unbounded) {
        if (min == 0) return item + "*";
        if (min == 1) return item + "+";
        return fmt::format("{}{{{},}}", item, min);
    }
    if (min == 0 && max == 1) return item + "?";
    if (min == max) return fmt::format("{}{{{}}}", item, min);
    return fmt::format("{}{{{},{}}}", item, min, max);
}

struct bound {
    double value;
    bool exclusive;
};

class converter {
  public:
    explicit converter(const ojson &root) : root_(root) {}

    std::string run() {
        check_depth();
        ref_names_["#"] = "root";
        const std::string body = visit(root_, "", "#");
        rules_["root"] = body;
        std::string out = "root ::= " + body + "\n";
        for (const auto &[name, rule] : rules_)
            if (name != "root") out += name + " ::= " + rule + "\n";
        return out;
    }

  private:
    [[noreturn]] static void bad(const std::string &path, const std::string &what) {
        fail("JSON schema, at {}: {}", path, what);
    }

    void check_depth() const {
        std::vector<std::pair<const ojson *, size_t>> todo{{&root_, 1}};
        while (!todo.empty()) {
            const auto [v, depth] = todo.back();
            todo.pop_back();
            if (depth > max_schema_depth)
                fail("JSON schema nested deeper than {} levels; flatten it (e.g. with $defs and $ref)",
                     max_schema_depth);
            if (v->is_structured())
                for (const auto &x : *v) todo.emplace_back(&x, depth + 1);
        }
    }

    struct depth_guard {
        converter &c;
        depth_guard(converter &conv, const std::string &path) : c(conv) {
            if (++c.depth_ > max_expansion_depth)
                bad(path, fmt::format("schema nested deeper than {} levels once $ref and allOf are followed (a $ref or "
                                      "allOf that refers to itself?)",
                                      max_expansion_depth));
        }
        ~depth_guard() { --c.depth_; }
    };

    // --- rules ---

    static bool reserved(const std::string &name) { return name == "root" || primitives().count(name) != 0; }

    static std::string sanitize(const std::string &name) {
        std::string out;
        for (const char c : name) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
            if (ok) out += c;
            else if (out.empty() || out.back() != '-') out += '-';
        }
        if (out.size() > max_name_length) out.resize(max_name_length);
        if (out.empty()) out = "unnamed";
        return out;
    }

    static std::string join(const std::string &name, const std::string &part) {
        return name.empty() ? part : name + "-" + part;
    }

    // Adds `name ::= body` (or finds the same rule) and returns the name used.
    std::string add_rule(const std::string &name, const std::string &body) {
        std::string base = sanitize(name);
        if (reserved(base)) base += "-";
        for (size_t i = 0;; ++i) {
            const std::string candidate = i == 0 ? base : base + std::to_string(i - 1);
            const auto it = rules_.find(candidate);
            if (it == rules_.end()) {
                rules_.emplace(candidate, body);
                return candidate;
            }
            if (it->second == body) return candidate;
        }
    }

    std::string use(const std::string &name) {
        if (rules_.count(name) == 0) {
            const primitive &p = primitives().at(name);
            rules_.emplace(name, p.body);
            for (const std::string &d : p.deps) use(d);
        }
        return name;
    }

    // The schema as one symbol (a rule of its own unless its body is a single symbol already).
    std::string symbol(const ojson &schema, const std::string &name, const std::string &path) {
        const std::string body = visit(schema, name, path);
        const bool single = !body.empty() && std::all_of(body.begin(), body.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        });
        return single ? body : add_rule(name, body);
    }

    // --- schema helpers ---

    static bool constrains(const std::string &key) { return annotations().count(key) == 0; }

    static bool only_annotations(const ojson &s) {
        for (const auto &[k, v] : s.items())
            if (constrains(k)) return false;
        return true;
    }

    void check_keywords(const ojson &s, const std::string &path) const {
        for (const auto &[k, v] : s.items()) {
            const auto r = refused().find(k);
            if (r != refused().end())
                bad(child(path, k), fmt::format("keyword '{}' is not supported: {}; remove it", k, r->second));
            if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>()))
                bad(child(path, k), "uniqueItems: true is not supported: a grammar cannot check that items differ; "
                                    "remove it");
            if (k == "unevaluatedProperties" &&
                !(v.is_boolean() && !v.get<bool>() && !allows_additional(s)))
                bad(child(path, k), "unevaluatedProperties is only supported as false (with additionalProperties "
                                    "absent or false); use additionalProperties instead");
        }
    }

    static bool allows_additional(const ojson &s) {
        const auto it = s.find("additionalProperties");
        return it != s.end() && !(it->is_boolean() && !it->get<bool>());
    }

    const ojson &resolve(const std::string &ref, const std::string &path) const {
        if (ref.empty() || ref[0] != '#')
            bad(path, fmt::format("$ref \"{}\" is not supported: only references inside this schema, like "
                                  "\"#/$defs/Name\", are (no remote or relative references)",
                                  ref));
        const ojson *at = &root_;
        size_t i = 1;
        if (ref.size() > 1 && ref[1] != '/')
            bad(path, fmt::format("$ref \"{}\" is not supported: anchors are not; write a JSON pointer like "
                                  "\"#/$defs/Name\"",
                                  ref));
        while (i < ref.size()) {
            size_t end = ref.find('/', i + 1);
            if (end == std::string::npos) end = ref.size();
            std::string token;
            for (size_t k = i + 1; k < end; ++k) {
                if (ref[k] == '~' && k + 1 < end && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
                    token += ref[k + 1] == '0' ? '~' : '/';
                    ++k;
                } else {
                    token += ref[k];
                }
            }
            i = end;
            if (at->is_object() && at->contains(token)) {
                at = &(*at)[token];
            } else if (at->is_array() && !token.empty() &&
                       std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                       token.size() < 10 && std::stoul(token) < at->size()) {
                at = &(*at)[std::stoul(token)];
            } else {
                bad(path, fmt::format("$ref \"{}\" points to nothing: there is no \"{}\" there", ref, token));
            }
        }
        return *at;
    }

    // The rule for a $ref target (one rule per target, so recursive schemas work).
    std::string ref_rule(const std::string &ref, const std::string &path) {
        const auto it = ref_names_.find(ref);
        if (it != ref_names_.end()) return it->second;
        const ojson &target = resolve(ref, child(path, "$ref"));
        const size_t slash = ref.rfind('/');
        std::string name = sanitize(ref.substr(slash == std::string::npos ? 0 : slash + 1));
        if (reserved(name)) name += "-";
        std::string unique = name;
        for (size_t i = 0; rules_.count(unique) != 0; ++i) unique = name + std::to_string(i);
        rules_.emplace(unique, ""); // reserved while the target is converted (it may refer to itself)
        ref_names_.emplace(ref, unique);
        rules_[unique] = visit(target, unique, ref);
        return unique;
    }

    static std::optional<uint64_t> count_keyword(const ojson &s, const char *key, const std::string &path) {
        const auto it = s.find(key);
        if (it == s.end()) return std::nullopt;
        if (it->is_number_unsigned()) return it->get<uint64_t>();
        if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
        if (it->is_number_float()) {
            const double d = it->get<double>();
            if (d >= 0 && std::floor(d) == d && d < 1e19) return static_cast<uint64_t>(d);
        }
        bad(child(path, key), fmt::format("{} must be a non-negative whole number, got {}", key, it->dump()));
    }

    static void check_count_limit(uint64_t n, const char *key, const std::string &path) {
        if (n != unbounded && n > grammar_limits::max_repetition)
            bad(child(path, key), fmt::format("{} {} is above the {} a grammar can count to; use a smaller value or "
                                              "remove it",
                                              key, n, grammar_limits::max_repetition));
    }

    // The types a schema allows: its "type" (one or a list), or what its keywords imply; empty means any value.
    static std::vector<std::string> types_of(const ojson &s, const std::string &path) {
        static const std::set<std::string> known = {"object",  "array",   "string", "number",
                                                    "integer", "boolean", "null"};
        std::vector<std::string> out;
        const auto it = s.find("type");
        if (it != s.end()) {
            const auto add = [&](const ojson &t) {
                if (!t.is_string() || known.count(t.get<std::string>()) == 0)
                    bad(child(path, "type"), fmt::format("unknown type {}; the types are object, array, string, "
                                                         "number, integer, boolean and null",
                                                         t.dump()));
                if (std::find(out.begin(), out.end(), t.get<std::string>()) == out.end())
                    out.push_back(t.get<std::string>());
            };
            if (it->is_array()) {
                for (const auto &t : *it) add(t);
                if (out.empty()) bad(child(path, "type"), "an empty list of types allows no value");
            } else {
                add(*it);
            }
            return out;
        }
        const auto has = [&](std::initializer_list<const char *> keys) {
            for (const char *k : keys)
                if (s.contains(k)) return true;
            return false;
        };
        if (has({"properties", "additionalProperties", "required", "minProperties", "maxProperties"}))
            return {"object"};
        if (has({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) return {"array"};
        if (has({"minLength", "maxLength", "format", "pattern"})) return {"string"};
        if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) return {"number"};
        return out;
    }

    static bool value_has_type(const ojson &v, const std::string &t) {
        if (t == "string") return v.is_string();
        if (t == "boolean") return v.is_boolean();
        if (t == "null") return v.is_null();
        if (t == "object") return v.is_object();
        if (t == "array") return v.is_array();
        if (t == "number") return v.is_number();
        if (t == "integer")
            return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
        return false;
    }

    // --- allOf: merging schemas ---

    static ojson as_object_schema(const ojson &s, const std::string &path) {
        if (s.is_boolean()) {
            if (!s.get<bool>()) bad(path, "schema false allows no value");
            return ojson::object();
        }
        if (!s.is_object()) bad(path, fmt::format("a schema must be an object or a boolean, got {}", type_name(s)));
        return s;
    }

    // s with its allOf and $ref expanded into one schema.
    ojson flatten(const ojson &schema, const std::string &path) {
        depth_guard guard(*this, path);
        ojson s = as_object_schema(schema, path);
        if (s.contains("$ref")) {
            const ojson ref = s["$ref"];
            if (!ref.is_string()) bad(child(path, "$ref"), "$ref must be a string");
            s.erase("$ref");
            const std::string target = ref.get<std::string>();
            s = merge(flatten(resolve(target, child(path, "$ref")), target), s, path);
        }
        if (s.contains("allOf")) {
            const ojson all = s["allOf"];
            if (!all.is_array() || all.empty()) bad(child(path, "allOf"), "allOf must be a non-empty array of schemas");
            s.erase("allOf");
            for (size_t i = 0; i < all.size(); ++i) {
                const std::string p = child(child(path, "allOf"), std::to_string(i));
                s = merge(s, flatten(all[i], p), p);
            }
        }
        return s;
    }

    static std::vector<std::string> type_list(const ojson &t) {
        std::vector<std::string> out;
        if (t.is_string()) out.push_back(t.get<std::string>());
        else if (t.is_array())
            for (const auto &x : t)
                if (x.is_string()) out.push_back(x.get<std::string>());
        return out;
    }

    static ojson merge(const ojson &a, const ojson &b, const std::string &path) {
        ojson out = a;
        for (const auto &[k, v] : b.items()) {
            if (!constrains(k)) {
                if (!out.contains(k)) out[k] = v;
                continue;
            }
            if (!out.contains(k)) {
                out[k] = v;
                continue;
            }
            ojson &cur = out[k];
            if (cur == v) continue;
            const std::string at = child(path, k);
            if (k == "type") {
                std::vector<std::string> both;
                for (const std::string &x : type_list(cur)) {
                    for (const std::string &y : type_list(v)) {
                        std::string t;
                        if (x == y) t = x;
                        else if ((x == "number" && y == "integer") || (x == "integer" && y == "number")) t = "integer";
                        if (!t.empty() && std::find(both.begin(), both.end(), t) == both.end()) both.push_back(t);
                    }
                }
                if (both.empty()) bad(at, fmt::format("allOf combines types {} and {}: no value has both", cur.dump(),
                                                      v.dump()));
                cur = both.size() == 1 ? ojson(both[0]) : ojson(both);
            } else if (k == "properties") {
                if (!cur.is_object() || !v.is_object()) bad(at, "properties must be an object");
                for (const auto &[p, ps] : v.items()) {
                    if (!cur.contains(p)) cur[p] = ps;
                    else if (cur[p] != ps) cur[p] = ojson{{"allOf", ojson::array({cur[p], ps})}};
                }
            } else if (k == "required") {
                if (!cur.is_array() || !v.is_array()) bad(at, "required must be an array of property names");
                for (const auto &r : v)
                    if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
            } else if (k == "enum") {
                if (!cur.is_array() || !v.is_array()) bad(at, "enum must be an array");
                ojson both = ojson::array();
                for (const auto &x : cur)
                    if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
                if (both.empty()) bad(at, "allOf combines enums with no value in common");
                cur = both;
            } else if (k == "minLength" || k == "minItems" || k == "minProperties" || k == "minimum" ||
                       (k == "exclusiveMinimum" && cur.is_number() && v.is_number())) {
                if (!cur.is_number() || !v.is_number()) bad(at, fmt::format("{} must be a number", k));
                if (v.get<double>() > cur.get<double>()) cur = v;
            } else if (k == "maxLength" || k == "maxItems" || k == "maxProperties" || k == "maximum" ||
                       (k == "exclusiveMaximum" && cur.is_number() && v.is_number())) {
                if (!cur.is_number() || !v.is_number()) bad(at, fmt::format("{} must be a number", k));
                if (v.get<double>() < cur.get<double>()) cur = v;
            } else if (k == "items" || k == "additionalProperties" || k == "additionalItems") {
                if ((cur.is_boolean() && !cur.get<bool>()) || (v.is_boolean() && !v.get<bool>())) cur = false;
                else if (cur.is_boolean()) cur = v;
                else if (!v.is_boolean()) cur = ojson{{"allOf", ojson::array({cur, v})}};
            } else {
                bad(at, fmt::format("allOf combines different values of '{}' ({} and {}), which is not supported; "
                                    "state it once",
                                    k, cur.dump(), v.dump()));
            }
        }
        return out;
    }

    // --- the conversion ---

    // The GBNF body for a schema; `name` is the base for the names of rules it needs.
    std::string visit(const ojson &schema, const std::string &name, const std::string &path) {
        depth_guard guard(*this, path);
        if (schema.is_boolean()) {
            if (!schema.get<bool>()) bad(path, "schema false allows no value here");
            return use("value");
        }
        if (!schema.is_object()) bad(path, fmt::format("a schema must be an object or a boolean, got {}",
                                                       type_name(schema)));
        check_keywords(schema, path);

        if (schema.contains("$ref")) {
            const ojson &ref = schema["$ref"];
            if (!ref.is_string()) bad(child(path, "$ref"), "$ref must be a string");
            ojson rest = schema;
            rest.erase("$ref");
            if (only_annotations(rest)) return ref_rule(ref.get<std::string>(), path);
            return visit(flatten(schema, path), name, path); // $ref with constraints beside it: an allOf
        }
        if (schema.contains("allOf")) return visit(flatten(schema, path), name, path);

        for (const char *key : {"anyOf", "oneOf"}) {
            if (!schema.contains(key)) continue;
            if (schema.contains("anyOf") && schema.contains("oneOf"))
                bad(path, "anyOf and oneOf together are not supported; combine them into one anyOf");
            const ojson &alts = schema[key];
            if (!alts.is_array() || alts.empty())
                bad(child(path, key), fmt::format("{} must be a non-empty array", key));
            ojson rest = schema;
            rest.erase(key);
            const bool plain = only_annotations(rest);
            std::string body;
            for (size_t i = 0; i < alts.size(); ++i) {
                const std::string p = child(child(path, key), std::to_string(i));
                const ojson alt = plain ? alts[i] : merge(rest, as_object_schema(alts[i], p), p);
                body += (body.empty() ? "" : " | ") +
                        symbol(alt, join(name.empty() ? "alternative" : name, std::to_string(i)), p);
            }
            return body;
        }

        if (schema.contains("nullable")) {
            const ojson &n = schema["nullable"];
            if (!n.is_boolean()) bad(child(path, "nullable"), "nullable must be true or false");
            ojson rest = schema;
            rest.erase("nullable");
            if (!n.get<bool>()) return visit(rest, name, path);
            return symbol(rest, join(name, "0"), path) + " | " + use("null");
        }

        const std::vector<std::string> types = types_of(schema, path);

        if (schema.contains("const") || schema.contains("enum")) {
            // Values are filtered by an explicit "type" only (other keywords are not checked against them).
            const std::vector<std::string> explicit_types =
                schema.contains("type") ? types : std::vector<std::string>{};
            std::vector<ojson> values;
            if (schema.contains("const")) {
                values.push_back(schema["const"]);
            } else {
                const ojson &e = schema["enum"];
                if (!e.is_array() || e.empty()) bad(child(path, "enum"), "enum must be a non-empty array");
                values.assign(e.begin(), e.end());
            }
            std::string body;
            for (const ojson &v : values) {
                const bool fits = explicit_types.empty() ||
                                  std::any_of(explicit_types.begin(), explicit_types.end(),
                                              [&](const std::string &t) { return value_has_type(v, t); });
                if (fits) body += (body.empty() ? "" : " | ") + constant(v);
            }
            if (body.empty())
                bad(path, fmt::format("no value of {} has the type {}", schema.contains("const") ? "const" : "enum",
                                      schema.at("type").dump()));
            return body;
        }

        if (types.size() > 1) {
            std::string body;
            for (const std::string &t : types) {
                ojson one = schema;
                one["type"] = t;
                body += (body.empty() ? "" : " | ") + symbol(one, join(name, t), path);
            }
            return body;
        }
        const std::string type = types.empty() ? "" : types[0];
        if (type == "object") return object_rule(schema, name, path);
        if (type == "array") return array_rule(schema, name, path);
        if (type == "string") return string_rule(schema, name, path);
        if (type == "integer") return integer_rule(schema, path);
        if (type == "number") return number_rule(schema, path);
        if (type == "boolean") return use("boolean");
        if (type == "null") return use("null");
        return use("value");
    }

    // A const or enum value; objects and arrays allow the same whitespace between tokens as everything else.
    std::string constant(const ojson &v) {
        if (!v.is_structured()) return literal(v.dump());
        const bool object = v.is_object();
        std::string out = object ? "\"{\" " : "\"[\" ";
        out += use("space");
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            out += first ? " " : " \",\" space ";
            first = false;
            if (object) out += literal(ojson(it.key()).dump()) + " space \":\" space ";
            out += constant(it.value()) + " space";
        }
        return out + (object ? " \"}\"" : " \"]\"");
    }

    std::string kv_rule(const std::string &key, const std::string &value, const std::string &name) {
        return add_rule(name + "-kv", literal(ojson(key).dump()) + " " + use("space") + " \":\" space " + value +
                                          " space");
    }

    // A JSON string key that is none of `names` (so extra properties never repeat a declared one).
    std::string key_excluding(const std::vector<std::string> &names, const std::string &name) {
        struct node {
            std::map<uint32_t, size_t> children;
            bool end = false;
        };
        std::vector<node> trie(1);
        for (const std::string &n : names) {
            std::vector<uint32_t> cps;
            utf8_decoder d;
            bool plain = true;
            for (const char c : n) {
                const auto r = d.feed(static_cast<uint8_t>(c));
                if (r == utf8_decoder::invalid) plain = false;
                if (r == utf8_decoder::complete) {
                    if (d.value < 0x20 || d.value == '"' || d.value == '\\' || d.value == 0x7F) plain = false;
                    cps.push_back(d.value);
                }
            }
            if (!plain || d.in_character()) continue; // written with escapes in JSON: not excluded (documented gap)
            size_t at = 0;
            for (const uint32_t cp : cps) {
                const auto it = trie[at].children.find(cp);
                if (it != trie[at].children.end()) {
                    at = it->second;
                } else {
                    trie.emplace_back();
                    trie[at].children.emplace(cp, trie.size() - 1);
                    at = trie.size() - 1;
                }
            }
            trie[at].end = true;
        }
        use("char");
        // Depth-first, bottom-up: the expression for each node (alternatives after the prefix it stands for).
        std::vector<std::string> expr(trie.size());
        std::vector<std::pair<size_t, bool>> todo{{0, false}};
        while (!todo.empty()) {
            const auto [at, children_done] = todo.back();
            todo.pop_back();
            if (!children_done) {
                todo.emplace_back(at, true);
                for (const auto &[cp, next] : trie[at].children) todo.emplace_back(next, false);
                continue;
            }
            std::string alts, excluded;
            for (const auto &[cp, next] : trie[at].children) {
                alts += (alts.empty() ? "" : " | ") + fmt::format("[{}] {}", class_char(cp), expr[next]);
                excluded += class_char(cp);
            }
            alts += (alts.empty() ? "" : " | ") + fmt::format("( [^\"\\\\\\x7F\\x00-\\x1F{}] | escape ) char*",
                                                              excluded);
            if (!trie[at].end) alts += " | \"\"";
            expr[at] = "( " + alts + " )";
        }
        return add_rule(name, "\"\\\"\" " + expr[0] + " \"\\\"\"");
    }

    std::string object_rule(const ojson &s, const std::string &name, const std::string &path) {
        std::vector<std::pair<std::string, ojson>> props;
        if (s.contains("properties")) {
            const ojson &p = s["properties"];
            if (!p.is_object()) bad(child(path, "properties"), "properties must be an object");
            for (const auto &[k, v] : p.items()) props.emplace_back(k, v);
        }
        std::vector<std::string> required;
        if (s.contains("required")) {
            const ojson &r = s["required"];
            if (!r.is_array()) bad(child(path, "required"), "required must be an array of property names");
            for (const auto &x : r) {
                if (!x.is_string()) bad(child(path, "required"), "required must list property names (strings)");
                if (std::find(required.begin(), required.end(), x.get<std::string>()) == required.end())
                    required.push_back(x.get<std::string>());
            }
        }
        // additionalProperties: absent means none when properties are given (llama.cpp's default), any otherwise.
        ojson additional = props.empty() && !s.contains("additionalProperties") ? ojson(true) : ojson(false);
        if (s.contains("additionalProperties")) {
            additional = s["additionalProperties"];
            if (!additional.is_boolean() && !additional.is_object())
                bad(child(path, "additionalProperties"), "additionalProperties must be a boolean or a schema");
        }
        const bool extra = !(additional.is_boolean() && !additional.get<bool>());
        for (const std::string &r : required) {
            const bool declared = std::any_of(props.begin(), props.end(), [&](const auto &p) { return p.first == r; });
            if (declared) continue;
            if (s.contains("additionalProperties") && !extra)
                bad(child(path, "required"), fmt::format("required property '{}' is not in properties and "
                                                         "additionalProperties is false, so no object is valid",
                                                         r));
            props.emplace_back(r, additional.is_object() ? additional : ojson::object());
        }

        // Declared properties in order: the required ones first, then the optional ones.
        std::vector<std::string> required_kv, optional_kv, optional_names, declared;
        for (const auto &[key, schema] : props) {
            const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
            declared.push_back(key);
            if (schema.is_boolean() && !schema.get<bool>()) {
                if (is_required)
                    bad(child(child(path, "properties"), key), "a required property with schema false: no object "
                                                              "is valid");
                continue; // may not appear
            }
            const std::string prop_name = join(name, key);
            const std::string value = symbol(schema, prop_name, child(child(path, "properties"), key));
            const std::string kv = kv_rule(key, value, prop_name);
            if (is_required) required_kv.push_back(kv);
            else {
                optional_kv.push_back(kv);
                optional_names.push_back(key);
            }
        }

        const uint64_t n_max = extra ? unbounded : required_kv.size() + optional_kv.size();
        if (const auto m = count_keyword(s, "minProperties", path); m && *m > required_kv.size())
            bad(child(path, "minProperties"), fmt::format("minProperties {} is more than the {} required properties; "
                                                          "list the properties that must appear in required",
                                                          *m, required_kv.size()));
        if (const auto m = count_keyword(s, "maxProperties", path); m && (n_max == unbounded || *m < n_max))
            bad(child(path, "maxProperties"), fmt::format("maxProperties {} is less than the properties an object "
                                                          "may have; a grammar cannot count them, so remove optional "
                                                          "properties or additionalProperties",
                                                          *m));
        use("space");
        if (props.empty() && extra && !additional.is_object()) return use("object");

        std::string additional_kv;
        if (extra) {
            const std::string value = additional.is_object()
                                          ? symbol(additional, join(name, "additional-value"),
                                                   child(path, "additionalProperties"))
                                          : use("value");
            const std::string key =
                declared.empty() ? use("string") : key_excluding(declared, join(name, "additional-k"));
            additional_kv = add_rule(join(name, "additional-kv"), key + " space \":\" space " + value + " space");
            optional_kv.push_back(additional_kv);
            optional_names.push_back("*");
        }

        std::string body = "\"{\" space";
        for (size_t i = 0; i < required_kv.size(); ++i) body += (i ? " \",\" space " : " ") + required_kv[i];
        if (!optional_kv.empty()) {
            // rest[i]: what may follow once optional property i-1 was written or skipped (any later ones, in order).
            std::vector<std::string> rest(optional_kv.size() + 1);
            for (size_t i = optional_kv.size() - 1; i >= 1; --i) {
                const bool star = optional_names[i] == "*";
                std::string r = fmt::format("( \",\" space {} ){}", optional_kv[i], star ? "*" : "?");
                if (!rest[i + 1].empty()) r += " " + rest[i + 1];
                rest[i] = add_rule(join(name, (star ? std::string("additional") : optional_names[i]) + "-rest"), r);
            }
            std::string alts;
            for (size_t i = 0; i < optional_kv.size(); ++i) {
                std::string a = optional_kv[i];
                if (optional_names[i] == "*") a += " ( \",\" space " + optional_kv[i] + " )*";
                if (!rest[i + 1].empty()) a += " " + rest[i + 1];
                alts += (alts.empty() ? "" : " | ") + a;
            }
            if (required_kv.empty()) body += " ( " + alts + " )?";
            else body += " ( \",\" space ( " + alts + " ) )?";
        }
        return body + " \"}\"";
    }

    std::string array_rule(const ojson &s, const std::string &name, const std::string &path) {
        const uint64_t min = count_keyword(s, "minItems", path).value_or(0);
        const uint64_t max = count_keyword(s, "maxItems", path).value_or(unbounded);
        if (min > max) bad(path, fmt::format("minItems {} is above maxItems {}: no array is valid", min, max));
        use("space");

        const ojson *prefix = nullptr;
        std::string prefix_key, rest_key;
        if (s.contains("prefixItems")) {
            prefix = &s["prefixItems"];
            prefix_key = "prefixItems";
            rest_key = "items";
        } else if (s.contains("items") && s["items"].is_array()) {
            prefix = &s["items"];
            prefix_key = "items";
            rest_key = "additionalItems";
        }

        std::string item; // the schema of items after the prefix; empty: no more items
        std::string item_key = prefix ? rest_key : "items";
        if (prefix && prefix_key == "prefixItems" && prefix->is_object() && !s.contains("items")) {
            item_key = "prefixItems"; // a schema instead of a list: the items' schema, as llama.cpp reads it
            prefix = nullptr;
        }
        if (prefix && !prefix->is_array()) bad(child(path, prefix_key), prefix_key + " must be an array of schemas");
        if (!s.contains(item_key)) {
            if (!prefix) item = use("value");
        } else if (!(s[item_key].is_boolean() && !s[item_key].get<bool>())) {
            item = symbol(s[item_key], join(name, "item"), child(path, item_key));
        }

        std::string body = "\"[\" space";
        uint64_t fixed = 0;
        if (prefix && !prefix->empty()) {
            // Every prefix item is generated (like llama.cpp): shorter arrays are valid too, but not produced.
            fixed = prefix->size();
            if (max < fixed)
                bad(child(path, "maxItems"), fmt::format("maxItems {} is below the {} {} this converter always "
                                                         "generates",
                                                         max, fixed, prefix_key));
            for (size_t i = 0; i < prefix->size(); ++i) {
                const std::string p = symbol((*prefix)[i], join(name, "tuple-" + std::to_string(i)),
                                             child(child(path, prefix_key), std::to_string(i)));
                body += (i ? " \",\" space " : " ") + p + " space";
            }
        }
        const uint64_t more_min = min > fixed ? min - fixed : 0;
        const uint64_t more_max = max == unbounded ? unbounded : max - fixed;
        if (item.empty() || more_max == 0) {
            if (more_min > 0)
                bad(path, fmt::format("minItems {} asks for more items than the {} {} allow", min, fixed, prefix_key));
            return body + " \"]\"";
        }
        check_count_limit(more_min, "minItems", path);
        check_count_limit(more_max, "maxItems", path);
        const std::string element = item + " space";
        if (fixed > 0) {
            body += " " + repetition("( \",\" space " + element + " )", more_min, more_max);
        } else if (more_min > 0) {
            body += " " + element;
            if (more_max != 1)
                body += " " + repetition("( \",\" space " + element + " )", more_min - 1,
                                         more_max == unbounded ? unbounded : more_max - 1);
        } else {
            std::string inner = element;
            if (more_max != 1)
                inner += " " + repetition("( \",\" space " + element + " )", 0,
                                          more_max == unbounded ? unbounded : more_max - 1);
            body += " ( " + inner + " )?";
        }
        return body + " \"]\"";
    }

    std::string string_rule(const ojson &s, const std::string &name, const std::string &path) {
        const auto min = count_keyword(s, "minLength", path);
        const auto max = count_keyword(s, "maxLength", path);
        if (s.contains("format")) {
            const ojson &f = s["format"];
            if (!f.is_string()) bad(child(path, "format"), "format must be a string");
            std::string rule;
            const std::string fmt_name = f.get<std::string>();
            if (fmt_name == "date" || fmt_name == "time" || fmt_name == "date-time") rule = use(fmt_name);
            else if (fmt_name == "uuid") rule = use("uuid");
            if (!rule.empty()) {
                if (s.contains("pattern"))
                    bad(path, fmt::format("format \"{}\" together with pattern is not supported; keep one of them",
                                          fmt_name));
                if (min || max)
                    bad(path, fmt::format("format \"{}\" together with minLength/maxLength is not supported; remove "
                                          "the lengths",
                                          fmt_name));
                return "\"\\\"\" " + rule + " \"\\\"\"";
            }
            // Other formats (email, uri, ...) are annotations: a plain string.
        }
        (void)name;
        if (s.contains("pattern")) {
            const ojson &p = s["pattern"];
            if (!p.is_string()) bad(child(path, "pattern"), "pattern must be a string (a regular expression)");
            if (min || max)
                bad(path, "pattern together with minLength/maxLength is not supported; express the length in the "
                          "pattern, e.g. ^[a-z]{3,8}$");
            std::string expr;
            try {
                expr = regex_to_gbnf_expression(p.get<std::string>(), regex_match::search, true);
            } catch (const strata::error &e) {
                bad(child(path, "pattern"), e.what());
            }
            use("char");
            return "\"\\\"\" " + expr + " \"\\\"\"";
        }
        if (!min && !max) return use("string");
        const uint64_t lo = min.value_or(0), hi = max.value_or(unbounded);
        if (lo > hi) bad(path, fmt::format("minLength {} is above maxLength {}: no string is valid", lo, hi));
        check_count_limit(lo, "minLength", path);
        check_count_limit(hi, "maxLength", path);
        if (hi == 0) return "\"\\\"\\\"\"";
        return "\"\\\"\" " + repetition(use("char"), lo, hi) + " \"\\\"\"";
    }

    // minimum / exclusiveMinimum (or maximum / exclusiveMaximum): the stricter bound, if any.
    static std::optional<bound> read_bound(const ojson &s, const char *inclusive, const char *exclusive, bool lower,
                                           const std::string &path) {
        std::optional<bound> b;
        const auto number = [&](const char *key) {
            const ojson &v = s[key];
            if (!v.is_number() || !std::isfinite(v.get<double>()))
                bad(child(path, key), fmt::format("{} must be a number, got {}", key, v.dump()));
            return v.get<double>();
        };
        bool draft4_exclusive = false;
        if (s.contains(exclusive) && s[exclusive].is_boolean()) draft4_exclusive = s[exclusive].get<bool>();
        if (s.contains(inclusive)) b = bound{number(inclusive), draft4_exclusive};
        if (s.contains(exclusive) && !s[exclusive].is_boolean()) {
            const double v = number(exclusive);
            if (!b || (lower ? v >= b->value : v <= b->value)) b = bound{v, true};
        }
        return b;
    }

    std::string integer_rule(const ojson &s, const std::string &path) {
        const auto lo_b = read_bound(s, "minimum", "exclusiveMinimum", true, path);
        const auto hi_b = read_bound(s, "maximum", "exclusiveMaximum", false, path);
        if (!lo_b && !hi_b) return use("integer");
        const auto clamp = [](double v) {
            return static_cast<int64_t>(std::clamp(v, -double(max_json_integer), double(max_json_integer)));
        };
        int64_t lo = -max_json_integer, hi = max_json_integer;
        if (lo_b) lo = clamp(lo_b->exclusive ? std::floor(lo_b->value) + 1 : std::ceil(lo_b->value));
        if (hi_b) hi = clamp(hi_b->exclusive ? std::ceil(hi_b->value) - 1 : std::floor(hi_b->value));
        if (lo > hi) bad(path, "no integer lies within minimum/maximum");
        return integer_range_gbnf(lo, hi);
    }

    std::string number_rule(const ojson &s, const std::string &path) {
        const auto lo_b = read_bound(s, "minimum", "exclusiveMinimum", true, path);
        const auto hi_b = read_bound(s, "maximum", "exclusiveMaximum", false, path);
        if (!lo_b && !hi_b) return use("number");
        const auto whole = [&](const std::optional<bound> &b) -> std::optional<number_bound> {
            if (!b || std::fabs(b->value) > double(max_json_integer)) return std::nullopt; // beyond 16 digits: open
            if (std::floor(b->value) != b->value)
                bad(path, fmt::format("a number bound of {} is not supported: only whole-number minimum/maximum are "
                                      "(use type integer, or a whole-number bound)",
                                      b->value));
            return number_bound{static_cast<int64_t>(b->value), b->exclusive};
        };
        const std::string body = number_range_gbnf(whole(lo_b), whole(hi_b));
        if (body.empty()) bad(path, "no number lies within minimum/maximum");
        return body;
    }

    const ojson &root_;
    std::map<std::string, std::string> rules_;
    std::unordered_map<std::string, std::string> ref_names_;
    size_t depth_ = 0;
};

} // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json &schema) {
    std::string text;
    try {
        text = converter(schema).run();
    } catch (const nlohmann::json::exception &e) {
        fail("JSON schema cannot be converted: {}", e.what());
    }
    try {
        parse_gbnf(text); // e.g. a $ref cycle that matches nothing in between is left recursion
    } catch (const strata::error &e) {
        fail("JSON schema converts to a grammar the matcher cannot use ({}); grammar:\n{}", e.what(), text);
    }
    return text;
}

std::string json_object_gbnf() {
    std::string out = "root ::= object\n";
    for (const char *n : {"array", "char", "escape", "integral-part", "decimal-part", "number", "boolean", "null",
                          "object", "space", "string", "value"})
        out += fmt::format("{} ::= {}\n", n, primitives().at(n).body);
    return out;
}

std::string json_value_gbnf() {
    std::string out = "root ::= value\n";
    for (const char *n : {"array", "char", "escape", "integral-part", "decimal-part", "number", "boolean", "null",
                          "object", "space", "string", "value"})
        out += fmt::format("{} ::= {}\n", n, primitives().at(n).body);
    return out;
}

} // namespace strata::grammar
