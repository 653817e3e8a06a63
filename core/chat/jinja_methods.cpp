// Methods of strings, lists and dicts (`text.strip()`, `messages.append(m)`, `tool.get("name")`). The ones
// @huggingface/jinja has behave as there (strip() trims JavaScript whitespace, split follows Python's rules,
// dict.get defaults to none); the rest (find, format, append, pop, ...) follow Python.
#include "chat/jinja_builtins.hpp"

#include "chat/jinja_interpreter.hpp"
#include "chat/jinja_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace strata::chat::jinja {

namespace {

const std::string &self_text(const value &self) { return self.as_string(); }

const std::string *optional_string(const call_arguments &args, size_t position, std::string_view name,
                                   std::string_view method) {
    const value *v = args.get(position, name);
    if (!v || v->is_none() || v->is_undefined()) return nullptr;
    if (!v->is_string()) failf("{}(): {} must be a string, not {}", method, name, kind_name(*v));
    return &v->as_string();
}

// Code-point index of a byte offset (Python's str methods count characters).
double char_index(const std::string &text, size_t byte_offset) {
    return static_cast<double>(code_point_count(std::string_view(text).substr(0, byte_offset)));
}

value string_upper(interpreter &in, const value &self, call_arguments &) {
    in.context().text_work(self_text(self).size());
    return in.context().make_string(to_upper(self_text(self)));
}
value string_lower(interpreter &in, const value &self, call_arguments &) {
    in.context().text_work(self_text(self).size());
    return in.context().make_string(to_lower(self_text(self)));
}
value string_title(interpreter &in, const value &self, call_arguments &) {
    return in.context().make_string(title_case(self_text(self)));
}
value string_capitalize(interpreter &in, const value &self, call_arguments &) {
    return in.context().make_string(capitalize_first(self_text(self)));
}

template <bool left, bool right> value string_strip(interpreter &in, const value &self, call_arguments &args) {
    in.context().text_work(self_text(self).size());
    return in.context().make_string(strip_text(self_text(self), args.get(0, "chars"), left, right));
}

template <bool at_start> value string_affix(interpreter &, const value &self, call_arguments &args) {
    const char *method = at_start ? "startswith" : "endswith";
    const value *pattern = args.get(0, "prefix");
    if (!pattern) failf("{}() needs an argument", method);
    const std::string &text = self_text(self);
    const auto matches = [&](const std::string &p) {
        if (p.size() > text.size()) return false;
        return at_start ? text.compare(0, p.size(), p) == 0 : text.compare(text.size() - p.size(), p.size(), p) == 0;
    };
    if (pattern->is_string()) return value::boolean(matches(pattern->as_string()));
    if (pattern->is_list()) {
        for (const value &item : pattern->as_list().items) {
            if (!item.is_string()) failf("{}(): the tuple must hold strings only, not {}", method, kind_name(item));
            if (matches(item.as_string())) return value::boolean(true);
        }
        return value::boolean(false);
    }
    failf("{}() takes a string or a tuple of strings, not {}", method, kind_name(*pattern));
}

value string_split(interpreter &in, const value &self, call_arguments &args) {
    return split_text(in, self_text(self), args.get(0, "sep"), args.get(1, "maxsplit"));
}

value string_replace(interpreter &in, const value &self, call_arguments &args) {
    const value *old_text = args.get(0, "old"), *new_text = args.get(1, "new");
    if (!old_text || !new_text) fail("replace() needs two arguments: old and new");
    return replace_text(in, self_text(self), *old_text, *new_text, args.get(2, "count"));
}

template <bool from_end> value string_find(interpreter &in, const value &self, call_arguments &args) {
    const std::string *sub = optional_string(args, 0, "sub", from_end ? "rfind" : "find");
    if (!sub) fail("find() needs the text to look for");
    const std::string &text = self_text(self);
    in.context().text_work(text.size());
    const size_t at = from_end ? text.rfind(*sub) : text.find(*sub);
    return value::integer(at == std::string::npos ? -1 : char_index(text, at));
}

value string_index(interpreter &in, const value &self, call_arguments &args) {
    const value found = string_find<false>(in, self, args);
    if (found.as_number() < 0) fail("index(): substring not found");
    return found;
}

value string_count(interpreter &in, const value &self, call_arguments &args) {
    const std::string *sub = optional_string(args, 0, "sub", "count");
    if (!sub) fail("count() needs the text to count");
    const std::string &text = self_text(self);
    in.context().text_work(text.size());
    if (sub->empty()) return value::integer(static_cast<double>(code_point_count(text) + 1));
    double n = 0;
    for (size_t at = text.find(*sub); at != std::string::npos; at = text.find(*sub, at + sub->size())) ++n;
    return value::integer(n);
}

// Python's str.format with {} / {0} / {name} fields (no format specs).
value string_format(interpreter &in, const value &self, call_arguments &args) {
    const std::string &pattern = self_text(self);
    std::string out;
    size_t next_auto = 0;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '}') {
            if (i + 1 < pattern.size() && pattern[i + 1] == '}')
                ++i;
            else
                fail("format(): single '}' in the format string");
            out += '}';
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const size_t close = pattern.find('}', i);
        if (close == std::string::npos) fail("format(): '{' without a closing '}'");
        const std::string field = pattern.substr(i + 1, close - i - 1);
        if (field.find_first_of(":!") != std::string::npos)
            failf("format(): '{{{}}}': format specs are not supported", field);
        const value *v = nullptr;
        if (field.empty()) {
            if (next_auto >= args.positional.size()) fail("format(): more {} fields than arguments");
            v = &args.positional[next_auto++];
        } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            const size_t index = std::stoul(field.substr(0, 9));
            if (index >= args.positional.size()) failf("format(): no argument {}", index);
            v = &args.positional[index];
        } else {
            v = args.keyword_value(field);
            if (!v) failf("format(): no keyword argument '{}'", field);
        }
        if (v->is_string())
            out += v->as_string();
        else if (v->is_none())
            out += "None";
        else if (!v->is_undefined())
            append_display(in.context(), out, *v);
        in.context().check_text_size(out.size());
        i = close;
    }
    return in.context().make_string(std::move(out));
}

