// The Jinja lexer: @huggingface/jinja's preprocessing passes and tokenizer, with source offsets kept through both.
#include "chat/jinja_lexer.hpp"

#include "chat/jinja_text.hpp"

#include <fmt/format.h>

#include <optional>

namespace strata::chat::jinja {

namespace {

// Text being preprocessed, with the source offset of each byte (and of the end).
struct mapped_text {
    std::string text;
    std::vector<uint32_t> origin;

    void append(const mapped_text &from, size_t begin, size_t end) {
        text.append(from.text, begin, end - begin);
        origin.insert(origin.end(), from.origin.begin() + static_cast<std::ptrdiff_t>(begin),
                      from.origin.begin() + static_cast<std::ptrdiff_t>(end));
    }
    void finish(const mapped_text &from) { origin.push_back(from.origin.back()); }
    void reserve_for(const mapped_text &from) {
        text.reserve(from.text.size());
        origin.reserve(from.origin.size());
    }
};

// Whether s has `prefix` (not empty) at i; the first byte is compared first, as it rarely matches.
bool starts_with_at(std::string_view s, size_t i, std::string_view prefix) {
    return i < s.size() && s[i] == prefix[0] && s.substr(i, prefix.size()) == prefix;
}

// lstrip_blocks: spaces and tabs at the start of a line go when "{#", "{%" or "{-" follows them
// (/^[ \t]*({[#%-])/gm; a line starts after \n, \r, U+2028 or U+2029).
mapped_text strip_block_indentation(const mapped_text &in) {
    mapped_text out;
    out.reserve_for(in);
    const std::string &s = in.text;
    size_t copied = 0;
    bool line_start = true;
    for (size_t i = 0; i < s.size();) {
        if (line_start) {
            size_t j = i;
            while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
            if (j > i && j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
                out.append(in, copied, i);
                copied = j;
            }
        }
        const char c = s[i];
        const bool separator =
            static_cast<unsigned char>(c) == 0xE2 && (starts_with_at(s, i, "\u2028") || starts_with_at(s, i, "\u2029"));
        line_start = c == '\n' || c == '\r' || separator;
        i += separator ? 3 : 1;
    }
    out.append(in, copied, s.size());
    out.finish(in);
    return out;
}

// trim_blocks: the newline right after "#}", "%}" or "-}" goes (/([#%-]})\n/g).
mapped_text drop_newline_after_blocks(const mapped_text &in) {
    mapped_text out;
    out.reserve_for(in);
    const std::string &s = in.text;
    size_t copied = 0;
    for (size_t i = 2; i < s.size(); ++i) {
        if (s[i] == '\n' && s[i - 1] == '}' && (s[i - 2] == '#' || s[i - 2] == '%' || s[i - 2] == '-')) {
            out.append(in, copied, i);
            copied = i + 1;
        }
    }
    out.append(in, copied, s.size());
    out.finish(in);
    return out;
}

// transformers' {% generation %} / {% endgeneration %} tags vanish, with the whitespace around them unless a '-'
// asks to strip it (/(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs).
mapped_text remove_generation_tags(const mapped_text &in) {
    mapped_text out;
    out.reserve_for(in);
    const std::string &s = in.text;
    size_t copied = 0;   // s[0, copied) is in `out` already
    size_t searched = 0; // where the previous match ended
    for (size_t pos = s.find("{%"); pos != std::string::npos; pos = s.find("{%", pos + 1)) {
        size_t i = pos + 2;
        const bool strip_before = i < s.size() && s[i] == '-';
        if (strip_before) ++i;
        i += js_space_run(s, i);
        if (starts_with_at(s, i, "end")) i += 3;
        if (!starts_with_at(s, i, "generation")) continue;
        i += 10;
        i += js_space_run(s, i);
        const bool strip_after = i < s.size() && s[i] == '-';
        if (strip_after) ++i;
        if (!starts_with_at(s, i, "%}")) continue;
        i += 2;
        // The whitespace before the tag, back to the previous match at most.
        size_t before = pos;
        while (before > searched) {
            size_t back = before - 1;
            while (back > searched && (static_cast<unsigned char>(s[back]) & 0xC0) == 0x80) --back;
            size_t probe = back;
            if (!is_js_space(next_code_point(s, probe))) break;
            before = back;
        }
        const size_t after = i + js_space_run(s, i);
        out.append(in, copied, before);
        if (!strip_before) out.append(in, before, pos);
        if (!strip_after) out.append(in, i, after);
        copied = after;
        searched = after;
        pos = after - 1;
    }
    out.append(in, copied, s.size());
    out.finish(in);
    return out;
}

mapped_text preprocess(std::string_view source) {
    mapped_text text;
    text.text.assign(source);
    text.origin.resize(source.size() + 1);
    for (size_t i = 0; i <= source.size(); ++i) text.origin[i] = static_cast<uint32_t>(i);
    if (!text.text.empty() && text.text.back() == '\n') {
        text.text.pop_back();
        text.origin.erase(text.origin.end() - 2);
    }
    return remove_generation_tags(drop_newline_after_blocks(strip_block_indentation(text)));
}

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

struct fixed_token {
    size_t length;
    token_kind kind;
};

class lexer {
  public:
    explicit lexer(std::string_view source) : text_(preprocess(source)), s_(text_.text) {}

