// The Jinja interpreter: statements, expressions, calls and scopes, following @huggingface/jinja's runtime.
#include "chat/jinja_interpreter.hpp"

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace strata::chat::jinja {

namespace {

// Counts nested evaluation; past max_depth the render fails instead of exhausting the stack.
class depth_guard {
  public:
    depth_guard(int &depth, int limit) : depth_(depth) {
        if (depth_ >= limit)
            failf("the template nests deeper than {} levels (render_limits.max_depth): a macro that calls itself "
                  "without end?",
                  limit);
        ++depth_;
    }
    depth_guard(const depth_guard &) = delete;
    depth_guard &operator=(const depth_guard &) = delete;
    ~depth_guard() { --depth_; }

  private:
    int &depth_;
};

const char *operator_text(binary_operator op) {
    switch (op) {
    case binary_operator::add: return "+";
    case binary_operator::subtract: return "-";
    case binary_operator::concat: return "~";
    case binary_operator::multiply: return "*";
    case binary_operator::divide: return "/";
    case binary_operator::floor_divide: return "//";
    case binary_operator::modulo: return "%";
    case binary_operator::power: return "**";
    case binary_operator::equal: return "==";
    case binary_operator::not_equal: return "!=";
    case binary_operator::less: return "<";
    case binary_operator::greater: return ">";
    case binary_operator::less_equal: return "<=";
    case binary_operator::greater_equal: return ">=";
    case binary_operator::in: return "in";
    case binary_operator::not_in: return "not in";
    case binary_operator::logical_and: return "and";
    case binary_operator::logical_or: return "or";
    }
    return "?";
}

bool is_comparison(binary_operator op) {
    return op == binary_operator::less || op == binary_operator::greater || op == binary_operator::less_equal ||
           op == binary_operator::greater_equal;
}

bool compare(binary_operator op, int order) {
    switch (op) {
    case binary_operator::less: return order < 0;
    case binary_operator::greater: return order > 0;
    case binary_operator::less_equal: return order <= 0;
    default: return order >= 0;
    }
}

bool numeric_like(const value &v) { return v.is_number() || v.is_boolean(); }

// A name for the thing being called, for messages.
std::string callee_text(const expression *e) {
    if (!e) return "value";
    if (e->kind == expression_kind::name) return "'" + static_cast<const name_expression *>(e)->text + "'";
    if (e->kind == expression_kind::member) {
        const auto *m = static_cast<const member_expression *>(e);
        if (!m->key && m->attribute.is_string()) return "'." + m->attribute.as_string() + "'";
    }
    return "the value";
}

} // namespace

const value *scope::find(symbol name) const {
    for (const scope *s = this; s; s = s->parent_) {
        if (!s->parent_ && !s->present_.empty()) return s->present_[name] ? &s->dense_[name] : nullptr;
        for (auto it = s->local_.rbegin(); it != s->local_.rend(); ++it)
            if (it->first == name) return &it->second;
    }
    return nullptr;
}

void scope::set(symbol name, value v) {
    if (!parent_ && !present_.empty()) {
        dense_[name] = std::move(v);
        present_[name] = true;
        return;
    }
    for (auto &[id, existing] : local_) {
        if (id == name) {
            existing = std::move(v);
            return;
        }
    }
    if (local_.empty()) local_.reserve(4);
    local_.emplace_back(name, std::move(v));
}

interpreter::interpreter(const program &p, const render_options &options)
    : ctx_(options.limits), program_(p), options_(options) {}

interpreter::~interpreter() { ctx_.clear_mutated(); }

std::string interpreter::render(const nlohmann::ordered_json &context) {
    if (!context.is_object() && !context.is_null())
        failf("the context must be a JSON object (messages, add_generation_prompt, ...), not {}", context.type_name());
    // The root scope is indexed by symbol, so a program with no names at all still gets one slot.
    scope root(std::max<size_t>(program_.symbols.names.size(), 1));
    for (symbol id = 0; id < program_.symbols.names.size(); ++id) {
        const std::string &name = program_.symbols.names[id];
        if (const builtin_function fn = find_global(name)) {
            auto c = ctx_.make_callable(callable_kind::builtin, name);
            c->builtin = fn;
            root.set(id, value::of(std::move(c)));
        }
    }
    // Only what the template can name is converted; the context may override a global, as Python's render() does.
    if (context.is_object())
        for (const auto &[key, item] : context.items())
            if (const auto id = program_.symbols.find(key)) root.set(*id, from_json(ctx_, item));
    output_buffer out(ctx_);
    execute_block(program_.body, root, out);
    return out.take();
}

std::tm interpreter::now() const {
    if (options_.now) return options_.now();
    const std::time_t t = std::time(nullptr);
    std::tm local{};
    localtime_r(&t, &local);
    return local;
}

value interpreter::apply_filter(std::string_view name, value operand, call_arguments &args) {
    const filter_function f = find_filter(name);
    if (!f) failf("unknown filter '{}'", name);
    return f(*this, std::move(operand), args, !args.positional.empty() || !args.keyword.empty());
}

bool interpreter::apply_test(std::string_view name, const value &operand, call_arguments &args) {
    const test_function t = find_test(name);
    if (!t) failf("unknown test '{}'", name);
    return t(*this, operand, args);
}

bool interpreter::contains(const value &container, const value &item) {
    if (container.is_undefined()) return false;
    if (container.is_list()) {
        ctx_.step(container.as_list().items.size());
        for (const value &v : container.as_list().items)
            if (strict_equals(v, item)) return true;
        return false;
    }
    if (container.is_string() && item.is_string()) {
        ctx_.text_work(container.as_string().size());
        return container.as_string().find(item.as_string()) != std::string::npos;
    }
    if (container.is_dict() && container.as_dict().kind != dict_kind::name_space && item.is_string())
        return container.as_dict().find(item.as_string()) != nullptr;
    failf("cannot test whether a {} is in a {}", kind_name(item), kind_name(container));
}

// --- expressions ---

value interpreter::evaluate(const expression &e, scope &s) {
    try {
        depth_guard guard(depth_, ctx_.limits().max_depth);
        ctx_.step();
        return evaluate_node(e, s);
    } catch (const failure &f) {
        fail_at(e.offset, f.message);
    } catch (const template_raise &r) {
        raise_at(e.offset, r.message);
    }
}

value interpreter::evaluate_node(const expression &e, scope &s) {
    switch (e.kind) {
    case expression_kind::literal: return static_cast<const literal_expression &>(e).constant;
    case expression_kind::name: {
        const value *v = s.find(static_cast<const name_expression &>(e).name);
        return v ? *v : value();
    }
    case expression_kind::list: {
        const auto &l = static_cast<const list_expression &>(e);
        auto list = ctx_.make_list(l.tuple);
        list->items.reserve(l.items.size());
        for (const expression_ptr &item : l.items) list->push(evaluate(*item, s));
        return value::of(std::move(list));
    }
    case expression_kind::dict: {
        const auto &d = static_cast<const dict_expression &>(e);
        auto dict = ctx_.make_dict();
        for (const auto &[key_expression, value_expression] : d.entries) {
            const value key = evaluate(*key_expression, s);
            if (!key.is_string()) failf("dict keys must be strings, not {}", kind_name(key));
            dict->set(key.as_string(), evaluate(*value_expression, s));
        }
        return value::of(std::move(dict));
    }
    case expression_kind::member: return evaluate_member(static_cast<const member_expression &>(e), s);
    case expression_kind::slice: return evaluate_slice(static_cast<const slice_expression &>(e), s);
    case expression_kind::call: return evaluate_call(static_cast<const call_expression &>(e), s);
    case expression_kind::filter: {
        const auto &f = static_cast<const filter_expression &>(e);
        return evaluate_filter(f.filter, evaluate(*f.operand, s), s);
    }
    case expression_kind::test: {
        const auto &t = static_cast<const test_expression &>(e);
        const value operand = evaluate(*t.operand, s);
        call_arguments args = evaluate_arguments(t.arguments, s);
        if (!t.function) failf("unknown test '{}'", t.name);
        return value::boolean(t.function(*this, operand, args) != t.negated);
    }
    case expression_kind::unary: return evaluate_unary(static_cast<const unary_expression &>(e), s);
    case expression_kind::binary: return evaluate_binary(static_cast<const binary_expression &>(e), s);
    case expression_kind::conditional: {
        const auto &c = static_cast<const conditional_expression &>(e);
        if (!c.otherwise) return truthy(evaluate(*c.condition, s)) ? evaluate(*c.then, s) : value();
        return evaluate(truthy(evaluate(*c.condition, s)) ? *c.then : *c.otherwise, s);
    }
    }
    fail("unknown expression");
}

value interpreter::member_of(const value &object, const value &property, method_function *method) {
    *method = nullptr;
    if (object.is_dict()) {
        if (!property.is_string()) return value(); // Python: no such key (@huggingface/jinja refuses)
        const dict_object &d = object.as_dict();
        if (const value *v = d.find(property.as_string())) return *v;
        if (d.kind == dict_kind::name_space) return value();
    } else if (object.is_list() || object.is_string()) {
        if (property.is_integer()) {
            double index = property.as_number();
            if (std::isnan(index)) index = 0; // JavaScript's at(NaN) is at(0)
            if (object.is_string()) {
                ctx_.text_work(object.as_string().size());
                if (std::fabs(index) > 9e15) return value();
                const auto unit = utf16_unit_at(object.as_string(), static_cast<int64_t>(index));
                return unit ? ctx_.make_string(*unit) : value();
            }
            const std::vector<value> &items = object.as_list().items;
            const auto size = static_cast<double>(items.size());
            if (index < 0) index += size;
            if (index < 0 || index >= size) return value();
            return items[static_cast<size_t>(index)];
        }
        if (!property.is_string()) return value(); // Python: no such item (@huggingface/jinja refuses)
    } else {
        if (!property.is_string()) failf("cannot index {} with a {}", kind_name(object), kind_name(property));
        return value();
    }
    std::optional<value> attribute;
    *method = find_method(object, property.as_string(), &attribute);
    if (attribute) return *attribute;
    return value();
}

value interpreter::evaluate_member(const member_expression &e, scope &s) {
    const value object = evaluate(*e.object, s);
    const value property = e.key ? evaluate(*e.key, s) : e.attribute;
    method_function method = nullptr;
    value result = member_of(object, property, &method);
    if (!method) return result;
    auto bound = ctx_.make_callable(callable_kind::method, property.as_string());
    bound->method = method;
    bound->self = object;
    return value::of(std::move(bound));
}

value interpreter::evaluate_slice(const slice_expression &e, scope &s) {
    const value object = evaluate(*e.object, s);
    if (!object.is_list() && !object.is_string())
        failf("cannot slice a {} (only a list or a string)", kind_name(object));
    const auto part = [&](const expression_ptr &p, const char *what) -> std::optional<double> {
        if (!p) return std::nullopt;
        const value v = evaluate(*p, s);
        if (v.is_undefined()) return std::nullopt;
        if (!v.is_integer()) failf("a slice {} must be an integer, not {}", what, kind_name(v));
        return v.as_number();
    };
    const std::optional<double> start_part = part(e.start, "start"), stop_part = part(e.stop, "stop"),
                                step_part = part(e.step, "step");
    std::vector<std::string> characters; // a string slices by code point, as Array.from(string) does
    if (object.is_string()) {
        const std::string &text = object.as_string();
        ctx_.text_work(text.size());
        for (size_t i = 0; i < text.size();) {
            const size_t begin = i;
            next_code_point(text, i);
            characters.emplace_back(text, begin, i - begin);
        }
    }
    const double length = static_cast<double>(object.is_string() ? characters.size() : object.as_list().items.size());
    // @huggingface/jinja's slice(): clamp start and stop by the step's direction, then walk.
    const double step = step_part.value_or(1);
    const double direction = step > 0 ? 1 : step < 0 ? -1 : std::isnan(step) ? NAN : 0;
    double start, stop;
    if (direction >= 0) {
        start = start_part.value_or(0);
        start = start < 0 ? std::max(length + start, 0.0) : std::min(start, length);
        stop = stop_part.value_or(length);
        stop = stop < 0 ? std::max(length + stop, 0.0) : std::min(stop, length);
    } else {
        start = start_part.value_or(length - 1);
        start = start < 0 ? std::max(length + start, -1.0) : std::min(start, length - 1);
        stop = stop_part.value_or(-1);
        stop = stop < -1 ? std::max(length + stop, -1.0) : std::min(stop, length - 1);
    }
    std::string text;
    auto list = object.is_list() ? ctx_.make_list() : nullptr;
    for (double i = start; direction * i < direction * stop; i += step) {
        const auto index = static_cast<size_t>(i);
        if (list) {
            list->push(object.as_list().items[index]);
        } else {
            text += characters[index];
            ctx_.step();
        }
    }
    if (list) return value::of(std::move(list));
    return ctx_.make_string(std::move(text));
}

call_arguments interpreter::evaluate_arguments(const std::vector<argument> &arguments, scope &s) {
    call_arguments args;
    // Positional arguments (and *spread) first, then keywords, as Python and @huggingface/jinja evaluate them.
    for (const argument &a : arguments) {
        if (a.kind == argument_kind::positional) {
            args.positional.push_back(evaluate(*a.value, s));
        } else if (a.kind == argument_kind::spread_positional) {
            const value v = evaluate(*a.value, s);
            if (!v.is_list()) failf("*{} must be a list to unpack, not {}", "argument", kind_name(v));
            ctx_.step(v.as_list().items.size());
            for (const value &item : v.as_list().items) args.positional.push_back(item);
        }
    }
    const auto add_keyword = [&](const std::string &name, value v) {
        if (args.keyword_value(name)) failf("keyword argument '{}' is given twice", name);
        args.keyword.emplace_back(name, std::move(v));
    };
    for (const argument &a : arguments) {
        if (a.kind == argument_kind::keyword) {
            add_keyword(a.name, evaluate(*a.value, s));
        } else if (a.kind == argument_kind::spread_keyword) {
            const value v = evaluate(*a.value, s);
            if (!v.is_dict() || v.as_dict().kind == dict_kind::name_space)
                failf("**argument must be a dict to unpack, not {}", kind_name(v));
            ctx_.step(v.as_dict().size());
            for (const auto &[key, item] : v.as_dict().entries) add_keyword(key, item);
        }
    }
    return args;
}

value interpreter::evaluate_call(const call_expression &e, scope &s) {
    call_arguments args = evaluate_arguments(e.arguments, s);
    if (e.callee->kind == expression_kind::member) {
        // object.method(...): call the method directly instead of making a bound-method value first.
        const auto &m = static_cast<const member_expression &>(*e.callee);
        const value object = evaluate(*m.object, s);
        const value property = m.key ? evaluate(*m.key, s) : m.attribute;
        method_function method = nullptr;
        const value callee = member_of(object, property, &method);
        if (method) return method(*this, object, args);
        if (!callee.is_callable() && !m.key && object.is_dict() && property.is_string()) {
            // Python's d.items() finds the dict method even where a key has that name ("items" of a JSON schema);
            // @huggingface/jinja tries to call the key's value and fails.
            std::optional<value> attribute;
            if (const method_function fn = find_method(object, property.as_string(), &attribute))
                return fn(*this, object, args);
        }
        return call(callee, args, s, e.callee.get());
    }
    const value callee = evaluate(*e.callee, s);
    return call(callee, args, s, e.callee.get());
}

value interpreter::call(const value &callee, call_arguments &args, scope &s, const expression *callee_expression) {
    if (!callee.is_callable()) {
        if (callee.is_undefined())
            failf("{} is undefined, so it cannot be called (no such macro, function or method)",
                  callee_text(callee_expression));
        failf("{} is a {}, not something to call", callee_text(callee_expression), kind_name(callee));
    }
    const callable_object &c = callee.as_callable();
    switch (c.kind) {
    case callable_kind::builtin: return c.builtin(*this, args);
    case callable_kind::method: return c.method(*this, c.self, args);
    case callable_kind::macro: return call_macro(*c.macro, args, s);
    case callable_kind::caller: {
        if (!c.caller_alive) fail("caller() was called after its {% call %} block had ended");
        scope body_scope(c.caller_scope);
        const call_statement &block = *c.call_block;
        bind_arguments("caller", block.parameters, block.reads_varargs, block.reads_kwargs, args, body_scope);
        output_buffer out(ctx_);
        execute_block(block.body, body_scope, out);
        return ctx_.make_string(out.take());
    }
    }
    fail("unknown callable");
}

value interpreter::call_macro(const macro_statement &m, call_arguments &args, scope &caller_scope) {
    // Macros see the variables of the place they are called from, as in @huggingface/jinja.
    scope macro_scope(&caller_scope);
    bind_arguments(m.text, m.parameters, m.reads_varargs, m.reads_kwargs, args, macro_scope);
    output_buffer out(ctx_);
    execute_block(m.body, macro_scope, out);
    return ctx_.make_string(out.take());
}

void interpreter::bind_arguments(std::string_view name, const std::vector<argument> &parameters, bool reads_varargs,
                                 bool reads_kwargs, call_arguments &args, scope &target) {
    std::vector<const argument *> pending_defaults;
    for (size_t i = 0; i < parameters.size(); ++i) {
        const argument &p = parameters[i];
        std::optional<value> v;
        if (i < args.positional.size()) {
            v = args.positional[i];
        } else {
            for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
                if (it->first == p.name) {
                    v = std::move(it->second);
                    args.keyword.erase(it);
                    break;
                }
            }
        }
        if (!v && p.value) pending_defaults.push_back(&p);
        target.set(p.name_symbol, v ? std::move(*v) : value());
    }
    if (reads_kwargs) {
        auto kwargs = ctx_.make_dict();
        for (auto &[key, v] : args.keyword) kwargs->set(key, std::move(v));
        target.set(program_.kwargs_symbol, value::of(std::move(kwargs)));
    } else if (!args.keyword.empty()) {
        failf("macro '{}' has no parameter '{}'", name, args.keyword.front().first);
    }
    if (reads_varargs) {
        auto varargs = ctx_.make_list();
        for (size_t i = parameters.size(); i < args.positional.size(); ++i) varargs->push(args.positional[i]);
        target.set(program_.varargs_symbol, value::of(std::move(varargs)));
    } else if (args.positional.size() > parameters.size()) {
        failf("macro '{}' takes at most {} argument(s), {} given", name, parameters.size(), args.positional.size());
    }
    for (const argument *p : pending_defaults) target.set(p->name_symbol, evaluate(*p->value, target));
}

