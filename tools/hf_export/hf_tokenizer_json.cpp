#include "hf_tokenizer_json.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <unordered_map>

namespace hf_export {

using nlohmann::ordered_json;

namespace {

// Offsets of each UTF-8 code point boundary inside `s` (Python slices strings by code point).
std::vector<size_t> code_point_starts(const std::string &s) {
    std::vector<size_t> out;
    for (size_t i = 0; i < s.size(); ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
    return out;
}

ordered_json special(int64_t id, const std::string &text) {
    return ordered_json{{"id", id},          {"content", text}, {"single_word", false}, {"lstrip", false},
                        {"rstrip", false},   {"normalized", false}, {"special", true}};
}

} // namespace

tokenizer_files spm_tokenizer_json(const strata::gguf::file &f) {
    const auto model = f.get_string("tokenizer.ggml.model");
    if (!model || *model != "llama")
        strata::fail("{}: tokenizer.ggml.model is '{}'; hf-export writes tokenizer.json for SentencePiece ('llama') "
                     "vocabularies only", f.name(), model ? std::string(*model) : "missing");
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    const auto scores = f.get_float_array("tokenizer.ggml.scores");
    const auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (!tokens || !scores || !types || scores->size() != tokens->size() || types->size() != tokens->size())
        strata::fail("{}: tokenizer.ggml.tokens, scores and token_type must all be present with one entry per token",
                     f.name());
    const size_t n = tokens->size();
    std::unordered_map<std::string, int64_t> id;
    for (size_t i = 0; i < n; ++i) id.emplace(std::string((*tokens)[i]), static_cast<int64_t>(i));

    // transformers' SentencePieceExtractor.extract: every split of a piece into two pieces is a merge; the splits of
    // one piece ordered by the ids of (left, right); all merges ordered by the merged piece's score, highest first
    // (a stable sort, so equal scores keep vocabulary order).
    struct merge {
        std::string left, right;
        float score;
    };
    std::vector<merge> merges;
    for (size_t i = 0; i < n; ++i) {
        const std::string piece((*tokens)[i]);
        std::vector<merge> local;
        const auto starts = code_point_starts(piece);
        for (size_t k = 1; k < starts.size(); ++k) {
            std::string l = piece.substr(0, starts[k]), r = piece.substr(starts[k]);
            if (id.count(l) && id.count(r)) local.push_back({std::move(l), std::move(r), (*scores)[i]});
        }
        std::sort(local.begin(), local.end(), [&](const merge &a, const merge &b) {
            return std::pair(id[a.left], id[a.right]) < std::pair(id[b.left], id[b.right]);
        });
        for (auto &m : local) merges.push_back(std::move(m));
    }
    std::stable_sort(merges.begin(), merges.end(), [](const merge &a, const merge &b) { return a.score > b.score; });

    const int64_t unk = f.get_int("tokenizer.ggml.unknown_token_id").value_or(0);
    const int64_t bos = f.get_int("tokenizer.ggml.bos_token_id").value_or(1);
    const int64_t eos = f.get_int("tokenizer.ggml.eos_token_id").value_or(2);
    const bool add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
    const bool add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
    for (const int64_t id : {unk, bos, eos})
        if (id < 0 || static_cast<size_t>(id) >= n)
            strata::fail("{}: special token id {} is outside the {}-token vocabulary", f.name(), id, n);
    auto text = [&](int64_t t) { return std::string((*tokens)[static_cast<size_t>(t)]); };
    const bool prefix_space = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);

    tokenizer_files out;
    ordered_json &tj = out.tokenizer;
    tj["version"] = "1.0";
    tj["truncation"] = nullptr;
    tj["padding"] = nullptr;
    ordered_json added = ordered_json::array();
    // UNKNOWN and CONTROL tokens are added special tokens, USER_DEFINED ones added plain tokens (SpmConverter).
    for (size_t i = 0; i < n; ++i) {
        const int64_t id = static_cast<int64_t>(i);
        if ((*types)[i] == 2 || (*types)[i] == 3) added.push_back(special(id, text(id)));
        if ((*types)[i] == 4) {
            ordered_json t = special(id, text(id));
            t["special"] = false;
            added.push_back(std::move(t));
        }
    }
    tj["added_tokens"] = added;
    ordered_json normalizers = ordered_json::array();
    if (prefix_space) normalizers.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
    tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    tj["pre_tokenizer"] = nullptr;
    ordered_json single = ordered_json::array();
    if (add_bos) single.push_back({{"SpecialToken", {{"id", text(bos)}, {"type_id", 0}}}});
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (add_eos) single.push_back({{"SpecialToken", {{"id", text(eos)}, {"type_id", 0}}}});
    ordered_json specials = ordered_json::object();
    if (add_bos) specials[text(bos)] = {{"id", text(bos)}, {"ids", {bos}}, {"tokens", {text(bos)}}};
    if (add_eos) specials[text(eos)] = {{"id", text(eos)}, {"ids", {eos}}, {"tokens", {text(eos)}}};
    tj["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single},
                            {"special_tokens", specials}};
    ordered_json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                             {{"type", "ByteFallback"}},
                             {{"type", "Fuse"}}};
    if (prefix_space) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    ordered_json vocab = ordered_json::object();
    for (size_t i = 0; i < n; ++i) vocab[text(static_cast<int64_t>(i))] = i;
    ordered_json merge_list = ordered_json::array();
    for (const auto &m : merges) merge_list.push_back({m.left, m.right});
    tj["model"] = {{"type", "BPE"},          {"dropout", nullptr},      {"unk_token", text(unk)},
                   {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                   {"byte_fallback", true},  {"ignore_merges", false},  {"vocab", vocab},
                   {"merges", merge_list}};

    ordered_json &c = out.config;
    c["add_bos_token"] = add_bos;
    c["add_eos_token"] = add_eos;
    c["bos_token"] = text(bos);
    c["eos_token"] = text(eos);
    c["unk_token"] = text(unk);
    c["legacy"] = true;
    c["tokenizer_class"] = "LlamaTokenizer";
    if (auto t = f.get_string("tokenizer.chat_template")) c["chat_template"] = std::string(*t);
    return out;
}

} // namespace hf_export
