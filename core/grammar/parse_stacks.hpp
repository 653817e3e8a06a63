// The matcher's pushdown machinery, shared by matcher and token_filter (internal). Like llama.cpp's llama_grammar, the
// state after some text is a set of parse stacks, each a list of grammar positions: the top is the terminal that must
// match next, the rest are where to continue when the rules above finish. Here the stacks are persistent linked lists
// of hash-consed nodes (a node is a position plus the node below it), so equal stacks are one node id, a set of
// stacks is a sorted vector of ids, and pushing or popping costs O(1) whatever the depth.
//
// A stack_engine works on one arena of nodes; a matcher keeps only the nodes its stacks use (stack_state) and loads
// them into an engine for each operation. Every bound of grammar_limits is enforced here: too deep stacks are dropped
// (what would nest deeper is not accepted), too many stacks or expansion steps are a strata::error.
#pragma once

#include "grammar/flat_hash.hpp"
#include "grammar/grammar.hpp"
#include "grammar/utf8_decoder.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace strata::grammar::detail {

struct stack_node {
    uint32_t pos;    // element position (a terminal or a rule reference); unused in node 0
    uint32_t parent; // node below; node 0 is the empty stack
};

inline constexpr uint32_t empty_stack = 0; // the whole root matched: the text may end here
inline constexpr uint32_t dead_stack = ~uint32_t{0};

// What a matcher keeps between tokens: only the nodes its heads use, parents before children.
struct stack_state {
    std::vector<stack_node> nodes{{0, 0}}; // nodes[0] is the empty stack
    std::vector<uint32_t> heads;          // sorted node ids, each topped by a terminal, or empty_stack
    utf8_decoder partial;                  // bytes of a character that the last token left unfinished
};

class stack_engine {
  public:
    // Most nodes one engine creates (one token filter call or one advance); more is a strata::error.
    static constexpr size_t max_nodes = size_t{1} << 20;

    explicit stack_engine(const grammar &g);

    // Replaces the arena by the nodes of `s` (its heads keep their ids).
    void load(const stack_state &s);
    // The stacks at the start of the text: the alternatives of the root rule, expanded to terminals.
    void start(std::vector<uint32_t> &heads);
    // The stacks after the terminals on top of `accepting` (heads that accept the next character) have matched it,
    // expanded to terminals, sorted and unique. Empty when nothing can follow.
    void advance(std::span<const uint32_t> accepting, std::vector<uint32_t> &out);
    // advance() with the heads of `heads` whose terminal accepts code point cp.
    void step(std::span<const uint32_t> heads, uint32_t cp, std::vector<uint32_t> &out);
    // The compact copy of the nodes under `heads`, with the heads renumbered.
    void save(std::span<const uint32_t> heads, const utf8_decoder &partial, stack_state &out);

    // Bounds the expansion steps of all the engine's work together (0: no bound beyond the per-character one); past
    // it, a strata::error that names `what` (e.g. "computing the allowed tokens").
    void set_total_step_budget(size_t steps, const char *what) {
        total_budget_ = steps;
        budget_what_ = what;
    }
    size_t total_steps() const { return total_steps_; }

    // The terminal on top of a head other than empty_stack.
    const char_class &top_class(uint32_t head) const {
        return g_.char_class_at(g_.elements()[nodes_[head].pos].value);
    }
    uint32_t top_position(uint32_t head) const { return nodes_[head].pos; }
    const grammar &grammar_ref() const { return g_; }

  private:
    uint32_t make(uint32_t pos, uint32_t parent);
    uint32_t after(uint32_t pos, uint32_t parent);
    void expand(uint32_t first, std::vector<uint32_t> &out);
    void finish(std::vector<uint32_t> &out);
    bool marked(uint32_t id) const { return id < mark_.size() && mark_[id] == stamp_; }
    void set_mark(uint32_t id);
    void new_stamp();

    const grammar &g_;
    const element *elems_;
    std::vector<stack_node> nodes_;
    std::vector<uint32_t> depth_;
    flat_map_u64 index_; // (pos, parent) -> node
    std::vector<uint32_t> mark_;
    uint32_t stamp_ = 0;
    size_t steps_ = 0;
    size_t total_steps_ = 0;
    size_t total_budget_ = 0;
    const char *budget_what_ = "";
    std::vector<uint32_t> work_;
    std::vector<uint32_t> accepting_;
};

} // namespace strata::grammar::detail
