// The values of the Jinja engine: heap objects and their release, the render's accounting, and how values compare,
// convert and print the way @huggingface/jinja does it.
#include "chat/jinja_value.hpp"

#include "chat/jinja_text.hpp"

#include <algorithm>
#include <cmath>

namespace strata::chat::jinja {

namespace {

// Dicts up to this size are searched linearly; larger ones keep a hash index.
constexpr size_t dict_index_threshold = 16;

bool is_object(const value &v) { return v.is_list() || v.is_dict() || v.is_callable(); }

// Releases heap objects one at a time: an object whose last reference this is gives up its own children to `pending`
// first, so no destructor ever recurses into a nested list or dict.
void release_objects(std::vector<std::shared_ptr<heap_object>> &pending) {
    while (!pending.empty()) {
        std::shared_ptr<heap_object> object = std::move(pending.back());
        pending.pop_back();
        if (object.use_count() == 1) object->take_children(pending);
    }
}

void take_value(value &v, std::vector<std::shared_ptr<heap_object>> &out) {
    if (is_object(v) && v.object()) out.push_back(std::move(v.object()));
}

std::string callable_text(const value &v) {
    const callable_object &c = v.as_callable();
    switch (c.kind) {
    case callable_kind::macro: return fmt::format("<macro {}>", c.name);
    case callable_kind::caller: return "<macro caller>";
    case callable_kind::method: return fmt::format("<method {}>", c.name);
    case callable_kind::builtin: break;
    }
    return fmt::format("<function {}>", c.name);
}

void append_json_at(render_context &ctx, std::string &out, const value &v, const json_style &style, int depth) {
    ctx.step();
    switch (v.kind()) {
    case value_kind::undefined: out += style.undefined_as_null ? "null" : "undefined"; return;
    case value_kind::none: out += "null"; return;
    case value_kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case value_kind::integer:
    case value_kind::floating: out += std::isfinite(v.as_number()) ? js_number_text(v.as_number()) : "null"; return;
    case value_kind::string:
        ctx.text_work(v.as_string().size());
        append_json_string(out, v.as_string(), style.ascii_only);
        ctx.check_text_size(out.size());
        return;
    case value_kind::callable: failf("cannot convert {} to JSON", callable_text(v));
    case value_kind::list:
    case value_kind::dict: break;
    }
    if (depth >= ctx.limits().max_depth)
        failf("a value nested deeper than {} levels (or containing itself) cannot be converted to text",
              ctx.limits().max_depth);
    std::string base_padding, child_padding;
    if (style.indent > 0) {
        base_padding = "\n" + std::string(static_cast<size_t>(style.indent) * static_cast<size_t>(depth), ' ');
        child_padding = base_padding + std::string(static_cast<size_t>(style.indent), ' ');
    }
    if (v.is_list()) {
        // Copy the references: printing cannot change the list, but keep the loop independent of it anyway.
        const std::vector<value> &items = v.as_list().items;
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += style.item_separator;
            out += child_padding;
            append_json_at(ctx, out, items[i], style, depth + 1);
            ctx.check_text_size(out.size());
        }
        if (!items.empty()) out += base_padding;
        out += ']';
        return;
    }
    const dict_object &d = v.as_dict();
    std::vector<const std::pair<std::string, value> *> entries;
    entries.reserve(d.entries.size());
    for (const auto &e : d.entries) entries.push_back(&e);
    if (style.sort_keys) {
        ctx.step(entries.size());
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto *a, const auto *b) { return a->first < b->first; });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += style.item_separator;
        out += child_padding;
        append_json_string(out, entries[i]->first, style.ascii_only);
        out += style.key_separator;
        append_json_at(ctx, out, entries[i]->second, style, depth + 1);
        ctx.check_text_size(out.size());
    }
    if (!entries.empty()) out += base_padding;
    out += '}';
}

