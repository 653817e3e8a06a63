// Per-generation grammar state: which text may come next, given the text so far. One matcher per request (copy it
// for speculative checks: copies are independent and cheap, a few small vectors). It works on Unicode code points
// decoded strictly from UTF-8; a token that ends in the middle of a character leaves the partial bytes in the state,
// and the next token must complete them.
//
//   auto g = strata::grammar::parse_gbnf(text);   // once; the grammar is shared, immutable
//   strata::grammar::matcher m(g);                 // per generation
//   if (m.accepts(piece)) m.advance(piece);        // per sampled token
//   if (m.can_end()) ...                           // end of generation allowed; done(): nothing else is
#pragma once

#include "grammar/grammar.hpp"
#include "grammar/parse_stacks.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace strata::grammar {

class matcher {
  public:
    // Throws strata::error when the grammar is null or too ambiguous to start (see grammar_limits).
    explicit matcher(std::shared_ptr<const grammar> g);

    // Whether `bytes` can come next: every complete character matches, and a trailing partial character can still
    // complete to one that matches. The empty string is always accepted. Throws strata::error only when the grammar
    // exceeds grammar_limits on this text.
    bool accepts(std::string_view bytes) const;
    // Moves past `bytes`; throws strata::error (leaving the matcher as it was) when they are not accepted.
    void advance(std::string_view bytes);
    // The root may end here: end of generation is allowed.
    bool can_end() const;
    // Nothing but the end can come.
    bool done() const;

    // What may come next, for messages: e.g. `"}", ",", [0-9], or the end`.
    std::string expected() const;
    const grammar &grammar_ref() const { return *g_; }
    const std::shared_ptr<const grammar> &grammar_ptr() const { return g_; }
    // The parse stacks (for token_filter).
    const detail::stack_state &state() const { return state_; }

  private:
    std::shared_ptr<const grammar> g_;
    detail::stack_state state_;
};

} // namespace strata::grammar
