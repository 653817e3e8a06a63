#include "kv/kv_cache.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <exception>

namespace strata::kv {

const char *tier_name(tier t) {
    switch (t) {
    case tier::device: return "device";
    case tier::host: return "CPU";
    case tier::nvme: return "NVMe";
    }
    return "?";
}

kv_cache::kv_cache(kv_cache_config cfg) : cfg_(cfg) {
    if (cfg_.block_size < 1) fail("KV block_size {} must be at least 1 (--block-size)", cfg_.block_size);
    if (cfg_.block_bytes == 0) fail("KV block of 0 bytes");
    bounce_.resize(cfg_.block_bytes);
}

kv_cache::~kv_cache() = default;

void kv_cache::add_pool(tier t, uint32_t n_blocks, std::unique_ptr<block_storage> storage) {
    auto pl = std::make_unique<pool>();
    pl->storage = std::move(storage);
    pl->n = n_blocks;
    pl->ref.assign(n_blocks, 0);
    pl->hash.assign(n_blocks, 0);
    pl->tokens.assign(static_cast<size_t>(n_blocks) * static_cast<size_t>(cfg_.block_size), 0);
    pl->lru.resize(n_blocks);
    pl->free.reserve(n_blocks);
    pl->by_hash.resize(n_blocks);
    // Low indexes are handed out first (free is used as a stack).
    for (uint32_t i = n_blocks; i-- > 0;) pl->free.push_back(i);
    pools_[static_cast<int>(t)] = std::move(pl);
    st_.blocks_total[static_cast<int>(t)] = n_blocks;
}

bool kv_cache::has_pool(tier t) const { return pools_[static_cast<int>(t)] != nullptr; }
uint32_t kv_cache::capacity(tier t) const { return has_pool(t) ? p(t).n : 0; }

uint32_t kv_cache::reclaimable_device_blocks() const {
    const pool &d = p(tier::device);
    return static_cast<uint32_t>(d.free.size() + d.lru.size());
}

uint32_t kv_cache::reclaimable_host_blocks() const {
    if (!has_pool(tier::host)) return 0;
    const pool &h = p(tier::host);
    return static_cast<uint32_t>(h.free.size() + h.lru.size());
}

void *kv_cache::device_address(block_ref b) const { return p(b.where).storage->device_address(b.index); }

uint32_t kv_cache::blocks_in(const seq_blocks &s, tier t) const {
    uint32_t n = 0;
    for (const block_ref &b : s.table) n += b.where == t ? 1u : 0u;
    return n;
}

uint64_t kv_cache::block_hash(uint64_t parent, std::span<const int32_t> block_tokens) const {
    // Chained: a block's hash covers every token before it, and the first block's seed is the model fingerprint.
    const uint64_t h = XXH3_64bits_withSeed(block_tokens.data(), block_tokens.size_bytes(), parent);
    return h == 0 ? 1 : h; // 0 marks "not hashed" in the pools
}

void kv_cache::forget_hash(pool &pl, uint32_t i) {
    if (pl.hash[i] == 0) return;
    pl.by_hash.erase(pl.hash[i], i);
    pl.hash[i] = 0;
}

void kv_cache::set_hash(pool &pl, uint32_t i, uint64_t h, std::span<const int32_t> toks) {
    if (pl.hash[i] == h || pl.by_hash.contains(h)) return; // already cached here (this block or a twin)
    forget_hash(pl, i);
    pl.hash[i] = h;
    pl.by_hash.insert(h, i);
    std::copy(toks.begin(), toks.end(), pl.tokens.begin() + static_cast<ptrdiff_t>(i) * cfg_.block_size);
}

std::span<const int32_t> kv_cache::block_tokens(const pool &pl, uint32_t i) const {
    return {pl.tokens.data() + static_cast<size_t>(i) * cfg_.block_size, static_cast<size_t>(cfg_.block_size)};
}

bool kv_cache::store_put(pool &pl, uint32_t i) {
    if (store_ == nullptr || pl.hash[i] == 0 || store_->contains(pl.hash[i])) return false;
    const std::span<const int32_t> toks = block_tokens(pl, i);
    const void *src = pl.storage->host_address(i);
    if (src == nullptr) {
        pl.storage->load(i, bounce_.data());
        src = bounce_.data();
    }
    return store_->put(pl.hash[i], toks, src);
}

void kv_cache::copy(block_ref from, block_ref to) {
    copy_block(*p(from.where).storage, from.index, *p(to.where).storage, to.index, bounce_.data());
}

// A cached (ref 0) block leaves `from`: its contents go one tier down (device -> host -> store) so a later request
// with the same prefix loads it instead of recomputing.
void kv_cache::demote(tier from, uint32_t i) {
    pool &src = p(from);
    if (src.hash[i] == 0) return;
    if (from == tier::device && has_pool(tier::host) && !p(tier::host).by_hash.contains(src.hash[i])) {
        pool &h = p(tier::host);
        std::optional<uint32_t> hi;
        if (h.free.empty() && !h.lru.empty()) evict_cached(tier::host);
        if (!h.free.empty()) hi = h.free.back();
        if (hi) {
            copy({tier::device, i}, {tier::host, *hi}); // before taking it: a failed copy leaves the pools as they were
            h.free.pop_back();
            set_hash(h, *hi, src.hash[i], block_tokens(src, i));
            h.lru.push_back(*hi); // a cached block: ref 0, at the most recently used end
            return;
        }
    }
    store_put(src, i);
}

void kv_cache::evict_cached(tier t) {
    pool &pl = p(t);
    const uint32_t i = pl.lru.front();
    try {
        demote(t, i);
    } catch (const std::exception &e) {
        // A cached block belongs to no request: one that cannot move down (a failed copy or tier write) is dropped,
        // and the prefix is computed again when it is next asked for.
        log::warn("kv", "a cached prefix block could not be demoted from the {} pool: {}; it is dropped", tier_name(t),
                  e.what());
    }
    pl.lru.remove(i);
    forget_hash(pl, i);
    pl.free.push_back(i);
}

std::optional<uint32_t> kv_cache::take(tier t) {
    if (!has_pool(t)) return std::nullopt;
    pool &pl = p(t);
    if (pl.free.empty()) {
        if (pl.lru.empty()) return std::nullopt;
        evict_cached(t);
    }
    const uint32_t i = pl.free.back();
    pl.free.pop_back();
    pl.ref[i] = 1;
    forget_hash(pl, i);
    return i;
}

void kv_cache::unref(block_ref b) {
    pool &pl = p(b.where);
    if (--pl.ref[b.index] > 0) return;
    if (pl.hash[b.index] != 0 && b.where != tier::nvme) {
        pl.lru.push_back(b.index);
    } else {
        forget_hash(pl, b.index);
        pl.free.push_back(b.index);
    }
}

int32_t kv_cache::match_prefix(seq_blocks &s, std::span<const int32_t> tokens, int32_t max_tokens) {
    if (!cfg_.prefix_caching || !s.table.empty()) return 0;
    const int32_t bs = cfg_.block_size;
    const int32_t n_full = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size())) / bs;
    st_.prefix_queries += static_cast<int64_t>(n_full) * bs;
    uint64_t parent = cfg_.fingerprint;
    pool &dev = p(tier::device);
    for (int32_t b = 0; b < n_full; ++b) {
        const auto toks = tokens.subspan(static_cast<size_t>(b) * bs, static_cast<size_t>(bs));
        const uint64_t h = block_hash(parent, toks);
        if (const uint32_t i = dev.by_hash.find(h); i != block_hash_index::none) {
            dev.lru.remove(i);
            ++dev.ref[i];
            st_.prefix_hits[static_cast<int>(tier::device)] += bs;
            s.table.push_back({tier::device, i});
            s.hashes.push_back(h);
            parent = h;
        } else {
            tier found = tier::device;
            uint32_t hi = 0;
            if (has_pool(tier::host)) {
                if (const uint32_t hit = p(tier::host).by_hash.find(h); hit != block_hash_index::none) {
                    found = tier::host;
                    hi = hit;
                }
            }
            if (found == tier::device && (store_ == nullptr || !store_->contains(h))) break;
            // Pin the host copy while a device block is found (taking one may evict host blocks).
            if (found == tier::host) {
                ++p(tier::host).ref[hi];
                p(tier::host).lru.remove(hi);
            }
            std::optional<uint32_t> di = take(tier::device);
            bool ok = di.has_value();
            try {
                if (ok && found == tier::host) {
                    copy({tier::host, hi}, {tier::device, *di});
                } else if (ok) {
                    void *dst = dev.storage->host_address(*di);
                    ok = store_->get(h, toks, dst != nullptr ? dst : bounce_.data());
                    if (ok && dst == nullptr) dev.storage->store(*di, bounce_.data());
                    found = tier::nvme;
                }
            } catch (...) {
                if (found == tier::host) unref({tier::host, hi});
                if (di) unref({tier::device, *di});
                throw;
            }
            if (found == tier::host) unref({tier::host, hi});
            if (!ok) {
                if (di) unref({tier::device, *di});
                break; // a corrupt or vanished entry: recompute from here
            }
            set_hash(dev, *di, h, toks);
            st_.prefix_hits[static_cast<int>(found)] += bs;
            st_.bytes_in += static_cast<int64_t>(cfg_.block_bytes);
            s.table.push_back({tier::device, *di});
            s.hashes.push_back(h);
            parent = h;
        }
    }
    return static_cast<int32_t>(s.table.size()) * bs;
}