    std::vector<token> run() {
        tokens_.reserve(s_.size() / 8);
        while (pos_ < s_.size()) step();
        return std::move(tokens_);
    }

  private:
    [[noreturn]] void error(std::string message, size_t at) const {
        throw syntax_error{std::move(message), text_.origin[std::min(at, s_.size())]};
    }

    void push(token_kind kind, std::string text, size_t at) {
        tokens_.push_back(token{kind, std::move(text), text_.origin[at]});
    }

    std::optional<token_kind> last_kind() const {
        if (tokens_.empty()) return std::nullopt;
        return tokens_.back().kind;
    }

    bool at(std::string_view prefix) const { return starts_with_at(s_, pos_, prefix); }

    // {%- and {#- : the text before the tag loses its trailing whitespace.
    void strip_trailing_whitespace() {
        if (tokens_.empty() || tokens_.back().kind != token_kind::text) return;
        std::string &t = tokens_.back().text;
        t.resize(js_trim_end(t).size());
        if (t.empty()) tokens_.pop_back();
    }

    void skip_whitespace() { pos_ += js_space_run(s_, pos_); }

    // Whitespace inside a tag. Like @huggingface/jinja, running into the end of the template here is an error.
    void skip_whitespace_in_tag() {
        const size_t run = js_space_run(s_, pos_);
        pos_ += run;
        if (run && pos_ >= s_.size()) error("unexpected end of template inside a tag", pos_);
    }

    std::string take_digits() {
        const size_t start = pos_;
        while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
        if (pos_ > start && pos_ >= s_.size()) error("unexpected end of template inside a tag", pos_);
        return std::string(s_.substr(start, pos_ - start));
    }

