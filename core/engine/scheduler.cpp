#include "engine/scheduler.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace strata::engine {

preemption_mode parse_preemption_mode(const std::string &s) {
    if (s == "swap") return preemption_mode::swap;
    if (s == "recompute") return preemption_mode::recompute;
    if (s == "auto") return preemption_mode::automatic;
    fail("preemption_mode \"{}\" is not one of swap, recompute, auto (--preemption-mode)", s);
}

scheduler::scheduler(kv::kv_cache &kv, scheduler_config cfg) : kv_(kv), cfg_(cfg) {
    if (cfg_.max_num_seqs < 1) fail("max_num_seqs {} must be at least 1 (--max-num-seqs)", cfg_.max_num_seqs);
    if (cfg_.max_num_batched_tokens < 1)
        fail("max_num_batched_tokens {} must be at least 1 (--max-num-batched-tokens)", cfg_.max_num_batched_tokens);
    if (cfg_.prefill_chunk < 1) fail("prefill_chunk {} must be at least 1 (--prefill-chunk)", cfg_.prefill_chunk);
    if (cfg_.max_waiting_requests < 1)
        fail("max_waiting_requests {} must be at least 1 (--max-waiting-requests)", cfg_.max_waiting_requests);
    running_.reserve(static_cast<size_t>(cfg_.max_num_seqs));
}

void scheduler::insert_by_arrival(std::deque<sequence *> &q, sequence *s) {
    auto it = std::find_if(q.begin(), q.end(), [&](const sequence *o) { return o->arrival > s->arrival; });
    q.insert(it, s);
}

void scheduler::insert_running(sequence *s) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const sequence *o) { return o->arrival > s->arrival; });
    running_.insert(it, s);
    s->state = seq_state::running;
}

void scheduler::add(sequence *s) {
    s->state = seq_state::waiting;
    waiting_.push_back(s);
}

void scheduler::remove(sequence *s) {
    auto drop = [&](auto &q) {
        auto it = std::find(q.begin(), q.end(), s);
        if (it != q.end()) q.erase(it);
    };
    drop(waiting_);
    drop(swapped_);
    drop(running_);
    kv_.release(s->kv);
    s->state = seq_state::finished;
}

// Gives back a sequence's blocks; its tokens are kept, to be prefilled again (and looked up in the prefix cache).
void scheduler::drop_kv(sequence *s) {
    kv_.release(s->kv);
    s->n_computed = 0;
    s->prefix_looked_up = false;
}

// Drops a sequence's KV and queues it (by arrival) to be prefilled again.
void scheduler::requeue_for_recompute(sequence *s) {
    drop_kv(s);
    s->state = seq_state::waiting;
    insert_by_arrival(waiting_, s);
}

void scheduler::swapped_to_recompute() {
    while (!swapped_.empty()) {
        sequence *v = swapped_.back();
        swapped_.pop_back();
        requeue_for_recompute(v);
    }
}

preemption_mode scheduler::choose(const sequence *victim) const {
    if (cfg_.mode != preemption_mode::automatic) return cfg_.mode;
    if (!kv_.has_pool(kv::tier::host) && !kv_.has_pool(kv::tier::nvme)) return preemption_mode::recompute;
    // Swap costs the transfer out and back; recompute costs a prefill of everything computed so far. Until both
    // have been measured, swap (it loses no work).
    if (swap_bps_ <= 0.0 || sec_per_token_ <= 0.0) return preemption_mode::swap;
    const double bytes = 2.0 * static_cast<double>(kv_.blocks_in(victim->kv, kv::tier::device)) *
                         static_cast<double>(kv_.config().block_bytes);
    const double swap_s = bytes / swap_bps_;
    const double recompute_s = static_cast<double>(victim->n_computed) * sec_per_token_;
    return swap_s <= recompute_s ? preemption_mode::swap : preemption_mode::recompute;
}