void kv_cache::register_full_blocks(seq_blocks &s, std::span<const int32_t> tokens, int32_t n_computed) {
    const int32_t bs = cfg_.block_size;
    while (static_cast<int32_t>(s.hashes.size() + 1) * bs <= n_computed &&
           s.hashes.size() < s.table.size()) {
        const size_t b = s.hashes.size();
        const auto toks = tokens.subspan(b * static_cast<size_t>(bs), static_cast<size_t>(bs));
        const uint64_t h = block_hash(b == 0 ? cfg_.fingerprint : s.hashes.back(), toks);
        s.hashes.push_back(h);
        const block_ref r = s.table[b];
        if (cfg_.prefix_caching && r.where != tier::nvme) set_hash(p(r.where), r.index, h, toks);
    }
}

bool kv_cache::ensure_slots(seq_blocks &s, int32_t n_tokens) {
    const int64_t need = (static_cast<int64_t>(n_tokens) + cfg_.block_size - 1) / cfg_.block_size -
                         static_cast<int64_t>(s.table.size());
    if (need <= 0) return true;
    if (need > static_cast<int64_t>(reclaimable_device_blocks())) return false;
    for (int64_t k = 0; k < need; ++k) s.table.push_back({tier::device, *take(tier::device)});
    return true;
}

