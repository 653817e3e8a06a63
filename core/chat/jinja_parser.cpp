// The Jinja parser: recursive descent over the lexer's tokens, with @huggingface/jinja's precedence
// (or < and < not < comparison/in < + - ~ < * / // % < ** < is < | < sign < member/call < primary).
#include "chat/jinja_parser.hpp"

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_lexer.hpp"
#include "chat/jinja_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

namespace strata::chat::jinja {

namespace {

class parser {
  public:
    parser(std::vector<token> tokens, program &p, const parse_limits &limits)
        : tokens_(std::move(tokens)), program_(p), limits_(limits) {
        p.loop_symbol = p.symbols.intern("loop");
        p.caller_symbol = p.symbols.intern("caller");
        p.varargs_symbol = p.symbols.intern("varargs");
        p.kwargs_symbol = p.symbols.intern("kwargs");
    }

    void run() {
        while (peek()) {
            if (statement_ptr st = parse_any()) program_.body.push_back(std::move(st));
        }
    }

  private:
    // Bounds the parser's recursion (blocks in blocks, parentheses, chains of signs and `not`).
    class nesting_guard {
      public:
        explicit nesting_guard(parser &p) : p_(p) {
            if (++p_.nesting_ > p_.limits_.max_nesting)
                p_.error(fmt::format("the template nests deeper than {} levels (parse_limits.max_nesting)",
                                     p_.limits_.max_nesting),
                         p_.here());
        }
        nesting_guard(const nesting_guard &) = delete;
        nesting_guard &operator=(const nesting_guard &) = delete;
        ~nesting_guard() { --p_.nesting_; }

      private:
        parser &p_;
    };

    // Where break and continue may appear: inside a for loop of the same macro or call block.
    struct body_context {
        bool *reads_varargs;
        bool *reads_kwargs;
    };

    [[noreturn]] void error(std::string message, uint32_t offset) const {
        throw syntax_error{std::move(message), offset};
    }

    const token *peek(size_t ahead = 0) const { return i_ + ahead < tokens_.size() ? &tokens_[i_ + ahead] : nullptr; }
    uint32_t here() const { return peek() ? peek()->offset : static_cast<uint32_t>(program_.source.size()); }
    bool is(token_kind kind, size_t ahead = 0) const {
        const token *t = peek(ahead);
        return t && t->kind == kind;
    }
    bool is_name(std::string_view name, size_t ahead = 0) const {
        const token *t = peek(ahead);
        return t && t->kind == token_kind::identifier && t->text == name;
    }
    bool at_statement(std::initializer_list<std::string_view> names) const {
        if (!is(token_kind::open_statement) || !is(token_kind::identifier, 1)) return false;
        return std::find(names.begin(), names.end(), peek(1)->text) != names.end();
    }
    std::string describe_next() const {
        const token *t = peek();
        if (!t) return "the end of the template";
        if (t->kind == token_kind::identifier || t->kind == token_kind::number) return "'" + t->text + "'";
        if (t->kind == token_kind::string) return "a string";
        return token_kind_name(t->kind);
    }
    const token &expect(token_kind kind, std::string_view what) {
        if (!is(kind)) error(fmt::format("expected {}, found {}", what, describe_next()), here());
        return tokens_[i_++];
    }
    void expect_end_tag(std::string_view name) {
        expect(token_kind::open_statement, fmt::format("{{% {} %}}", name));
        if (!is_name(name)) error(fmt::format("expected {{% {} %}}, found {}", name, describe_next()), here());
        ++i_;
        expect(token_kind::close_statement, "'%}'");
    }

    void measure(expression &e, std::initializer_list<const expression *> children) {
        for (const expression *c : children)
            if (c) e.height = std::max(e.height, c->height + 1);
        check_height(e);
    }
    void check_height(const expression &e) {
        if (e.height > limits_.max_nesting)
            error(
                fmt::format("expression nested deeper than {} levels (parse_limits.max_nesting)", limits_.max_nesting),
                e.offset);
    }