value interpreter::evaluate_filter(const filter_call &f, value operand, scope &s) {
    call_arguments args = evaluate_arguments(f.arguments, s);
    if (!f.function) failf("unknown filter '{}'", f.name);
    return f.function(*this, std::move(operand), args, f.called);
}

value interpreter::evaluate_unary(const unary_expression &e, scope &s) {
    const value v = evaluate(*e.operand, s);
    if (e.op == unary_operator::logical_not) return value::boolean(!truthy(v));
    if (!numeric_like(v))
        failf("unary {} needs a number, not {}", e.op == unary_operator::negate ? '-' : '+', kind_name(v));
    const double r = (e.op == unary_operator::negate ? -1 : 1) * v.as_number();
    return v.is_floating() ? value::floating(r) : value::integer(r);
}

value interpreter::evaluate_binary(const binary_expression &e, scope &s) {
    using op_t = binary_operator;
    const op_t op = e.op;
    value left = evaluate(*e.left, s);
    if (op == op_t::logical_and) return truthy(left) ? evaluate(*e.right, s) : left;
    if (op == op_t::logical_or) return truthy(left) ? left : evaluate(*e.right, s);
    const value right = evaluate(*e.right, s);
    if (op == op_t::equal) return value::boolean(loose_equals(ctx_, left, right));
    if (op == op_t::not_equal) return value::boolean(!loose_equals(ctx_, left, right));

    // `~` joins text. Undefined and none are refused by @huggingface/jinja; Python reads them as "" and "None".
    const auto concat = [this](const value &a, const value &b) {
        std::string text;
        for (const value *v : std::initializer_list<const value *>{&a, &b}) {
            if (v->is_undefined()) continue;
            if (v->is_none())
                text += "None";
            else
                append_concat_text(ctx_, text, *v);
        }
        return ctx_.make_string(std::move(text));
    };
    if (left.is_undefined() || right.is_undefined()) {
        if (right.is_undefined() && (op == op_t::in || op == op_t::not_in)) return value::boolean(op == op_t::not_in);
        if (op == op_t::concat) return concat(left, right);
        failf("cannot apply '{}' to an undefined value", operator_text(op));
    }
    if (left.is_none() || right.is_none()) {
        if (op == op_t::concat) return concat(left, right);
        failf("cannot apply '{}' to none", operator_text(op));
    }
    if (op == op_t::concat) return concat(left, right);
    if (op == op_t::power && numeric_like(left) && numeric_like(right)) {
        const double a = left.as_number(), b = right.as_number();
        if (a == 0 && b < 0) fail("0 cannot be raised to a negative power");
        double r = std::isnan(b) || (std::isnan(a) && b != 0) ? NAN : std::pow(a, b);
        if (std::fabs(a) == 1 && std::isinf(b)) r = NAN; // JavaScript: 1 ** Infinity is NaN
        if (!std::isfinite(r)) fail("the power is not a finite real number");
        return left.is_floating() || right.is_floating() || b < 0 ? value::floating(r) : value::integer(r);
    }
    if (left.is_number() && right.is_number()) {
        const double a = left.as_number(), b = right.as_number();
        const bool floating = left.is_floating() || right.is_floating();
        const auto number = [floating](double r) { return floating ? value::floating(r) : value::integer(r); };
        switch (op) {
        case op_t::add: return number(a + b);
        case op_t::subtract: return number(a - b);
        case op_t::multiply: return number(a * b);
        case op_t::divide: return value::floating(a / b);
        case op_t::floor_divide: return number(std::floor(a / b));
        case op_t::modulo: return number(std::fmod(a, b));
        case op_t::less: return value::boolean(a < b);
        case op_t::greater: return value::boolean(a > b);
        case op_t::less_equal: return value::boolean(a <= b);
        case op_t::greater_equal: return value::boolean(a >= b);
        default: break;
        }
    } else if (left.is_list() && right.is_list()) {
        if (op == op_t::add) {
            auto list = ctx_.make_list();
            ctx_.step(left.as_list().items.size() + right.as_list().items.size());
            list->append_all(left.as_list().items);
            list->append_all(right.as_list().items);
            return value::of(std::move(list));
        }
    } else if (right.is_list() && (op == op_t::in || op == op_t::not_in)) {
        return value::boolean(contains(right, left) == (op == op_t::in));
    }
    if (op == op_t::add && (left.is_string() || right.is_string())) return concat(left, right);
    if ((op == op_t::in || op == op_t::not_in) && right.is_string() && left.is_string())
        return value::boolean(contains(right, left) == (op == op_t::in));
    if ((op == op_t::in || op == op_t::not_in) && left.is_string() && right.is_dict() &&
        right.as_dict().kind != dict_kind::name_space)
        return value::boolean(contains(right, left) == (op == op_t::in));
    // Python where @huggingface/jinja refuses: text repetition, and ordering strings or booleans.
    if (op == op_t::multiply && (left.is_string() || right.is_string()) && (left.is_integer() || right.is_integer())) {
        const std::string &text = left.is_string() ? left.as_string() : right.as_string();
        const double count = left.is_integer() ? left.as_number() : right.as_number();
        std::string repeated;
        if (count > 0 && !text.empty()) {
            if (count * static_cast<double>(text.size()) > static_cast<double>(ctx_.limits().max_output_bytes))
                failf("repeating a {}-byte string {} times exceeds render_limits.max_output_bytes", text.size(), count);
            for (double i = 0; i < count; ++i) repeated += text;
        }
        return ctx_.make_string(std::move(repeated));
    }
    if (is_comparison(op) && left.is_string() && right.is_string())
        return value::boolean(compare(op, left.as_string().compare(right.as_string())));
    if (is_comparison(op) && numeric_like(left) && numeric_like(right)) {
        const double a = left.as_number(), b = right.as_number();
        return value::boolean(compare(op, a < b ? -1 : a > b ? 1 : 0) && !std::isnan(a) && !std::isnan(b));
    }
    failf("cannot apply '{}' to {} and {}", operator_text(op), kind_name(left), kind_name(right));
}