value from_json_at(render_context &ctx, const nlohmann::ordered_json &json, int depth) {
    ctx.step();
    using t = nlohmann::ordered_json::value_t;
    switch (json.type()) {
    case t::null: return value::none();
    case t::boolean: return value::boolean(json.get<bool>());
    case t::number_integer: return value::integer(static_cast<double>(json.get<int64_t>()));
    case t::number_unsigned: return value::integer(static_cast<double>(json.get<uint64_t>()));
    case t::number_float: {
        // JavaScript cannot tell 1.0 from 1: a whole number is an integer, as in @huggingface/jinja.
        const double d = json.get<double>();
        return std::isfinite(d) && std::floor(d) == d ? value::integer(d) : value::floating(d);
    }
    case t::string: return ctx.make_string(sanitize_utf8(json.get_ref<const std::string &>()));
    case t::array:
    case t::object: break;
    case t::binary: fail("the context holds binary data, which a template cannot use");
    case t::discarded: fail("the context holds a discarded JSON value");
    }
    if (depth >= ctx.limits().max_depth) failf("the JSON nests deeper than {} levels", ctx.limits().max_depth);
    if (json.is_array()) {
        auto list = ctx.make_list();
        list->items.reserve(json.size());
        for (const auto &item : json) list->push(from_json_at(ctx, item, depth + 1));
        return value::of(std::move(list));
    }
    auto dict = ctx.make_dict();
    dict->entries.reserve(json.size());
    for (const auto &[key, item] : json.items()) {
        // JSON object keys are distinct; repairing invalid UTF-8 could make two equal.
        if (is_valid_utf8(key))
            dict->append(key, from_json_at(ctx, item, depth + 1));
        else
            dict->set(sanitize_utf8(key), from_json_at(ctx, item, depth + 1));
    }
    return value::of(std::move(dict));
}

} // namespace

void fail(std::string message) { throw failure{std::move(message)}; }

void memory_budget::charge(size_t bytes) {
    if (bytes > limit_ || used_ > limit_ - bytes)
        failf("the render needs more than {} MiB of memory (render_limits.max_memory_bytes)", limit_ >> 20);
    used_ += bytes;
}

value value::of(std::shared_ptr<string_object> s) { return value(value_kind::string, std::move(s)); }
value value::of(std::shared_ptr<list_object> l) { return value(value_kind::list, std::move(l)); }
value value::of(std::shared_ptr<dict_object> d) { return value(value_kind::dict, std::move(d)); }
value value::of(std::shared_ptr<callable_object> c) { return value(value_kind::callable, std::move(c)); }

const std::string &value::as_string() const { return static_cast<const string_object *>(object_.get())->text; }
list_object &value::as_list() const { return *static_cast<list_object *>(object_.get()); }
dict_object &value::as_dict() const { return *static_cast<dict_object *>(object_.get()); }
callable_object &value::as_callable() const { return *static_cast<callable_object *>(object_.get()); }

void release_values(std::vector<value> &values) {
    std::vector<std::shared_ptr<heap_object>> pending;
    for (value &v : values) take_value(v, pending);
    values.clear();
    release_objects(pending);
}

void list_object::take_children(std::vector<std::shared_ptr<heap_object>> &out) {
    for (value &v : items) take_value(v, out);
    items.clear();
}

void list_object::push(value v) {
    charge(sizeof(value));
    items.push_back(std::move(v));
}

void list_object::append_all(const std::vector<value> &values) {
    charge(values.size() * sizeof(value));
    if (&values != &items) {
        items.insert(items.end(), values.begin(), values.end());
        return;
    }
    const size_t n = items.size();
    items.reserve(2 * n); // no reallocation below, so items[i] stays valid while it is copied
    for (size_t i = 0; i < n; ++i) items.push_back(items[i]);
}

dict_object::~dict_object() {
    std::vector<std::shared_ptr<heap_object>> pending;
    take_children(pending);
    release_objects(pending);
}

void dict_object::take_children(std::vector<std::shared_ptr<heap_object>> &out) {
    for (auto &e : entries) take_value(e.second, out);
    entries.clear();
    index_.clear();
}

const value *dict_object::find(std::string_view key) const {
    if (entries.size() <= dict_index_threshold) {
        for (const auto &e : entries)
            if (e.first == key) return &e.second;
        return nullptr;
    }
    if (index_.size() != entries.size()) {
        index_.clear();
        for (size_t i = 0; i < entries.size(); ++i) index_.emplace(entries[i].first, i);
    }
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries[it->second].second;
}

void dict_object::set(std::string_view key, value v) {
    if (const value *existing = find(key)) {
        *const_cast<value *>(existing) = std::move(v);
        return;
    }
    append(key, std::move(v));
}

