// Engine: the request API frontends call from their threads (submit, wait, cancel, stats). Everything here runs
// under the engine's mutex; the step thread owns the scheduler and the KV cache.
#include "engine/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine_util.hpp"
#include "engine/token_logprobs.hpp"

#include <algorithm>
#include <cstddef>

namespace strata::engine {

using namespace detail;

// A request's sequence, validated, tokenized and with everything its steps need allocated; not yet queued.
std::shared_ptr<sequence> engine::prepare(const strata_request &req) {
    auto r = std::make_shared<sequence>();
    if (req.prompt_tokens != nullptr && req.n_prompt_tokens > 0) {
        r->tokens.assign(req.prompt_tokens, req.prompt_tokens + req.n_prompt_tokens);
        for (int32_t t : r->tokens) {
            if (t < 0 || t >= hp_.n_vocab) fail("prompt token id {} is outside the vocabulary [0, {})", t, hp_.n_vocab);
        }
    } else {
        // Special-token texts in a prompt are those tokens, as in vLLM and llama-server: a rendered chat prompt
        // carries its template's markers (<|im_start|>, <|eot_id|>, ...) as text.
        r->tokens = tokenizer_->encode(req.prompt ? std::string_view(req.prompt) : std::string_view(), req.add_bos != 0,
                                       true);
    }
    if (r->tokens.empty()) { // generation needs at least one token to condition on
        if (tokenizer_->bos() < 0) fail("the prompt is empty and the model's vocabulary has no BOS token to start from");
        r->tokens.push_back(tokenizer_->bos());
    }
    r->n_prompt = static_cast<int32_t>(r->tokens.size());
    if (r->n_prompt >= n_ctx_) {
        fail("the prompt has {} tokens but max_model_len is {}; shorten the prompt or raise --max-model-len", r->n_prompt,
             n_ctx_);
    }
    r->sampling = req.sampling;
    sampling_config sc;
    // The 1.4 tail: a frontend built against an older ABI passes a smaller struct_size and gets the neutral values.
    if (req.struct_size >= offsetof(strata_request, logprobs) + sizeof req.logprobs) {
        for (const float p : {req.presence_penalty, req.frequency_penalty}) {
            if (!(p >= -2.f && p <= 2.f)) fail("presence_penalty/frequency_penalty is {}; it must be in [-2, 2]", p);
        }
        if (req.logprobs < -1 || req.logprobs > max_top_logprobs) {
            fail("logprobs is {}; it must be -1 (chosen token only), 0 (off) or 1..{} alternatives", req.logprobs,
                 max_top_logprobs);
        }
        sc.presence_penalty = req.presence_penalty;
        sc.frequency_penalty = req.frequency_penalty;
        r->logprobs = std::min(req.logprobs, hp_.n_vocab);
    }
    // The 1.9 tail: constrained decoding (a grammar or schema the engine builds now, so a bad one fails the submit).
    if (req.struct_size >= offsetof(strata_request, constraint) + sizeof req.constraint &&
        req.constraint_kind != STRATA_CONSTRAINT_NONE) {
        std::call_once(constraint_vocab_once_, [&] { constraint_vocab_ = std::make_unique<constraint_vocab>(*tokenizer_); });
        r->constraint = std::make_unique<output_constraint>(*constraint_vocab_, req.constraint_kind, req.constraint);
    }
    r->on_token = req.on_token;
    r->user = req.user;
    r->max_tokens = r->sampling.max_tokens > 0 ? r->sampling.max_tokens : n_ctx_;
    // Room for everything it can generate, so appending a token never reallocates in the step loop.
    const auto max_len = static_cast<int32_t>(std::min<int64_t>(n_ctx_, int64_t{r->n_prompt} + r->max_tokens));
    r->tokens.reserve(static_cast<size_t>(max_len));
    r->kv.reserve(max_len, kv_->config().block_size);
    // Sampling state is allocated here, once per request, never in the step loop.
    sc.temperature = r->sampling.temperature;
    sc.top_k = r->sampling.top_k;
    sc.top_p = r->sampling.top_p;
    sc.min_p = r->sampling.min_p;
    sc.repetition_penalty = r->sampling.repetition_penalty;
    sc.repetition_last_n = r->sampling.repetition_last_n;
    sc.seed = r->sampling.seed;
    r->smp = std::make_unique<sampler>(hp_.n_vocab, sc);
    // Logprobs are of the raw model output (vLLM's default): the sampler changes the logits in place.
    r->lp = std::make_unique<token_logprobs>(r->logprobs != 0 ? hp_.n_vocab : 0, std::max(r->logprobs, 0));
    r->text = token_text_stream(*tokenizer_, std::span<const int32_t>(r->tokens.data(), r->tokens.size()));
    r->result.struct_size = sizeof r->result;
    r->result.n_prompt_tokens = r->n_prompt;
    r->t_submit = std::chrono::steady_clock::now();
    return r;
}

// With mu_ held: room for `n` more in the waiting queue, or the engine is busy. Bounded by what stats reports as
// waiting, which lags by the requests the step thread took in during its current step, so the queue holds at most
// twice the limit, never more.
void engine::check_queue_room_locked(size_t n) const {
    if (stopping_) fail("the engine is shutting down");
    if (const int64_t waiting = waiting_snapshot_ + static_cast<int64_t>(incoming_.size());
        waiting + static_cast<int64_t>(n) > opts_.scheduler.max_waiting_requests) {
        if (static_cast<int64_t>(n) > opts_.scheduler.max_waiting_requests)
            fail("{} requests submitted together exceed max_waiting_requests = {}; submit fewer at once or raise "
                 "--max-waiting-requests",
                 n, opts_.scheduler.max_waiting_requests);
        throw coded_error(STRATA_ERR_BUSY, fmt::format("the engine is at its waiting-queue limit ({} requests waiting, "
                                                       "max_waiting_requests = {}); retry later",
                                                       waiting, opts_.scheduler.max_waiting_requests));
    }
}

// With mu_ held: the sequence gets its id and goes to the step thread's intake.
strata_request_id engine::enqueue_locked(std::shared_ptr<sequence> r) {
    // Data-parallel replica d of N numbers its requests d, d + N, d + 2N, ... (offset past 0): ids unique across the
    // replicas, so the id a frontend holds is the one every token event carries (replica_set routes by id % N).
    r->id = next_id_++ * static_cast<strata_request_id>(opts_.data_parallel_size) +
            static_cast<strata_request_id>(opts_.data_parallel_rank);
    ++submitted_;
    r->arrival = next_arrival_++;
    requests_[r->id] = r;
    incoming_.push_back(std::move(r));
    return incoming_.back()->id;
}

strata_request_id engine::submit(const strata_request &req) {
    std::shared_ptr<sequence> r = prepare(req);
    std::lock_guard<std::mutex> lock(mu_);
    check_queue_room_locked(1);
    const strata_request_id id = enqueue_locked(std::move(r));
    cv_.notify_all();
    return id;
}

std::vector<strata_request_id> engine::submit_all(std::span<const strata_request> reqs) {
    std::vector<std::shared_ptr<sequence>> prepared;
    for (const strata_request &req : reqs) prepared.push_back(prepare(req));
    std::vector<strata_request_id> ids;
    std::lock_guard<std::mutex> lock(mu_);
    check_queue_room_locked(prepared.size());
    for (auto &r : prepared) ids.push_back(enqueue_locked(std::move(r)));
    cv_.notify_all();
    return ids;
}

strata_request_result engine::wait(strata_request_id id) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) fail("unknown request id {}", id);
    auto r = it->second;
    if (r->waited) fail("request {} is already being waited for", id);
    r->waited = true;
    cv_.wait(lock, [&] { return r->done; });
    strata_request_result res = r->result;
    requests_.erase(id);
    if (res.finish == STRATA_FINISH_ERROR) fail("{}", r->error);
    return res;
}