    // --- statements ---

    statement_ptr parse_any() {
        const token &t = *peek();
        switch (t.kind) {
        case token_kind::comment: ++i_; return nullptr;
        case token_kind::text:
        case token_kind::raw_text:
            ++i_;
            if (t.text.empty()) return nullptr;
            return std::make_unique<text_statement>(t.offset, constant_string(t.text));
        case token_kind::open_statement: return parse_statement();
        case token_kind::open_expression: {
            ++i_;
            auto out = std::make_unique<output_statement>(t.offset);
            out->value = parse_expression();
            expect(token_kind::close_expression, "'}}' to close the expression");
            return out;
        }
        default: error(fmt::format("unexpected {}", describe_next()), t.offset);
        }
    }

    block parse_until(std::initializer_list<std::string_view> end_names, std::string_view opening, uint32_t offset) {
        block b;
        while (!at_statement(end_names)) {
            if (!peek())
                error(fmt::format("{{% {} %}} is never closed with {{% {} %}}", opening, *end_names.begin()), offset);
            if (statement_ptr st = parse_any()) b.push_back(std::move(st));
        }
        return b;
    }

    statement_ptr parse_statement() {
        nesting_guard guard(*this);
        const uint32_t offset = tokens_[i_++].offset;
        if (!is(token_kind::identifier))
            error(fmt::format("expected a statement name after '{{%', found {}", describe_next()), here());
        const std::string name = tokens_[i_++].text;
        if (name == "set") return parse_set(offset);
        if (name == "if") return parse_if(offset);
        if (name == "for") return parse_for(offset);
        if (name == "macro") return parse_macro(offset);
        if (name == "call") return parse_call_block(offset);
        if (name == "filter") return parse_filter_block(offset);
        if (name == "break" || name == "continue") {
            if (loop_depth_ == 0) error(fmt::format("{{% {} %}} outside a for loop", name), offset);
            expect(token_kind::close_statement, "'%}'");
            return std::make_unique<statement>(
                name == "break" ? statement_kind::loop_break : statement_kind::loop_continue, offset);
        }
        static constexpr std::string_view closers[] = {"elif",     "else",    "endif",     "endfor", "endset",
                                                       "endmacro", "endcall", "endfilter", "endraw"};
        if (std::find(std::begin(closers), std::end(closers), name) != std::end(closers))
            error(fmt::format("{{% {} %}} without the block it belongs to", name), offset);
        static constexpr std::string_view unsupported[] = {"include", "import", "from",       "extends", "block",
                                                           "with",    "do",     "autoescape", "trans"};
        if (std::find(std::begin(unsupported), std::end(unsupported), name) != std::end(unsupported))
            error(fmt::format("{{% {} %}} is not supported in chat templates", name), offset);
        error(fmt::format("unknown statement '{}'", name), offset);
    }

    statement_ptr parse_set(uint32_t offset) {
        auto st = std::make_unique<set_statement>(offset);
        expression_ptr target = parse_expression_sequence(false);
        if (target->kind == expression_kind::name) {
            st->targets.push_back(static_cast<name_expression &>(*target).name);
        } else if (target->kind == expression_kind::list && static_cast<list_expression &>(*target).tuple) {
            for (const expression_ptr &item : static_cast<list_expression &>(*target).items) {
                if (item->kind != expression_kind::name) error("{% set %} can unpack into names only", item->offset);
                st->targets.push_back(static_cast<name_expression &>(*item).name);
            }
            st->unpack = true;
        } else if (target->kind == expression_kind::member && !static_cast<member_expression &>(*target).key &&
                   static_cast<member_expression &>(*target).attribute.is_string()) {
            auto &m = static_cast<member_expression &>(*target);
            st->name_space = std::move(m.object);
            st->attribute = m.attribute.as_string();
        } else {
            error("{% set %} assigns to a name, names (a, b) or a namespace attribute (ns.name)", target->offset);
        }
        if (is(token_kind::equals)) {
            ++i_;
            st->value = parse_expression_sequence(false);
            expect(token_kind::close_statement, "'%}'");
        } else {
            expect(token_kind::close_statement, "'=' or '%}'");
            st->body = parse_until({"endset"}, "set", offset);
            expect_end_tag("endset");
        }
        return st;
    }