value string_join(interpreter &in, const value &self, call_arguments &args) {
    const value *items = args.get(0, "iterable");
    if (!items || !items->is_list()) fail("join() takes a list");
    std::string out;
    bool first = true;
    for (const value &item : items->as_list().items) {
        if (!first) out += self_text(self);
        first = false;
        append_concat_text(in.context(), out, item, true);
        in.context().check_text_size(out.size());
    }
    return in.context().make_string(std::move(out));
}

value string_splitlines(interpreter &in, const value &self, call_arguments &args) {
    const value *keep = args.get(0, "keepends");
    const bool keep_ends = keep && truthy(*keep);
    const std::string &text = self_text(self);
    in.context().text_work(text.size());
    auto list = in.context().make_list();
    size_t start = 0, i = 0;
    while (i < text.size()) {
        const size_t at = i;
        const char32_t c = next_code_point(text, i);
        const bool breaks = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                            c == 0x2028 || c == 0x2029;
        if (!breaks) continue;
        if (c == '\r' && i < text.size() && text[i] == '\n') ++i;
        list->push(in.context().make_string(text.substr(start, (keep_ends ? i : at) - start)));
        start = i;
    }
    if (start < text.size()) list->push(in.context().make_string(text.substr(start)));
    return value::of(std::move(list));
}

enum class char_class { digit, alpha, alnum, space };

bool in_class(char32_t c, char_class k) {
    const bool digit = c >= '0' && c <= '9';
    switch (k) {
    case char_class::digit: return digit;
    case char_class::alpha: return is_letter(c);
    case char_class::alnum: return digit || is_letter(c);
    case char_class::space: return is_js_space(c) || (c >= 0x1C && c <= 0x1F) || c == 0x85; // Python's set
    }
    return false;
}

