// The names a template can use without defining them: filters (`x | name`), tests (`x is name`), methods of strings,
// lists and dicts (`s.strip()`), and global functions (range, namespace, raise_exception, strftime_now, dict).
// Each is implemented in its own file (jinja_filters.cpp, jinja_tests.cpp, jinja_methods.cpp, jinja_globals.cpp).
#pragma once

#include "chat/jinja_ast.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

namespace strata::chat::jinja {

// Null when there is no such filter / test / global.
filter_function find_filter(std::string_view name);
test_function find_test(std::string_view name);
builtin_function find_global(std::string_view name);

// What `self.name` is when self is a string, list or dict and has no key `name`: a method (called with self), or
// `length` (set in *attribute). Null method and no attribute: there is none.
method_function find_method(const value &self, std::string_view name, std::optional<value> *attribute);

// Shared by filters and methods.
std::string strip_text(std::string_view text, const value *chars, bool left, bool right); // Python str.strip(chars)
value replace_text(interpreter &in, const std::string &text, const value &old_text, const value &new_text,
                   const value *count);
value dict_items(interpreter &in, const value &dict); // [[key, value], ...]
value dict_keys(interpreter &in, const value &dict);
value dict_values(interpreter &in, const value &dict);
value dict_sorted(interpreter &in, const value &dict, call_arguments &args); // dictsort
value split_text(interpreter &in, const std::string &text, const value *separator, const value *max_split);
// One argument, required to be of a kind; what names it in the message.
const value &argument_of(const call_arguments &args, size_t position, std::string_view name, std::string_view what);

// A stable merge sort (JavaScript's sort is stable) that stays in bounds whatever `less` answers: std::sort needs a
// strict weak order, which NaN and mixed kinds break.
template <class Less> void stable_sort_values(std::vector<value> &items, Less less) {
    const size_t n = items.size();
    std::vector<value> merged(n);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t low = 0; low < n; low += 2 * width) {
            const size_t middle = std::min(low + width, n), high = std::min(low + 2 * width, n);
            size_t i = low, j = middle, k = low;
            while (i < middle && j < high)
                merged[k++] = less(items[j], items[i]) ? std::move(items[j++]) : std::move(items[i++]);
            while (i < middle) merged[k++] = std::move(items[i++]);
            while (j < high) merged[k++] = std::move(items[j++]);
        }
        items.swap(merged);
    }
}

// raise_exception(message) throws this; the interpreter turns it into a template_exception with the location.
struct template_raise {
    std::string message;
};

} // namespace strata::chat::jinja
