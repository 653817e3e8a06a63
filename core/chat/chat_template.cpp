// The public face of the Jinja engine: parse once into a shared program, render it under limits, and let nothing
// but strata::error out.
#include "chat/chat_template.hpp"

#include "chat/jinja_interpreter.hpp"
#include "chat/jinja_parser.hpp"

#include <fmt/format.h>

#include <new>

namespace strata::chat {

template_program::template_program(std::shared_ptr<const jinja::program> program) : program_(std::move(program)) {}

template_program template_program::parse(std::string_view source, std::string_view origin, const parse_limits &limits) {
    try {
        return template_program(jinja::parse_program(source, origin, limits));
    } catch (const error &) {
        throw;
    } catch (const std::bad_alloc &) {
        throw error(fmt::format("{}: out of memory while parsing the template", origin));
    } catch (const std::exception &e) {
        throw error(fmt::format("{}: cannot parse the template: {}", origin, e.what()));
    }
}

std::string template_program::render(const nlohmann::ordered_json &context, const render_options &options) const {
    try {
        jinja::interpreter in(*program_, options);
        return in.render(context);
    } catch (const error &) {
        throw;
    } catch (const jinja::failure &f) {
        // A failure outside any statement, e.g. while reading the context.
        throw error(fmt::format("{}: {}", program_->origin, f.message));
    } catch (const std::bad_alloc &) {
        throw error(fmt::format("{}: out of memory while rendering the template", program_->origin));
    } catch (const std::exception &e) {
        throw error(fmt::format("{}: rendering failed: {}", program_->origin, e.what()));
    }
}

const std::string &template_program::origin() const { return program_->origin; }

} // namespace strata::chat