// --- statements ---

void interpreter::print(const value &v, output_buffer &out) {
    if (v.is_none() || v.is_undefined()) return;
    if (v.is_string()) {
        out.append(v.as_string());
        return;
    }
    out.append(display_text(ctx_, v));
}

flow interpreter::execute_block(const block &b, scope &s, output_buffer &out) {
    for (const statement_ptr &st : b) {
        const flow f = execute(*st, s, out);
        if (f != flow::normal) return f;
    }
    return flow::normal;
}

flow interpreter::execute(const statement &st, scope &s, output_buffer &out) {
    try {
        depth_guard guard(depth_, ctx_.limits().max_depth);
        ctx_.step();
        switch (st.kind) {
        case statement_kind::text: out.append(static_cast<const text_statement &>(st).text.as_string()); break;
        case statement_kind::output: print(evaluate(*static_cast<const output_statement &>(st).value, s), out); break;
        case statement_kind::if_block: {
            const auto &i = static_cast<const if_statement &>(st);
            for (const auto &[condition, body] : i.branches)
                if (truthy(evaluate(*condition, s))) return execute_block(body, s, out);
            return execute_block(i.otherwise, s, out);
        }
        case statement_kind::for_loop: return execute_for(static_cast<const for_statement &>(st), s, out);
        case statement_kind::set: return execute_set(static_cast<const set_statement &>(st), s);
        case statement_kind::macro: {
            const auto &m = static_cast<const macro_statement &>(st);
            auto c = ctx_.make_callable(callable_kind::macro, m.text);
            c->macro = &m;
            s.set(m.name, value::of(std::move(c)));
            break;
        }
        case statement_kind::call_block:
            print(execute_call_block(static_cast<const call_statement &>(st), s), out);
            break;
        case statement_kind::filter_block: {
            const auto &f = static_cast<const filter_statement &>(st);
            output_buffer body(ctx_);
            const flow inner = execute_block(f.body, s, body);
            if (inner != flow::normal) return inner;
            value v = ctx_.make_string(body.take());
            for (const filter_call &filter : f.filters) v = evaluate_filter(filter, std::move(v), s);
            print(v, out);
            break;
        }
        case statement_kind::loop_break: return flow::break_loop;
        case statement_kind::loop_continue: return flow::continue_loop;
        }
        return flow::normal;
    } catch (const failure &f) {
        fail_at(st.offset, f.message);
    } catch (const template_raise &r) {
        raise_at(st.offset, r.message);
    }
}