// isdigit(), isalpha(), isalnum(), isspace(): not empty, and every character of the class.
template <char_class k> value string_is(interpreter &in, const value &self, call_arguments &) {
    const std::string &text = self_text(self);
    in.context().text_work(text.size());
    if (text.empty()) return value::boolean(false);
    for (size_t i = 0; i < text.size();)
        if (!in_class(next_code_point(text, i), k)) return value::boolean(false);
    return value::boolean(true);
}

// islower() / isupper(): some cased character, and all of them in that case.
template <bool lower> value string_is_case(interpreter &in, const value &self, call_arguments &) {
    const std::string &text = self_text(self);
    in.context().text_work(text.size());
    const std::string lowered = to_lower(text), uppered = to_upper(text);
    return value::boolean(lowered != uppered && text == (lower ? lowered : uppered));
}

template <bool prefix> value string_remove_affix(interpreter &in, const value &self, call_arguments &args) {
    const std::string *affix =
        optional_string(args, 0, prefix ? "prefix" : "suffix", prefix ? "removeprefix" : "removesuffix");
    const std::string &text = self_text(self);
    if (!affix || affix->size() > text.size()) return self;
    if (prefix && text.compare(0, affix->size(), *affix) == 0)
        return in.context().make_string(text.substr(affix->size()));
    if (!prefix && text.compare(text.size() - affix->size(), affix->size(), *affix) == 0)
        return in.context().make_string(text.substr(0, text.size() - affix->size()));
    return self;
}

// --- lists (the mutating ones follow Python: mutation of a namespace's list is how some templates keep state) ---

value list_append(interpreter &in, const value &self, call_arguments &args) {
    if (args.positional.size() != 1) fail("append() takes exactly one argument");
    self.as_list().push(args.positional[0]);
    in.context().note_mutation(self);
    return value::none();
}

value list_extend(interpreter &in, const value &self, call_arguments &args) {
    const value *items = args.get(0, "iterable");
    if (!items || !items->is_list()) fail("extend() takes a list");
    in.context().step(items->as_list().items.size());
    self.as_list().append_all(items->as_list().items); // a list may extend itself
    in.context().note_mutation(self);
    return value::none();
}

double list_position(const value *index, double size, const char *method) {
    if (!index->is_integer()) failf("{}(): the index must be an integer, not {}", method, kind_name(*index));
    const double i = index->as_number();
    return i < 0 ? i + size : i;
}

value list_pop(interpreter &in, const value &self, call_arguments &args) {
    std::vector<value> &items = self.as_list().items;
    if (items.empty()) fail("pop() from an empty list");
    const value *index = args.get(0, "index");
    const double i =
        index ? list_position(index, static_cast<double>(items.size()), "pop") : static_cast<double>(items.size()) - 1;
    if (!(i >= 0 && i < static_cast<double>(items.size()))) fail("pop(): index out of range");
    value v = std::move(items[static_cast<size_t>(i)]);
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
    in.context().step(items.size());
    return v;
}

value list_insert(interpreter &in, const value &self, call_arguments &args) {
    if (args.positional.size() != 2) fail("insert() takes an index and a value");
    std::vector<value> &items = self.as_list().items;
    const double size = static_cast<double>(items.size());
    const double i = std::clamp(list_position(&args.positional[0], size, "insert"), 0.0, size);
    self.as_list().charge(sizeof(value));
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(i), args.positional[1]);
    in.context().step(items.size());
    in.context().note_mutation(self);
    return value::none();
}

