#include "tokenizer/vocab_from_gguf.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "model_file/model_file.hpp"
#include "tokenizer/pre_tokenizer.hpp"

namespace strata {

namespace {

// Special-token id: a missing key keeps the default; a negative value means "none" (-1).
int32_t read_token_id(const model_file &f, std::string_view key, int32_t fallback, size_t n_vocab) {
    const auto v = f.get_int(key);
    if (!v) return fallback >= 0 && static_cast<size_t>(fallback) < n_vocab ? fallback : -1;
    if (*v < 0) return -1;
    if (static_cast<uint64_t>(*v) >= n_vocab)
        fail("{}: {} = {} is out of range for the {}-token vocabulary; fix the metadata (valid ids 0..{})", f.name(),
             key, *v, n_vocab, n_vocab - 1);
    return static_cast<int32_t>(*v);
}

// llama.cpp gives every special token of Phi-3 models RSTRIP (whitespace after it is dropped when the token is
// found in text), except <unk>, <s> and <|endoftext|>; it recognises Phi-3 by general.name.
void apply_phi3_strip_rule(vocab_data &v) {
    v.rstrip.assign(v.tokens.size(), 0);
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const token_type t = v.types[i];
        if (t == token_type::control || t == token_type::user_defined || t == token_type::unknown) v.rstrip[i] = 1;
        const std::string &text = v.tokens[i];
        if (text == "</s>") v.rstrip[i] = 1;
        if (text == "<unk>" || text == "<s>" || text == "<|endoftext|>") v.rstrip[i] = 0;
    }
}

// What a tokenizer.ggml.model value is, for the ones Strata refuses.
std::string_view unsupported_model(std::string_view model) {
    if (model == "bert") return "WordPiece (BERT)";
    if (model == "t5") return "Unigram (T5)";
    if (model == "rwkv") return "RWKV's trie tokenizer";
    if (model == "plamo2") return "PLaMo-2's Aho-Corasick tokenizer";
    if (model == "whitespace") return "a whitespace-split embedding tokenizer";
    if (model == "hybriddna") return "a DNA k-mer tokenizer";
    if (model == "no_vocab" || model == "none") return "no vocabulary";
    return {};
}

} // namespace