bool kv_cache::make_writable(seq_blocks &s, int32_t pos) {
    const size_t b = static_cast<size_t>(pos / cfg_.block_size);
    if (b >= s.table.size()) return true;
    block_ref &r = s.table[b];
    pool &pl = p(r.where);
    if (pl.ref[r.index] <= 1 && (pl.hash[r.index] == 0 || b >= s.hashes.size())) {
        // Private. A block still registered as a cached prefix must not change under its hash.
        if (pl.hash[r.index] != 0) forget_hash(pl, r.index);
        return true;
    }
    if (pl.ref[r.index] <= 1) {
        forget_hash(pl, r.index);
        if (b < s.hashes.size()) s.hashes.resize(b);
        return true;
    }
    std::optional<uint32_t> di = take(tier::device);
    if (!di) return false;
    copy(r, {tier::device, *di});
    unref(r);
    r = {tier::device, *di};
    if (b < s.hashes.size()) s.hashes.resize(b); // the copy is about to diverge from the shared prefix
    return true;
}

void kv_cache::fork(const seq_blocks &src, seq_blocks &dst) {
    dst = src;
    for (const block_ref &b : dst.table) ++p(b.where).ref[b.index];
}

void kv_cache::release(seq_blocks &s) {
    // Last block first: in the LRU the tail of a prompt is then evicted before its (more shareable) beginning.
    for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) unref(*it);
    s.table.clear();
    s.hashes.clear();
}

// Moves the block `r` points at into `dst` (already taken, reference 1): copies the bytes, carries the prefix hash
// (not into the NVMe swap pool), drops the old reference and points `r` at the copy. `keep_cached`: a hashed source
// stays cached where it was (reclaimable); otherwise it is freed because the block has left its tier.
void kv_cache::move_block(block_ref &r, block_ref dst, bool keep_cached) {
    try {
        copy(r, dst);
    } catch (...) {
        unref(dst); // the sequence keeps its block; blocks moved before stay moved (the table says so)
        throw;
    }
    pool &src = p(r.where);
    if (src.hash[r.index] != 0) {
        if (dst.where != tier::nvme) set_hash(p(dst.where), dst.index, src.hash[r.index], block_tokens(src, r.index));
        if (!keep_cached) forget_hash(src, r.index);
    }
    unref(r);
    r = dst;
}