template <bool count> value list_search(interpreter &in, const value &self, call_arguments &args) {
    if (args.positional.size() != 1) failf("{}() takes one argument", count ? "count" : "index");
    const std::vector<value> &items = self.as_list().items;
    in.context().step(items.size());
    double n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
        if (!loose_equals(in.context(), items[i], args.positional[0])) continue;
        if (!count) return value::integer(static_cast<double>(i));
        ++n;
    }
    if (!count) fail("index(): the value is not in the list");
    return value::integer(n);
}

// --- dicts ---

value dict_get(interpreter &, const value &self, call_arguments &args) {
    if (args.positional.empty()) fail("get() needs a key");
    const value &key = args.positional[0];
    if (!key.is_string()) failf("get(): dict keys are strings, not {}", kind_name(key));
    if (const value *v = self.as_dict().find(key.as_string())) return *v;
    return args.positional.size() > 1 ? args.positional[1] : value::none();
}

value dict_items_method(interpreter &in, const value &self, call_arguments &) { return dict_items(in, self); }
value dict_keys_method(interpreter &in, const value &self, call_arguments &) { return dict_keys(in, self); }
value dict_values_method(interpreter &in, const value &self, call_arguments &) { return dict_values(in, self); }
value dict_sort_method(interpreter &in, const value &self, call_arguments &args) { return dict_sorted(in, self, args); }

value dict_update(interpreter &in, const value &self, call_arguments &args) {
    dict_object &d = self.as_dict();
    if (const value *other = args.get(0, "")) {
        if (!other->is_dict()) failf("update() takes a dict, not {}", kind_name(*other));
        const auto entries = other->as_dict().entries;
        for (const auto &[key, v] : entries) d.set(key, v);
    }
    for (const auto &[key, v] : args.keyword) d.set(key, v);
    in.context().note_mutation(self);
    return value::none();
}

// loop.cycle(a, b, ...): the argument at loop.index0 modulo their number.
value loop_cycle(interpreter &, const value &self, call_arguments &args) {
    if (args.positional.empty()) fail("loop.cycle() needs at least one value");
    const value *index = self.as_dict().find("index0");
    const double i = index && index->is_number() ? index->as_number() : 0;
    return args.positional[static_cast<size_t>(std::fmod(i, static_cast<double>(args.positional.size())))];
}

struct method_entry {
    std::string_view name;
    method_function function;
};

constexpr method_entry string_methods[] = {
    {"upper", string_upper},
    {"lower", string_lower},
    {"strip", string_strip<true, true>},
    {"lstrip", string_strip<true, false>},
    {"rstrip", string_strip<false, true>},
    {"title", string_title},
    {"capitalize", string_capitalize},
    {"startswith", string_affix<true>},
    {"endswith", string_affix<false>},
    {"split", string_split},
    {"replace", string_replace},
    {"find", string_find<false>},
    {"rfind", string_find<true>},
    {"index", string_index},
    {"count", string_count},
    {"format", string_format},
    {"join", string_join},
    {"splitlines", string_splitlines},
    {"isdigit", string_is<char_class::digit>},
    {"isalpha", string_is<char_class::alpha>},
    {"isalnum", string_is<char_class::alnum>},
    {"isspace", string_is<char_class::space>},
    {"islower", string_is_case<true>},
    {"isupper", string_is_case<false>},
    {"removeprefix", string_remove_affix<true>},
    {"removesuffix", string_remove_affix<false>},
};

constexpr method_entry list_methods[] = {
    {"append", list_append}, {"extend", list_extend},       {"pop", list_pop},
    {"insert", list_insert}, {"index", list_search<false>}, {"count", list_search<true>},
};

constexpr method_entry dict_methods[] = {
    {"get", dict_get},
    {"items", dict_items_method},
    {"keys", dict_keys_method},
    {"values", dict_values_method},
    {"dictsort", dict_sort_method},
    {"update", dict_update},
};

template <size_t n> method_function find_in(const method_entry (&table)[n], std::string_view name) {
    for (const method_entry &m : table)
        if (m.name == name) return m.function;
    return nullptr;
}

} // namespace

