#include "kv/lru_index.hpp"

namespace strata::kv {

size_t lru_index::home(uint64_t hash) const {
    // The keys are hashes already, but a caller's hash may have weak low bits: mix before masking.
    hash ^= hash >> 33;
    hash *= 0xff51afd7ed558ccdULL;
    hash ^= hash >> 33;
    return static_cast<size_t>(hash) & (table_.size() - 1);
}

size_t lru_index::find_slot(uint64_t hash) const {
    if (table_.empty()) return npos;
    for (size_t s = home(hash);; s = (s + 1) & (table_.size() - 1)) {
        const uint32_t v = table_[s];
        if (v == 0) return npos;
        if (nodes_[v - 1].hash == hash) return s;
    }
}

void lru_index::grow_table() {
    std::vector<uint32_t> old = std::move(table_);
    table_.assign(old.empty() ? 64 : old.size() * 2, 0);
    for (uint32_t v : old) {
        if (v == 0) continue;
        size_t s = home(nodes_[v - 1].hash);
        while (table_[s] != 0) s = (s + 1) & (table_.size() - 1);
        table_[s] = v;
    }
}

void lru_index::unlink(uint32_t n) {
    node &x = nodes_[n];
    if (x.older != none) nodes_[x.older].newer = x.newer;
    else oldest_ = x.newer;
    if (x.newer != none) nodes_[x.newer].older = x.older;
    else newest_ = x.older;
    x.older = x.newer = none;
}

void lru_index::push_newest(uint32_t n) {
    nodes_[n].older = newest_;
    nodes_[n].newer = none;
    if (newest_ != none) nodes_[newest_].newer = n;
    else oldest_ = n;
    newest_ = n;
}

bool lru_index::touch(uint64_t hash) {
    const size_t s = find_slot(hash);
    if (s == npos) return false;
    const uint32_t n = table_[s] - 1;
    if (n != newest_) {
        unlink(n);
        push_newest(n);
    }
    return true;
}

void lru_index::insert_or_touch(uint64_t hash) {
    if (touch(hash)) return;
    if ((size_ + 1) * 2 > table_.size()) grow_table();
    uint32_t n;
    if (free_ != none) {
        n = free_;
        free_ = nodes_[n].newer;
    } else {
        n = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back({});
    }
    nodes_[n].hash = hash;
    push_newest(n);
    size_t s = home(hash);
    while (table_[s] != 0) s = (s + 1) & (table_.size() - 1);
    table_[s] = n + 1;
    ++size_;
}

bool lru_index::erase(uint64_t hash) {
    size_t s = find_slot(hash);
    if (s == npos) return false;
    const uint32_t n = table_[s] - 1;
    unlink(n);
    nodes_[n].newer = free_;
    free_ = n;
    --size_;
    // Backward-shift deletion: move later entries of the probe run into the hole so lookups need no tombstones.
    const size_t mask = table_.size() - 1;
    table_[s] = 0;
    for (size_t next = (s + 1) & mask; table_[next] != 0; next = (next + 1) & mask) {
        const size_t want = home(nodes_[table_[next] - 1].hash);
        // The entry at `next` may fill the hole unless its home lies cyclically in (s, next].
        const bool stays = s <= next ? (s < want && want <= next) : (s < want || want <= next);
        if (stays) continue;
        table_[s] = table_[next];
        table_[next] = 0;
        s = next;
    }
    return true;
}

std::optional<uint64_t> lru_index::oldest() const {
    if (oldest_ == none) return std::nullopt;
    return nodes_[oldest_].hash;
}

} // namespace strata::kv
