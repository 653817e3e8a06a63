#include "grammar/token_filter.hpp"

#include "common/error.hpp"
#include "grammar/flat_hash.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace strata::grammar {

namespace {

using detail::empty_stack;
using detail::flat_map_u64;
using detail::mix64;
using detail::stack_engine;

constexpr uint32_t unknown = ~uint32_t{0};
constexpr uint32_t dead = ~uint32_t{0} - 1;

// The automaton one allowed() call builds. A state is a set of parse stacks plus, in the middle of a UTF-8
// character, the decoder state. When every stack treats the whole rest of a character alike (all of its possible
// completions match, or none do), the state keeps only the stacks that result and forgets the exact bits, so the
// thousands of CJK characters inside a JSON string share a handful of states.
class automaton {
  public:
    explicit automaton(stack_engine &eng) : eng_(eng) {}

    uint32_t start(const std::vector<uint32_t> &heads, const utf8_decoder &partial) {
        const uint32_t set = intern_set(heads);
        return partial.in_character() ? partial_state(set, partial) : full_state(set);
    }

    uint32_t next(uint32_t state, uint8_t b) {
        const uint32_t t = table_[size_t{state} * 256 + b];
        if (t != unknown) return t;
        const uint32_t computed = compute(state, b);
        table_[size_t{state} * 256 + b] = computed;
        return computed;
    }

  private:
    struct state_info {
        uint32_t set;          // the parse stacks (for a uniform partial state: those after the character)
        utf8_decoder partial;  // decoder state; value is 0 in a uniform partial state
        bool uniform;          // partial, and the character's outcome no longer depends on its value
    };

    std::span<const uint32_t> set_at(uint32_t id) const {
        return {set_data_.data() + set_off_[id], set_off_[id + 1] - set_off_[id]};
    }

    uint32_t intern_set(const std::vector<uint32_t> &heads) {
        uint64_t h = 0x9e3779b97f4a7c15ULL ^ heads.size();
        for (const uint32_t x : heads) h = mix64(h ^ x);
        if (h == flat_map_u64::empty_key) h = 0;
        for (uint32_t id = set_index_.find(h); id != flat_map_u64::not_found; id = set_chain_[id]) {
            const auto s = set_at(id);
            if (std::equal(s.begin(), s.end(), heads.begin(), heads.end())) return id;
        }
        const auto id = static_cast<uint32_t>(set_chain_.size());
        set_chain_.push_back(set_index_.find(h));
        set_index_.assign(h, id);
        set_data_.insert(set_data_.end(), heads.begin(), heads.end());
        set_off_.push_back(static_cast<uint32_t>(set_data_.size()));
        full_.push_back(unknown);
        return id;
    }

    uint32_t new_state(const state_info &info) {
        if (states_.size() >= token_filter::max_states)
            fail("grammar too complex for token filtering: more than {} distinct matcher states within one step; "
                 "simplify the grammar (fewer distinct long literals or counted repetitions)",
                 token_filter::max_states);
        states_.push_back(info);
        table_.resize(table_.size() + 256, unknown);
        return static_cast<uint32_t>(states_.size() - 1);
    }

    uint32_t full_state(uint32_t set) {
        if (full_[set] == unknown) full_[set] = new_state({set, {}, false});
        return full_[set];
    }

    static uint64_t lo_code(uint8_t lo) { return lo == 0x80 ? 0 : lo == 0x90 ? 1 : 2; }
    static uint64_t hi_code(uint8_t hi) { return hi == 0xBF ? 0 : hi == 0x8F ? 1 : 2; }

    uint32_t partial_key_state(bool uniform, uint32_t set, const utf8_decoder &d) {
        const uint64_t key = (uint64_t{uniform} << 63) | (uint64_t{d.remaining} << 61) | (lo_code(d.lo) << 59) |
                             (hi_code(d.hi) << 57) | (uint64_t{d.value & 0x1FFFFF} << 32) | set;
        uint32_t id = partial_index_.find(key);
        if (id == flat_map_u64::not_found) {
            id = new_state({set, d, uniform});
            bool inserted = false;
            partial_index_.insert(key, id, inserted);
        }
        return id;
    }

    // The stacks after a character that exactly the heads in accepting_ accept (cached per set and selection).
    uint32_t after_selected(uint32_t set) {
        if (accepting_.empty()) return dead;
        key_.assign(reinterpret_cast<const char *>(&set), sizeof set);
        key_.append(reinterpret_cast<const char *>(selection_.data()), selection_.size() * sizeof(uint64_t));
        const auto it = selections_.find(key_);
        if (it != selections_.end()) return it->second;
        eng_.advance(accepting_, next_);
        const uint32_t result = next_.empty() ? dead : intern_set(next_);
        selections_.emplace(key_, result);
        return result;
    }

    void select_begin(size_t n) {
        accepting_.clear();
        selection_.assign((n + 63) / 64, 0);
    }
    void select(size_t i, uint32_t head) {
        accepting_.push_back(head);
        selection_[i / 64] |= uint64_t{1} << (i % 64);
    }

    uint32_t after_char(uint32_t set, uint32_t cp) {
        const auto heads = set_at(set);
        select_begin(heads.size());
        for (size_t i = 0; i < heads.size(); ++i)
            if (heads[i] != empty_stack && eng_.top_class(heads[i]).contains(cp)) select(i, heads[i]);
        const uint32_t next = after_selected(set);
        return next == dead ? dead : full_state(next);
    }

