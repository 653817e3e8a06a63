#include "engine/tensor_parallel_group.hpp"

#include "common/error.hpp"
#include "engine/vocab_pieces.hpp"

#include <strata/thread_pool.hpp>

#include <cstdio>
#include <cstring>

namespace strata::engine {

tensor_parallel_group::tensor_parallel_group(std::vector<worker *> ranks, size_t max_floats, int32_t n_vocab,
                                             int32_t max_rows, size_t stream_floats)
    : ranks_(std::move(ranks)), sum_(max_floats), partial_(ranks_.size(), nullptr), outputs_(ranks_.size()),
      pieces_(ranks_.size(), nullptr),
      n_vocab_(n_vocab), logits_(static_cast<size_t>(max_rows) * static_cast<size_t>(n_vocab)),
      stream_floats_(stream_floats), streams_((ranks_.size() - 1) * stream_floats) {
    contexts_.reserve(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
        contexts_.push_back({this, static_cast<int32_t>(r)});
        worker::tensor_parallel_link link = ranks_[r]->tensor_parallel();
        link.all_reduce = &tensor_parallel_group::all_reduce;
        link.user = &contexts_.back();
        ranks_[r]->set_tensor_parallel(link);
    }
    threads_.reserve(ranks_.size() - 1);
    try {
        for (size_t r = 1; r < ranks_.size(); ++r) threads_.emplace_back([this, r] { serve(static_cast<int32_t>(r)); });
    } catch (...) {
        stop_threads(); // the ones started, before the error leaves
        throw;
    }
}

tensor_parallel_group::~tensor_parallel_group() { stop_threads(); }

void tensor_parallel_group::stop_threads() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto &t : threads_)
        if (t.joinable()) t.join();
}

step_output tensor_parallel_group::execute_model(const step_input &step, const float *hidden_in, float *hidden_out) {
    if (hidden_out != nullptr && stream_floats_ == 0)
        fail("internal: a tensor-parallel group made for the last pipeline stage asked for a residual stream");
    {
        std::lock_guard<std::mutex> lock(mu_);
        step_ = &step;
        hidden_in_ = hidden_in;
        hidden_out_ = hidden_out;
        ranks_done_ = 0;
        arrived_.store(0, std::memory_order_relaxed);
        broken_.store(false, std::memory_order_relaxed);
        finished_.store(0, std::memory_order_relaxed);
        failure_ = nullptr;
        ++step_generation_;
    }
    cv_.notify_all();
    run_rank(0);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ranks_done_ == static_cast<int32_t>(ranks_.size()) - 1; });
    step_ = nullptr;
    if (failure_) std::rethrow_exception(failure_);
    lock.unlock();
    if (hidden_out != nullptr) return {}; // a stage before the last: the residual stream went on
    // Rank r wrote its piece of each row, n_rows rows of its width one after another (ABI 1.29).
    const int32_t n_rows = outputs_.front().n_rows;
    const auto size = static_cast<int32_t>(ranks_.size());
    for (int32_t r = 0; r < size; ++r) {
        const step_output &o = outputs_[static_cast<size_t>(r)];
        if (o.n_rows != n_rows)
            fail("internal: tensor-parallel rank {} returned {} logits rows where rank 0 has {}", r, o.n_rows, n_rows);
        pieces_[static_cast<size_t>(r)] = o.logits;
    }
    join_vocab_pieces(pieces_.data(), size, n_rows, n_vocab_, logits_.data());
    step_output out;
    out.logits = logits_.data();
    out.n_rows = n_rows;
    out.n_vocab = n_vocab_;
    return out;
}

void tensor_parallel_group::serve(int32_t rank) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || step_generation_ != seen; });
            if (stopping_) return;
            seen = step_generation_;
        }
        run_rank(rank);
        {
            std::lock_guard<std::mutex> lock(mu_);
            ++ranks_done_;
        }
        cv_.notify_all();
    }
}

void tensor_parallel_group::run_rank(int32_t rank) {
    try {
        // Every rank of a stage before the last ends with the same residual stream: rank 0's goes on.
        float *out = hidden_out_ == nullptr || rank == 0
                         ? hidden_out_
                         : streams_.data() + static_cast<size_t>(rank - 1) * stream_floats_;
        outputs_[static_cast<size_t>(rank)] = ranks_[static_cast<size_t>(rank)]->execute_model(*step_, hidden_in_, out);
    } catch (...) {
        record_failure(std::current_exception());
    }
    finished_.fetch_add(1, std::memory_order_acq_rel);
    { std::lock_guard<std::mutex> lock(mu_); } // a rank between its check and its wait sees it
    cv_.notify_all();
}

