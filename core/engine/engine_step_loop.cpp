// Engine: the step thread's loop (continuous batching): intake, cancellation, one scheduled batch per step handed to
// the executor (the workers' batched forward pass over the paged KV cache), sampling, and finishing requests.
#include "engine/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine_util.hpp"

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

void engine::step_loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !sched_->idle() || (pending_task_ != nullptr && !pending_task_done_); });
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
        run_pending_task();
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
    step_.clear();
    for (const auto &b : batch) {
        sequence &s = *b.seq;
        step_.add_sequence(s.tokens.data() + s.n_computed, s.n_computed, b.n_new, s.kv);
        if (s.n_computed + b.n_new == static_cast<int32_t>(s.tokens.size())) {
            step_logits_owner_[static_cast<size_t>(step_.n_logits())] = &s;
            step_.want_logits(step_.n_tokens() - 1);
        }
    }
    const int32_t n = step_.n_tokens(), n_seqs = step_.n_seqs(), n_logits = step_.n_logits();
    const step_output out = execute_step();
    for (const auto &b : batch) {
        b.seq->n_computed += b.n_new;
        kv_->register_full_blocks(b.seq->kv, b.seq->tokens, b.seq->n_computed);
    }
    if (n > n_seqs) sched_->observe_prefill(seconds_since(t0) / n); // a step with prefill: time per token

    sample_rows(out, n_logits);
    for (int32_t i = 0; i < n_logits; ++i) {
        sequence &s = *step_logits_owner_[static_cast<size_t>(i)];
        const sampled_row &r = step_sampled_[static_cast<size_t>(i)];
        if (r.failed) {
            finish(s, STRATA_FINISH_ERROR, r.error);
            continue;
        }
        const int32_t tok = r.token;
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

// Draws the next token of each of the step's n_rows logits rows into step_sampled_, on the sampling pool when the
// rows are worth the wake-up (each row touches only its own sequence, so the draws do not depend on the threads).
void engine::sample_rows(const step_output &out, int32_t n_rows) {
    auto draw = [&](int64_t begin, int64_t end, int) noexcept {
        for (int64_t i = begin; i < end; ++i) {
            sequence &s = *step_logits_owner_[static_cast<size_t>(i)];
            sampled_row &r = step_sampled_[static_cast<size_t>(i)];
            r.failed = true;
            float *logits = out.row(static_cast<int32_t>(i));
            try {
                if (any_nan(logits, hp_.n_vocab)) {
                    // Garbage in, no garbage out: a NaN logit means damaged weights (or an overflow) upstream.
                    r.error = "the model produced NaN logits; a weight block of the file may hold a NaN or infinite "
                              "scale: run with --check-tensors to find the damaged tensor";
                    continue;
                }
                if (s.logprobs != 0) s.lp->capture(logits);
                int32_t tok = s.smp->sample(logits, s.tokens);
                if (s.constraint) {
                    tok = s.constraint->choose(*s.smp, logits, tok);
                    s.constraint->accept(tok);
                }
                r.token = tok;
                r.failed = false;
            } catch (const std::exception &e) {
                r.error = *e.what() != '\0' ? e.what() : "sampling failed";
            } catch (...) {
                r.error = "sampling failed with an unknown error";
            }
        }
    };
    // About eight rows of a 32000-token vocabulary: below that one thread draws faster than waking the others.
    constexpr int64_t parallel_min_values = int64_t{1} << 18;
    if (sampling_pool_ && n_rows > 1 && int64_t{n_rows} * hp_.n_vocab >= parallel_min_values)
        sampling_pool_->parallel_for(n_rows, 1, draw);
    else
        draw(0, n_rows, 0);
}

// The step built in step_, handed to the executor.
step_output engine::execute_step() { return executor_->execute_model(step_.input()); }

void engine::run_between_steps(const std::function<void()> &fn) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) fail("the engine is shutting down");
    cv_.wait(lock, [&] { return pending_task_ == nullptr; }); // one task at a time
    pending_task_ = &fn;
    pending_task_done_ = false;
    pending_task_error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lock, [&] { return pending_task_done_; });
    pending_task_ = nullptr;
    pending_task_done_ = false;
    std::exception_ptr error = std::exchange(pending_task_error_, nullptr);
    cv_.notify_all();
    if (error) std::rethrow_exception(error);
}

// Step thread, between steps: the task run_between_steps queued, if any (at shutdown it fails instead of running).
void engine::run_pending_task() {
    const std::function<void()> *task = nullptr;
    bool stopping = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (pending_task_ == nullptr || pending_task_done_) return;
        task = pending_task_;
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
        pending_task_error_ = error;
        pending_task_done_ = true;
    }
    cv_.notify_all();
}

} // namespace strata::engine