    void step() {
        const auto last = last_kind();
        const bool text_follows = !last || *last == token_kind::close_statement ||
                                  *last == token_kind::close_expression || *last == token_kind::comment ||
                                  *last == token_kind::raw_text;
        if (text_follows) {
            const size_t start = pos_;
            // Text runs up to the next "{%", "{{" or "{#".
            for (pos_ = s_.find('{', pos_); pos_ != std::string_view::npos; pos_ = s_.find('{', pos_ + 1)) {
                const char next = pos_ + 1 < s_.size() ? s_[pos_ + 1] : '\0';
                if (next == '%' || next == '{' || next == '#') break;
            }
            if (pos_ == std::string_view::npos) pos_ = s_.size();
            if (pos_ > start) {
                push(token_kind::text, std::string(s_.substr(start, pos_ - start)), start);
                return;
            }
        }
        if (at("{#")) return comment();
        if (at("{%") && raw_block()) return;
        if (at("{%-")) {
            strip_trailing_whitespace();
            push(token_kind::open_statement, "{%", pos_);
            pos_ += 3;
            return;
        }
        if (at("{{-")) {
            strip_trailing_whitespace();
            push(token_kind::open_expression, "{{", pos_);
            brace_depth_ = 0;
            pos_ += 3;
            return;
        }
        skip_whitespace_in_tag();
        if (at("-%}")) {
            push(token_kind::close_statement, "%}", pos_);
            pos_ += 3;
            skip_whitespace();
            return;
        }
        if (at("-}}")) {
            push(token_kind::close_expression, "}}", pos_);
            pos_ += 3;
            skip_whitespace();
            return;
        }
        if (pos_ >= s_.size()) return;
        const char c = s_[pos_];
        if ((c == '-' || c == '+') && sign()) return;
        if (const auto f = fixed_token_at()) {
            push(f->kind, std::string(s_.substr(pos_, f->length)), pos_);
            if (f->kind == token_kind::open_expression) brace_depth_ = 0;
            if (f->kind == token_kind::open_brace) ++brace_depth_;
            if (f->kind == token_kind::close_brace) --brace_depth_;
            pos_ += f->length;
            return;
        }
        if (c == '\'' || c == '"') return string_literal(c);
        if (is_digit(c)) {
            const size_t start = pos_;
            std::string number = take_digits();
            if (last_kind() != token_kind::dot && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
                ++pos_;
                number += "." + take_digits();
            }
            push(token_kind::number, std::move(number), start);
            return;
        }
        if (is_word_char(c)) {
            const size_t start = pos_;
            while (pos_ < s_.size() && is_word_char(s_[pos_])) ++pos_;
            if (pos_ >= s_.size()) error("unexpected end of template inside a tag", pos_);
            push(token_kind::identifier, std::string(s_.substr(start, pos_ - start)), start);
            return;
        }
        size_t end = pos_;
        next_code_point(s_, end);
        error(fmt::format("unexpected character '{}'", s_.substr(pos_, end - pos_)), pos_);
    }

    // The operator or bracket at pos_: the longest of @huggingface/jinja's table (ORDERED_MAPPING_TABLE), where "}}"
    // inside a dict literal is two closing braces.
    std::optional<fixed_token> fixed_token_at() const {
        const char c = s_[pos_], next = pos_ + 1 < s_.size() ? s_[pos_ + 1] : '\0';
        const auto one = [](token_kind kind) { return fixed_token{1, kind}; };
        const auto two = [](token_kind kind) { return fixed_token{2, kind}; };
        switch (c) {
        case '{':
            return next == '%'   ? two(token_kind::open_statement)
                   : next == '{' ? two(token_kind::open_expression)
                                 : one(token_kind::open_brace);
        case '}':
            return next == '}' && brace_depth_ <= 0 ? two(token_kind::close_expression) : one(token_kind::close_brace);
        case '%': return next == '}' ? two(token_kind::close_statement) : one(token_kind::multiplicative);
        case '(': return one(token_kind::open_paren);
        case ')': return one(token_kind::close_paren);
        case '[': return one(token_kind::open_bracket);
        case ']': return one(token_kind::close_bracket);
        case ',': return one(token_kind::comma);
        case '.': return one(token_kind::dot);
        case ':': return one(token_kind::colon);
        case '|': return one(token_kind::pipe);
        case '<':
        case '>': return next == '=' ? two(token_kind::comparison) : one(token_kind::comparison);
        case '=': return next == '=' ? two(token_kind::comparison) : one(token_kind::equals);
        case '!': return next == '=' ? std::optional(two(token_kind::comparison)) : std::nullopt;
        case '+':
        case '-':
        case '~': return one(token_kind::additive);
        case '*': return next == '*' ? two(token_kind::power) : one(token_kind::multiplicative);
        case '/': return next == '/' ? two(token_kind::multiplicative) : one(token_kind::multiplicative);
        default: return std::nullopt;
        }
    }