flow interpreter::execute_for(const for_statement &st, scope &s, output_buffer &out) {
    scope loop_scope(&s);
    const value iterable = evaluate(*st.iterable, loop_scope);
    std::vector<value> candidates;
    if (iterable.is_list()) {
        candidates = iterable.as_list().items;
    } else if (iterable.is_dict() && iterable.as_dict().kind != dict_kind::name_space) {
        for (const auto &entry : iterable.as_dict().entries) candidates.push_back(ctx_.make_string(entry.first));
    } else if (iterable.is_string()) {
        // @huggingface/jinja refuses a string; Python loops over its characters.
        const std::string &text = iterable.as_string();
        for (size_t i = 0; i < text.size();) {
            const size_t begin = i;
            next_code_point(text, i);
            candidates.push_back(ctx_.make_string(text.substr(begin, i - begin)));
        }
    } else if (!iterable.is_undefined()) { // Python loops over undefined zero times
        failf("cannot loop over {} (a list, dict or string is needed)", kind_name(iterable));
    }
    ctx_.step(candidates.size());

    std::vector<value> items;
    items.reserve(candidates.size());
    for (value &candidate : candidates) {
        if (st.filter) {
            scope test_scope(&loop_scope);
            assign_targets(st.targets, st.unpack, candidate, test_scope);
            if (!truthy(evaluate(*st.filter, test_scope))) continue;
        } else if (st.unpack) {
            assign_targets(st.targets, st.unpack, candidate, loop_scope); // checks the shape before any output
        }
        items.push_back(std::move(candidate));
    }

    bool iterated = false;
    for (size_t i = 0; i < items.size(); ++i) {
        if (program_.reads_loop) {
            auto loop = ctx_.make_dict(dict_kind::loop);
            const auto n = static_cast<double>(items.size()), index = static_cast<double>(i);
            loop->entries.reserve(9);
            loop->append("index", value::integer(index + 1));
            loop->append("index0", value::integer(index));
            loop->append("revindex", value::integer(n - index));
            loop->append("revindex0", value::integer(n - index - 1));
            loop->append("first", value::boolean(i == 0));
            loop->append("last", value::boolean(i + 1 == items.size()));
            loop->append("length", value::integer(n));
            loop->append("previtem", i > 0 ? items[i - 1] : value());
            loop->append("nextitem", i + 1 < items.size() ? items[i + 1] : value());
            loop_scope.set(program_.loop_symbol, value::of(std::move(loop)));
        }
        assign_targets(st.targets, st.unpack, items[i], loop_scope);
        // As in @huggingface/jinja, an iteration that ends in break or continue leaves no output.
        const size_t mark = out.size();
        const flow f = execute_block(st.body, loop_scope, out);
        if (f == flow::continue_loop) {
            out.truncate(mark);
            continue;
        }
        if (f == flow::break_loop) {
            out.truncate(mark);
            break;
        }
        iterated = true;
    }
    if (!iterated) return execute_block(st.otherwise, loop_scope, out);
    return flow::normal;
}

