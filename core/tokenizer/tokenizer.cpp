#include "tokenizer/tokenizer.hpp"

#include "common/error.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/spm_tokenizer.hpp"

namespace strata {

tokenizer::tokenizer(class vocab v) : vocab_(std::move(v)) {}

std::vector<int32_t> tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    encode_into(text, add_special, parse_special, out);
    return out;
}

void tokenizer::encode_into(std::string_view text, bool add_special, bool parse_special,
                            std::vector<int32_t> &out) const {
    out.clear();
    std::vector<vocab::fragment> fragments;
    vocab_.partition(text, parse_special, fragments);
    const vocab_data &d = vocab_.data();
    if (add_special && d.add_bos) out.push_back(d.bos);
    bool after_special = true;
    for (const vocab::fragment &f : fragments) {
        if (f.token >= 0) {
            out.push_back(f.token);
            after_special = true;
            continue;
        }
        encode_text(text.substr(f.offset, f.length), after_special, f.offset == 0, out);
        after_special = false;
    }
    if (add_special && d.add_eos) out.push_back(d.eos);
}

std::string_view tokenizer::piece(int32_t id) const {
    vocab_.check_id(id, "piece");
    return pieces_[static_cast<size_t>(id)];
}

std::string tokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    token_text_stream stream(*this, {});
    for (const int32_t id : ids) out += stream.next(id);
    return out;
}

std::vector<std::string> tokenizer::pieces_by_type(const class vocab &v,
                                                   const std::function<std::string(const std::string &)> &normal_text) {
    std::vector<std::string> pieces(static_cast<size_t>(v.size()));
    for (int32_t i = 0; i < v.size(); ++i) {
        const std::string &text = v.text(i);
        switch (v.type(i)) {
        case token_type::normal: pieces[static_cast<size_t>(i)] = normal_text(text); break;
        case token_type::user_defined: pieces[static_cast<size_t>(i)] = text; break;
        case token_type::byte: {
            const int b = parse_byte_token(text);
            if (b < 0)
                fail("{}: token {} has type BYTE but its text '{}' is not of the form <0xNN>", v.data().origin, i, text);
            pieces[static_cast<size_t>(i)] = std::string(1, static_cast<char>(b));
            break;
        }
        default: break; // control, unknown, unused, undefined: no text (llama.cpp with special=false)
        }
    }
    return pieces;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (!from.empty() && text.substr(i, from.size()) == from) {
            out += to;
            i += from.size();
        } else {
            out += text[i++];
        }
    }
    return out;
}

std::unique_ptr<tokenizer> make_tokenizer(vocab_data data) {
    switch (data.model) {
    case vocab_model::spm: return std::make_unique<spm_tokenizer>(vocab(std::move(data)));
    case vocab_model::bpe: return std::make_unique<bpe_tokenizer>(vocab(std::move(data)));
    }
    fail("tokenizer: unknown vocabulary model {}", static_cast<int>(data.model));
}

token_text_stream::token_text_stream(const tokenizer &t, std::span<const int32_t> prompt)
    : tok_(&t), text_started_(!t.drops_leading_space()) {
    for (size_t i = 0; i < prompt.size() && !text_started_; ++i)
        text_started_ = t.type(prompt[i]) != token_type::control;
}

std::string_view token_text_stream::next(int32_t id) {
    std::string_view p = tok_->piece(id);
    if (!text_started_ && !p.empty()) {
        // Only a piece SentencePiece produced carries the dummy prefix; a user-defined token's text is as written.
        const token_type t = tok_->type(id);
        if ((t == token_type::normal || t == token_type::byte) && p.front() == ' ') p.remove_prefix(1);
        text_started_ = true;
    }
    return p;
}

} // namespace strata