    // A + or - that starts a sign (after an operator, '(' or '[') rather than a binary operator; false otherwise.
    bool sign() {
        const auto last = last_kind();
        const char c = s_[pos_];
        if (!last || *last == token_kind::text) error(fmt::format("unexpected character '{}'", c), pos_);
        switch (*last) {
        case token_kind::identifier:
        case token_kind::number:
        case token_kind::string:
        case token_kind::close_paren:
        case token_kind::close_bracket: return false;
        default: break;
        }
        const size_t start = pos_++;
        std::string number = take_digits();
        if (!number.empty() && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
            ++pos_;
            number += "." + take_digits();
        }
        if (number.empty()) {
            push(token_kind::unary, std::string(1, c), start);
        } else {
            push(token_kind::number, c + number, start);
        }
        return true;
    }

    void comment() {
        const size_t start = pos_;
        pos_ += 2;
        const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
        if (strip_before) ++pos_;
        const size_t end = s_.find("#}", pos_);
        if (end == std::string_view::npos) error("comment opened with {# is never closed with #}", start);
        std::string body(s_.substr(pos_, end - pos_));
        const bool strip_after = !body.empty() && body.back() == '-';
        if (strip_after) body.pop_back();
        if (strip_before) strip_trailing_whitespace();
        push(token_kind::comment, std::move(body), start);
        pos_ = end + 2;
        if (strip_after) skip_whitespace();
    }

    // The tag at pos_ if it is "{% name %}" (with optional '-' and spaces): where it ends and its dashes.
    struct tag_match {
        size_t end;
        bool strip_before, strip_after;
    };
    std::optional<tag_match> match_tag(size_t i, std::string_view name) const {
        if (!starts_with_at(s_, i, "{%")) return std::nullopt;
        i += 2;
        const bool strip_before = i < s_.size() && s_[i] == '-';
        if (strip_before) ++i;
        i += js_space_run(s_, i);
        if (!starts_with_at(s_, i, name) || (i + name.size() < s_.size() && is_word_char(s_[i + name.size()])))
            return std::nullopt;
        i += name.size();
        i += js_space_run(s_, i);
        const bool strip_after = i < s_.size() && s_[i] == '-';
        if (strip_after) ++i;
        if (!starts_with_at(s_, i, "%}")) return std::nullopt;
        return tag_match{i + 2, strip_before, strip_after};
    }

    // {% raw %}...{% endraw %}: the body is text, tags and all.
    bool raw_block() {
        const auto open = match_tag(pos_, "raw");
        if (!open) return false;
        const size_t start = pos_;
        if (open->strip_before) strip_trailing_whitespace();
        size_t body_start = open->end;
        if (open->strip_after) body_start += js_space_run(s_, body_start);
        for (size_t i = s_.find("{%", body_start); i != std::string_view::npos; i = s_.find("{%", i + 1)) {
            const auto close = match_tag(i, "endraw");
            if (!close) continue;
            std::string_view body = s_.substr(body_start, i - body_start);
            if (close->strip_before) body = js_trim_end(body);
            push(token_kind::raw_text, std::string(body), body_start);
            pos_ = close->end;
            if (close->strip_after) skip_whitespace();
            return true;
        }
        error("{% raw %} is never closed with {% endraw %}", start);
    }