vocab_data load_vocab(const model_file &f) {
    const auto model = f.get_string("tokenizer.ggml.model");
    if (!model)
        fail("{}: no tokenizer.ggml.model key; the file has no tokenizer (Strata needs the model's vocabulary in the "
             "GGUF)",
             f.name());
    vocab_data v;
    v.origin = f.name();
    if (*model == "llama") {
        v.model = vocab_model::spm;
    } else if (*model == "gpt2" || *model == "gemma4") {
        v.model = vocab_model::bpe;
    } else if (const std::string_view what = unsupported_model(*model); !what.empty()) {
        fail("{}: tokenizer.ggml.model is \"{}\" ({}); Strata runs SentencePiece (\"llama\") and byte-level BPE "
             "(\"gpt2\") vocabularies",
             f.name(), *model, what);
    } else {
        fail("{}: tokenizer.ggml.model is \"{}\", which is not a tokenizer Strata or llama.cpp knows; Strata runs "
             "SentencePiece (\"llama\") and byte-level BPE (\"gpt2\") vocabularies",
             f.name(), *model);
    }

    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->empty())
        fail("{}: tokenizer.ggml.tokens is missing or empty; the vocabulary can't be loaded", f.name());
    const size_t n = tokens->size();
    v.tokens.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        // llama.cpp names an empty token so that every text is distinct.
        if ((*tokens)[i].empty()) {
            log::warn("tokenizer", "{}: tokenizer.ggml.tokens[{}] is empty; it is named [EMPTY_{}] (as llama.cpp does)",
                      f.name(), i, i);
            v.tokens.push_back(fmt::format("[EMPTY_{}]", i));
        } else {
            v.tokens.emplace_back((*tokens)[i]);
        }
    }

    // Missing scores/types default as in llama.cpp (score 0, NORMAL); present ones must match the token count.
    if (auto scores = f.get_float_array("tokenizer.ggml.scores")) {
        if (scores->size() != n)
            fail("{}: tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}", f.name(),
                 scores->size(), n);
        v.scores = std::move(*scores);
    }
    if (auto types = f.get_int_array("tokenizer.ggml.token_type")) {
        if (types->size() != n)
            fail("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}", f.name(),
                 types->size(), n);
        v.types.resize(n);
        for (size_t i = 0; i < n; ++i) {
            const int64_t t = (*types)[i];
            if (t < 0 || t > static_cast<int64_t>(token_type::byte))
                fail("{}: tokenizer.ggml.token_type[{}] = {} (token '{}'); valid types are 0..6", f.name(), i, t,
                     v.tokens[i]);
            v.types[i] = static_cast<token_type>(t);
        }
    }

    // llama.cpp's defaults per model; the keys below override them.
    int32_t bos = 1, eos = 2, unk = 0, pad = -1;
    if (v.model == vocab_model::spm) {
        v.add_bos = true;
        v.add_space_prefix = true;
    } else {
        if (*model == "gemma4") {
            bos = eos = unk = -1;
            v.pre = "gemma4"; // llama.cpp's tokenizer model "gemma4" forces it
        } else {
            bos = eos = 11;
            unk = -1;
            v.pre = "default";
            const auto pre = f.get_string("tokenizer.ggml.pre");
            if (pre) {
                v.pre = std::string(*pre);
            } else {
                log::warn("tokenizer", "{}: no tokenizer.ggml.pre key; using llama.cpp's \"default\" pre-tokenizer. "
                                       "A model converted before llama.cpp named pre-tokenizers may split text "
                                       "differently than it was trained; reconvert it with a current llama.cpp",
                          f.name());
            }
        }
        const auto spec = find_pre_tokenizer(v.pre);
        if (!spec) {
            std::string known;
            for (const std::string_view name : pre_tokenizer_names())
                known += fmt::format("{}{}", known.empty() ? "" : ", ", name);
            fail("{}: unknown pre-tokenizer tokenizer.ggml.pre = \"{}\"; Strata knows the same names as llama.cpp: "
                 "{}. Convert the model with a llama.cpp that knows its tokenizer, or set the key to the "
                 "pre-tokenizer it was trained with",
                 f.name(), v.pre, known);
        }
        v.bpe = rules_for(*spec);
        v.add_bos = (spec->flags & pre_add_bos) != 0;
        if (spec->flags & pre_no_bos) bos = -1;
        const auto merges = f.get_string_array("tokenizer.ggml.merges");
        if (!merges && v.pre != "kimi-k2")
            fail("{}: tokenizer.ggml.merges is missing; a byte-level BPE vocabulary needs its merges (reconvert the "
                 "model)",
                 f.name());
        if (merges) {
            v.merges.reserve(merges->size());
            for (size_t i = 0; i < merges->size(); ++i) {
                // llama.cpp splits at the first space after the first byte; a line without one is ("", ""), a
                // pair no symbols ever form.
                const std::string_view line = (*merges)[i];
                const size_t space = line.find(' ', 1);
                if (space == std::string_view::npos) {
                    log::warn("tokenizer", "{}: tokenizer.ggml.merges[{}] = \"{}\" is not two symbols separated by a "
                                           "space; it can never apply (as in llama.cpp)",
                              f.name(), i, line);
                    v.merges.emplace_back();
                    continue;
                }
                v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
            }
        }
    }

    v.bos = read_token_id(f, "tokenizer.ggml.bos_token_id", bos, n);
    v.eos = read_token_id(f, "tokenizer.ggml.eos_token_id", eos, n);
    v.unk = read_token_id(f, "tokenizer.ggml.unknown_token_id", unk, n);
    v.eot = read_token_id(f, "tokenizer.ggml.eot_token_id", -1, n);
    v.eom = read_token_id(f, "tokenizer.ggml.eom_token_id", -1, n);
    // A bad padding id only matters for batching by padding, which we don't do: warn like llama.cpp and drop it.
    if (const auto p = f.get_int("tokenizer.ggml.padding_token_id")) {
        if (*p >= 0 && static_cast<uint64_t>(*p) < n)
            pad = static_cast<int32_t>(*p);
        else if (*p >= 0)
            log::warn("tokenizer", "{}: tokenizer.ggml.padding_token_id = {} is out of range; ignoring it", f.name(),
                      *p);
    }
    v.pad = pad;
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(v.add_bos);
    v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(v.add_eos);
    v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(v.add_space_prefix);
    if (v.model == vocab_model::bpe && v.pre == "gemma4") v.add_bos = true; // llama.cpp forces it for Gemma 4

    std::string name(f.get_string("general.name").value_or(""));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (v.model == vocab_model::spm && (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos)) {
        if (v.types.empty()) v.types.assign(n, token_type::normal);
        apply_phi3_strip_rule(v);
    }
    return v;
}

} // namespace strata