void scheduler::preempt(sequence *victim, std::vector<scheduled_seq> &out) {
    running_.erase(std::find(running_.begin(), running_.end(), victim));
    out.erase(std::remove_if(out.begin(), out.end(), [&](const scheduled_seq &x) { return x.seq == victim; }),
              out.end());
    preemption_mode mode = choose(victim);
    kv::tier to = kv::tier::host;
    uint64_t bytes = 0;
    if (mode == preemption_mode::swap) {
        const auto t0 = std::chrono::steady_clock::now();
        bool swapped = false;
        try {
            swapped = kv_.swap_out(victim->kv, to, bytes);
        } catch (const std::exception &e) {
            // A lower tier's write failed (ENOSPC, EIO, a damaged chunk): the blocks moved so far and the rest are
            // given back below and the sequence is recomputed from its tokens, which lose nothing.
            log::warn("scheduler", "swapping out sequence group {} failed: {}; it is recomputed instead", victim->id,
                      e.what());
        }
        if (!swapped) {
            mode = preemption_mode::recompute;
        } else {
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (s > 0 && bytes > 0) swap_bps_ = static_cast<double>(bytes) / s;
        }
    }
    const bool swap = mode == preemption_mode::swap;
    ++(swap ? counters_.preempt_swap : counters_.preempt_recompute);
    log::warn("scheduler",
              "Sequence group {} is preempted by PreemptionMode.{} mode because there is not enough KV cache space. "
              "This can affect the end-to-end performance. Increase kv_cache_memory (--kv-cache-memory) or lower "
              "max_num_seqs to provide more KV cache memory. total_num_cumulative_preemption={}",
              victim->id, swap ? "SWAP" : "RECOMPUTE", counters_.preempt_swap + counters_.preempt_recompute);
    if (swap) {
        log::info("kv", "KV cache pages evicted to {}: {} blocks ({:.2f} MiB) of sequence group {}", kv::tier_name(to),
                  bytes / kv_.config().block_bytes, static_cast<double>(bytes) / 1048576.0, victim->id);
        victim->state = seq_state::swapped;
        insert_by_arrival(swapped_, victim);
    } else {
        requeue_for_recompute(victim);
    }
}

// Finds device blocks for `s` to hold n_tokens slots: evicting cached prefixes (inside ensure_slots), preempting newer
// running sequences, or, for a sequence alone, spilling its own oldest blocks to the host tier. False when `s` was
// preempted itself or nothing can be freed.
bool scheduler::make_room(sequence *s, int32_t n_tokens, std::vector<scheduled_seq> &out, bool &preempted) {
    for (;;) {
        if (kv_.ensure_slots(s->kv, n_tokens)) return true;
        sequence *newest = running_.empty() ? nullptr : running_.back();
        if (newest != nullptr && newest != s) {
            preempt(newest, out);
            preempted = true;
            continue;
        }
        const bool is_running = s->state == seq_state::running;
        if (is_running && running_.size() > 1) {
            preempt(s, out);
            preempted = true;
            return false;
        }
        if (kv_.spill_oldest(s->kv)) {
            if (!s->spill_logged) {
                log::info("kv", "KV cache pages evicted to CPU: sequence group {} has outgrown the device KV cache; "
                                "its oldest blocks stay in the host tier and attention reads them there",
                          s->id);
                s->spill_logged = true;
            }
            continue;
        }
        // The host tier is full of swapped-out sequences: the newest of them gives up its blocks (recompute later).
        // Only useful when spilling to the host can then make device room.
        if (!swapped_.empty() && kv_.has_pool(kv::tier::host) && kv_.config().device_reads_host) {
            sequence *v = swapped_.back();
            swapped_.pop_back();
            requeue_for_recompute(v);
            continue;
        }
        return false;
    }
}