    void string_literal(char quote) {
        const size_t start = pos_++;
        std::string value;
        while (true) {
            if (pos_ >= s_.size()) error("string literal is never closed", start);
            const char c = s_[pos_];
            if (c == quote) break;
            if (c != '\\') {
                value += c;
                ++pos_;
                if (pos_ >= s_.size()) error("string literal is never closed", start);
                continue;
            }
            ++pos_;
            if (pos_ >= s_.size()) error("string literal is never closed", start);
            const char e = s_[pos_++];
            switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case 'b': value += '\b'; break;
            case 'f': value += '\f'; break;
            case 'v': value += '\v'; break;
            case '\'': value += '\''; break;
            case '"': value += '"'; break;
            case '\\': value += '\\'; break;
            case 'x':
            case 'u': hex_escape(e, value); break;
            default:
                // Python keeps an unknown escape as written ("\d" stays "\d").
                value += '\\';
                --pos_;
                break;
            }
        }
        ++pos_; // the closing quote
        push(token_kind::string, std::move(value), start);
    }

    void hex_escape(char kind, std::string &value) {
        const size_t length = kind == 'x' ? 2 : 4;
        const size_t start = pos_;
        unsigned code = 0;
        for (size_t k = 0; k < length; ++k, ++pos_) {
            const char h = pos_ < s_.size() ? s_[pos_] : '\0';
            int digit;
            if (is_digit(h))
                digit = h - '0';
            else if (h >= 'a' && h <= 'f')
                digit = h - 'a' + 10;
            else if (h >= 'A' && h <= 'F')
                digit = h - 'A' + 10;
            else
                error(fmt::format("invalid escape \\{}: {} hexadecimal digits expected", kind, length), start - 2);
            code = code * 16 + static_cast<unsigned>(digit);
        }
        // A \uD83D\uDE00 pair is one character; a lone surrogate becomes U+FFFD.
        if (code >= 0xD800 && code <= 0xDBFF && starts_with_at(s_, pos_, "\\u")) {
            size_t p = pos_ + 2;
            unsigned low = 0;
            bool ok = p + 4 <= s_.size();
            for (size_t k = 0; ok && k < 4; ++k) {
                const char h = s_[p + k];
                if (is_digit(h))
                    low = low * 16 + static_cast<unsigned>(h - '0');
                else if (h >= 'a' && h <= 'f')
                    low = low * 16 + static_cast<unsigned>(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F')
                    low = low * 16 + static_cast<unsigned>(h - 'A' + 10);
                else
                    ok = false;
            }
            if (ok && low >= 0xDC00 && low <= 0xDFFF) {
                append_utf8(value, 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00));
                pos_ = p + 4;
                return;
            }
        }
        append_utf8(value, code);
    }

    mapped_text text_;
    std::string_view s_;
    size_t pos_ = 0;
    int brace_depth_ = 0;
    std::vector<token> tokens_;
};

} // namespace

std::vector<token> tokenize(std::string_view source) { return lexer(source).run(); }

const char *token_kind_name(token_kind kind) {
    switch (kind) {
    case token_kind::text: return "text";
    case token_kind::raw_text: return "raw text";
    case token_kind::comment: return "comment";
    case token_kind::number: return "number";
    case token_kind::string: return "string";
    case token_kind::identifier: return "name";
    case token_kind::equals: return "'='";
    case token_kind::open_paren: return "'('";
    case token_kind::close_paren: return "')'";
    case token_kind::open_statement: return "'{%'";
    case token_kind::close_statement: return "'%}'";
    case token_kind::open_expression: return "'{{'";
    case token_kind::close_expression: return "'}}'";
    case token_kind::open_bracket: return "'['";
    case token_kind::close_bracket: return "']'";
    case token_kind::open_brace: return "'{'";
    case token_kind::close_brace: return "'}'";
    case token_kind::comma: return "','";
    case token_kind::dot: return "'.'";
    case token_kind::colon: return "':'";
    case token_kind::pipe: return "'|'";
    case token_kind::additive: return "operator";
    case token_kind::multiplicative: return "operator";
    case token_kind::power: return "'**'";
    case token_kind::comparison: return "comparison";
    case token_kind::unary: return "sign";
    }
    return "token";
}

} // namespace strata::chat::jinja