    // A state in the middle of a character.
    uint32_t partial_state(uint32_t set, const utf8_decoder &d) {
        uint32_t first = 0, last = 0;
        d.completion_range(first, last);
        const auto heads = set_at(set);
        select_begin(heads.size());
        for (size_t i = 0; i < heads.size(); ++i) {
            if (heads[i] == empty_stack) continue;
            const auto rel = eng_.top_class(heads[i]).relation_to(first, last);
            if (rel == char_class::some) return partial_key_state(false, set, d); // depends on the rest
            if (rel == char_class::all) select(i, heads[i]);
        }
        const uint32_t next = after_selected(set);
        if (next == dead) return dead;
        utf8_decoder canonical = d;
        canonical.value = 0;
        return partial_key_state(true, next, canonical);
    }

    uint32_t compute(uint32_t state, uint8_t b) {
        const state_info st = states_[state];
        utf8_decoder d = st.partial;
        const auto r = d.feed(b);
        if (r == utf8_decoder::invalid) return dead;
        if (st.uniform) {
            if (r == utf8_decoder::complete) return full_state(st.set);
            d.value = 0;
            return partial_key_state(true, st.set, d);
        }
        if (r == utf8_decoder::complete) return after_char(st.set, d.value);
        return partial_state(st.set, d);
    }

    stack_engine &eng_;
    std::vector<uint32_t> set_data_;
    std::vector<uint32_t> set_off_{0};
    std::vector<uint32_t> set_chain_; // previous set with the same hash
    std::vector<uint32_t> full_;      // set -> its state between characters
    flat_map_u64 set_index_;
    std::vector<state_info> states_;
    std::vector<uint32_t> table_;
    flat_map_u64 partial_index_;
    std::unordered_map<std::string, uint32_t> selections_;
    std::string key_;
    std::vector<uint32_t> accepting_;
    std::vector<uint64_t> selection_;
    std::vector<uint32_t> next_;
};

} // namespace

token_filter::token_filter(std::vector<std::string> pieces) : n_tokens_(pieces.size()) {
    if (pieces.size() >= dead) fail("token filter: {} tokens is more than it can index", pieces.size());
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < pieces.size(); ++i)
        if (!pieces[i].empty()) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        return pieces[a] != pieces[b] ? pieces[a] < pieces[b] : a < b;
    });

    std::vector<uint32_t> path; // path[d - 1]: the node at depth d on the current branch
    const std::string *prev = nullptr;
    std::vector<std::pair<uint32_t, uint32_t>> ends; // (node, token), nodes non-decreasing
    for (const uint32_t t : order) {
        const std::string &p = pieces[t];
        size_t common = 0;
        if (prev) {
            const size_t n = std::min(prev->size(), p.size());
            while (common < n && (*prev)[common] == p[common]) ++common;
        }
        path.resize(common);
        for (size_t d = common; d < p.size(); ++d) {
            path.push_back(static_cast<uint32_t>(byte_.size()));
            byte_.push_back(static_cast<uint8_t>(p[d]));
            depth_.push_back(static_cast<uint32_t>(d + 1));
        }
        ends.emplace_back(path.back(), t);
        max_depth_ = std::max(max_depth_, p.size());
        prev = &p;
    }
    if (byte_.size() >= dead) fail("token filter: the vocabulary's trie has too many nodes ({})", byte_.size());

    skip_.assign(byte_.size(), static_cast<uint32_t>(byte_.size()));
    std::vector<uint32_t> open;
    for (uint32_t i = 0; i < byte_.size(); ++i) {
        while (!open.empty() && depth_[open.back()] >= depth_[i]) {
            skip_[open.back()] = i;
            open.pop_back();
        }
        open.push_back(i);
    }

    token_begin_.assign(byte_.size() + 1, 0);
    for (const auto &e : ends) ++token_begin_[e.first + 1];
    std::partial_sum(token_begin_.begin(), token_begin_.end(), token_begin_.begin());
    tokens_.resize(ends.size());
    for (size_t i = 0; i < ends.size(); ++i) tokens_[i] = ends[i].second; // ends are grouped by node already
}

void token_filter::allowed(const matcher &m, std::vector<uint8_t> &mask) const {
    mask.assign(n_tokens_, 0);
    if (byte_.empty()) return;
    stack_engine eng(m.grammar_ref());
    eng.load(m.state());
    eng.set_total_step_budget(max_steps, "computing the allowed tokens");
    automaton a(eng);
    const uint32_t s0 = a.start(m.state().heads, m.state().partial);
    if (s0 == dead) return;
    std::vector<uint32_t> at(max_depth_ + 1);
    at[0] = s0;
    const size_t n = byte_.size();
    for (size_t i = 0; i < n;) {
        const uint32_t d = depth_[i];
        const uint32_t t = a.next(at[d - 1], byte_[i]);
        if (t == dead) {
            i = skip_[i];
            continue;
        }
        at[d] = t;
        for (uint32_t k = token_begin_[i]; k < token_begin_[i + 1]; ++k) mask[tokens_[k]] = 1;
        ++i;
    }
}

} // namespace strata::grammar
