// Tests (`value is name`, `value is name(arguments)`). @huggingface/jinja's set behaves as there (`iterable` is true
// for lists and strings only, `mapping` for dicts but not namespaces, `equalto` is JavaScript's ===); Python Jinja2's
// others (float, divisibleby, in, sameas, ne, lt, ...) are added with Python's meaning.
#include "chat/jinja_builtins.hpp"

#include "chat/jinja_interpreter.hpp"
#include "chat/jinja_text.hpp"

#include <cmath>

namespace strata::chat::jinja {

namespace {

// The test's argument (`x is eq 1`), undefined when none is given.
const value &test_argument(const call_arguments &args) {
    static const value undefined;
    const value *v = args.get(0, "value");
    return v ? *v : undefined;
}

bool is_mapping(const value &v) { return v.is_dict() && v.as_dict().kind != dict_kind::name_space; }

bool defined(interpreter &, const value &v, call_arguments &) { return !v.is_undefined(); }
bool undefined(interpreter &, const value &v, call_arguments &) { return v.is_undefined(); }
bool none(interpreter &, const value &v, call_arguments &) { return v.is_none(); }
bool boolean(interpreter &, const value &v, call_arguments &) { return v.is_boolean(); }
bool true_test(interpreter &, const value &v, call_arguments &) { return v.is_boolean() && v.as_bool(); }
bool false_test(interpreter &, const value &v, call_arguments &) { return v.is_boolean() && !v.as_bool(); }
bool string(interpreter &, const value &v, call_arguments &) { return v.is_string(); }
bool number(interpreter &, const value &v, call_arguments &) { return v.is_number(); }
bool integer(interpreter &, const value &v, call_arguments &) { return v.is_integer(); }
bool floating(interpreter &, const value &v, call_arguments &) { return v.is_floating(); }
bool callable(interpreter &, const value &v, call_arguments &) { return v.is_callable(); }
bool mapping(interpreter &, const value &v, call_arguments &) { return is_mapping(v); }
// As @huggingface/jinja: a list (not a tuple) or a string.
bool iterable(interpreter &, const value &v, call_arguments &) {
    return (v.is_list() && !v.as_list().tuple) || v.is_string();
}
bool sequence(interpreter &, const value &v, call_arguments &) { return v.is_list() || v.is_string() || is_mapping(v); }
bool lower(interpreter &, const value &v, call_arguments &) {
    return v.is_string() && to_lower(v.as_string()) == v.as_string();
}
bool upper(interpreter &, const value &v, call_arguments &) {
    return v.is_string() && to_upper(v.as_string()) == v.as_string();
}

template <bool odd> bool parity(interpreter &, const value &v, call_arguments &) {
    if (!v.is_number()) failf("the {} test needs a number, not {}", odd ? "odd" : "even", kind_name(v));
    const double r = std::fmod(v.as_number(), 2.0);
    return odd ? r != 0 : r == 0;
}

bool divisible_by(interpreter &, const value &v, call_arguments &args) {
    const value &divisor = test_argument(args);
    if (!v.is_number() || !divisor.is_number()) fail("divisibleby needs numbers: x is divisibleby(3)");
    if (divisor.as_number() == 0) fail("divisibleby(0): division by zero");
    return std::fmod(v.as_number(), divisor.as_number()) == 0;
}

bool equal_to(interpreter &, const value &v, call_arguments &args) { return strict_equals(v, test_argument(args)); }
bool not_equal_to(interpreter &in, const value &v, call_arguments &args) { return !equal_to(in, v, args); }

template <int sign, bool or_equal> bool ordered(interpreter &, const value &v, call_arguments &args) {
    const value &other = test_argument(args);
    int order;
    if ((v.is_number() || v.is_boolean()) && (other.is_number() || other.is_boolean())) {
        const double a = v.as_number(), b = other.as_number();
        if (std::isnan(a) || std::isnan(b)) return false;
        order = a < b ? -1 : a > b ? 1 : 0;
    } else if (v.is_string() && other.is_string()) {
        order = v.as_string().compare(other.as_string());
        order = order < 0 ? -1 : order > 0 ? 1 : 0;
    } else {
        failf("cannot compare {} with {}", kind_name(v), kind_name(other));
    }
    return order == sign || (or_equal && order == 0);
}

bool in_test(interpreter &in, const value &v, call_arguments &args) { return in.contains(test_argument(args), v); }
bool same_as(interpreter &, const value &v, call_arguments &args) { return strict_equals(v, test_argument(args)); }

struct test_entry {
    std::string_view name;
    test_function function;
};

constexpr test_entry tests[] = {
    {"defined", defined},
    {"undefined", undefined},
    {"none", none},
    {"boolean", boolean},
    {"true", true_test},
    {"false", false_test},
    {"string", string},
    {"number", number},
    {"integer", integer},
    {"float", floating},
    {"callable", callable},
    {"mapping", mapping},
    {"iterable", iterable},
    {"sequence", sequence},
    {"lower", lower},
    {"upper", upper},
    {"odd", parity<true>},
    {"even", parity<false>},
    {"divisibleby", divisible_by},
    {"equalto", equal_to},
    {"eq", equal_to},
    {"ne", not_equal_to},
    {"lt", ordered<-1, false>},
    {"lessthan", ordered<-1, false>},
    {"le", ordered<-1, true>},
    {"gt", ordered<1, false>},
    {"greaterthan", ordered<1, false>},
    {"ge", ordered<1, true>},
    {"in", in_test},
    {"sameas", same_as},
};

} // namespace

test_function find_test(std::string_view name) {
    for (const test_entry &t : tests)
        if (t.name == name) return t.function;
    return nullptr;
}

} // namespace strata::chat::jinja
