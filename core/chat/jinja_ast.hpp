// The syntax tree of a parsed template. Owned by the program, read-only while rendering (many renders may share it).
// Names are interned into symbols so a lookup compares integers; filters and tests are resolved to functions once,
// at parse time (an unknown one fails only when it runs, as in @huggingface/jinja).
#pragma once

#include "chat/jinja_value.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata::chat::jinja {

using symbol = uint32_t;

using filter_function = value (*)(interpreter &, value operand, call_arguments &args, bool called);
using test_function = bool (*)(interpreter &, const value &operand, call_arguments &args);

enum class expression_kind : uint8_t {
    literal,
    name,
    list,
    dict,
    member,
    slice,
    call,
    filter,
    test,
    unary,
    binary,
    conditional,
};

struct expression {
    expression(expression_kind kind, uint32_t offset) : kind(kind), offset(offset) {}
    expression(const expression &) = delete;
    expression &operator=(const expression &) = delete;
    virtual ~expression() = default;

    expression_kind kind;
    uint32_t offset; // byte offset in the source, for messages
    int height = 1;  // of this subtree; the parser bounds it (parse_limits.max_nesting)
};
using expression_ptr = std::unique_ptr<expression>;

// A string, number, boolean or none written in the template.
struct literal_expression : expression {
    literal_expression(uint32_t offset, value constant)
        : expression(expression_kind::literal, offset), constant(std::move(constant)) {}
    value constant;
};

struct name_expression : expression {
    name_expression(uint32_t offset, symbol name, std::string text)
        : expression(expression_kind::name, offset), name(name), text(std::move(text)) {}
    symbol name;
    std::string text;
};

// [a, b] or (a, b).
struct list_expression : expression {
    list_expression(uint32_t offset, bool tuple) : expression(expression_kind::list, offset), tuple(tuple) {}
    std::vector<expression_ptr> items;
    bool tuple;
};

struct dict_expression : expression {
    explicit dict_expression(uint32_t offset) : expression(expression_kind::dict, offset) {}
    std::vector<std::pair<expression_ptr, expression_ptr>> entries;
};

// object[key], or object.name / object.0 (then `attribute` holds the name or the number).
struct member_expression : expression {
    explicit member_expression(uint32_t offset) : expression(expression_kind::member, offset) {}
    expression_ptr object;
    expression_ptr key;
    value attribute;
};

// object[start:stop:step], each part optional.
struct slice_expression : expression {
    explicit slice_expression(uint32_t offset) : expression(expression_kind::slice, offset) {}
    expression_ptr object, start, stop, step;
};

enum class argument_kind : uint8_t { positional, keyword, spread_positional, spread_keyword };

// One argument of a call, filter or test, or one parameter of a macro (keyword = has a default).
struct argument {
    argument_kind kind;
    std::string name;
    symbol name_symbol = 0; // for macro parameters
    expression_ptr value;
};

struct call_expression : expression {
    explicit call_expression(uint32_t offset) : expression(expression_kind::call, offset) {}
    expression_ptr callee;
    std::vector<argument> arguments;
};

// `| name` or `| name(arguments)`: `called` tells them apart, which a few @huggingface/jinja filters notice.
struct filter_call {
    std::string name;
    filter_function function = nullptr; // null: unknown, an error when it runs
    std::vector<argument> arguments;
    bool called = false;
    uint32_t offset = 0;
};

struct filter_expression : expression {
    explicit filter_expression(uint32_t offset) : expression(expression_kind::filter, offset) {}
    expression_ptr operand;
    filter_call filter;
};

// `operand is [not] name`, with arguments as Python Jinja2 allows: `is divisibleby(3)`, `is sameas none`.
struct test_expression : expression {
    explicit test_expression(uint32_t offset) : expression(expression_kind::test, offset) {}
    expression_ptr operand;
    std::string name;
    test_function function = nullptr;
    std::vector<argument> arguments;
    bool negated = false;
};

enum class unary_operator : uint8_t { negate, plus, logical_not };

struct unary_expression : expression {
    unary_expression(uint32_t offset, unary_operator op) : expression(expression_kind::unary, offset), op(op) {}
    unary_operator op;
    expression_ptr operand;
};

