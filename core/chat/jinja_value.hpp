// The values a Jinja template computes with, and one render's accounting of them. Kinds follow @huggingface/jinja:
// undefined, none, boolean, integer and float (both JavaScript numbers, so an integer is a double holding a whole
// value), string, list (or tuple), dict (or namespace), callable. Strings, lists, dicts and callables live on the
// heap, shared by reference (a list appended to through one name changes for every name, as in Python) and counted
// against the render's memory budget while alive. Lists and dicts are released without recursion, and the render
// clears every container it mutated when it ends, so a value can neither overflow the stack when freed nor leak
// through a cycle.
#pragma once

#include "chat/chat_template.hpp"

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace strata::chat::jinja {

// A runtime error before the interpreter says where in the template it happened.
struct failure {
    std::string message;
};
[[noreturn]] void fail(std::string message);
template <class... Args> [[noreturn]] void failf(fmt::format_string<Args...> f, Args &&...args) {
    fail(fmt::format(f, std::forward<Args>(args)...));
}

// Live bytes of one render's heap values.
class memory_budget {
  public:
    explicit memory_budget(size_t limit) : limit_(limit) {}
    void charge(size_t bytes);
    void refund(size_t bytes) noexcept { used_ -= bytes; }
    size_t used() const { return used_; }

  private:
    size_t used_ = 0;
    size_t limit_;
};

struct heap_object {
    explicit heap_object(memory_budget *budget) : budget(budget) {}
    heap_object(const heap_object &) = delete;
    heap_object &operator=(const heap_object &) = delete;
    virtual ~heap_object() {
        if (budget) budget->refund(charged);
    }
    void charge(size_t bytes) {
        if (!budget) return;
        budget->charge(bytes);
        charged += bytes;
    }
    // Moves out the heap objects this one holds, so they can be released one at a time (release_children).
    virtual void take_children(std::vector<std::shared_ptr<heap_object>> &) {}

    memory_budget *budget; // null for the program's own constants
    size_t charged = 0;
    bool registered_as_mutated = false;
};

enum class value_kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, callable };

struct string_object;
struct list_object;
struct dict_object;
struct callable_object;

class value {
  public:
    value() = default;
    static value none() { return value(value_kind::none, 0); }
    static value boolean(bool b) { return value(value_kind::boolean, b ? 1 : 0); }
    static value integer(double v) { return value(value_kind::integer, v); }
    static value floating(double v) { return value(value_kind::floating, v); }
    static value of(std::shared_ptr<string_object> s);
    static value of(std::shared_ptr<list_object> l);
    static value of(std::shared_ptr<dict_object> d);
    static value of(std::shared_ptr<callable_object> c);

    value_kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == value_kind::undefined; }
    bool is_none() const { return kind_ == value_kind::none; }
    bool is_boolean() const { return kind_ == value_kind::boolean; }
    bool is_integer() const { return kind_ == value_kind::integer; }
    bool is_floating() const { return kind_ == value_kind::floating; }
    bool is_number() const { return kind_ == value_kind::integer || kind_ == value_kind::floating; }
    bool is_string() const { return kind_ == value_kind::string; }
    bool is_list() const { return kind_ == value_kind::list; }
    bool is_dict() const { return kind_ == value_kind::dict; }
    bool is_callable() const { return kind_ == value_kind::callable; }

    bool as_bool() const { return number_ != 0; }
    double as_number() const { return number_; }
    const std::string &as_string() const;
    list_object &as_list() const;
    dict_object &as_dict() const;
    callable_object &as_callable() const;
    // Identity of a heap value (lists, dicts and callables compare by identity, as JavaScript objects do).
    const heap_object *identity() const { return object_.get(); }
    std::shared_ptr<heap_object> &object() { return object_; }
    const std::shared_ptr<heap_object> &object() const { return object_; }

  private:
    value(value_kind kind, double number) : kind_(kind), number_(number) {}
    value(value_kind kind, std::shared_ptr<heap_object> object) : kind_(kind), object_(std::move(object)) {}

    value_kind kind_ = value_kind::undefined;
    double number_ = 0;
    std::shared_ptr<heap_object> object_;
};

// Releases values (and what they hold) without recursing into nested lists and dicts.
void release_values(std::vector<value> &values);

struct string_object : heap_object {
    string_object(memory_budget *budget, std::string text) : heap_object(budget), text(std::move(text)) {}
    const std::string text;
};

struct list_object : heap_object {
    explicit list_object(memory_budget *budget) : heap_object(budget) {}
    ~list_object() override { release_values(items); }
    void take_children(std::vector<std::shared_ptr<heap_object>> &out) override;
    void push(value v);
    // Appends copies of `values` (which may be this list's own items), charged before anything is allocated.
    void append_all(const std::vector<value> &values);

    std::vector<value> items;
    bool tuple = false;
};

enum class dict_kind : uint8_t {
    mapping,    // a dict (JSON object, {...} literal, dict(), keyword arguments)
    name_space, // namespace(...): attribute access and assignment only
    loop,       // the `loop` variable of a for loop (a mapping that also has loop.cycle)
};

struct dict_object : heap_object {
    dict_object(memory_budget *budget, dict_kind kind) : heap_object(budget), kind(kind) {}
    ~dict_object() override;
    void take_children(std::vector<std::shared_ptr<heap_object>> &out) override;