    statement_ptr parse_if(uint32_t offset) {
        auto st = std::make_unique<if_statement>(offset);
        expression_ptr condition = parse_expression();
        expect(token_kind::close_statement, "'%}'");
        block body = parse_until({"elif", "else", "endif"}, "if", offset);
        st->branches.emplace_back(std::move(condition), std::move(body));
        while (at_statement({"elif"})) {
            i_ += 2;
            condition = parse_expression();
            expect(token_kind::close_statement, "'%}'");
            body = parse_until({"elif", "else", "endif"}, "if", offset);
            st->branches.emplace_back(std::move(condition), std::move(body));
        }
        if (at_statement({"else"})) {
            i_ += 2;
            expect(token_kind::close_statement, "'%}'");
            st->otherwise = parse_until({"endif"}, "if", offset);
        }
        expect_end_tag("endif");
        return st;
    }

    statement_ptr parse_for(uint32_t offset) {
        auto st = std::make_unique<for_statement>(offset);
        const expression_ptr target = parse_expression_sequence(true);
        if (target->kind == expression_kind::name) {
            st->targets.push_back(static_cast<name_expression &>(*target).name);
        } else if (target->kind == expression_kind::list && static_cast<list_expression &>(*target).tuple) {
            for (const expression_ptr &item : static_cast<list_expression &>(*target).items) {
                if (item->kind != expression_kind::name) error("a for loop unpacks into names only", item->offset);
                st->targets.push_back(static_cast<name_expression &>(*item).name);
            }
            st->unpack = true;
        } else {
            error("expected a name or names (a, b) after 'for'", target->offset);
        }
        if (!is_name("in"))
            error(fmt::format("expected 'in' after the loop variable, found {}", describe_next()), here());
        ++i_;
        st->iterable = parse_expression();
        if (st->iterable->kind == expression_kind::conditional) {
            // `for x in items if condition`: the condition filters the items.
            auto &c = static_cast<conditional_expression &>(*st->iterable);
            if (!c.otherwise) {
                st->filter = std::move(c.condition);
                st->iterable = std::move(c.then);
            }
        }
        expect(token_kind::close_statement, "'%}'");
        ++loop_depth_;
        st->body = parse_until({"endfor", "else"}, "for", offset);
        --loop_depth_;
        if (at_statement({"else"})) {
            i_ += 2;
            expect(token_kind::close_statement, "'%}'");
            st->otherwise = parse_until({"endfor"}, "for", offset);
        }
        expect_end_tag("endfor");
        return st;
    }

    statement_ptr parse_macro(uint32_t offset) {
        auto st = std::make_unique<macro_statement>(offset);
        const token &name = expect(token_kind::identifier, "the macro's name");
        st->text = name.text;
        st->name = program_.symbols.intern(name.text);
        st->parameters = parse_arguments(true);
        expect(token_kind::close_statement, "'%}'");
        st->body = parse_body({&st->reads_varargs, &st->reads_kwargs}, "macro", offset, "endmacro");
        expect_end_tag("endmacro");
        return st;
    }

    statement_ptr parse_call_block(uint32_t offset) {
        auto st = std::make_unique<call_statement>(offset);
        if (is(token_kind::open_paren)) st->parameters = parse_arguments(true);
        const token &name = expect(token_kind::identifier, "the name of the macro to call");
        st->call = std::make_unique<call_expression>(name.offset);
        st->call->callee = make_name(name);
        st->call->arguments = parse_arguments(false);
        expect(token_kind::close_statement, "'%}'");
        st->body = parse_body({&st->reads_varargs, &st->reads_kwargs}, "call", offset, "endcall");
        expect_end_tag("endcall");
        return st;
    }