void dict_object::append(std::string_view key, value v) {
    charge(sizeof(std::pair<std::string, value>) + key.size());
    entries.emplace_back(std::string(key), std::move(v));
    if (!index_.empty()) index_.emplace(entries.back().first, entries.size() - 1);
}

callable_object::~callable_object() {
    std::vector<std::shared_ptr<heap_object>> pending;
    take_value(self, pending);
    release_objects(pending);
}

void callable_object::take_children(std::vector<std::shared_ptr<heap_object>> &out) { take_value(self, out); }

const value *call_arguments::keyword_value(std::string_view name) const {
    for (const auto &[key, v] : keyword)
        if (key == name) return &v;
    return nullptr;
}

const value *call_arguments::get(size_t position, std::string_view name) const {
    if (position < positional.size()) return &positional[position];
    return keyword_value(name);
}

void render_context::step(uint64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps)
        failf("the render took more than {} steps (render_limits.max_steps): an endless or very long loop?",
              limits_.max_steps);
}

void render_context::check_text_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
        failf("the text grew past {} bytes (render_limits.max_output_bytes)", limits_.max_output_bytes);
}

value render_context::make_string(std::string text) {
    check_text_size(text.size());
    text_work(text.size());
    auto s = std::make_shared<string_object>(&memory_, std::move(text));
    s->charge(sizeof(string_object) + s->text.capacity());
    return value::of(std::move(s));
}

std::shared_ptr<list_object> render_context::make_list(bool tuple) {
    step();
    auto l = std::make_shared<list_object>(&memory_);
    l->charge(sizeof(list_object));
    l->tuple = tuple;
    return l;
}

std::shared_ptr<dict_object> render_context::make_dict(dict_kind kind) {
    step();
    auto d = std::make_shared<dict_object>(&memory_, kind);
    d->charge(sizeof(dict_object));
    return d;
}

std::shared_ptr<callable_object> render_context::make_callable(callable_kind kind, std::string name) {
    step();
    auto c = std::make_shared<callable_object>(&memory_, kind, std::move(name));
    c->charge(sizeof(callable_object));
    return c;
}

void render_context::note_mutation(const value &container) {
    heap_object *object = container.object().get();
    if (!object || object->registered_as_mutated) return;
    object->registered_as_mutated = true;
    mutated_.push_back(container.object());
}

void render_context::reserve_output(size_t bytes) {
    if (bytes > limits_.max_output_bytes || output_bytes_ > limits_.max_output_bytes - bytes)
        failf("the output grew past {} bytes (render_limits.max_output_bytes)", limits_.max_output_bytes);
    output_bytes_ += bytes;
    text_work(bytes);
}

void render_context::clear_mutated() {
    std::vector<std::shared_ptr<heap_object>> pending;
    for (const auto &weak : mutated_) {
        if (auto object = weak.lock()) {
            object->take_children(pending);
            release_objects(pending);
        }
    }
    mutated_.clear();
}

value constant_string(std::string text) { return value::of(std::make_shared<string_object>(nullptr, std::move(text))); }

const char *kind_name(const value &v) {
    switch (v.kind()) {
    case value_kind::undefined: return "undefined";
    case value_kind::none: return "none";
    case value_kind::boolean: return "boolean";
    case value_kind::integer: return "integer";
    case value_kind::floating: return "float";
    case value_kind::string: return "string";
    case value_kind::list: return v.as_list().tuple ? "tuple" : "list";
    case value_kind::dict: return v.as_dict().kind == dict_kind::name_space ? "namespace" : "dict";
    case value_kind::callable: return "callable";
    }
    return "value";
}

bool truthy(const value &v) {
    switch (v.kind()) {
    case value_kind::undefined:
    case value_kind::none: return false;
    case value_kind::boolean: return v.as_bool();
    case value_kind::integer:
    case value_kind::floating: return v.as_number() != 0 && !std::isnan(v.as_number());
    case value_kind::string: return !v.as_string().empty();
    case value_kind::list: return !v.as_list().items.empty();
    case value_kind::dict: return v.as_dict().kind == dict_kind::name_space || v.as_dict().size() > 0;
    case value_kind::callable: return true;
    }
    return false;
}

bool js_truthy(const value &v) { return is_object(v) || truthy(v); }