void engine::cancel(strata_request_id id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it != requests_.end()) it->second->cancelled = true;
    cv_.notify_all();
}

strata_engine_stats engine::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    strata_engine_stats s{};
    s.struct_size = sizeof s;
    s.requests_running = running_snapshot_;
    s.requests_waiting = waiting_snapshot_ + static_cast<int64_t>(incoming_.size());
    s.requests_finished = finished_;
    s.prompt_tokens_total = prompt_tokens_total_;
    s.generation_tokens_total = generation_tokens_total_;
    s.kv_block_size = opts_.kv.block_size;
    for (int t = 0; t < kv::n_tiers; ++t) {
        s.kv_blocks_total[t] = kv_snapshot_.blocks_total[t];
        s.kv_blocks_used[t] = kv_snapshot_.blocks_used[t];
        s.kv_blocks_cached[t] = kv_snapshot_.blocks_cached[t];
        s.prefix_hits[t] = kv_snapshot_.prefix_hits[t];
    }
    s.preemptions_swap = sched_snapshot_.preempt_swap;
    s.preemptions_recompute = sched_snapshot_.preempt_recompute;
    s.prefix_queries = kv_snapshot_.prefix_queries;
    s.kv_bytes_swapped_out = kv_snapshot_.bytes_out;
    s.kv_bytes_swapped_in = kv_snapshot_.bytes_in;
    return s;
}

int64_t engine::unfinished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_ - finished_;
}

// Called by the step thread between steps.
void engine::publish_stats() {
    const kv::kv_cache_stats ks = kv_->stats();
    std::lock_guard<std::mutex> lock(mu_);
    publish_stats_locked(ks);
}

// With mu_ held; the scheduler and KV figures as of now.
void engine::publish_stats_locked(const kv::kv_cache_stats &ks) {
    kv_snapshot_ = ks;
    sched_snapshot_ = sched_->counters();
    running_snapshot_ = static_cast<int64_t>(sched_->n_running());
    waiting_snapshot_ = static_cast<int64_t>(sched_->n_waiting());
}

} // namespace strata::engine
