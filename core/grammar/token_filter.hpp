// Which tokens of a vocabulary a grammar allows next, for the sampler. Built once per vocabulary: a trie over the
// tokens' bytes, laid out flat in depth-first order. One allowed() call walks the trie from the matcher's state and
// skips every subtree whose prefix the grammar refuses, so shared prefixes are matched once. Along the walk it builds
// a small automaton on the fly, (parse stacks, partial UTF-8 character) -> state with a 256-entry byte table, so each
// trie node usually costs one table lookup; characters whose outcome is the same for a whole UTF-8 lead byte (as
// inside a JSON string) are decided once for that lead byte.
//
// Thread-safe: allowed() is const and keeps its working state on the call's stack, so one filter can serve every
// request of a vocabulary at once.
#pragma once

#include "grammar/matcher.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace strata::grammar {

class token_filter {
  public:
    // Most states the automaton of one allowed() call may build (each holds a 1 KiB table); a grammar that needs more
    // within one token is a strata::error.
    static constexpr size_t max_states = size_t{1} << 16;
    // Most parse steps (rule expansions) of one allowed() call, all states together; typical JSON states need tens to
    // hundreds. More is a strata::error, so a pathological grammar cannot stall a request for long.
    static constexpr size_t max_steps = size_t{1} << 22;

    // pieces[i]: the UTF-8 bytes token i stands for; empty for special tokens (never allowed: end of generation is the
    // caller's, through matcher::can_end()).
    explicit token_filter(std::vector<std::string> pieces);

    // mask[i] = 1 when token i may come next (m.accepts(pieces[i])), else 0; mask is resized to size().
    void allowed(const matcher &m, std::vector<uint8_t> &mask) const;

    size_t size() const { return n_tokens_; }
    size_t trie_nodes() const { return byte_.size(); }

  private:
    size_t n_tokens_ = 0;
    size_t max_depth_ = 0;
    // Trie nodes in depth-first order: the byte on the edge into the node, its depth (1 = child of the root), the
    // index just past its subtree, and the tokens that end there (tokens_[token_begin_[i] .. token_begin_[i + 1])).
    std::vector<uint8_t> byte_;
    std::vector<uint32_t> depth_;
    std::vector<uint32_t> skip_;
    std::vector<uint32_t> token_begin_;
    std::vector<uint32_t> tokens_;
};

} // namespace strata::grammar
