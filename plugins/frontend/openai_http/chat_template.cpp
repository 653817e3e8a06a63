#include "chat_template.hpp"

namespace strata::openai_http {

namespace {

// "<role>: content" lines, then "assistant:" for the model to continue.
std::string render_plain(const std::vector<chat_message> &ms) {
    std::string out;
    for (const chat_message &m : ms) out += m.role + ": " + m.content + "\n";
    return out + "assistant:";
}

// Llama 2 chat: the system prompt sits inside the first [INST] block; every finished exchange ends with </s><s>.
std::string render_llama2(const std::vector<chat_message> &ms) {
    std::string out, system;
    bool first_user = true;
    for (const chat_message &m : ms) {
        if (m.role == "system") {
            system += m.content;
        } else if (m.role == "assistant") {
            out += " " + m.content + " </s><s>";
        } else {
            out += "[INST] ";
            if (first_user && !system.empty()) out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
            first_user = false;
            out += m.content + " [/INST]";
        }
    }
    return out;
}

std::string render_llama3(const std::vector<chat_message> &ms) {
    std::string out;
    for (const chat_message &m : ms) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
    }
    return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string render_chatml(const std::vector<chat_message> &ms) {
    std::string out;
    for (const chat_message &m : ms) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    return out + "<|im_start|>assistant\n";
}

// Mistral instruct: no system role; the system text is prepended to the first user message.
std::string render_mistral(const std::vector<chat_message> &ms) {
    std::string out, system;
    for (const chat_message &m : ms) {
        if (m.role == "system") {
            system += m.content + "\n\n";
        } else if (m.role == "assistant") {
            out += m.content + "</s>";
        } else {
            out += "[INST] " + system + m.content + " [/INST]";
            system.clear();
        }
    }
    return out;
}

std::string render_phi3(const std::vector<chat_message> &ms) {
    std::string out;
    for (const chat_message &m : ms) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    return out + "<|assistant|>\n";
}

// Gemma: roles user and model only; the system text goes in front of the first user turn.
std::string render_gemma(const std::vector<chat_message> &ms) {
    std::string out, system;
    for (const chat_message &m : ms) {
        if (m.role == "system") {
            system += m.content + "\n\n";
            continue;
        }
        const bool model = m.role == "assistant";
        out += std::string("<start_of_turn>") + (model ? "model" : "user") + "\n" + (model ? "" : system) + m.content +
               "<end_of_turn>\n";
        if (!model) system.clear();
    }
    return out + "<start_of_turn>model\n";
}

} // namespace

std::optional<chat_template> chat_template_from_jinja(std::string_view jinja) {
    auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
    if (has("<|start_header_id|>")) return chat_template::llama3;
    if (has("<|im_start|>")) return chat_template::chatml;
    if (has("<start_of_turn>")) return chat_template::gemma;
    if (has("<|user|>") && has("<|end|>")) return chat_template::phi3;
    if (has("[INST]")) return has("<<SYS>>") ? chat_template::llama2 : chat_template::mistral;
    return std::nullopt;
}

std::optional<chat_template> chat_template_from_name(std::string_view name) {
    if (name == "plain") return chat_template::plain;
    if (name == "llama2") return chat_template::llama2;
    if (name == "llama3") return chat_template::llama3;
    if (name == "chatml") return chat_template::chatml;
    if (name == "mistral") return chat_template::mistral;
    if (name == "phi3") return chat_template::phi3;
    if (name == "gemma") return chat_template::gemma;
    return std::nullopt;
}

std::string render_chat(chat_template t, const std::vector<chat_message> &messages) {
    switch (t) {
    case chat_template::llama2: return render_llama2(messages);
    case chat_template::llama3: return render_llama3(messages);
    case chat_template::chatml: return render_chatml(messages);
    case chat_template::mistral: return render_mistral(messages);
    case chat_template::phi3: return render_phi3(messages);
    case chat_template::gemma: return render_gemma(messages);
    case chat_template::plain: break;
    }
    return render_plain(messages);
}

} // namespace strata::openai_http