    // The body of a macro or call block: its own function, where break/continue of an outer loop do not reach.
    block parse_body(body_context context, std::string_view opening, uint32_t offset, std::string_view end) {
        const int saved_loop_depth = loop_depth_;
        loop_depth_ = 0;
        bodies_.push_back(context);
        block b = parse_until({end}, opening, offset);
        bodies_.pop_back();
        loop_depth_ = saved_loop_depth;
        return b;
    }

    statement_ptr parse_filter_block(uint32_t offset) {
        auto st = std::make_unique<filter_statement>(offset);
        do {
            if (!st->filters.empty()) ++i_; // the '|' between chained filters
            st->filters.push_back(parse_filter_call());
        } while (is(token_kind::pipe));
        expect(token_kind::close_statement, "'%}'");
        st->body = parse_until({"endfilter"}, "filter", offset);
        expect_end_tag("endfilter");
        return st;
    }

    filter_call parse_filter_call() {
        const token &name = expect(token_kind::identifier, "a filter name");
        filter_call f;
        f.name = name.text;
        f.function = find_filter(name.text);
        f.offset = name.offset;
        if (is(token_kind::open_paren)) {
            f.arguments = parse_arguments(false);
            f.called = true;
        }
        return f;
    }

    // --- expressions ---

    expression_ptr parse_expression() {
        nesting_guard guard(*this);
        return parse_conditional();
    }

    expression_ptr parse_conditional() {
        expression_ptr a = parse_or();
        if (!is_name("if")) return a;
        auto c = std::make_unique<conditional_expression>(peek()->offset);
        ++i_;
        c->condition = parse_or();
        c->then = std::move(a);
        if (is_name("else")) {
            ++i_;
            nesting_guard guard(*this);
            c->otherwise = parse_conditional();
        }
        measure(*c, {c->condition.get(), c->then.get(), c->otherwise.get()});
        return c;
    }

    expression_ptr binary(binary_operator op, uint32_t offset, expression_ptr left, expression_ptr right) {
        auto b = std::make_unique<binary_expression>(offset, op);
        b->left = std::move(left);
        b->right = std::move(right);
        measure(*b, {b->left.get(), b->right.get()});
        return b;
    }

    expression_ptr parse_or() {
        expression_ptr left = parse_and();
        while (is_name("or")) {
            const uint32_t offset = tokens_[i_++].offset;
            left = binary(binary_operator::logical_or, offset, std::move(left), parse_and());
        }
        return left;
    }

    expression_ptr parse_and() {
        expression_ptr left = parse_not();
        while (is_name("and")) {
            const uint32_t offset = tokens_[i_++].offset;
            left = binary(binary_operator::logical_and, offset, std::move(left), parse_not());
        }
        return left;
    }

    expression_ptr parse_not() {
        if (!is_name("not")) return parse_comparison();
        auto u = std::make_unique<unary_expression>(tokens_[i_++].offset, unary_operator::logical_not);
        nesting_guard guard(*this);
        u->operand = parse_not();
        measure(*u, {u->operand.get()});
        return u;
    }

    expression_ptr parse_comparison() {
        expression_ptr left = parse_additive();
        while (true) {
            const uint32_t offset = here();
            binary_operator op;
            if (is_name("not") && is_name("in", 1)) {
                op = binary_operator::not_in;
                i_ += 2;
            } else if (is_name("in")) {
                op = binary_operator::in;
                ++i_;
            } else if (is(token_kind::comparison)) {
                const std::string &text = tokens_[i_++].text;
                op = text == "=="   ? binary_operator::equal
                     : text == "!=" ? binary_operator::not_equal
                     : text == "<"  ? binary_operator::less
                     : text == ">"  ? binary_operator::greater
                     : text == "<=" ? binary_operator::less_equal
                                    : binary_operator::greater_equal;
            } else {
                return left;
            }
            left = binary(op, offset, std::move(left), parse_additive());
        }
    }