method_function find_method(const value &self, std::string_view name, std::optional<value> *attribute) {
    if (self.is_string()) {
        if (name == "length") {
            *attribute = value::integer(static_cast<double>(utf16_length(self.as_string())));
            return nullptr;
        }
        return find_in(string_methods, name);
    }
    if (self.is_list()) {
        if (name == "length") {
            *attribute = value::integer(static_cast<double>(self.as_list().items.size()));
            return nullptr;
        }
        return find_in(list_methods, name);
    }
    if (self.is_dict() && self.as_dict().kind != dict_kind::name_space) {
        if (self.as_dict().kind == dict_kind::loop && name == "cycle") return loop_cycle;
        return find_in(dict_methods, name);
    }
    return nullptr;
}

const value &argument_of(const call_arguments &args, size_t position, std::string_view name, std::string_view what) {
    const value *v = args.get(position, name);
    if (!v) failf("{}: missing argument '{}'", what, name);
    return *v;
}

std::string strip_text(std::string_view text, const value *chars, bool left, bool right) {
    if (!chars || chars->is_none() || chars->is_undefined()) {
        if (left && right) return std::string(js_trim(text));
        return std::string(left ? js_trim_start(text) : js_trim_end(text));
    }
    if (!chars->is_string()) failf("strip(): chars must be a string, not {}", kind_name(*chars));
    const std::string &set = chars->as_string();
    const auto in_set = [&set](std::string_view c) { return set.find(c) != std::string::npos; };
    // Walk code points from each end while they are in the set.
    size_t begin = 0, end = text.size();
    if (left) {
        while (begin < end) {
            size_t next = begin;
            next_code_point(text, next);
            if (!in_set(text.substr(begin, next - begin))) break;
            begin = next;
        }
    }
    if (right) {
        while (end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
            if (!in_set(text.substr(start, end - start))) break;
            end = start;
        }
    }
    return std::string(text.substr(begin, end - begin));
}

value replace_text(interpreter &in, const std::string &text, const value &old_text, const value &new_text,
                   const value *count) {
    if (!old_text.is_string() || !new_text.is_string())
        failf("replace() takes strings, not {} and {}", kind_name(old_text), kind_name(new_text));
    if (count && !count->is_none() && !count->is_integer())
        failf("replace(): count must be an integer or none, not {}", kind_name(*count));
    double remaining = count && count->is_integer() && count->as_number() >= 0 ? count->as_number() : INFINITY;
    render_context &ctx = in.context();
    ctx.text_work(text.size());
    if (remaining == 0) return ctx.make_string(text);
    const std::string &from = old_text.as_string(), &to = new_text.as_string();
    std::string out;
    if (from.empty()) {
        // An empty pattern matches before every character and at the end.
        size_t i = 0;
        while (true) {
            if (remaining > 0) {
                out += to;
                --remaining;
            }
            ctx.check_text_size(out.size());
            if (i >= text.size()) break;
            const size_t start = i;
            next_code_point(text, i);
            out.append(text, start, i - start);
        }
        return ctx.make_string(std::move(out));
    }
    size_t copied = 0;
    for (size_t at = text.find(from); at != std::string::npos && remaining > 0; at = text.find(from, copied)) {
        out.append(text, copied, at - copied);
        out += to;
        copied = at + from.size();
        --remaining;
        ctx.check_text_size(out.size());
    }
    out.append(text, copied, std::string::npos);
    return ctx.make_string(std::move(out));
}

