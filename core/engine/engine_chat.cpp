// The engine's chat prompts: which templates the model's chat requests are rendered with. [model] chat_template
// (vLLM's --chat-template) names a built-in family, a Jinja file or the template text; otherwise the model file's
// own: GGUF tokenizer.chat_template, and named ones as tokenizer.chat_template.<name> (e.g. tool_use). A model with
// none gets the plain built-in, said once at start-up.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine.hpp"
#include "gguf/gguf_file.hpp"

namespace strata::engine {

namespace {

namespace fs = std::filesystem;

std::vector<chat::template_source> configured_template(const std::string &value, const std::string &base_dir) {
    if (auto b = chat::builtin_template(value)) return {*b};
    for (const fs::path &p : {fs::path(value), fs::path(base_dir) / value}) {
        std::error_code ec;
        if (!value.empty() && fs::is_regular_file(p, ec)) {
            std::ifstream in(p, std::ios::binary);
            std::ostringstream text;
            text << in.rdbuf();
            if (!in) fail("chat_template: cannot read {}", p.string());
            return {{"default", text.str(), p.string()}};
        }
    }
    if (value.find("{{") != std::string::npos || value.find("{%") != std::string::npos)
        return {{"default", value, "the --chat-template text"}};
    std::string names;
    for (const auto n : chat::builtin_template_names()) names += fmt::format("{}{}", names.empty() ? "" : ", ", n);
    fail("chat_template '{}' is not a built-in template ({}), a file, or Jinja text (--chat-template)", value, names);
}

std::vector<chat::template_source> model_templates(const model_file &f) {
    std::vector<chat::template_source> out;
    constexpr std::string_view prefix = "tokenizer.chat_template";
    for (size_t i = 0; i < f.kv_count(); ++i) {
        const std::string_view key = f.kv_key(i);
        if (!key.starts_with(prefix)) continue;
        const std::string_view rest = key.substr(prefix.size());
        if (!rest.empty() && rest.front() != '.') continue;
        const auto text = f.get_string(key);
        if (!text) {
            log::warn("engine", "{}: {} is not a string; ignoring it as a chat template", f.name(), key);
            continue;
        }
        const std::string name = rest.empty() ? "default" : std::string(rest.substr(1));
        out.push_back({name, std::string(*text), fmt::format("{} of {}", key, f.name())});
    }
    return out;
}

} // namespace

void engine::setup_chat() {
    const auto format = chat::content_format_from_name(opts_.chat_content_format);
    if (!format)
        fail("chat_template_content_format '{}' is not auto, string or openai (--chat-template-content-format)",
             opts_.chat_content_format);
    std::vector<chat::template_source> templates = opts_.chat_template.empty()
                                                       ? model_templates(*file_)
                                                       : configured_template(opts_.chat_template, opts_.chat_template_base_dir);
    if (templates.empty()) {
        log::info("engine", "{} carries no chat template: chat requests use the plain built-in (pick one with "
                            "--chat-template chatml|llama3|...|FILE)",
                  opts_.model_path);
        templates.push_back(*chat::builtin_template("plain"));
    }
    const auto text_of = [&](int32_t id) { return id >= 0 ? tokenizer_->token_text(id) : std::string(); };
    chat_ = std::make_unique<chat::chat_formatter>(std::move(templates), text_of(tokenizer_->bos()),
                                                   text_of(tokenizer_->eos()), tokenizer_->add_bos(), *format);
}

} // namespace strata::engine