    expression_ptr parse_additive() {
        expression_ptr left = parse_multiplicative();
        while (is(token_kind::additive)) {
            const token &t = tokens_[i_++];
            const binary_operator op = t.text == "+"   ? binary_operator::add
                                       : t.text == "-" ? binary_operator::subtract
                                                       : binary_operator::concat;
            left = binary(op, t.offset, std::move(left), parse_multiplicative());
        }
        return left;
    }

    expression_ptr parse_multiplicative() {
        expression_ptr left = parse_power();
        while (is(token_kind::multiplicative)) {
            const token &t = tokens_[i_++];
            const binary_operator op = t.text == "*"    ? binary_operator::multiply
                                       : t.text == "/"  ? binary_operator::divide
                                       : t.text == "//" ? binary_operator::floor_divide
                                                        : binary_operator::modulo;
            left = binary(op, t.offset, std::move(left), parse_power());
        }
        return left;
    }

    // Left-associative, as in Jinja2: 2 ** 3 ** 2 is (2 ** 3) ** 2.
    expression_ptr parse_power() {
        expression_ptr left = parse_test();
        while (is(token_kind::power)) {
            const uint32_t offset = tokens_[i_++].offset;
            left = binary(binary_operator::power, offset, std::move(left), parse_test());
        }
        return left;
    }

    // Whether a bare test argument follows (`is divisibleby 3`, `is sameas none`), where @huggingface/jinja would
    // have nothing valid to read.
    bool test_argument_follows() const {
        const token *t = peek();
        if (!t) return false;
        switch (t->kind) {
        case token_kind::number:
        case token_kind::string:
        case token_kind::open_bracket:
        case token_kind::open_brace: return true;
        case token_kind::identifier: {
            static constexpr std::string_view operators[] = {"is", "in", "not", "and", "or", "if", "else"};
            return std::find(std::begin(operators), std::end(operators), t->text) == std::end(operators);
        }
        default: return false;
        }
    }

    expression_ptr parse_test() {
        expression_ptr operand = parse_filter();
        while (is_name("is")) {
            auto t = std::make_unique<test_expression>(tokens_[i_++].offset);
            if (is_name("not")) {
                t->negated = true;
                ++i_;
            }
            const token &name = expect(token_kind::identifier, "a test name after 'is'");
            t->name = name.text;
            t->function = find_test(name.text);
            t->operand = std::move(operand);
            if (is(token_kind::open_paren)) {
                t->arguments = parse_arguments(false);
            } else if (test_argument_follows()) {
                t->arguments.push_back(argument{argument_kind::positional, "", 0, parse_postfix(parse_primary())});
            }
            measure(*t, {t->operand.get()});
            for (const argument &a : t->arguments) measure(*t, {a.value.get()});
            operand = std::move(t);
        }
        return operand;
    }

    expression_ptr parse_filter() {
        expression_ptr operand = parse_unary_sign();
        while (is(token_kind::pipe)) {
            ++i_;
            auto f = std::make_unique<filter_expression>(here());
            f->filter = parse_filter_call();
            f->operand = std::move(operand);
            measure(*f, {f->operand.get()});
            for (const argument &a : f->filter.arguments) measure(*f, {a.value.get()});
            operand = parse_postfix(std::move(f));
        }
        return operand;
    }

    expression_ptr parse_unary_sign() {
        const token *t = peek();
        if (t && (t->kind == token_kind::unary || t->kind == token_kind::additive) &&
            (t->text == "-" || t->text == "+")) {
            auto u = std::make_unique<unary_expression>(t->offset,
                                                        t->text == "-" ? unary_operator::negate : unary_operator::plus);
            ++i_;
            nesting_guard guard(*this);
            u->operand = parse_unary_sign();
            measure(*u, {u->operand.get()});
            return u;
        }
        return parse_postfix(parse_primary());
    }

