// Filters (`value | name(arguments)`). Those @huggingface/jinja has behave as there, including where it differs
// from Python Jinja2 (tojson keeps non-ASCII text and its ", " / ": " separators, unique is case-sensitive,
// `x | int` floors a float while `x | int(0)` returns a number unchanged). Those it lacks (select, reject, map with a
// filter name, min, max, sum, round, escape, ...) and the kinds of value it refuses follow Python Jinja2.
#include "chat/jinja_builtins.hpp"

#include "chat/jinja_interpreter.hpp"
#include "chat/jinja_text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <unordered_set>

namespace strata::chat::jinja {

namespace {

[[noreturn]] void refuse(std::string_view filter, const value &operand) {
    failf("the {} filter cannot take {} {}", filter, operand.is_undefined() ? "an" : "a", kind_name(operand));
}

// @huggingface/jinja's getAttributeValue: "a.b.0" through dicts, namespaces and list indexes.
value attribute_path(const value &item, const std::string &path) {
    value v = item;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string_view part =
            std::string_view(path).substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (v.is_dict()) {
            const value *found = v.as_dict().find(part);
            v = found ? *found : value();
        } else if (v.is_list()) {
            const auto index = js_parse_int(part);
            const std::vector<value> &items = v.as_list().items;
            if (!index || !(*index >= 0 && *index < static_cast<double>(items.size()))) return value();
            v = items[static_cast<size_t>(*index)];
        } else {
            return value();
        }
        if (dot == std::string::npos) return v;
        start = dot + 1;
    }
}

std::string code_point_at(const std::string &text, size_t &i) {
    const size_t start = i;
    next_code_point(text, i);
    return text.substr(start, i - start);
}

// Text a string filter works on: the string itself, "" for undefined, a number's or boolean's printed form.
std::optional<std::string> filter_text(interpreter &in, const value &v) {
    if (v.is_string()) return v.as_string();
    if (v.is_undefined()) return std::string();
    if (v.is_number() || v.is_boolean()) return display_text(in.context(), v);
    return std::nullopt;
}

value safe(interpreter &, value operand, call_arguments &, bool) { return operand; }

value tojson(interpreter &in, value operand, call_arguments &args, bool) {
    json_style style;
    const value *indent = args.keyword_value("indent"), *ascii = args.keyword_value("ensure_ascii");
    const value *sort_keys = args.keyword_value("sort_keys"), *separators = args.keyword_value("separators");
    if (indent && !indent->is_integer() && !indent->is_none()) fail("tojson: indent must be an integer or none");
    if (indent && indent->is_integer()) {
        if (indent->as_number() < 0) fail("tojson: indent must not be negative");
        if (indent->as_number() > 64) fail("tojson: indent is at most 64");
        style.indent = static_cast<int>(indent->as_number());
    }
    if (ascii && !ascii->is_boolean()) fail("tojson: ensure_ascii must be a boolean");
    style.ascii_only = ascii && ascii->as_bool();
    if (sort_keys && !sort_keys->is_boolean()) fail("tojson: sort_keys must be a boolean");
    style.sort_keys = sort_keys && sort_keys->as_bool();
    if (separators && !separators->is_none()) {
        if (!separators->is_list() || separators->as_list().items.size() != 2 ||
            !separators->as_list().items[0].is_string() || !separators->as_list().items[1].is_string())
            fail("tojson: separators must be a tuple of two strings");
        style.item_separator = separators->as_list().items[0].as_string();
        style.key_separator = separators->as_list().items[1].as_string();
    } else if (style.indent > 0) {
        style.item_separator.assign(1, ','); // as Python's json.dumps with an indent
    }
    std::string out;
    append_json(in.context(), out, operand, style);
    return in.context().make_string(std::move(out));
}

// Printed as {{ }} prints it (none and undefined as "").
value string_filter(interpreter &in, value operand, call_arguments &, bool) {
    if (operand.is_string()) return operand;
    if (operand.is_none() || operand.is_undefined()) return in.context().make_string("");
    return in.context().make_string(display_text(in.context(), operand));
}

value length(interpreter &in, value operand, call_arguments &, bool) {
    if (operand.is_list()) return value::integer(static_cast<double>(operand.as_list().items.size()));
    if (operand.is_string()) {
        in.context().text_work(operand.as_string().size());
        return value::integer(static_cast<double>(utf16_length(operand.as_string())));
    }
    if (operand.is_dict() && operand.as_dict().kind != dict_kind::name_space)
        return value::integer(static_cast<double>(operand.as_dict().size()));
    if (operand.is_undefined()) return value::integer(0);
    refuse("length", operand);
}

template <std::string (*transform)(std::string_view)>
value text_transform(interpreter &in, value operand, call_arguments &, bool) {
    const auto text = filter_text(in, operand);
    if (!text) refuse("text", operand);
    in.context().text_work(text->size());
    return in.context().make_string(transform(*text));
}

value trim(interpreter &in, value operand, call_arguments &args, bool) {
    const auto text = filter_text(in, operand);
    if (!text) refuse("trim", operand);
    return in.context().make_string(strip_text(*text, args.get(0, "chars"), true, true));
}

value indent(interpreter &in, value operand, call_arguments &args, bool) {
    const auto text = filter_text(in, operand);
    if (!text) refuse("indent", operand);
    const value *width = args.get(0, "width"), *first = args.get(1, "first"), *blank = args.get(2, "blank");
    std::string prefix(4, ' ');
    if (width && width->is_integer()) {
        if (width->as_number() < 0 || width->as_number() > 1024) fail("indent: width must be between 0 and 1024");
        prefix.assign(static_cast<size_t>(width->as_number()), ' ');
    } else if (width && width->is_string()) {
        prefix = width->as_string(); // Python: indent by this text
    } else if (width) {
        fail("indent: width must be a number");
    }
    const bool indent_first = first && js_truthy(*first), indent_blank = blank && js_truthy(*blank);
    std::string out;
    size_t start = 0;
    for (size_t line = 0;; ++line) {
        const size_t end = text->find('\n', start);
        const std::string_view piece =
            std::string_view(*text).substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (!((!indent_first && line == 0) || (!indent_blank && piece.empty()))) out += prefix;
        out += piece;
        in.context().check_text_size(out.size());
        if (end == std::string::npos) break;
        out += '\n';
        start = end + 1;
    }
    return in.context().make_string(std::move(out));
}

value join(interpreter &in, value operand, call_arguments &args, bool) {
    const value *separator = args.get(0, "d");
    if (!separator) separator = args.keyword_value("separator");
    if (separator && !separator->is_string()) fail("join: the separator must be a string");
    const std::string sep = separator ? separator->as_string() : "";
    const value *attribute = args.keyword_value("attribute");
    std::string out;
    if (operand.is_string()) {
        const std::string &text = operand.as_string();
        for (size_t i = 0; i < text.size();) {
            if (i) out += sep;
            out += code_point_at(text, i);
            in.context().check_text_size(out.size());
        }
    } else if (operand.is_list()) {
        bool first = true;
        for (const value &item : operand.as_list().items) {
            if (!first) out += sep;
            first = false;
            append_concat_text(
                in.context(), out,
                attribute && attribute->is_string() ? attribute_path(item, attribute->as_string()) : item, true);
            in.context().check_text_size(out.size());
        }
    } else if (!operand.is_undefined()) {
        refuse("join", operand);
    }
    return in.context().make_string(std::move(out));
}

template <bool integer> value number_filter(interpreter &, value operand, call_arguments &args, bool called) {
    const value fallback = args.get(0, "default") ? *args.get(0, "default")
                           : integer              ? value::integer(0)
                                                  : value::floating(0);
    if (operand.is_string()) {
        const auto parsed = integer ? js_parse_int(operand.as_string()) : js_parse_float(operand.as_string());
        if (!parsed) return fallback;
        return integer ? value::integer(*parsed) : value::floating(*parsed);
    }
    if (operand.is_number()) {
        if (called) return operand; // as @huggingface/jinja: int(default)/float(default) leave numbers alone
        return integer ? value::integer(std::floor(operand.as_number())) : value::floating(operand.as_number());
    }
    if (operand.is_boolean()) return integer ? value::integer(operand.as_bool()) : value::floating(operand.as_bool());
    return fallback; // Python: what does not convert gives the default
}

value abs_filter(interpreter &, value operand, call_arguments &, bool) {
    if (!operand.is_number()) refuse("abs", operand);
    return operand.is_integer() ? value::integer(std::fabs(operand.as_number()))
                                : value::floating(std::fabs(operand.as_number()));
}

value default_filter(interpreter &in, value operand, call_arguments &args, bool) {
    const value *fallback = args.get(0, "default_value");
    const value *boolean = args.get(1, "boolean");
    if (boolean && !boolean->is_boolean()) fail("default: the second argument (boolean) must be true or false");
    if (operand.is_undefined() || (boolean && boolean->as_bool() && !truthy(operand)))
        return fallback ? *fallback : in.context().make_string("");
    return operand;
}

template <bool first> value end_item(interpreter &in, value operand, call_arguments &, bool) {
    if (operand.is_list()) {
        const std::vector<value> &items = operand.as_list().items;
        if (items.empty()) return value();
        return first ? items.front() : items.back();
    }
    if (operand.is_string()) {
        const std::string &text = operand.as_string();
        if (text.empty()) return value();
        size_t i = 0;
        if (!first) {
            i = text.size() - 1;
            while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
        }
        return in.context().make_string(code_point_at(text, i));
    }
    if (operand.is_dict() && operand.as_dict().kind != dict_kind::name_space) {
        const auto &entries = operand.as_dict().entries;
        if (entries.empty()) return value();
        return in.context().make_string(first ? entries.front().first : entries.back().first);
    }
    if (operand.is_undefined()) return value();
    refuse(first ? "first" : "last", operand);
}

value reverse(interpreter &in, value operand, call_arguments &, bool) {
    if (operand.is_list()) {
        auto list = in.context().make_list();
        const std::vector<value> &items = operand.as_list().items;
        for (auto it = items.rbegin(); it != items.rend(); ++it) list->push(*it);
        return value::of(std::move(list));
    }
    if (operand.is_string()) {
        std::vector<std::string> characters;
        const std::string &text = operand.as_string();
        for (size_t i = 0; i < text.size();) characters.push_back(code_point_at(text, i));
        std::string out;
        for (auto it = characters.rbegin(); it != characters.rend(); ++it) out += *it;
        return in.context().make_string(std::move(out));
    }
    refuse("reverse", operand);
}

value sort(interpreter &in, value operand, call_arguments &args, bool) {
    if (!operand.is_list()) refuse("sort", operand);
    const value *reverse_flag = args.get(0, "reverse"), *case_sensitive = args.get(1, "case_sensitive");
    const value *attribute = args.get(2, "attribute");
    if (reverse_flag && !reverse_flag->is_boolean()) fail("sort: reverse must be a boolean");
    if (case_sensitive && !case_sensitive->is_boolean()) fail("sort: case_sensitive must be a boolean");
    if (attribute && !attribute->is_string() && !attribute->is_integer() && !attribute->is_none())
        fail("sort: attribute must be a string, an integer or none");
    const bool descending = reverse_flag && reverse_flag->as_bool(),
               sensitive = case_sensitive && case_sensitive->as_bool();
    std::string path;
    if (attribute && attribute->is_string()) path = attribute->as_string();
    if (attribute && attribute->is_integer()) path = js_number_text(attribute->as_number());
    const auto key = [&](const value &v) { return path.empty() ? v : attribute_path(v, path); };
    auto list = in.context().make_list();
    list->items = operand.as_list().items;
    list->charge(list->items.size() * sizeof(value));
    in.context().step(list->items.size() * 4);
    stable_sort_values(list->items, [&](const value &a, const value &b) {
        const int order = compare_for_sort(key(a), key(b), sensitive);
        return descending ? order > 0 : order < 0;
    });
    return value::of(std::move(list));
}

// Distinct items by JavaScript's SameValueZero (strings by content, lists and dicts by identity).
value unique(interpreter &in, value operand, call_arguments &, bool) {
    if (!operand.is_list()) refuse("unique", operand);
    auto list = in.context().make_list();
    std::unordered_set<std::string> strings;
    std::vector<value> others;
    for (const value &item : operand.as_list().items) {
        bool seen = false;
        if (item.is_string()) {
            seen = !strings.insert(item.as_string()).second;
        } else {
            in.context().step(others.size());
            for (const value &o : others) {
                const bool both_nan =
                    o.is_number() && item.is_number() && std::isnan(o.as_number()) && std::isnan(item.as_number());
                if (strict_equals(o, item) || both_nan) seen = true;
            }
            if (!seen) others.push_back(item);
        }
        if (!seen) list->push(item);
    }
    return value::of(std::move(list));
}

value list_filter(interpreter &in, value operand, call_arguments &, bool) {
    if (operand.is_list()) return operand;
    auto list = in.context().make_list();
    if (operand.is_string()) {
        const std::string &text = operand.as_string();
        for (size_t i = 0; i < text.size();) list->push(in.context().make_string(code_point_at(text, i)));
    } else if (operand.is_dict() && operand.as_dict().kind != dict_kind::name_space) {
        for (const auto &entry : operand.as_dict().entries) list->push(in.context().make_string(entry.first));
    } else if (!operand.is_undefined()) {
        refuse("list", operand);
    }
    return value::of(std::move(list));
}

template <value (*get)(interpreter &, const value &)>
value dict_view(interpreter &in, value operand, call_arguments &, bool) {
    if (operand.is_undefined()) return value::of(in.context().make_list());
    if (!operand.is_dict() || operand.as_dict().kind == dict_kind::name_space) refuse("items", operand);
    return get(in, operand);
}

value dictsort(interpreter &in, value operand, call_arguments &args, bool) {
    if (!operand.is_dict() || operand.as_dict().kind == dict_kind::name_space) refuse("dictsort", operand);
    return dict_sorted(in, operand, args);
}

// selectattr / rejectattr as @huggingface/jinja: items must be dicts; a missing attribute never passes the test.
template <bool select> value select_attribute(interpreter &in, value operand, call_arguments &args, bool) {
    const char *name = select ? "selectattr" : "rejectattr";
    if (!operand.is_list()) refuse(name, operand);
    const value &attribute = argument_of(args, 0, "attribute", name);
    if (!attribute.is_string()) failf("{}: the attribute must be a string", name);
    const value *test = args.get(1, "test");
    if (test && !test->is_string()) failf("{}: the test name must be a string", name);
    call_arguments test_args;
    for (size_t i = 2; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
    for (const value &item : operand.as_list().items)
        if (!item.is_dict()) failf("{} takes a list of dicts, and this one holds a {}", name, kind_name(item));
    auto list = in.context().make_list();
    for (const value &item : operand.as_list().items) {
        in.context().step();
        const value *a = item.as_dict().find(attribute.as_string());
        bool passes = false;
        if (a) {
            call_arguments each = test_args;
            passes = test ? in.apply_test(test->as_string(), *a, each) : truthy(*a);
        }
        if (passes == select) list->push(item);
    }
    return value::of(std::move(list));
}

// select / reject (Python): items passing a test, or truthy ones.
template <bool select> value select_items(interpreter &in, value operand, call_arguments &args, bool) {
    const char *name = select ? "select" : "reject";
    if (!operand.is_list()) refuse(name, operand);
    const value *test = args.get(0, "test");
    if (test && !test->is_string()) failf("{}: the test name must be a string", name);
    auto list = in.context().make_list();
    for (const value &item : operand.as_list().items) {
        in.context().step();
        call_arguments each;
        for (size_t i = 1; i < args.positional.size(); ++i) each.positional.push_back(args.positional[i]);
        const bool passes = test ? in.apply_test(test->as_string(), item, each) : truthy(item);
        if (passes == select) list->push(item);
    }
    return value::of(std::move(list));
}

// map(attribute="a.b", default=x) as @huggingface/jinja; map("filter", args...) as Python.
value map(interpreter &in, value operand, call_arguments &args, bool) {
    if (!operand.is_list()) refuse("map", operand);
    auto list = in.context().make_list();
    if (const value *attribute = args.keyword_value("attribute")) {
        if (!attribute->is_string()) fail("map: attribute must be a string");
        const value *fallback = args.keyword_value("default");
        for (const value &item : operand.as_list().items) {
            if (!item.is_dict())
                failf("map(attribute=...) takes a list of dicts, and this one holds a {}", kind_name(item));
            value v = attribute_path(item, attribute->as_string());
            list->push(v.is_undefined() && fallback ? *fallback : v);
        }
        return value::of(std::move(list));
    }
    const value &filter = argument_of(args, 0, "filter", "map");
    if (!filter.is_string()) fail("map: the first argument names a filter (or use attribute=)");
    for (const value &item : operand.as_list().items) {
        call_arguments each;
        for (size_t i = 1; i < args.positional.size(); ++i) each.positional.push_back(args.positional[i]);
        each.keyword = args.keyword;
        list->push(in.apply_filter(filter.as_string(), item, each));
    }
    return value::of(std::move(list));
}

value replace(interpreter &in, value operand, call_arguments &args, bool) {
    const auto text = filter_text(in, operand);
    if (!text) refuse("replace", operand);
    const value *old_text = args.get(0, "old"), *new_text = args.get(1, "new");
    if (!old_text || !new_text) fail("replace needs two arguments: old and new");
    return replace_text(in, *text, *old_text, *new_text, args.get(2, "count"));
}

// HTML escaping as markupsafe does it.
value escape(interpreter &in, value operand, call_arguments &, bool) {
    const std::string text = operand.is_none()        ? "None"
                             : operand.is_string()    ? operand.as_string()
                             : operand.is_undefined() ? ""
                                                      : display_text(in.context(), operand);
    std::string out;
    for (const char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return in.context().make_string(std::move(out));
}

value sum(interpreter &, value operand, call_arguments &args, bool) {
    if (!operand.is_list()) refuse("sum", operand);
    const value *attribute = args.get(0, "attribute"), *start = args.get(1, "start");
    if (start && !start->is_number()) fail("sum: start must be a number");
    double total = start ? start->as_number() : 0;
    bool floating = start && start->is_floating();
    for (const value &item : operand.as_list().items) {
        const value v = attribute && attribute->is_string() ? attribute_path(item, attribute->as_string()) : item;
        if (!v.is_number() && !v.is_boolean()) failf("sum: cannot add a {}", kind_name(v));
        total += v.as_number();
        floating = floating || v.is_floating();
    }
    return floating ? value::floating(total) : value::integer(total);
}

template <bool minimum> value extreme(interpreter &in, value operand, call_arguments &args, bool) {
    if (!operand.is_list()) refuse(minimum ? "min" : "max", operand);
    const value *case_sensitive = args.get(0, "case_sensitive"), *attribute = args.get(1, "attribute");
    const bool sensitive = case_sensitive && truthy(*case_sensitive);
    const auto key = [&](const value &v) {
        return attribute && attribute->is_string() ? attribute_path(v, attribute->as_string()) : v;
    };
    const value *best = nullptr;
    for (const value &item : operand.as_list().items) {
        in.context().step();
        if (!best) {
            best = &item;
            continue;
        }
        const int order = compare_for_sort(key(item), key(*best), sensitive);
        if (minimum ? order < 0 : order > 0) best = &item;
    }
    return best ? *best : value();
}

value round_filter(interpreter &, value operand, call_arguments &args, bool) {
    if (!operand.is_number() && !operand.is_boolean()) refuse("round", operand);
    const value *precision = args.get(0, "precision"), *method = args.get(1, "method");
    if (precision && !precision->is_integer()) fail("round: precision must be an integer");
    const double digits = precision ? precision->as_number() : 0;
    if (std::fabs(digits) > 300) fail("round: precision out of range");
    const std::string how = method && method->is_string() ? method->as_string() : "common";
    const double x = operand.as_number(), scale = std::pow(10.0, digits);
    double r;
    if (how == "common") {
        if (digits >= 0 && std::isfinite(x)) {
            // Correctly rounded, ties to even, as Python's round().
            r = js_string_to_number(fmt::format("{:.{}f}", x, static_cast<int>(digits)));
        } else {
            r = std::nearbyint(x * scale) / scale;
        }
        if (operand.is_integer() && !precision) return value::integer(r);
    } else if (how == "ceil") {
        r = std::ceil(x * scale) / scale;
    } else if (how == "floor") {
        r = std::floor(x * scale) / scale;
    } else {
        fail("round: method must be 'common', 'ceil' or 'floor'");
    }
    return value::floating(r);
}

// Parses a JSON string (llama.cpp's extension, for tool call arguments given as text).
value from_json_filter(interpreter &in, value operand, call_arguments &, bool) {
    if (!operand.is_string()) refuse("from_json", operand);
    const std::string &text = operand.as_string();
    in.context().text_work(text.size());
    // nlohmann's parser does not recurse, but the conversion does: refuse deep nesting before parsing.
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    if (deepest >= in.context().limits().max_depth)
        failf("from_json: the JSON nests deeper than {} levels", in.context().limits().max_depth);
    const auto json = nlohmann::ordered_json::parse(text, nullptr, false);
    if (json.is_discarded()) fail("from_json: the text is not valid JSON");
    return from_json(in.context(), json);
}

value attr(interpreter &, value operand, call_arguments &args, bool) {
    const value &name = argument_of(args, 0, "name", "attr");
    if (!name.is_string()) fail("attr: the name must be a string");
    if (!operand.is_dict()) return value();
    const value *v = operand.as_dict().find(name.as_string());
    return v ? *v : value();
}

value bool_filter(interpreter &, value operand, call_arguments &, bool) { return value::boolean(truthy(operand)); }

struct filter_entry {
    std::string_view name;
    filter_function function;
};

constexpr filter_entry filters[] = {
    {"safe", safe},
    {"tojson", tojson},
    {"string", string_filter},
    {"length", length},
    {"count", length},
    {"upper", text_transform<to_upper>},
    {"lower", text_transform<to_lower>},
    {"title", text_transform<title_case>},
    {"capitalize", text_transform<capitalize_first>},
    {"trim", trim},
    {"indent", indent},
    {"join", join},
    {"int", number_filter<true>},
    {"float", number_filter<false>},
    {"abs", abs_filter},
    {"default", default_filter},
    {"d", default_filter},
    {"first", end_item<true>},
    {"last", end_item<false>},
    {"reverse", reverse},
    {"sort", sort},
    {"unique", unique},
    {"list", list_filter},
    {"items", dict_view<dict_items>},
    {"keys", dict_view<dict_keys>},
    {"values", dict_view<dict_values>},
    {"dictsort", dictsort},
    {"selectattr", select_attribute<true>},
    {"rejectattr", select_attribute<false>},
    {"select", select_items<true>},
    {"reject", select_items<false>},
    {"map", map},
    {"replace", replace},
    {"escape", escape},
    {"e", escape},
    {"sum", sum},
    {"min", extreme<true>},
    {"max", extreme<false>},
    {"round", round_filter},
    {"from_json", from_json_filter},
    {"attr", attr},
    {"bool", bool_filter},
};

} // namespace

filter_function find_filter(std::string_view name) {
    for (const filter_entry &f : filters)
        if (f.name == name) return f.function;
    return nullptr;
}

} // namespace strata::chat::jinja
