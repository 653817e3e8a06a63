// Renders a parsed template: evaluates the syntax tree against a context, with @huggingface/jinja's semantics
// (dynamic scoping of macros, `loop` as a dict, for-loop bodies that lose their output on break/continue), under the
// render limits. One interpreter serves one render; filters, tests and methods call back into it.
#pragma once

#include "chat/jinja_ast.hpp"
#include "chat/jinja_value.hpp"

#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace strata::chat::jinja {

// Variables of one scope. The root scope (context, globals, top-level sets) is indexed by symbol; the scopes of
// loops, macro calls and call blocks are small lists that fall back on their parent.
class scope {
  public:
    explicit scope(size_t symbol_count) : dense_(symbol_count), present_(symbol_count, false) {}
    explicit scope(scope *parent) : parent_(parent) {}

    const value *find(symbol name) const;
    void set(symbol name, value v);

  private:
    scope *parent_ = nullptr;
    std::vector<std::pair<symbol, value>> local_;
    std::vector<value> dense_;
    std::vector<bool> present_;
};

// Text being rendered into (the whole output, or a macro's, set block's or filter block's own). All buffers of a
// render together stay within max_output_bytes.
class output_buffer {
  public:
    explicit output_buffer(render_context &ctx) : ctx_(ctx) {}
    output_buffer(const output_buffer &) = delete;
    output_buffer &operator=(const output_buffer &) = delete;
    ~output_buffer() { ctx_.release_output(text_.size()); }

    void append(std::string_view s) {
        ctx_.reserve_output(s.size());
        text_.append(s);
    }
    size_t size() const { return text_.size(); }
    void truncate(size_t size) {
        ctx_.release_output(text_.size() - size);
        text_.resize(size);
    }
    std::string take() {
        ctx_.release_output(text_.size());
        std::string text = std::move(text_);
        text_.clear();
        return text;
    }

  private:
    render_context &ctx_;
    std::string text_;
};

enum class flow : uint8_t { normal, break_loop, continue_loop };

class interpreter {
  public:
    interpreter(const program &p, const render_options &options);
    interpreter(const interpreter &) = delete;
    interpreter &operator=(const interpreter &) = delete;
    ~interpreter();

    std::string render(const nlohmann::ordered_json &context);

    render_context &context() { return ctx_; }
    std::tm now() const;
    // For filters that apply other filters or tests by name (map, select, selectattr, ...).
    value apply_filter(std::string_view name, value operand, call_arguments &args);
    bool apply_test(std::string_view name, const value &operand, call_arguments &args);
    // `a in b` as the operator computes it.
    bool contains(const value &container, const value &item);

  private:
    value evaluate(const expression &e, scope &s);
    value evaluate_node(const expression &e, scope &s);
    value evaluate_member(const member_expression &e, scope &s);
    value evaluate_slice(const slice_expression &e, scope &s);
    value evaluate_call(const call_expression &e, scope &s);
    value evaluate_binary(const binary_expression &e, scope &s);
    value evaluate_unary(const unary_expression &e, scope &s);
    value evaluate_filter(const filter_call &f, value operand, scope &s);
    call_arguments evaluate_arguments(const std::vector<argument> &arguments, scope &s);
    // object.property: a value, a method to call with object, or undefined.
    value member_of(const value &object, const value &property, method_function *method);
    value call(const value &callee, call_arguments &args, scope &s, const expression *callee_expression);
    value call_macro(const macro_statement &m, call_arguments &args, scope &caller_scope);
    void bind_arguments(std::string_view name, const std::vector<argument> &parameters, bool reads_varargs,
                        bool reads_kwargs, call_arguments &args, scope &target);

    flow execute_block(const block &b, scope &s, output_buffer &out);
    flow execute(const statement &st, scope &s, output_buffer &out);
    flow execute_for(const for_statement &st, scope &s, output_buffer &out);
    flow execute_set(const set_statement &st, scope &s);
    value execute_call_block(const call_statement &st, scope &s);
    void assign_targets(const std::vector<symbol> &targets, bool unpack, const value &v, scope &s);
    void print(const value &v, output_buffer &out);

    [[noreturn]] void fail_at(uint32_t offset, const std::string &message) const;
    [[noreturn]] void raise_at(uint32_t offset, const std::string &message) const;

    render_context ctx_; // first member: every value of the render is gone before its budget
    const program &program_;
    const render_options &options_;
    int depth_ = 0;
};

} // namespace strata::chat::jinja