    // object.name, object.0, object[key], object[a:b:c], callee(arguments), in any order and number.
    expression_ptr parse_postfix(expression_ptr e) {
        while (true) {
            if (is(token_kind::dot)) {
                ++i_;
                auto m = std::make_unique<member_expression>(here());
                const token *t = peek();
                if (t && t->kind == token_kind::identifier) {
                    m->attribute = constant_string(t->text);
                } else if (t && t->kind == token_kind::number && t->text.find('.') == std::string::npos) {
                    m->attribute = value::integer(js_string_to_number(t->text));
                } else {
                    error(fmt::format("expected a name or an integer after '.', found {}", describe_next()), here());
                }
                ++i_;
                m->object = std::move(e);
                measure(*m, {m->object.get()});
                e = std::move(m);
            } else if (is(token_kind::open_bracket)) {
                e = parse_subscript(std::move(e));
            } else if (is(token_kind::open_paren)) {
                auto c = std::make_unique<call_expression>(e->offset);
                c->arguments = parse_arguments(false);
                c->callee = std::move(e);
                measure(*c, {c->callee.get()});
                for (const argument &a : c->arguments) measure(*c, {a.value.get()});
                e = std::move(c);
            } else {
                return e;
            }
        }
    }

    expression_ptr parse_subscript(expression_ptr object) {
        const uint32_t offset = tokens_[i_++].offset;
        std::vector<expression_ptr> parts;
        bool slice = false;
        while (!is(token_kind::close_bracket)) {
            if (!peek()) error("'[' is never closed with ']'", offset);
            if (is(token_kind::colon)) {
                parts.push_back(nullptr);
                ++i_;
                slice = true;
            } else {
                parts.push_back(parse_expression());
                if (is(token_kind::colon)) {
                    ++i_;
                    slice = true;
                }
            }
        }
        ++i_;
        if (parts.empty()) error("expected an index or a slice inside '[]'", offset);
        if (slice) {
            if (parts.size() > 3) error("a slice has at most three parts: [start:stop:step]", offset);
            auto s = std::make_unique<slice_expression>(offset);
            s->object = std::move(object);
            parts.resize(3);
            s->start = std::move(parts[0]);
            s->stop = std::move(parts[1]);
            s->step = std::move(parts[2]);
            measure(*s, {s->object.get(), s->start.get(), s->stop.get(), s->step.get()});
            return s;
        }
        // Like @huggingface/jinja, `a[x y]` reads as a[x].
        auto m = std::make_unique<member_expression>(offset);
        m->object = std::move(object);
        m->key = std::move(parts[0]);
        measure(*m, {m->object.get(), m->key.get()});
        return m;
    }

    expression_ptr make_name(const token &t) {
        const symbol id = program_.symbols.intern(t.text);
        if (t.text == "loop") program_.reads_loop = true;
        for (const body_context &b : bodies_) {
            if (t.text == "varargs") *b.reads_varargs = true;
            if (t.text == "kwargs") *b.reads_kwargs = true;
        }
        return std::make_unique<name_expression>(t.offset, id, t.text);
    }