void scheduler::schedule(std::vector<scheduled_seq> &out, std::vector<std::pair<sequence *, std::string>> &failed) {
    out.clear();
    int32_t budget = cfg_.max_num_batched_tokens;
    bool preempted = false;
    const int32_t bs = kv_.config().block_size;
    auto no_room = [&](sequence *s) {
        return fmt::format("sequence group {} needs KV for {} tokens but the device ({} blocks) and the host tier ({} "
                           "blocks) cannot hold it; raise --kv-cache-memory or --swap-space, or lower --max-model-len",
                           s->id, s->tokens.size(), kv_.capacity(kv::tier::device), kv_.capacity(kv::tier::host));
    };

    // 1. Running sequences, oldest first: a decode token each, or their next prefill chunk.
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
        sequence *s = running_[i];
        const int32_t n_new = std::min({s->pending(), budget, cfg_.prefill_chunk});
        if (n_new <= 0) continue;
        if (!make_room(s, s->n_computed + n_new, out, preempted)) {
            if (s->state == seq_state::running) { // alone and still no room: it can never run
                failed.emplace_back(s, no_room(s));
                remove(s); // its blocks go back now, for the sequences scheduled after it in this step
                --i;
            }
            continue; // preempted itself: it was the last, so the loop ends
        }
        out.push_back({s, n_new});
        budget -= n_new;
    }
    if (preempted) return; // vLLM's rule: no swap-ins or admissions in a step that had to preempt

    // 2. Swapped-out sequences, oldest first, when all their blocks fit again (plus one for the next token).
    while (!swapped_.empty() && running_.size() < static_cast<size_t>(cfg_.max_num_seqs) && budget > 0) {
        sequence *s = swapped_.front();
        uint64_t bytes = 0;
        // All its blocks come back, with one to spare for the next token. Only a context larger than the whole
        // device KV comes back partly (the rest attended in place in the host tier), and only when it runs alone.
        const uint32_t outside = static_cast<uint32_t>(s->kv.table.size()) - kv_.blocks_in(s->kv, kv::tier::device);
        const bool fits = outside + 1 <= kv_.reclaimable_device_blocks();
        const bool oversized = kv_.config().device_reads_host &&
                               s->kv.table.size() + 1 > kv_.capacity(kv::tier::device) && running_.empty();
        if (!fits && !oversized) break;
        bool back = false;
        try {
            back = kv_.swap_in(s->kv, oversized && !fits ? 1 : 0, bytes);
        } catch (const std::exception &e) {
            // A swapped block could not be read back (EIO, a short read, a checksum mismatch): its KV is lost, its
            // tokens are not. It gives every block back and waits to be prefilled again.
            log::warn("scheduler", "swapping in sequence group {} failed: {}; it is recomputed instead", s->id,
                      e.what());
            swapped_.pop_front();
            requeue_for_recompute(s);
            continue;
        }
        if (!back) break;
        swapped_.pop_front();
        log::info("kv", "KV cache pages of sequence group {} moved back to the device: {} blocks ({:.2f} MiB)", s->id,
                  bytes / kv_.config().block_bytes, static_cast<double>(bytes) / 1048576.0);
        insert_running(s);
        const int32_t n_new = std::min({s->pending(), budget, cfg_.prefill_chunk});
        if (n_new > 0 && kv_.ensure_slots(s->kv, s->n_computed + n_new)) {
            out.push_back({s, n_new});
            budget -= n_new;
        }
    }

    // 3. New (and recompute-preempted) sequences, first come first served, while blocks, seats and tokens last. Not
    // while any sequence is swapped out (vLLM's rule): new arrivals would keep taking the blocks it needs to return.
    while (swapped_.empty() && !waiting_.empty() && running_.size() < static_cast<size_t>(cfg_.max_num_seqs) &&
           budget > 0) {
        sequence *s = waiting_.front();
        // Not even one block to take while others run: nothing to look up (a lookup would only count again).
        if (!running_.empty() && kv_.reclaimable_device_blocks() == 0) break;
        if (!s->prefix_looked_up) {
            // The last prompt token is always computed: its logits start generation.
            try {
                s->n_computed = kv_.match_prefix(s->kv, s->tokens, static_cast<int32_t>(s->tokens.size()) - 1);
            } catch (const std::exception &e) {
                // A cached block could not be copied in: a miss, the prompt is computed.
                log::warn("scheduler", "the prefix-cache lookup of sequence group {} failed: {}; its prompt is "
                                       "recomputed instead",
                          s->id, e.what());
                drop_kv(s);
            }
            s->prefix_looked_up = true;
        }
        int32_t n_new = std::min({s->pending(), budget, cfg_.prefill_chunk});
        // A sequence that is not admitted gives back the prefix blocks it just took: a waiting sequence holds none.
        if (running_.empty()) {
            // Alone: may spill its own blocks to the host tier to make room.
            if (!make_room(s, s->n_computed + n_new, out, preempted)) {
                failed.emplace_back(s, no_room(s));
                remove(s);
                continue;
            }
        } else {
            // Others run: take only free or cached blocks, a smaller chunk if that is all there is.
            const int64_t slots = static_cast<int64_t>(s->kv.table.size()) * bs - s->n_computed +
                                  static_cast<int64_t>(kv_.reclaimable_device_blocks()) * bs;
            n_new = static_cast<int32_t>(std::min<int64_t>(n_new, slots));
            if (n_new <= 0 || !kv_.ensure_slots(s->kv, s->n_computed + n_new)) {
                drop_kv(s);
                break;
            }
        }
        waiting_.pop_front();
        insert_running(s);
        out.push_back({s, n_new});
        budget -= n_new;
    }

    // Nothing runs or can start, yet swapped-out sequences remain: their blocks no longer fit the device (the
    // device cannot read them where they are), so they give them up and are recomputed instead.
    if (out.empty() && failed.empty() && running_.empty() && !swapped_.empty()) swapped_to_recompute();
}

} // namespace strata::engine