    const value *find(std::string_view key) const;
    void set(std::string_view key, value v);
    // Adds an entry whose key the dict does not have yet (no search).
    void append(std::string_view key, value v);
    size_t size() const { return entries.size(); }

    dict_kind kind;
    std::vector<std::pair<std::string, value>> entries; // in insertion order

  private:
    struct key_hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    // key -> entry, built once the dict is large enough for linear search to cost
    mutable std::unordered_map<std::string, size_t, key_hash, std::equal_to<>> index_;
};

class interpreter;
struct macro_statement;
struct call_statement;
class scope;

struct call_arguments {
    std::vector<value> positional;
    std::vector<std::pair<std::string, value>> keyword;

    const value *keyword_value(std::string_view name) const;
    // The argument at `position`, else the keyword `name`, else null.
    const value *get(size_t position, std::string_view name) const;
};

using builtin_function = value (*)(interpreter &, call_arguments &);
using method_function = value (*)(interpreter &, const value &self, call_arguments &);

enum class callable_kind : uint8_t { builtin, method, macro, caller };

struct callable_object : heap_object {
    callable_object(memory_budget *budget, callable_kind kind, std::string name)
        : heap_object(budget), kind(kind), name(std::move(name)) {}
    ~callable_object() override;
    void take_children(std::vector<std::shared_ptr<heap_object>> &out) override;

    callable_kind kind;
    std::string name;
    builtin_function builtin = nullptr;
    method_function method = nullptr;
    value self;                                 // a method's receiver
    const macro_statement *macro = nullptr;     // a macro's definition
    const call_statement *call_block = nullptr; // `caller` of a {% call %} block: its body and parameters
    scope *caller_scope = nullptr;              // where the call block's body runs; valid while caller_alive
    bool caller_alive = false;
};

// One render's limits and counters; every module that builds values goes through it.
class render_context {
  public:
    explicit render_context(const render_limits &limits) : limits_(limits), memory_(limits.max_memory_bytes) {}

    const render_limits &limits() const { return limits_; }
    memory_budget &memory() { return memory_; }
    void step(uint64_t n = 1);
    // Work proportional to a text's length (copying, searching, converting).
    void text_work(size_t bytes) { step(1 + bytes / 64); }
    // A string may be at most max_output_bytes long.
    void check_text_size(size_t bytes) const;

    value make_string(std::string text);
    std::shared_ptr<list_object> make_list(bool tuple = false);
    std::shared_ptr<dict_object> make_dict(dict_kind kind = dict_kind::mapping);
    std::shared_ptr<callable_object> make_callable(callable_kind kind, std::string name);
    // Remembers a container changed after creation (list.append, namespace attribute): the render clears it at the
    // end, which breaks any reference cycle the change made.
    void note_mutation(const value &container);
    void clear_mutated();
    // Text written into an output buffer; all buffers of the render together stay within max_output_bytes.
    void reserve_output(size_t bytes);
    void release_output(size_t bytes) noexcept { output_bytes_ -= bytes; }

    uint64_t steps() const { return steps_; }

  private:
    render_limits limits_;
    memory_budget memory_; // destroyed after every value this render made (they are gone when the render returns)
    uint64_t steps_ = 0;
    size_t output_bytes_ = 0;
    std::vector<std::weak_ptr<heap_object>> mutated_;
};

// A constant string outside any render (template literals, names): not counted against a budget.
value constant_string(std::string text);

// --- How values read and print, as @huggingface/jinja does it. ---

const char *kind_name(const value &v); // "string", "list", ... for messages

// Python truthiness: empty string, list or dict, 0, none and undefined are false; a namespace is true.
bool truthy(const value &v);
// JavaScript truthiness of the underlying value (a list or dict is true even when empty).
bool js_truthy(const value &v);
// JavaScript == on the underlying values (1 == "1", undefined == none; lists and dicts by identity).
bool loose_equals(render_context &ctx, const value &a, const value &b);
// JavaScript === (no conversions; lists and dicts by identity).
bool strict_equals(const value &a, const value &b);
// The ordering the sort filter and dictsort use; fails on values of kinds that do not compare.
int compare_for_sort(const value &a, const value &b, bool case_sensitive);

// What {{ v }} writes (none and undefined print nothing; the caller skips them): integers as JavaScript prints them,
// floats with ".0" when whole, booleans "true"/"false", lists and dicts as JSON ("[1, 2]", {"a": "b"}).
void append_display(render_context &ctx, std::string &out, const value &v);
std::string display_text(render_context &ctx, const value &v);
// String(v) of the underlying JavaScript value, which `~` and `+` use: 1.0 -> "1", [1, "a"] -> "1,a",
// a dict -> "[object Map]", none -> "undefined". With for_join, none and undefined give "" (Array.prototype.join).
void append_concat_text(render_context &ctx, std::string &out, const value &v, bool for_join = false);

struct json_style {
    int indent = 0; // spaces per level; 0: one line
    bool ascii_only = false;
    bool sort_keys = false;
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool undefined_as_null = true;
};
void append_json(render_context &ctx, std::string &out, const value &v, const json_style &style);

// A JSON document (the render's context, or text given to from_json) as values; nesting deeper than max_depth fails.
value from_json(render_context &ctx, const nlohmann::ordered_json &json);

} // namespace strata::chat::jinja