flow interpreter::execute_set(const set_statement &st, scope &s) {
    value v;
    if (st.value) {
        v = evaluate(*st.value, s);
    } else {
        output_buffer body(ctx_);
        const flow f = execute_block(st.body, s, body);
        if (f != flow::normal) return f;
        v = ctx_.make_string(body.take());
    }
    if (st.name_space) {
        const value target = evaluate(*st.name_space, s);
        if (!target.is_dict() || target.as_dict().kind != dict_kind::name_space)
            failf("cannot set attribute '{}' of a {}: only a namespace(...) takes attributes", st.attribute,
                  kind_name(target));
        target.as_dict().set(st.attribute, std::move(v));
        ctx_.note_mutation(target);
        return flow::normal;
    }
    assign_targets(st.targets, st.unpack, v, s);
    return flow::normal;
}

void interpreter::assign_targets(const std::vector<symbol> &targets, bool unpack, const value &v, scope &s) {
    if (!unpack) {
        s.set(targets[0], v);
        return;
    }
    if (!v.is_list()) failf("cannot unpack a {} into {} names", kind_name(v), targets.size());
    const std::vector<value> &items = v.as_list().items;
    if (items.size() != targets.size())
        failf("too {} values to unpack: {} names, {} values", items.size() < targets.size() ? "few" : "many",
              targets.size(), items.size());
    for (size_t i = 0; i < targets.size(); ++i) s.set(targets[i], items[i]);
}

value interpreter::execute_call_block(const call_statement &st, scope &s) {
    auto caller = ctx_.make_callable(callable_kind::caller, "caller");
    caller->call_block = &st;
    caller->caller_scope = &s;
    caller->caller_alive = true;
    // The body's scope is this statement's: once the statement ends, caller() can no longer run.
    struct end_of_block {
        callable_object &c;
        ~end_of_block() { c.caller_alive = false; }
    } end{*caller};
    call_arguments args = evaluate_arguments(st.call->arguments, s);
    const value callee = evaluate(*st.call->callee, s);
    scope with_caller(&s);
    with_caller.set(program_.caller_symbol, value::of(caller));
    return call(callee, args, with_caller, st.call->callee.get());
}

void interpreter::fail_at(uint32_t offset, const std::string &message) const {
    throw error(
        fmt::format("{}: {}\n{}", source_location(program_, offset), message, source_excerpt(program_, offset)));
}

void interpreter::raise_at(uint32_t offset, const std::string &message) const {
    throw template_exception(fmt::format("{}: the template raised an error: {}\n{}", source_location(program_, offset),
                                         message, source_excerpt(program_, offset)),
                             message);
}

} // namespace strata::chat::jinja
