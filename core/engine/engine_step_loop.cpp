// Engine: the worker thread's step loop (continuous batching): intake, cancellation, one scheduled batch per step
// through the model's batched forward pass over the paged KV cache, sampling, and finishing requests.
#include "engine/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine_util.hpp"
#include "engine/prefetch_ring.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace strata::engine {

using namespace detail;

void engine::finish(sequence &s, int32_t reason, const std::string &error) {
    sched_->remove(&s); // frees its blocks now, so the next step can use them
    s.result.finish = reason;
    s.result.n_completion_tokens = s.generated;
    if (s.generated > 0) {
        s.result.prefill_seconds = std::chrono::duration<double>(s.t_first_token - s.t_submit).count();
        s.result.decode_seconds = seconds_since(s.t_first_token);
    } else {
        s.result.prefill_seconds = seconds_since(s.t_submit);
    }
    s.error = error;
    if (s.on_token) {
        strata_token_event ev{};
        ev.struct_size = sizeof ev;
        ev.id = s.id;
        ev.token = -1;
        ev.piece = "";
        ev.finish = reason;
        ev.error = s.error.empty() ? nullptr : s.error.c_str();
        s.on_token(s.user, &ev);
    }
    // The stats a waiter reads right after wait() returns already show this sequence's blocks back in their pools.
    const kv::kv_cache_stats ks = kv_->stats();
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++finished_;
        prompt_tokens_total_ += s.result.n_prompt_tokens;
        generation_tokens_total_ += s.generated;
        publish_stats_locked(ks);
        s.done = true;
    }
    cv_.notify_all();
}

void engine::emit_token(sequence &s, int32_t tok, bool eos) {
    if (!s.on_token) return;
    const std::string_view piece = eos ? std::string_view() : s.text.next(tok);
    strata_token_event ev{};
    ev.struct_size = sizeof ev;
    ev.id = s.id;
    ev.token = tok;
    ev.piece = piece.data() ? piece.data() : "";
    ev.piece_len = static_cast<int32_t>(piece.size());
    ev.finish = STRATA_FINISH_NONE;
    if (s.logprobs != 0) {
        ev.logprob = s.lp->of(tok);
        ev.n_top = s.lp->n_top();
        ev.top_tokens = s.lp->top_tokens();
        ev.top_logprobs = s.lp->top_logprobs();
    }
    s.on_token(s.user, &ev);
}

void engine::worker_loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !sched_->idle() || (worker_task_ != nullptr && !worker_task_done_); });
            if (stopping_) {
                for (auto &r : incoming_) live_.push_back(r);
                incoming_.clear();
            } else {
                // Still waiting, now in the scheduler: counted until this step's schedule says which of them run,
                // so submit's queue limit (max_waiting_requests) never sees them leave early.
                waiting_snapshot_ += static_cast<int64_t>(incoming_.size());
                while (!incoming_.empty()) {
                    live_.push_back(incoming_.front());
                    sched_->add(incoming_.front().get());
                    incoming_.pop_front();
                }
            }
        }
        // Cancelled requests (and all of them at shutdown) give their blocks back before anything is scheduled.
        bool stopping = false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            stopping = stopping_;
        }
        for (size_t i = 0; i < live_.size();) {
            sequence &s = *live_[i];
            if (stopping || s.cancelled) {
                finish(s, STRATA_FINISH_CANCELLED);
                live_[i] = std::move(live_.back());
                live_.pop_back();
            } else {
                ++i;
            }
        }
        run_worker_task();
        if (stopping) {
            publish_stats();
            return;
        }
        failed_.clear();
        try {
            sched_->schedule(batch_, failed_);
            std::lock_guard<std::mutex> lock(mu_);
            waiting_snapshot_ = static_cast<int64_t>(sched_->n_waiting()); // those just scheduled no longer wait
        } catch (const std::exception &e) {
            // A KV copy or tier read failed while moving blocks: the requests in flight fail with the reason, the
            // server keeps serving.
            log::error("engine", "scheduling failed: {}; failing the {} requests in flight", e.what(), live_.size());
            for (auto &r : live_) {
                if (r->state != seq_state::finished) finish(*r, STRATA_FINISH_ERROR, std::string("KV cache: ") + e.what());
            }
            live_.clear();
            publish_stats();
            continue;
        }
        for (auto &[s, why] : failed_) finish(*s, STRATA_FINISH_ERROR, why);
        if (!batch_.empty()) {
            try {
                run_step(batch_);
            } catch (const std::exception &e) {
                // A failed forward pass fails the sequences of this step, not the server.
                for (const auto &b : batch_) {
                    if (b.seq->state != seq_state::finished) finish(*b.seq, STRATA_FINISH_ERROR, e.what());
                }
            }
        }
        live_.erase(std::remove_if(live_.begin(), live_.end(), [](const auto &s) { return s->state == seq_state::finished; }),
                    live_.end());
        publish_stats();
    }
}