enum class binary_operator : uint8_t {
    add,
    subtract,
    concat,
    multiply,
    divide,
    floor_divide,
    modulo,
    power,
    equal,
    not_equal,
    less,
    greater,
    less_equal,
    greater_equal,
    in,
    not_in,
    logical_and,
    logical_or,
};

struct binary_expression : expression {
    binary_expression(uint32_t offset, binary_operator op) : expression(expression_kind::binary, offset), op(op) {}
    binary_operator op;
    expression_ptr left, right;
};

// `then if condition else otherwise`; without `else` (otherwise null) the value is undefined when the condition is
// false, and in a for loop `for x in items if condition` it filters the items.
struct conditional_expression : expression {
    explicit conditional_expression(uint32_t offset) : expression(expression_kind::conditional, offset) {}
    expression_ptr condition, then, otherwise;
};

enum class statement_kind : uint8_t {
    text,
    output,
    if_block,
    for_loop,
    set,
    macro,
    call_block,
    filter_block,
    loop_break,
    loop_continue,
};

struct statement {
    statement(statement_kind kind, uint32_t offset) : kind(kind), offset(offset) {}
    statement(const statement &) = delete;
    statement &operator=(const statement &) = delete;
    virtual ~statement() = default;

    statement_kind kind;
    uint32_t offset;
};
using statement_ptr = std::unique_ptr<statement>;
using block = std::vector<statement_ptr>;

struct text_statement : statement {
    text_statement(uint32_t offset, value text) : statement(statement_kind::text, offset), text(std::move(text)) {}
    value text;
};

// {{ expression }}
struct output_statement : statement {
    explicit output_statement(uint32_t offset) : statement(statement_kind::output, offset) {}
    expression_ptr value;
};

struct if_statement : statement {
    explicit if_statement(uint32_t offset) : statement(statement_kind::if_block, offset) {}
    std::vector<std::pair<expression_ptr, block>> branches; // if, then each elif
    block otherwise;
};

struct for_statement : statement {
    explicit for_statement(uint32_t offset) : statement(statement_kind::for_loop, offset) {}
    std::vector<symbol> targets; // one name, or the names a tuple unpacks into
    std::vector<std::string> target_texts;
    bool unpack = false;
    expression_ptr iterable;
    expression_ptr filter; // `for x in items if filter`
    block body, otherwise;
};

// {% set a = ... %}, {% set a, b = ... %}, {% set ns.attr = ... %}, or {% set a %}body{% endset %}.
struct set_statement : statement {
    explicit set_statement(uint32_t offset) : statement(statement_kind::set, offset) {}
    std::vector<symbol> targets;
    bool unpack = false;
    expression_ptr name_space; // for ns.attr
    std::string attribute;
    expression_ptr value; // null: the body's output
    block body;
};

struct macro_statement : statement {
    explicit macro_statement(uint32_t offset) : statement(statement_kind::macro, offset) {}
    symbol name = 0;
    std::string text;
    std::vector<argument> parameters; // positional (no default) or keyword (with a default)
    bool reads_varargs = false, reads_kwargs = false;
    block body;
};

// {% call(params) macro(args) %}body{% endcall %}: macro runs with `caller` calling the body.
struct call_statement : statement {
    explicit call_statement(uint32_t offset) : statement(statement_kind::call_block, offset) {}
    std::unique_ptr<call_expression> call;
    std::vector<argument> parameters;
    bool reads_varargs = false, reads_kwargs = false;
    block body;
};

struct filter_statement : statement {
    explicit filter_statement(uint32_t offset) : statement(statement_kind::filter_block, offset) {}
    std::vector<filter_call> filters;
    block body;
};

struct symbol_table {
    symbol intern(std::string_view name);
    std::optional<symbol> find(std::string_view name) const;
    std::vector<std::string> names;
    std::unordered_map<std::string, symbol> ids;
};

struct program {
    std::string origin;
    std::string source; // valid UTF-8, for messages
    block body;
    symbol_table symbols;
    symbol loop_symbol = 0, caller_symbol = 0, varargs_symbol = 0, kwargs_symbol = 0;
    bool reads_loop = false; // some expression names `loop`: for loops must provide it
};

// "origin:line:col" of a source offset, and its line with a caret under the column, for messages.
std::string source_location(const program &p, uint32_t offset);
std::string source_excerpt(const program &p, uint32_t offset);

} // namespace strata::chat::jinja