    expression_ptr parse_primary() {
        if (!peek()) error("unexpected end of the template in an expression", here());
        const token &t = tokens_[i_++];
        switch (t.kind) {
        case token_kind::number: {
            const double v = js_string_to_number(t.text);
            return std::make_unique<literal_expression>(
                t.offset, t.text.find('.') == std::string::npos ? value::integer(v) : value::floating(v));
        }
        case token_kind::string: {
            std::string text = t.text;
            while (is(token_kind::string)) text += tokens_[i_++].text; // 'a' 'b' is 'ab'
            return std::make_unique<literal_expression>(t.offset, constant_string(std::move(text)));
        }
        case token_kind::identifier:
            if (t.text == "true" || t.text == "True")
                return std::make_unique<literal_expression>(t.offset, value::boolean(true));
            if (t.text == "false" || t.text == "False")
                return std::make_unique<literal_expression>(t.offset, value::boolean(false));
            if (t.text == "none" || t.text == "None")
                return std::make_unique<literal_expression>(t.offset, value::none());
            return make_name(t);
        case token_kind::open_paren: {
            expression_ptr e = parse_expression_sequence(false);
            expect(token_kind::close_paren, "')'");
            return e;
        }
        case token_kind::open_bracket: {
            auto l = std::make_unique<list_expression>(t.offset, false);
            while (!is(token_kind::close_bracket)) {
                if (!peek()) error("'[' is never closed with ']'", t.offset);
                l->items.push_back(parse_expression());
                measure(*l, {l->items.back().get()});
                if (is(token_kind::comma)) ++i_;
            }
            ++i_;
            return l;
        }
        case token_kind::open_brace: {
            auto d = std::make_unique<dict_expression>(t.offset);
            while (!is(token_kind::close_brace)) {
                if (!peek()) error("'{' is never closed with '}'", t.offset);
                expression_ptr key = parse_expression();
                expect(token_kind::colon, "':' between a key and its value");
                expression_ptr v = parse_expression();
                measure(*d, {key.get(), v.get()});
                d->entries.emplace_back(std::move(key), std::move(v));
                if (is(token_kind::comma)) ++i_;
            }
            ++i_;
            return d;
        }
        default: error(fmt::format("unexpected {} in an expression", token_kind_name(t.kind)), t.offset);
        }
    }

    // a or a, b, c (a tuple); with primary_only the items are primaries (a for loop's targets).
    expression_ptr parse_expression_sequence(bool primary_only) {
        const auto item = [&] { return primary_only ? parse_primary() : parse_expression(); };
        expression_ptr first = item();
        if (!is(token_kind::comma)) return first;
        auto tuple = std::make_unique<list_expression>(first->offset, true);
        tuple->items.push_back(std::move(first));
        while (is(token_kind::comma)) {
            ++i_;
            tuple->items.push_back(item());
            measure(*tuple, {tuple->items.back().get()});
        }
        measure(*tuple, {tuple->items.front().get()});
        return tuple;
    }

    // (arguments) of a call, or (parameters) of a macro or call block.
    std::vector<argument> parse_arguments(bool parameters) {
        const uint32_t offset = expect(token_kind::open_paren, "'('").offset;
        std::vector<argument> args;
        bool saw_keyword = false, saw_spread = false;
        while (!is(token_kind::close_paren)) {
            if (!peek()) error("'(' is never closed with ')'", offset);
            const bool keyword_spread = is(token_kind::power);
            const bool positional_spread = is(token_kind::multiplicative) && peek()->text == "*";
            if (parameters && (keyword_spread || positional_spread))
                error("a parameter list cannot unpack arguments (* or **)", here());
            if (keyword_spread) {
                ++i_;
                args.push_back(argument{argument_kind::spread_keyword, "", 0, parse_expression()});
                if (is(token_kind::comma)) ++i_;
                if (!is(token_kind::close_paren)) error("**argument must be the last argument", here());
                break;
            }
            if (positional_spread) {
                if (saw_spread) error("only one *argument may be unpacked", here());
                saw_spread = true;
                ++i_;
                args.push_back(argument{argument_kind::spread_positional, "", 0, parse_expression()});
            } else {
                const uint32_t at = here();
                expression_ptr e = parse_expression();
                argument a{argument_kind::positional, "", 0, nullptr};
                if (is(token_kind::equals)) {
                    ++i_;
                    if (e->kind != expression_kind::name)
                        error(parameters ? "expected a parameter name before '='"
                                         : "expected an argument name before '='",
                              at);
                    a.kind = argument_kind::keyword;
                    a.name = static_cast<name_expression &>(*e).text;
                    a.value = parse_expression();
                } else if (parameters) {
                    if (e->kind != expression_kind::name) error("expected a parameter name", at);
                    a.name = static_cast<name_expression &>(*e).text;
                } else {
                    a.value = std::move(e);
                }
                if (parameters) {
                    for (const argument &other : args)
                        if (other.name == a.name) error(fmt::format("parameter '{}' is declared twice", a.name), at);
                    a.name_symbol = program_.symbols.intern(a.name);
                }
                if (a.kind == argument_kind::keyword) {
                    saw_keyword = true;
                } else if (saw_keyword) {
                    error(parameters ? "a parameter without a default follows one with a default"
                                     : "positional arguments must come before keyword arguments",
                          at);
                } else if (saw_spread) {
                    error("positional arguments must not follow *argument", at);
                }
                args.push_back(std::move(a));
            }
            if (is(token_kind::comma)) ++i_;
        }
        ++i_;
        return args;
    }