void engine::run_step(const std::vector<scheduled_seq> &batch) {
    const auto t0 = std::chrono::steady_clock::now();
    int32_t n = 0, n_logits = 0;
    step_block_base_.clear();
    const int32_t n_seqs = static_cast<int32_t>(batch.size());
    for (int32_t k = 0; k < n_seqs; ++k) {
        sequence &s = *batch[static_cast<size_t>(k)].seq;
        const int32_t n_new = batch[static_cast<size_t>(k)].n_new;
        for (int32_t j = 0; j < n_new; ++j) {
            step_tokens_[static_cast<size_t>(n)] = s.tokens[static_cast<size_t>(s.n_computed + j)];
            step_positions_[static_cast<size_t>(n)] = s.n_computed + j;
            step_token_seq_[static_cast<size_t>(n)] = k;
            ++n;
        }
        step_seq_block_start_[static_cast<size_t>(k)] = static_cast<int32_t>(step_block_base_.size());
        for (const kv::block_ref &b : s.kv.table) {
            void *addr = kv_->device_address(b);
            if (addr == nullptr) fail("internal: sequence {} runs with a KV block outside device memory", s.id);
            step_block_base_.push_back(addr);
        }
        if (s.n_computed + n_new == static_cast<int32_t>(s.tokens.size())) {
            step_logits_tokens_[static_cast<size_t>(n_logits)] = n - 1;
            step_logits_owner_[static_cast<size_t>(n_logits)] = &s;
            ++n_logits;
        }
    }
    step_seq_block_start_[static_cast<size_t>(n_seqs)] = static_cast<int32_t>(step_block_base_.size());
    forward_batch(n, n_seqs, n_logits);
    fetch_logits(n_logits);
    for (const auto &b : batch) {
        b.seq->n_computed += b.n_new;
        kv_->register_full_blocks(b.seq->kv, b.seq->tokens, b.seq->n_computed);
    }
    if (n > n_seqs) sched_->observe_prefill(seconds_since(t0) / n); // a step with prefill: time per token

    for (int32_t i = 0; i < n_logits; ++i) {
        sequence &s = *step_logits_owner_[static_cast<size_t>(i)];
        float *logits = logits_row(i);
        if (any_nan(logits, hp_.n_vocab)) {
            // Garbage in, no garbage out: a NaN logit means damaged weights (or an overflow) upstream.
            finish(s, STRATA_FINISH_ERROR,
                   "the model produced NaN logits; a weight block of the file may hold a NaN or infinite scale: run "
                   "with --check-tensors to find the damaged tensor");
            continue;
        }
        if (s.logprobs != 0) s.lp->capture(logits);
        int32_t tok = s.smp->sample(logits, s.tokens);
        if (s.constraint) {
            try {
                tok = s.constraint->choose(*s.smp, logits, tok);
                s.constraint->accept(tok);
            } catch (const std::exception &e) {
                finish(s, STRATA_FINISH_ERROR, e.what());
                continue;
            }
        }
        s.tokens.push_back(tok);
        ++s.generated;
        if (s.generated == 1) s.t_first_token = std::chrono::steady_clock::now();
        const bool eos = tokenizer_->is_eog(tok) && s.sampling.ignore_eos == 0;
        emit_token(s, tok, eos);
        if (eos) finish(s, STRATA_FINISH_STOP);
        else if (s.generated >= s.max_tokens || static_cast<int32_t>(s.tokens.size()) >= n_ctx_)
            finish(s, STRATA_FINISH_LENGTH);
    }
}

// Brings the step's logits rows to host memory in one copy when the device has its own memory.
void engine::fetch_logits(int32_t n_logits) {
    if (logits_host_.empty() || n_logits == 0) return;
    strata_status st{};
    const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n_logits) * static_cast<uint64_t>(hp_.n_vocab);
    if (device_desc_.desc->copy(device_, logits_host_.data(), logits_, bytes, STRATA_COPY_D2H, &st) != STRATA_OK)
        fail("copying logits from the device failed: {}", status_text(st));
}