value split_text(interpreter &in, const std::string &text, const value *separator, const value *max_split) {
    if (separator && !separator->is_string() && !separator->is_none())
        failf("split(): the separator must be a string or none, not {}", kind_name(*separator));
    if (max_split && !max_split->is_integer())
        failf("split(): maxsplit must be an integer, not {}", kind_name(*max_split));
    const double limit = max_split ? max_split->as_number() : -1;
    render_context &ctx = in.context();
    ctx.text_work(text.size());
    auto list = ctx.make_list();
    if (!separator || separator->is_none()) {
        // Runs of whitespace separate; with maxsplit the rest, from the next word on, is the last item.
        const std::string_view rest = js_trim_start(text);
        size_t i = 0;
        while (i < rest.size()) {
            i += js_space_run(rest, i);
            if (i >= rest.size()) break;
            if (limit != -1 && static_cast<double>(list->items.size()) >= limit) {
                list->push(ctx.make_string(std::string(rest.substr(i))));
                break;
            }
            size_t end = i;
            while (end < rest.size()) {
                size_t next = end;
                if (is_js_space(next_code_point(rest, next))) break;
                end = next;
            }
            list->push(ctx.make_string(std::string(rest.substr(i, end - i))));
            i = end;
        }
        return value::of(std::move(list));
    }
    const std::string &sep = separator->as_string();
    if (sep.empty()) fail("split(): empty separator");
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
        parts.push_back(text.substr(start, at - start));
        start = at + sep.size();
    }
    parts.push_back(text.substr(start));
    if (limit != -1 && static_cast<double>(parts.size()) > limit) {
        // JavaScript's splice(maxsplit): the parts from there on, joined again, become the last one.
        const double n = static_cast<double>(parts.size());
        const auto from = static_cast<size_t>(limit < 0 ? std::max(n + limit, 0.0) : std::min(limit, n));
        std::string tail;
        for (size_t k = from; k < parts.size(); ++k) {
            if (k > from) tail += sep;
            tail += parts[k];
        }
        parts.resize(from);
        parts.push_back(std::move(tail));
    }
    for (std::string &p : parts) list->push(ctx.make_string(std::move(p)));
    return value::of(std::move(list));
}

value dict_items(interpreter &in, const value &dict) {
    render_context &ctx = in.context();
    auto list = ctx.make_list();
    list->items.reserve(dict.as_dict().size());
    for (const auto &[key, v] : dict.as_dict().entries) {
        auto pair = ctx.make_list();
        pair->items.reserve(2);
        pair->push(ctx.make_string(key));
        pair->push(v);
        list->push(value::of(std::move(pair)));
    }
    return value::of(std::move(list));
}

value dict_keys(interpreter &in, const value &dict) {
    auto list = in.context().make_list();
    for (const auto &entry : dict.as_dict().entries) list->push(in.context().make_string(entry.first));
    return value::of(std::move(list));
}

value dict_values(interpreter &in, const value &dict) {
    auto list = in.context().make_list();
    for (const auto &entry : dict.as_dict().entries) list->push(entry.second);
    return value::of(std::move(list));
}

value dict_sorted(interpreter &in, const value &dict, call_arguments &args) {
    const value *case_sensitive = args.get(0, "case_sensitive"), *by = args.get(1, "by"),
                *reverse = args.get(2, "reverse");
    if (case_sensitive && !case_sensitive->is_boolean()) fail("dictsort(): case_sensitive must be a boolean");
    if (by && (!by->is_string() || (by->as_string() != "key" && by->as_string() != "value")))
        fail("dictsort(): by must be 'key' or 'value'");
    if (reverse && !reverse->is_boolean()) fail("dictsort(): reverse must be a boolean");
    const bool sensitive = case_sensitive && case_sensitive->as_bool(), descending = reverse && reverse->as_bool();
    const size_t index = by && by->as_string() == "value" ? 1 : 0;
    value items = dict_items(in, dict);
    std::vector<value> &pairs = items.as_list().items;
    in.context().step(pairs.size() * 4);
    stable_sort_values(pairs, [&](const value &a, const value &b) {
        const int order = compare_for_sort(a.as_list().items[index], b.as_list().items[index], sensitive);
        return descending ? order > 0 : order < 0;
    });
    return items;
}

} // namespace strata::chat::jinja
