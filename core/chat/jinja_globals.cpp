// Global functions: range, namespace, raise_exception and strftime_now (as @huggingface/jinja and transformers
// provide them), and Python Jinja2's dict.
#include "chat/jinja_builtins.hpp"

#include "chat/jinja_interpreter.hpp"

#include <fmt/format.h>

#include <cmath>

namespace strata::chat::jinja {

namespace {

double range_number(const value &v, const char *what) {
    if (!v.is_number() && !v.is_boolean()) failf("range(): {} must be a number, not {}", what, kind_name(v));
    return v.as_number();
}

// range(stop) / range(start, stop[, step]), counting as @huggingface/jinja does (numbers need not be whole).
value range_function(interpreter &in, call_arguments &args) {
    if (args.positional.empty() || args.positional.size() > 3) fail("range() takes 1 to 3 arguments");
    double start = 0, stop, step = 1;
    if (args.positional.size() == 1) {
        stop = range_number(args.positional[0], "stop");
    } else {
        start = range_number(args.positional[0], "start");
        stop = range_number(args.positional[1], "stop");
        if (args.positional.size() == 3) step = range_number(args.positional[2], "step");
    }
    if (step == 0) fail("range() step must not be zero");
    const double count = std::max(std::ceil((stop - start) / step), 0.0);
    if (!(count < static_cast<double>(in.context().limits().max_steps)))
        failf("range() of {} numbers is more than the render may take", count);
    in.context().step(static_cast<uint64_t>(count));
    auto list = in.context().make_list();
    // Adding the step as JavaScript does; the count bounds it where i + step == i.
    double i = start;
    for (uint64_t k = 0; k <= static_cast<uint64_t>(count) && (step > 0 ? i < stop : i > stop); ++k, i += step)
        list->push(std::floor(i) == i ? value::integer(i) : value::floating(i));
    return value::of(std::move(list));
}

// namespace(dict_or_pairs?, **attributes): a mutable object for state that must outlive a loop iteration.
value namespace_function(interpreter &in, call_arguments &args) {
    if (args.positional.size() > 1)
        failf("namespace() takes at most 1 positional argument, {} given", args.positional.size());
    auto ns = in.context().make_dict(dict_kind::name_space);
    if (!args.positional.empty()) {
        const value &source = args.positional[0];
        if (source.is_dict() && source.as_dict().kind != dict_kind::name_space) {
            for (const auto &[key, v] : source.as_dict().entries) ns->set(key, v);
        } else if (source.is_list()) {
            for (const value &pair : source.as_list().items) {
                if (!pair.is_list() || pair.as_list().items.size() != 2 || !pair.as_list().items[0].is_string())
                    fail("namespace() takes a dict or a list of [key, value] pairs with string keys");
                ns->set(pair.as_list().items[0].as_string(), pair.as_list().items[1]);
            }
        } else {
            failf("namespace() takes a dict or a list of pairs, not {}", kind_name(source));
        }
    }
    for (const auto &[key, v] : args.keyword) ns->set(key, v);
    return value::of(std::move(ns));
}

value raise_exception_function(interpreter &in, call_arguments &args) {
    std::string message;
    // JavaScript's Error(message): none and undefined give "".
    if (!args.positional.empty()) append_concat_text(in.context(), message, args.positional[0], true);
    throw template_raise{std::move(message)};
}

constexpr const char *month_names[] = {"January", "February", "March",     "April",   "May",      "June",
                                       "July",    "August",   "September", "October", "November", "December"};
constexpr const char *day_names[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};

// strftime with English names whatever the process locale: %Y %m %d %b %B %H %M %% as @huggingface/jinja, and
// Python's %S %y %a %A %p %I %j %e; anything else stays as written.
std::string format_time(const std::tm &t, const std::string &format) {
    std::string out;
    for (size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 >= format.size()) {
            out += format[i];
            continue;
        }
        const char code = format[++i];
        const int month = std::clamp(t.tm_mon, 0, 11), weekday = std::clamp(t.tm_wday, 0, 6);
        switch (code) {
        case 'Y': out += fmt::format("{}", t.tm_year + 1900); break;
        case 'y': out += fmt::format("{:02}", (t.tm_year + 1900) % 100); break;
        case 'm': out += fmt::format("{:02}", t.tm_mon + 1); break;
        case 'd': out += fmt::format("{:02}", t.tm_mday); break;
        case 'e': out += fmt::format("{:2}", t.tm_mday); break;
        case 'b': out += std::string_view(month_names[month]).substr(0, 3); break;
        case 'B': out += month_names[month]; break;
        case 'a': out += std::string_view(day_names[weekday]).substr(0, 3); break;
        case 'A': out += day_names[weekday]; break;
        case 'H': out += fmt::format("{:02}", t.tm_hour); break;
        case 'I': out += fmt::format("{:02}", t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12); break;
        case 'p': out += t.tm_hour < 12 ? "AM" : "PM"; break;
        case 'M': out += fmt::format("{:02}", t.tm_min); break;
        case 'S': out += fmt::format("{:02}", t.tm_sec); break;
        case 'j': out += fmt::format("{:03}", t.tm_yday + 1); break;
        case '%': out += '%'; break;
        default: out += '%'; out += code;
        }
    }
    return out;
}

value strftime_now_function(interpreter &in, call_arguments &args) {
    const value &format = argument_of(args, 0, "format", "strftime_now()");
    if (!format.is_string()) failf("strftime_now() takes a format string, not {}", kind_name(format));
    return in.context().make_string(format_time(in.now(), format.as_string()));
}

// dict(mapping?, **entries), as Python's.
value dict_function(interpreter &in, call_arguments &args) {
    auto d = in.context().make_dict();
    if (!args.positional.empty()) {
        const value &source = args.positional[0];
        if (!source.is_dict()) failf("dict() takes a dict, not {}", kind_name(source));
        for (const auto &[key, v] : source.as_dict().entries) d->set(key, v);
    }
    for (const auto &[key, v] : args.keyword) d->set(key, v);
    return value::of(std::move(d));
}

} // namespace

builtin_function find_global(std::string_view name) {
    if (name == "range") return range_function;
    if (name == "namespace") return namespace_function;
    if (name == "raise_exception") return raise_exception_function;
    if (name == "strftime_now") return strftime_now_function;
    if (name == "dict") return dict_function;
    return nullptr;
}

} // namespace strata::chat::jinja