// The first error of the step is its reason (the others' all_reduce fails because of it); the barrier breaks so
// that no rank waits for one that has stopped.
void tensor_parallel_group::record_failure(std::exception_ptr e) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failure_) failure_ = e;
        broken_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
}

std::optional<bool> tensor_parallel_group::barrier_state(uint64_t generation) {
    // finished_ first: a rank that finished had passed every barrier, and having seen its count this rank sees the
    // generation it advanced (the other order could see the count and an old generation, a false alarm).
    const int32_t finished = finished_.load(std::memory_order_acquire);
    if (barrier_generation_.load(std::memory_order_acquire) != generation) return true;
    if (broken_.load(std::memory_order_acquire)) return false;
    if (finished > 0) {
        // A rank ended its step while this barrier still waits for it: it will never arrive.
        record_failure(std::make_exception_ptr(error(
            "tensor parallel: a rank finished its forward pass while another waited for it in all_reduce (the model "
            "plugin called all_reduce a different number of times on different ranks)")));
        return false;
    }
    return std::nullopt;
}

bool tensor_parallel_group::barrier() {
    if (broken_.load(std::memory_order_acquire)) return false;
    const uint64_t generation = barrier_generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int32_t>(ranks_.size())) {
        arrived_.store(0, std::memory_order_relaxed);
        barrier_generation_.fetch_add(1, std::memory_order_release);
        { std::lock_guard<std::mutex> lock(mu_); } // a rank between its check and its wait sees the new generation
        cv_.notify_all();
        return true;
    }
    for (int i = 0; i < thread_pool_detail::spin_iterations; ++i) {
        if (const std::optional<bool> done = barrier_state(generation)) return *done;
        thread_pool_detail::cpu_relax();
    }
    std::optional<bool> done;
    {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] {
            // (barrier_state may record a failure, which takes mu_: look without it here.)
            return barrier_generation_.load(std::memory_order_acquire) != generation ||
                   broken_.load(std::memory_order_acquire) || finished_.load(std::memory_order_acquire) > 0;
        });
    }
    done = barrier_state(generation);
    return done.value_or(false);
}

int32_t tensor_parallel_group::all_reduce(void *user, float *data, int64_t n, strata_status *st) {
    auto *c = static_cast<rank_context *>(user);
    return c->group->reduce(c->rank, data, n, st);
}

// Each rank publishes its partial sums; once all have, rank r adds up its slice of the elements over the ranks in
// rank order into sum_; once all slices are done, every rank copies sum_. Rank k's pointer is read only between the
// first and the second barrier, and sum_ is rewritten only after every rank has passed the first barrier of the next
// call, which each reaches only after its copy: no rank overtakes another.
int32_t tensor_parallel_group::reduce(int32_t rank, float *data, int64_t n, strata_status *st) {
    if (n < 0 || static_cast<size_t>(n) > sum_.size()) {
        if (st != nullptr) {
            st->code = STRATA_ERR_INVALID_ARGUMENT;
            std::snprintf(st->message, sizeof st->message,
                          "tensor parallel: all_reduce of %lld floats exceeds the %zu a step holds",
                          static_cast<long long>(n), sum_.size());
        }
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    const auto broken = [&] {
        if (st != nullptr) {
            st->code = STRATA_ERR_CANCELLED;
            std::snprintf(st->message, sizeof st->message,
                          "tensor parallel: another rank failed during this step (its error is the step's)");
        }
        return static_cast<int32_t>(STRATA_ERR_CANCELLED);
    };
    partial_[static_cast<size_t>(rank)] = data;
    if (!barrier()) return broken();
    const auto size = static_cast<int64_t>(ranks_.size());
    const int64_t first = n * rank / size, end = n * (rank + 1) / size;
    for (int64_t i = first; i < end; ++i) {
        float s = partial_[0][i];
        for (size_t k = 1; k < ranks_.size(); ++k) s += partial_[k][i];
        sum_[static_cast<size_t>(i)] = s;
    }
    if (!barrier()) return broken();
    std::memcpy(data, sum_.data(), static_cast<size_t>(n) * sizeof(float));
    return STRATA_OK;
}

} // namespace strata::engine
