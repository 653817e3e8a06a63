// Continuous batching (vLLM's scheduler, V1 style): every step takes the running sequences in arrival order (a decode
// token each, or the next chunk of a prefill), then swapped-out ones that fit again, then new ones while
// max_num_seqs, max_num_batched_tokens and the KV blocks allow. When a running sequence needs a block and none is
// free, the newest running sequence is preempted, by swapping its blocks to the host tier (then NVMe) or by dropping
// them to recompute later; `auto` chooses per decision by cost. A sequence alone whose context outgrows the device KV
// spills its oldest blocks to the host tier, where attention reads them in place.
#pragma once

#include "engine/sequence.hpp"
#include "kv/kv_cache.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace strata::engine {

enum class preemption_mode { swap, recompute, automatic };
preemption_mode parse_preemption_mode(const std::string &s); // "swap" | "recompute" | "auto"

struct scheduler_config {
    int32_t max_num_seqs = 256;
    int32_t max_num_batched_tokens = 2048;
    int32_t prefill_chunk = 512; // most prompt tokens of one sequence per step
    // Requests queued but not running ([scheduler] max_waiting_requests); engine::submit refuses more with
    // STRATA_ERR_BUSY. Its count lags by the requests taken in during the current step, so the waiting queue holds
    // at most twice this.
    int64_t max_waiting_requests = 1024;
    preemption_mode mode = preemption_mode::automatic;
};

struct scheduled_seq {
    sequence *seq;
    int32_t n_new; // tokens fed this step, from seq->n_computed
};

struct scheduler_counters {
    int64_t preempt_swap = 0, preempt_recompute = 0;
};

class scheduler {
  public:
    scheduler(kv::kv_cache &kv, scheduler_config cfg);

    void add(sequence *s);          // a new request joins the waiting queue
    // Removes a sequence wherever it is and releases its blocks (finished, cancelled, failed).
    void remove(sequence *s);
    // Plans one step into `out` (cleared first). Sequences that can never run are appended to `failed` with a reason.
    void schedule(std::vector<scheduled_seq> &out, std::vector<std::pair<sequence *, std::string>> &failed);


    // Cost model for `auto`: seconds per prefill token as the engine measures its steps (the swap bandwidth is
    // measured here, on each swap).
    void observe_prefill(double seconds_per_token) { sec_per_token_ = seconds_per_token; }

    size_t n_running() const { return running_.size(); }
    size_t n_waiting() const { return waiting_.size() + swapped_.size(); }
    bool idle() const { return running_.empty() && waiting_.empty() && swapped_.empty(); }
    const scheduler_counters &counters() const { return counters_; }
    const scheduler_config &config() const { return cfg_; }

  private:
    // Swapped sequences that cannot come back (their blocks no longer fit the device) give their blocks up and wait
    // to be recomputed instead.
    void swapped_to_recompute();
    bool make_room(sequence *s, int32_t n_tokens, std::vector<scheduled_seq> &out, bool &preempted);
    void preempt(sequence *victim, std::vector<scheduled_seq> &out);
    preemption_mode choose(const sequence *victim) const;
    void insert_by_arrival(std::deque<sequence *> &q, sequence *s);
    void drop_kv(sequence *s);
    void requeue_for_recompute(sequence *s);
    void insert_running(sequence *s);

    kv::kv_cache &kv_;
    scheduler_config cfg_;
    std::deque<sequence *> waiting_;
    std::deque<sequence *> swapped_;
    std::vector<sequence *> running_; // arrival order: the last is preempted first
    scheduler_counters counters_;
    double sec_per_token_ = 0.0;
    double swap_bps_ = 0.0;
};

} // namespace strata::engine
