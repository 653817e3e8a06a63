// Constrained decoding for one request (strata_request.constraint_kind): a grammar matcher over the text generated so
// far, and the rule the sampler follows. A sampled token the grammar refuses is replaced by a draw among the tokens
// it allows (llama.cpp's order: sample, check, mask and draw again only when refused, which gives the same
// distribution as masking first); end-of-generation tokens are allowed only where the text is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.hpp"
#include "grammar/matcher.hpp"
#include "grammar/token_filter.hpp"
#include "tokenizer/tokenizer.hpp"

namespace strata::engine {

// What every constrained request of a model shares: each token's bytes in a trie, and the end-of-generation ids.
class constraint_vocab {
  public:
    explicit constraint_vocab(const tokenizer &t);
    const tokenizer &tok() const { return tok_; }
    const grammar::token_filter &filter() const { return filter_; }
    const std::vector<int32_t> &eog_ids() const { return eog_; }

  private:
    const tokenizer &tok_;
    grammar::token_filter filter_;
    std::vector<int32_t> eog_;
};

class output_constraint {
  public:
    // kind: strata_constraint_kind; text: GBNF or a JSON schema. Throws strata::error naming what cannot be built.
    output_constraint(const constraint_vocab &vocab, int32_t kind, const char *text);

    // The token to emit, given the one the sampler chose from `logits` (already penalised): kept when the grammar
    // allows it, else a new draw among the allowed ones (logits of the others set to -inf). Throws strata::error
    // when the grammar allows nothing at all.
    int32_t choose(sampler &smp, float *logits, int32_t sampled);
    // Moves the grammar past an emitted token.
    void accept(int32_t token);

  private:
    bool allowed(int32_t token) const;

    const constraint_vocab &vocab_;
    grammar::matcher matcher_;
    std::vector<uint8_t> mask_; // one per token, filled only when a sampled token is refused
};

} // namespace strata::engine
