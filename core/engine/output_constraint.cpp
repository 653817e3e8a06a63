#include "engine/output_constraint.hpp"

#include <limits>

#include <nlohmann/json.hpp>
#include <strata/plugin_abi.h>

#include "common/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/json_schema_grammar.hpp"
#include "grammar/regex_grammar.hpp"

namespace strata::engine {

namespace {

std::vector<std::string> token_pieces(const tokenizer &t) {
    std::vector<std::string> pieces(static_cast<size_t>(t.n_vocab()));
    for (int32_t i = 0; i < t.n_vocab(); ++i) pieces[static_cast<size_t>(i)] = std::string(t.piece(i)); // "" for special
    return pieces;
}

std::shared_ptr<const grammar::grammar> build(int32_t kind, const char *text) {
    switch (kind) {
    case STRATA_CONSTRAINT_GBNF:
        if (text == nullptr) fail("constraint: a GBNF grammar needs its text");
        return grammar::parse_gbnf(text);
    case STRATA_CONSTRAINT_JSON_SCHEMA: {
        if (text == nullptr) fail("constraint: a JSON schema needs its text");
        const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
        if (schema.is_discarded()) fail("constraint: the JSON schema is not valid JSON");
        return grammar::parse_gbnf(grammar::json_schema_to_gbnf(schema));
    }
    case STRATA_CONSTRAINT_ANY_JSON_OBJECT: return grammar::parse_gbnf(grammar::json_object_gbnf());
    case STRATA_CONSTRAINT_REGEX:
        if (text == nullptr) fail("constraint: a regular expression needs its text");
        return grammar::parse_gbnf(grammar::regex_to_gbnf(text));
    default: fail("constraint: unknown constraint_kind {}", kind);
    }
}

} // namespace

constraint_vocab::constraint_vocab(const tokenizer &t) : tok_(t), filter_(token_pieces(t)) {
    for (int32_t i = 0; i < t.n_vocab(); ++i)
        if (t.is_eog(i)) eog_.push_back(i);
}

output_constraint::output_constraint(const constraint_vocab &vocab, int32_t kind, const char *text)
    : vocab_(vocab), matcher_(build(kind, text)) {
    mask_.reserve(static_cast<size_t>(vocab.tok().n_vocab()));
}

bool output_constraint::allowed(int32_t token) const {
    if (vocab_.tok().is_eog(token)) return matcher_.can_end();
    const std::string_view piece = vocab_.tok().piece(token);
    return !piece.empty() && matcher_.accepts(piece);
}

int32_t output_constraint::choose(sampler &smp, float *logits, int32_t sampled) {
    if (allowed(sampled)) return sampled;
    vocab_.filter().allowed(matcher_, mask_);
    const bool can_end = matcher_.can_end();
    for (const int32_t id : vocab_.eog_ids()) mask_[static_cast<size_t>(id)] = can_end ? 1 : 0;
    bool any = false;
    constexpr float neg_inf = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < mask_.size(); ++i) {
        if (mask_[i]) any = true;
        else logits[i] = neg_inf;
    }
    if (!any)
        fail("the output constraint allows no token after the text so far (it expects {}); the model's vocabulary "
             "cannot spell what the grammar requires",
             matcher_.expected());
    const int32_t token = smp.draw(logits);
    if (mask_[static_cast<size_t>(token)]) return token;
    // Every allowed token had -inf already (a penalty, or the model itself): the first allowed one, deterministically.
    for (size_t i = 0; i < mask_.size(); ++i)
        if (mask_[i]) return static_cast<int32_t>(i);
    return token;
}

void output_constraint::accept(int32_t token) {
    if (vocab_.tok().is_eog(token)) return;
    matcher_.advance(vocab_.tok().piece(token));
}

} // namespace strata::engine
