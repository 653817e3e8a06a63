#include "grammar/parse_stacks.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace strata::grammar::detail {

stack_engine::stack_engine(const grammar &g) : g_(g), elems_(g.elements().data()) {
    nodes_.push_back({0, 0});
    depth_.push_back(0);
}

void stack_engine::load(const stack_state &s) {
    nodes_ = s.nodes;
    depth_.assign(nodes_.size(), 0);
    index_.clear();
    bool inserted = false;
    for (uint32_t i = 1; i < nodes_.size(); ++i) {
        depth_[i] = depth_[nodes_[i].parent] + 1;
        index_.insert((uint64_t{nodes_[i].pos} << 32) | nodes_[i].parent, i, inserted);
    }
}

void stack_engine::new_stamp() {
    if (++stamp_ == 0) {
        std::fill(mark_.begin(), mark_.end(), 0);
        stamp_ = 1;
    }
}

void stack_engine::set_mark(uint32_t id) {
    if (id >= mark_.size()) mark_.resize(std::max<size_t>({nodes_.size(), size_t{id} + 1, 2 * mark_.size(), 64}), 0);
    mark_[id] = stamp_;
}

uint32_t stack_engine::make(uint32_t pos, uint32_t parent) {
    const uint64_t key = (uint64_t{pos} << 32) | parent;
    const uint32_t found = index_.find(key);
    if (found != flat_map_u64::not_found) return found;
    const uint32_t depth = depth_[parent] + 1;
    if (depth > grammar_limits::max_stack_depth) return dead_stack; // not followed: what nests deeper is refused
    if (nodes_.size() >= max_nodes)
        fail("grammar too complex: matching needed more than {} parse stack nodes at once (near {}); simplify the "
             "grammar or make its alternatives less ambiguous",
             max_nodes, g_.element_text(pos));
    const auto id = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back({pos, parent});
    depth_.push_back(depth);
    bool inserted = false;
    index_.insert(key, id, inserted);
    return id;
}

uint32_t stack_engine::after(uint32_t pos, uint32_t parent) {
    return elems_[pos + 1].kind == element_kind::end ? parent : make(pos + 1, parent);
}

void stack_engine::expand(uint32_t first, std::vector<uint32_t> &out) {
    work_.clear();
    work_.push_back(first);
    while (!work_.empty()) {
        const uint32_t s = work_.back();
        work_.pop_back();
        if (s == dead_stack || marked(s)) continue;
        set_mark(s);
        if (++total_steps_ > total_budget_ && total_budget_ != 0)
            fail("grammar too complex: {} took more than {} parse steps; simplify the grammar or make its alternatives "
                 "less ambiguous",
                 budget_what_, total_budget_);
        if (++steps_ > grammar_limits::max_steps_per_char)
            fail("grammar too ambiguous: more than {} steps to find what may follow one character (near {}); make "
                 "alternatives start differently, e.g. write `a (b | c)` instead of `a b | a c`",
                 grammar_limits::max_steps_per_char, s == empty_stack ? "the end" : g_.element_text(nodes_[s].pos));
        if (s == empty_stack) {
            out.push_back(s);
            continue;
        }
        const uint32_t pos = nodes_[s].pos;
        const element e = elems_[pos];
        if (e.kind == element_kind::terminal) {
            out.push_back(s);
            continue;
        }
        const uint32_t base = after(pos, nodes_[s].parent);
        if (base == dead_stack) continue;
        for (const uint32_t alt : g_.alternatives(e.value))
            work_.push_back(elems_[alt].kind == element_kind::end ? base : make(alt, base));
    }
}

void stack_engine::finish(std::vector<uint32_t> &out) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (out.size() > grammar_limits::max_stacks)
        fail("grammar too ambiguous: more than {} ways to read the text so far are alive at once; make alternatives "
             "start differently (write `a (b | c)` instead of `a b | a c`) and avoid repeating optional items",
             grammar_limits::max_stacks);
}

void stack_engine::start(std::vector<uint32_t> &heads) {
    heads.clear();
    new_stamp();
    steps_ = 0;
    for (const uint32_t alt : g_.alternatives(g_.root()))
        expand(elems_[alt].kind == element_kind::end ? empty_stack : make(alt, empty_stack), heads);
    finish(heads);
}

void stack_engine::advance(std::span<const uint32_t> accepting, std::vector<uint32_t> &out) {
    out.clear();
    new_stamp();
    steps_ = 0;
    for (const uint32_t h : accepting) expand(after(nodes_[h].pos, nodes_[h].parent), out);
    finish(out);
}

void stack_engine::step(std::span<const uint32_t> heads, uint32_t cp, std::vector<uint32_t> &out) {
    accepting_.clear();
    for (const uint32_t h : heads)
        if (h != empty_stack && top_class(h).contains(cp)) accepting_.push_back(h);
    advance(accepting_, out);
}

void stack_engine::save(std::span<const uint32_t> heads, const utf8_decoder &partial, stack_state &out) {
    new_stamp();
    std::vector<uint32_t> live;
    for (uint32_t x : heads) {
        while (x != empty_stack && !marked(x)) {
            set_mark(x);
            live.push_back(x);
            x = nodes_[x].parent;
        }
    }
    std::sort(live.begin(), live.end()); // parents were created before their children, so they stay first
    const auto renumber = [&](uint32_t x) -> uint32_t {
        if (x == empty_stack) return 0;
        return static_cast<uint32_t>(std::lower_bound(live.begin(), live.end(), x) - live.begin()) + 1;
    };
    out.nodes.assign(1, stack_node{0, 0});
    out.nodes.reserve(live.size() + 1);
    for (const uint32_t x : live) out.nodes.push_back({nodes_[x].pos, renumber(nodes_[x].parent)});
    out.heads.clear();
    for (const uint32_t h : heads) out.heads.push_back(renumber(h));
    out.partial = partial;
}

} // namespace strata::grammar::detail