    std::vector<token> tokens_;
    size_t i_ = 0;
    program &program_;
    const parse_limits &limits_;
    int nesting_ = 0;
    int loop_depth_ = 0;
    std::vector<body_context> bodies_;
};

} // namespace

symbol symbol_table::intern(std::string_view name) {
    const auto it = ids.find(std::string(name));
    if (it != ids.end()) return it->second;
    const auto id = static_cast<symbol>(names.size());
    names.emplace_back(name);
    ids.emplace(std::string(name), id);
    return id;
}

std::optional<symbol> symbol_table::find(std::string_view name) const {
    const auto it = ids.find(std::string(name));
    if (it == ids.end()) return std::nullopt;
    return it->second;
}

std::shared_ptr<const program> parse_program(std::string_view source, std::string_view origin,
                                             const parse_limits &limits) {
    auto p = std::make_shared<program>();
    p->origin = origin;
    if (source.size() > limits.max_source_bytes)
        throw error(
            fmt::format("{}: the template is {} bytes long; at most {} are accepted (parse_limits.max_source_bytes)",
                        origin, source.size(), limits.max_source_bytes));
    p->source = sanitize_utf8(source);
    try {
        parser(tokenize(p->source), *p, limits).run();
    } catch (const syntax_error &e) {
        throw error(fmt::format("{}: {}\n{}", source_location(*p, e.offset), e.message, source_excerpt(*p, e.offset)));
    }
    return p;
}

std::string source_location(const program &p, uint32_t offset) {
    const std::string_view s = p.source;
    const size_t end = std::min<size_t>(offset, s.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < end; ++i) {
        if (s[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    }
    const size_t column = code_point_count(s.substr(line_start, end - line_start)) + 1;
    return fmt::format("{}:{}:{}", p.origin, line, column);
}

std::string source_excerpt(const program &p, uint32_t offset) {
    const std::string_view s = p.source;
    const size_t at = std::min<size_t>(offset, s.size());
    size_t begin = at;
    while (begin > 0 && s[begin - 1] != '\n') --begin;
    size_t end = s.find('\n', at);
    if (end == std::string_view::npos) end = s.size();
    // Long lines: keep up to 60 code points before the column and 60 after.
    constexpr size_t context = 60;
    std::string_view before = s.substr(begin, at - begin), after = s.substr(at, end - at);
    std::string lead;
    if (code_point_count(before) > context) {
        size_t cut = before.size();
        for (size_t n = 0; n < context && cut > 0;) {
            --cut;
            if ((static_cast<unsigned char>(before[cut]) & 0xC0) != 0x80) ++n;
        }
        before = before.substr(cut);
        lead = "...";
    }
    std::string tail;
    if (code_point_count(after) > context) {
        size_t cut = 0;
        for (size_t n = 0; n < context && cut < after.size(); ++n) next_code_point(after, cut);
        after = after.substr(0, cut);
        tail = "...";
    }
    std::string caret = "    " + std::string(lead.size(), ' ');
    for (size_t i = 0; i < before.size();) {
        const char32_t c = next_code_point(before, i);
        caret += c == '\t' ? '\t' : ' ';
    }
    return fmt::format("    {}{}{}{}\n{}^", lead, before, after, tail, caret);
}

} // namespace strata::chat::jinja