bool loose_equals(render_context &ctx, const value &a, const value &b) {
    if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
    if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
    if (a.is_boolean() && b.is_boolean()) return a.as_bool() == b.as_bool();
    const bool a_nullish = a.is_none() || a.is_undefined(), b_nullish = b.is_none() || b.is_undefined();
    if (a_nullish || b_nullish) return a_nullish && b_nullish;
    if (is_object(a) && is_object(b)) return a.identity() == b.identity();
    if (a.is_number() && b.is_string()) return a.as_number() == js_string_to_number(b.as_string());
    if (a.is_string() && b.is_number()) return js_string_to_number(a.as_string()) == b.as_number();
    if (a.is_boolean()) return loose_equals(ctx, value::integer(a.as_bool() ? 1 : 0), b);
    if (b.is_boolean()) return loose_equals(ctx, a, value::integer(b.as_bool() ? 1 : 0));
    // An object against a number or string: JavaScript compares the object's string form.
    const auto primitive = [&ctx](const value &object) {
        std::string text;
        append_concat_text(ctx, text, object);
        return ctx.make_string(std::move(text));
    };
    if (is_object(a)) return loose_equals(ctx, primitive(a), b);
    if (is_object(b)) return loose_equals(ctx, a, primitive(b));
    return false;
}

bool strict_equals(const value &a, const value &b) {
    if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
    // Both hold JavaScript's undefined in @huggingface/jinja.
    if ((a.is_none() || a.is_undefined()) && (b.is_none() || b.is_undefined())) return true;
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case value_kind::undefined:
    case value_kind::none: return true;
    case value_kind::boolean: return a.as_bool() == b.as_bool();
    case value_kind::string: return a.as_string() == b.as_string();
    default: return a.identity() == b.identity();
    }
}

int compare_for_sort(const value &a, const value &b, bool case_sensitive) {
    if (a.is_none() && b.is_none()) return 0;
    if (a.is_undefined() && b.is_undefined()) return 0;
    if (a.is_none() || b.is_none() || a.is_undefined() || b.is_undefined())
        failf("cannot compare {} with {}", kind_name(a), kind_name(b));
    const auto numeric = [](const value &v) { return v.is_number() || v.is_boolean(); };
    if (numeric(a) && numeric(b)) {
        const double x = a.as_number(), y = b.as_number();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
        if (case_sensitive) return compare_utf16(a.as_string(), b.as_string());
        return compare_utf16(to_lower(a.as_string()), to_lower(b.as_string()));
    }
    if (std::string_view(kind_name(a)) != kind_name(b)) failf("cannot compare {} with {}", kind_name(a), kind_name(b));
    failf("cannot sort values of type {}", kind_name(a));
}

void append_display(render_context &ctx, std::string &out, const value &v) {
    switch (v.kind()) {
    case value_kind::undefined:
    case value_kind::none: out += "undefined"; return; // @huggingface/jinja's none holds JavaScript's undefined
    case value_kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case value_kind::integer: out += js_number_text(v.as_number()); return;
    case value_kind::floating: out += float_text(v.as_number()); return;
    case value_kind::string: out += v.as_string(); return;
    case value_kind::callable: out += callable_text(v); return;
    case value_kind::list:
    case value_kind::dict: {
        json_style style;
        style.undefined_as_null = false;
        append_json(ctx, out, v, style);
        return;
    }
    }
}

std::string display_text(render_context &ctx, const value &v) {
    if (v.is_string()) return v.as_string();
    std::string out;
    append_display(ctx, out, v);
    return out;
}

void append_concat_text(render_context &ctx, std::string &out, const value &v, bool for_join) {
    switch (v.kind()) {
    case value_kind::undefined:
    case value_kind::none: out += for_join ? "" : "undefined"; return;
    case value_kind::integer:
    case value_kind::floating: out += js_number_text(v.as_number()); return;
    case value_kind::dict: out += "[object Map]"; return;
    case value_kind::list: {
        const std::vector<value> &items = v.as_list().items;
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += ',';
            ctx.step();
            append_display(ctx, out, items[i]);
            ctx.check_text_size(out.size());
        }
        return;
    }
    default: append_display(ctx, out, v); return;
    }
}

void append_json(render_context &ctx, std::string &out, const value &v, const json_style &style) {
    append_json_at(ctx, out, v, style, 0);
}

value from_json(render_context &ctx, const nlohmann::ordered_json &json) { return from_json_at(ctx, json, 0); }

} // namespace strata::chat::jinja
