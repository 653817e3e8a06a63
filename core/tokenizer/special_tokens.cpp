#include "tokenizer/special_tokens.hpp"

#include <array>
#include <string_view>

namespace strata {

namespace {

// The texts llama.cpp recognises (node-llama-cpp 3.21.1's llama.cpp), by role.
constexpr std::array<std::string_view, 11> k_eot_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<end_of_utterance>"};
constexpr std::array<std::string_view, 1> k_eom_texts = {"<|eom_id|>"};
constexpr std::array<std::string_view, 8> k_fim_prefix_texts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
    "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::array<std::string_view, 8> k_fim_suffix_texts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
    "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::array<std::string_view, 8> k_fim_middle_texts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
    "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::array<std::string_view, 5> k_fim_pad_texts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> k_fim_repo_texts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                                              "<reponame>"};
constexpr std::array<std::string_view, 1> k_fim_sep_texts = {"<|file_sep|>"};
constexpr std::array<std::string_view, 22> k_eog_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};
// gpt-oss's channel markers, which llama.cpp always renders as text.
constexpr std::array<std::string_view, 4> k_always_rendered = {"<|channel|>", "<|message|>", "<|start|>",
                                                               "<|constrain|>"};

} // namespace

std::vector<uint8_t> apply_special_token_rules(vocab_data &d, const std::function<int32_t(std::string_view)> &find) {
    if (d.convention == special_token_convention::hugging_face) {
        std::vector<uint8_t> eog(d.tokens.size(), 0);
        for (const int32_t id : {d.eos, d.eot, d.eom})
            if (id >= 0) eog[static_cast<size_t>(id)] = 1;
        for (const std::string_view t : k_eog_texts)
            if (const int32_t id = find(t); id >= 0 && d.types[static_cast<size_t>(id)] == token_type::control)
                eog[static_cast<size_t>(id)] = 1;
        return eog;
    }
    const auto make_control = [&](int32_t id) { d.types[static_cast<size_t>(id)] = token_type::control; };
    // A role's token: the id the file gives, else the first text of the list the vocab has. Either way it is
    // CONTROL (llama.cpp retypes found tokens; a given id keeps its type).
    const auto detect = [&](int32_t given, const auto &texts) {
        if (given >= 0) return given;
        for (const std::string_view t : texts) {
            const int32_t id = find(t);
            if (id < 0) continue;
            make_control(id);
            return id;
        }
        return int32_t{-1};
    };
    d.eot = detect(d.eot, k_eot_texts);
    d.eom = detect(d.eom, k_eom_texts);
    (void)detect(-1, k_fim_prefix_texts);
    (void)detect(-1, k_fim_suffix_texts);
    (void)detect(-1, k_fim_middle_texts);
    const int32_t fim_pad = detect(-1, k_fim_pad_texts);
    const int32_t fim_repo = detect(-1, k_fim_repo_texts);
    const int32_t fim_sep = detect(-1, k_fim_sep_texts);

    std::vector<uint8_t> eog(d.tokens.size(), 0);
    for (const int32_t id : {fim_pad, fim_repo, fim_sep, d.eos, d.eot, d.eom})
        if (id >= 0) eog[static_cast<size_t>(id)] = 1;
    for (const std::string_view t : k_eog_texts) {
        const int32_t id = find(t);
        if (id < 0) continue;
        eog[static_cast<size_t>(id)] = 1;
        make_control(id);
    }
    for (const std::string_view t : k_always_rendered)
        if (const int32_t id = find(t); id >= 0) d.types[static_cast<size_t>(id)] = token_type::user_defined;

    const auto in_eog = [&](std::string_view t) {
        const int32_t id = find(t);
        return id >= 0 && eog[static_cast<size_t>(id)];
    };
    // gpt-oss (o200k_harmony) and Solar Open: <|end|> ends a message, not the generation.
    if (in_eog("<|end|>") && ((in_eog("<|return|>") && in_eog("<|call|>")) || (in_eog("<|calls|>") && in_eog("<|flush|>")))) {
        const int32_t end = find("<|end|>");
        eog[static_cast<size_t>(end)] = 0;
        d.types[static_cast<size_t>(end)] = token_type::user_defined;
    }
    // Gemma 4 and PaddleOCR: </s> is plain text there.
    if (in_eog("<|tool_response>") && in_eog("</s>")) {
        const int32_t s = find("</s>");
        eog[static_cast<size_t>(s)] = 0;
        d.types[static_cast<size_t>(s)] = token_type::normal;
    }
    return eog;
}

} // namespace strata