bool kv_cache::swap_out(seq_blocks &s, tier &to, uint64_t &bytes) {
    const uint32_t n = blocks_in(s, tier::device);
    const uint32_t host_room = reclaimable_host_blocks();
    const uint32_t nvme_room = has_pool(tier::nvme) ? static_cast<uint32_t>(p(tier::nvme).free.size()) : 0;
    if (n > host_room + nvme_room) return false;
    to = tier::host;
    bytes = 0;
    for (block_ref &r : s.table) {
        if (r.where != tier::device) continue;
        block_ref dst{};
        if (auto hi = take(tier::host)) {
            dst = {tier::host, *hi};
        } else {
            dst = {tier::nvme, *take(tier::nvme)};
            to = tier::nvme;
        }
        move_block(r, dst, true); // a hashed device block stays cached (reclaimable)
        bytes += cfg_.block_bytes;
    }
    st_.bytes_out += static_cast<int64_t>(bytes);
    return true;
}

bool kv_cache::swap_in(seq_blocks &s, uint32_t keep_free, uint64_t &bytes) {
    bytes = 0;
    // Feasibility first, so a failure loses nothing.
    const uint32_t outside = static_cast<uint32_t>(s.table.size()) - blocks_in(s, tier::device);
    const uint32_t dev_room = reclaimable_device_blocks() > keep_free ? reclaimable_device_blocks() - keep_free : 0;
    if (!cfg_.device_reads_host && outside > dev_room) return false;
    if (cfg_.device_reads_host) {
        const uint32_t nvme_blocks = blocks_in(s, tier::nvme);
        const uint32_t to_device = std::min(outside, dev_room);
        // Blocks that do not go to the device must be in the host pool; NVMe ones need host room.
        const uint32_t nvme_left = nvme_blocks > to_device ? nvme_blocks - to_device : 0;
        if (nvme_left > reclaimable_host_blocks()) return false;
    }
    // Newest blocks first onto the device: decode attends to all, but the next writes go to the newest.
    for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) {
        block_ref &r = *it;
        if (r.where == tier::device) continue;
        if (reclaimable_device_blocks() > keep_free) {
            move_block(r, {tier::device, *take(tier::device)}, true); // the host copy stays cached
            bytes += cfg_.block_bytes;
        } else if (r.where == tier::nvme) {
            move_block(r, {tier::host, *take(tier::host)}, true);
        }
    }
    st_.bytes_in += static_cast<int64_t>(bytes);
    return true;
}

bool kv_cache::spill_oldest(seq_blocks &s) {
    if (!cfg_.device_reads_host || !has_pool(tier::host)) return false;
    for (block_ref &r : s.table) {
        if (r.where != tier::device) continue;
        pool &dev = p(tier::device);
        if (dev.ref[r.index] > 1) continue; // shared: moving it would not free a device block
        std::optional<uint32_t> hi = take(tier::host);
        if (!hi) return false;
        move_block(r, {tier::host, *hi}, false); // it leaves the device: freed there, not kept cached
        st_.bytes_out += static_cast<int64_t>(cfg_.block_bytes);
        return true;
    }
    return false;
}

uint64_t kv_cache::persist_prefixes() {
    if (store_ == nullptr) return 0;
    uint64_t n = 0;
    for (tier t : {tier::device, tier::host}) {
        if (!has_pool(t)) continue;
        pool &pl = p(t);
        for (uint32_t i = 0; i < pl.n; ++i) n += store_put(pl, i) ? 1 : 0;
    }
    return n;
}

kv_cache_stats kv_cache::stats() const {
    kv_cache_stats s = st_;
    for (int t = 0; t < n_tiers; ++t) {
        if (!pools_[t]) continue;
        const pool &pl = *pools_[t];
        s.blocks_total[t] = pl.n;
        s.blocks_used[t] = static_cast<int64_t>(pl.n - pl.free.size());
        s.blocks_cached[t] = static_cast<int64_t>(pl.lru.size());
    }
    if (store_ != nullptr) {
        const int t = static_cast<int>(tier::nvme);
        s.blocks_total[t] += static_cast<int64_t>(store_->capacity_entries());
        s.blocks_used[t] += static_cast<int64_t>(store_->entries());
        s.blocks_cached[t] += static_cast<int64_t>(store_->entries());
    }
    return s;
}

} // namespace strata::kv
