#include "tokenizer/vocab_from_gguf.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "gguf/gguf_file.hpp"

namespace strata {

namespace {

// Special-token id: a missing key keeps the default; a negative value means "none" (-1).
int32_t read_token_id(const gguf::file &f, std::string_view key, int32_t fallback, size_t n_vocab) {
    const auto v = f.get_int(key);
    if (!v) return fallback;
    if (*v < 0) return -1;
    if (static_cast<uint64_t>(*v) >= n_vocab)
        fail("{}: {} = {} is out of range for the {}-token vocabulary; fix the metadata (valid ids 0..{})", f.name(),
             key, *v, n_vocab, n_vocab - 1);
    return static_cast<int32_t>(*v);
}

// llama.cpp gives every special token of Phi-3 models RSTRIP (whitespace after it is dropped when the token is
// found in text), except <unk>, <s> and <|endoftext|>; it recognises Phi-3 by general.name.
void apply_phi3_strip_rule(spm_vocab &v) {
    v.rstrip.assign(v.tokens.size(), 0);
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const token_type t = v.types[i];
        if (t == token_type::control || t == token_type::user_defined || t == token_type::unknown) v.rstrip[i] = 1;
        const std::string &text = v.tokens[i];
        if (text == "</s>") v.rstrip[i] = 1;
        if (text == "<unk>" || text == "<s>" || text == "<|endoftext|>") v.rstrip[i] = 0;
    }
}

} // namespace

spm_vocab load_spm_vocab(const gguf::file &f) {
    const auto model = f.get_string("tokenizer.ggml.model");
    if (!model)
        fail("{}: no tokenizer.ggml.model key; the file has no tokenizer (a GGUF with an SPM vocabulary is needed)",
             f.name());
    if (*model != "llama")
        fail("{}: tokenizer.ggml.model is \"{}\", but only SentencePiece vocabularies (\"llama\") are supported",
             f.name(), *model);

    spm_vocab v;
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->empty())
        fail("{}: tokenizer.ggml.tokens is missing or empty; the vocabulary can't be loaded", f.name());
    const size_t n = tokens->size();
    v.tokens.assign(tokens->begin(), tokens->end());

    // Missing scores/types default as in llama.cpp (score 0, NORMAL); present ones must match the token count.
    if (auto scores = f.get_float_array("tokenizer.ggml.scores")) {
        if (scores->size() != n)
            fail("{}: tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}", f.name(),
                 scores->size(), n);
        v.scores = std::move(*scores);
    } else {
        v.scores.assign(n, 0.0f);
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
    } else {
        v.types.assign(n, token_type::normal);
    }

    v.bos = read_token_id(f, "tokenizer.ggml.bos_token_id", 1, n);
    v.eos = read_token_id(f, "tokenizer.ggml.eos_token_id", 2, n);
    v.unk = read_token_id(f, "tokenizer.ggml.unknown_token_id", 0, n);
    // A bad padding id only matters for batching by padding, which we don't do: warn like llama.cpp and drop it.
    if (const auto pad = f.get_int("tokenizer.ggml.padding_token_id")) {
        if (*pad >= 0 && static_cast<uint64_t>(*pad) < n)
            v.pad = static_cast<int32_t>(*pad);
        else if (*pad >= 0)
            log::warn("tokenizer", "{}: tokenizer.ggml.padding_token_id = {} is out of range; ignoring it", f.name(),
                      *pad);
    }
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
    v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
    v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);

    std::string name(f.get_string("general.name").value_or(""));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) apply_phi3_strip_rule(v);
    return v;
}

} // namespace strata