float *engine::logits_row(int32_t i) {
    const uint64_t off = static_cast<uint64_t>(i) * static_cast<uint64_t>(hp_.n_vocab);
    return (logits_host_.empty() ? logits_ : logits_host_.data()) + off;
}

void engine::forward_batch(int32_t n_tokens, int32_t n_seqs, int32_t n_logits) {
    strata_paged_kv pk{};
    pk.struct_size = sizeof pk;
    pk.block_size = opts_.kv.block_size;
    pk.kv_dim = hp_.n_head_kv * hp_.head_dim;
    pk.kv_type = opts_.kv.kv_type;
    pk.n_seqs = n_seqs;
    pk.seq_block_start = step_seq_block_start_.data();
    pk.block_base = step_block_base_.data();
    strata_forward_args a{};
    a.struct_size = sizeof a;
    a.device_ops = device_desc_.desc;
    a.device = device_;
    a.tokens = step_tokens_.data();
    a.positions = step_positions_.data();
    a.n_tokens = n_tokens;
    a.workspace = workspace_;
    a.workspace_size = workspace_size_;
    a.logits = logits_;
    a.paged_kv = &pk;
    a.token_seq = step_token_seq_.data();
    a.logits_tokens = step_logits_tokens_.data();
    a.n_logits = n_logits;
    // Hybrid placement: the CPU computes its layers where they live, unless this step is large enough that
    // streaming them to the device is cheaper (then their own ring streams them).
    // Experts on the CPU (--n-cpu-moe) run there in every step.
    const bool host_layers = host_device_ != nullptr && !layer_on_host_.empty();
    const bool host_experts = host_device_ != nullptr && !experts_on_host_.empty();
    const bool stream_host_layers = host_layers && hybrid_min_batch_ > 0 && n_tokens >= hybrid_min_batch_;
    if ((host_layers && !stream_host_layers) || host_experts) {
        a.host_device_ops = host_desc_.desc;
        a.host_device = host_device_;
        a.host_workspace = host_workspace_.data();
        a.host_workspace_size = host_workspace_.size();
        if (host_experts) a.experts_on_host = experts_on_host_.data();
    }
    if (host_layers && !stream_host_layers) {
        a.layer_on_host = layer_on_host_.data();
        ++hybrid_steps_;
    } else if (stream_host_layers) {
        ++hybrid_streamed_steps_;
    }
    prefetch_ring *rings[2] = {weights_ ? weights_->ring() : nullptr,
                               stream_host_layers ? weights_->host_layer_ring() : nullptr};
    if (rings[0] != nullptr || rings[1] != nullptr) {
        a.layer_begin = [](void *user, int32_t layer, strata_status *st) {
            for (prefetch_ring *r : *static_cast<prefetch_ring *(*)[2]>(user)) {
                if (r == nullptr) continue;
                if (int32_t rc = r->layer_begin(layer, st); rc != STRATA_OK) return rc;
            }
            return static_cast<int32_t>(STRATA_OK);
        };
        a.user = &rings;
    }
    strata_status st{};
    const int32_t rc = arch_.desc->forward(model_, &a, &st);
    for (prefetch_ring *ring : rings) {
        if (ring == nullptr) continue;
        if (rc == STRATA_OK) ring->forward_done();
        else ring->recover(); // a pass that stopped partway leaves slots mid-cycle
    }
    if (rc != STRATA_OK) fail("forward pass failed: {}", status_text(st));
}

void engine::run_on_worker(const std::function<void()> &fn) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) fail("the engine is shutting down");
    cv_.wait(lock, [&] { return worker_task_ == nullptr; }); // one task at a time
    worker_task_ = &fn;
    worker_task_done_ = false;
    worker_task_error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lock, [&] { return worker_task_done_; });
    worker_task_ = nullptr;
    worker_task_done_ = false;
    std::exception_ptr error = std::exchange(worker_task_error_, nullptr);
    cv_.notify_all();
    if (error) std::rethrow_exception(error);
}

// Worker thread, between steps: the task run_on_worker queued, if any (at shutdown it fails instead of running).
void engine::run_worker_task() {
    const std::function<void()> *task = nullptr;
    bool stopping = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (worker_task_ == nullptr || worker_task_done_) return;
        task = worker_task_;
        stopping = stopping_;
    }
    std::exception_ptr error;
    try {
        if (stopping) fail("the engine is shutting down");
        (*task)();
        publish_stats();
    } catch (...) {
        error = std::current_exception();
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        worker_task_error_ = error;
        worker_task_done_ = true;
    }
    cv_.notify_all();
}

} // namespace strata::engine
