// The executor (vLLM v1's Executor): where a step the scheduler decided crosses to the workers that run it. One worker
// runs the whole model (vLLM's UniProcExecutor); with pipeline_parallel_size N, N workers in this process each run a
// contiguous range of the layers over KV blocks of their own, and each step passes the residual stream rank to rank;
// with tensor_parallel_size N, N workers each hold their share of every layer's heads and feed-forward columns and
// run each step at once (tensor_parallel_group).
// Under mpirun the ranks are processes (vLLM's multi-node executors; #16): this process keeps rank 0's worker, the
// others are remote_ranks, each step goes to every rank; pipeline ranks pass the residual stream from process to
// process and the last rank's logits come back here, tensor-parallel ranks all run the step at once, their partial
// sums meeting through the transport, and each sends its piece of the logits here. The engine above does not change.
#pragma once

#include "common/error.hpp"
#include "distributed/transport.hpp"
#include "engine/pipeline_protocol.hpp"
#include "engine/process_all_reduce.hpp"
#include "engine/remote_rank.hpp"
#include "engine/step_input.hpp"
#include "engine/tensor_parallel_group.hpp"
#include "engine/vocab_pieces.hpp"
#include "engine/worker.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace strata::engine {

class executor {
  public:
    explicit executor(std::vector<std::unique_ptr<worker>> workers) : workers_(std::move(workers)) {}

    // The worker that reports for start-up (rank 0: the device, the plan, the hyperparameters).
    worker &driver_worker() { return *workers_.front(); }
    const worker &driver_worker() const { return *workers_.front(); }
    // The workers in this process, rank by rank (one unless pipeline or tensor parallel in one process; tensor-parallel
    // ranks inside pipeline stages rank-major: worker t * S + s is rank t of stage s).
    const std::vector<std::unique_ptr<worker>> &workers() const { return workers_; }

    // The workers are tensor-parallel ranks (#16 item 3): each step runs on all of them at once, their partial sums
    // joined by all_reduce (tensor_parallel_group); up to max_floats floats each (max_num_batched_tokens x n_embd),
    // and their pieces of up to max_seqs logits rows. Inside n_stages pipeline stages the workers are rank-major
    // (worker t * n_stages + s: rank t of stage s): a group per stage, run stage after stage, the residual stream
    // passing between them; only the last stage's group has logits.
    void make_tensor_parallel(size_t max_floats, int32_t n_vocab, int32_t max_seqs, int32_t n_stages = 1) {
        if (n_stages < 1) fail("internal: {} pipeline stages of tensor-parallel ranks", n_stages);
        const auto n_tp = static_cast<int32_t>(workers_.size()) / n_stages;
        if (n_tp * n_stages != static_cast<int32_t>(workers_.size()))
            fail("internal: {} workers are not {} pipeline stages of tensor-parallel ranks", workers_.size(), n_stages);
        for (int32_t s = 0; s < n_stages; ++s) {
            std::vector<worker *> ranks;
            for (int32_t t = 0; t < n_tp; ++t) ranks.push_back(workers_[static_cast<size_t>(t * n_stages + s)].get());
            const bool last = s + 1 == n_stages;
            tensor_parallel_.push_back(std::make_unique<tensor_parallel_group>(
                std::move(ranks), max_floats, n_vocab, last ? max_seqs : 0, last ? 0 : max_floats));
        }
    }
    // The same across processes (under mpirun): rank 0's worker here, the other ranks remote (add_remote first); each
    // step goes to every rank, their partial sums meet through the transport (process_all_reduce) and each sends its
    // piece of the logits here.
    void make_tensor_parallel_across_processes(size_t max_floats, int32_t n_vocab, int32_t max_seqs) {
        if (link_ == nullptr || workers_.size() != 1) fail("internal: tensor parallel across processes without ranks");
        reducer_ = std::make_unique<process_all_reduce>(*link_, max_floats, timeout_s_);
        worker::tensor_parallel_link tp = workers_.front()->tensor_parallel();
        tp.all_reduce = &process_all_reduce::all_reduce;
        tp.user = reducer_.get();
        workers_.front()->set_tensor_parallel(tp);
        pieces_.assign(remote_.size() + 1, nullptr);
        remote_logits_.resize(remote_.size());
        for (size_t i = 0; i < remote_.size(); ++i)
            remote_logits_[i].resize(static_cast<size_t>(max_seqs) *
                                     static_cast<size_t>(vocab_piece_width(n_vocab, remote_[i]->stage().rank,
                                                                           static_cast<int32_t>(pieces_.size()))));
    }
    bool tensor_parallel() const { return !tensor_parallel_.empty() || reducer_ != nullptr; }

    // Pipeline ranks that are processes (after rank 0's worker, in rank order), reached through `link`; each rank's
    // part of a step may take timeout_s seconds ([parallel] rank_timeout_s).
    void add_remote(distributed::transport &link, double timeout_s, std::unique_ptr<remote_rank> rank) {
        link_ = &link;
        timeout_s_ = timeout_s;
        remote_.push_back(std::move(rank));
    }
    const std::vector<std::unique_ptr<remote_rank>> &remote_ranks() const { return remote_; }
    // Every rank, local and remote, in rank order.
    std::vector<pipeline_rank *> ranks() const {
        std::vector<pipeline_rank *> out;
        for (const auto &w : workers_) out.push_back(w.get());
        for (const auto &r : remote_) out.push_back(r.get());
        return out;
    }

    // The residual stream between ranks (max_tokens x n_embd floats of host memory) and, with remote ranks, the
    // logits rows the last one sends (max_seqs x n_vocab), allocated once.
    void allocate_step_memory(int32_t max_tokens, int32_t n_embd, int32_t max_seqs, int32_t n_vocab) {
        for (auto &w : workers_) w->allocate_step_memory();
        n_embd_ = n_embd;
        n_vocab_ = n_vocab;
        const size_t stream_floats = static_cast<size_t>(max_tokens) * static_cast<size_t>(n_embd);
        if (workers_.size() + remote_.size() > 1 && !tensor_parallel()) stream_.resize(stream_floats);
        // Tensor-parallel stages: the stream in and the stream out apart, since a stage's ranks read it at once.
        if (tensor_parallel_.size() > 1) stream_.resize(stream_floats), stream_next_.resize(stream_floats);
        if (!remote_.empty()) logits_.resize(static_cast<size_t>(max_seqs) * static_cast<size_t>(n_vocab));
    }

    // Every rank's step buffers for steps of up to max_step_blocks block references.
    void bind_kv(size_t max_step_blocks, int32_t max_tokens, int32_t max_seqs) {
        for (auto &w : workers_) w->bind_kv(max_step_blocks);
        for (auto &r : remote_) r->bind(max_step_blocks, max_tokens, max_seqs);
        if (!remote_.empty())
            packed_.reserve(pipeline_protocol::packed_step_words(static_cast<size_t>(max_tokens),
                                                                 static_cast<size_t>(max_seqs), max_step_blocks));
    }

    // Runs one step on the workers, rank after rank, and returns the logits rows the last rank holds.
    step_output execute_model(const step_input &step) {
        if (reducer_) return execute_tensor_parallel_across_processes(step);
        if (!remote_.empty()) return execute_across_processes(step);
        if (tensor_parallel_.size() == 1) return tensor_parallel_.front()->execute_model(step);
        if (!tensor_parallel_.empty()) return execute_tensor_parallel_stages(step);
        if (workers_.size() == 1) return workers_.front()->execute_model(step);
        step_output out;
        for (size_t r = 0; r < workers_.size(); ++r) {
            const bool last = r + 1 == workers_.size();
            out = workers_[r]->execute_model(step, r > 0 ? stream_.data() : nullptr, last ? nullptr : stream_.data());
        }
        return out;
    }

    // Stops the remote ranks, then releases the workers here.
    void release(bool clean_shutdown) {
        for (auto &r : remote_) r->stop();
        tensor_parallel_.clear(); // their threads, before the workers they run
        for (auto it = workers_.rbegin(); it != workers_.rend(); ++it) (*it)->release(clean_shutdown);
    }

  private:
    // Tensor-parallel ranks inside pipeline stages: stage after stage, each stage's ranks at once; the residual stream
    // goes from one buffer to the other between stages.
    step_output execute_tensor_parallel_stages(const step_input &step) {
        float *in = nullptr, *out = stream_.data(), *spare = stream_next_.data();
        step_output result;
        for (size_t s = 0; s < tensor_parallel_.size(); ++s) {
            const bool last = s + 1 == tensor_parallel_.size();
            result = tensor_parallel_[s]->execute_model(step, in, last ? nullptr : out);
            in = out;
            std::swap(out, spare);
        }
        return result;
    }

    step_output execute_across_processes(const step_input &step) {
        check_pipeline();
        // Every rank waits for this step's residual stream once it has the step: from then on anything that goes
        // wrong in talking to the ranks leaves them out of step, so it stops the pipeline (fail_pipeline). A rank's
        // own layers may fail alone, so that only this step fails (as in one process): rank 0's send zeros on and the
        // logits that come back are dropped; another's send their number on in place of the stream and the logits,
        // then their reason.
        const size_t words = pipeline_protocol::pack_step(step, packed_);
        std::exception_ptr local_error;
        std::string remote_error; // a rank's reason when its layers failed the step
        size_t got = 0;
        try {
            for (auto &r : remote_) r->send_step(packed_.data(), words);
            try {
                workers_.front()->execute_model(step, nullptr, stream_.data());
            } catch (...) {
                local_error = std::current_exception();
                std::fill_n(stream_.data(), static_cast<size_t>(step.n_tokens) * static_cast<size_t>(n_embd_), 0.0f);
            }
            send_to_rank(*link_, remote_.front()->stage().rank, pipeline_protocol::tag_hidden, stream_.data(),
                         sizeof(float) * static_cast<size_t>(step.n_tokens) * static_cast<size_t>(n_embd_), timeout_s_);
            // rank_timeout_s is each rank's part: the step crosses ranks 1..N-1 one after another.
            const double wait_s = timeout_s_ * static_cast<double>(remote_.size());
            if (!link_->recv_within(remote_.back()->stage().rank, pipeline_protocol::tag_logits, logits_.data(),
                                    logits_.size() * sizeof(float), wait_s, got))
                fail_pipeline(*link_, fmt::format("pipeline ranks 1-{} did not return the step's logits within {} s "
                                                  "({} s a rank): a rank hung or died (see the ranks' logs; "
                                                  "[parallel] rank_timeout_s)",
                                                  remote_.back()->stage().rank, wait_s, timeout_s_));
            if (got == pipeline_protocol::failed_step_bytes) {
                // A rank's layers failed: its number came in place of the logits, its reason follows.
                int32_t rank = 0;
                std::memcpy(&rank, logits_.data(), sizeof rank);
                if (rank < 1 || rank > static_cast<int32_t>(remote_.size()))
                    fail("the pipeline said rank {} failed the step, which is no rank here", rank);
                remote_error = reason_of(*remote_[static_cast<size_t>(rank) - 1]);
            }
        } catch (const std::exception &e) {
            check_pipeline(); // a timeout above: already stopped, with its reason
            fail_pipeline(*link_, fmt::format("talking to the pipeline ranks failed: {}", e.what()));
        }
        if (local_error) std::rethrow_exception(local_error);
        if (!remote_error.empty()) fail("{}", remote_error);
        const size_t bytes = sizeof(float) * static_cast<size_t>(step.n_logits) * static_cast<size_t>(n_vocab_);
        if (got != bytes)
            fail_pipeline(*link_, fmt::format("pipeline rank {} sent {} bytes of logits where the step has {} rows of {}",
                                              remote_.back()->stage().rank, got, step.n_logits, n_vocab_));
        step_output out;
        out.logits = logits_.data();
        out.n_rows = step.n_logits;
        out.n_vocab = n_vocab_;
        return out;
    }

    // A step of tensor-parallel ranks that are processes: each runs it at once, their forwards meeting in each
    // all_reduce, and each ends it with process_all_reduce::end_step. A step that failed on some rank (here or there)
    // fails alone with that rank's reason, as in one process: no logits come, the ranks that failed of themselves
    // send their reasons, and the next step starts in step. A rank that hung or an error talking to the ranks leaves
    // them out of step: that stops every rank (fail_pipeline) with its reason.
    step_output execute_tensor_parallel_across_processes(const step_input &step) {
        check_pipeline();
        const size_t words = pipeline_protocol::pack_step(step, packed_);
        const auto n_ranks = static_cast<int32_t>(pieces_.size());
        std::exception_ptr local;
        std::string why; // the reason of the first rank that failed of itself
        try {
            reducer_->begin_step();
            for (auto &r : remote_) r->send_step(packed_.data(), words);
            step_output mine;
            try {
                mine = workers_.front()->execute_model(step);
                if (mine.n_rows != step.n_logits)
                    fail("internal: tensor-parallel rank 0 returned {} logits rows for {}", mine.n_rows, step.n_logits);
            } catch (...) {
                local = std::current_exception();
            }
            const std::vector<process_all_reduce::ending> &ends = reducer_->end_step(local == nullptr);
            const bool whole = std::all_of(ends.begin(), ends.end(),
                                           [](auto e) { return e == process_all_reduce::ending::ok; });
            if (!whole) {
                for (const auto &r : remote_) {
                    if (ends[static_cast<size_t>(r->stage().rank)] != process_all_reduce::ending::failed) continue;
                    const std::string reason = reason_of(*r);
                    if (why.empty()) why = reason;
                }
            } else {
                pieces_[0] = mine.logits;
                for (size_t i = 0; i < remote_.size(); ++i) {
                    const int rank = remote_[i]->stage().rank;
                    const size_t bytes = sizeof(float) * static_cast<size_t>(step.n_logits) *
                                         static_cast<size_t>(vocab_piece_width(n_vocab_, rank, n_ranks));
                    size_t got = 0;
                    std::vector<float> &piece = remote_logits_[i];
                    if (!link_->recv_within(rank, pipeline_protocol::tag_logits, piece.data(),
                                            piece.size() * sizeof(float), timeout_s_, got))
                        fail("{} did not return its logits within {} s: it hung or died (see its log; [parallel] "
                             "rank_timeout_s)", remote_[i]->name(), timeout_s_);
                    if (got != bytes)
                        fail("{} sent {} bytes of logits where the step's {} rows of its piece are {}",
                             remote_[i]->name(), got, step.n_logits, bytes);
                    pieces_[i + 1] = piece.data();
                }
            }
            if (!whole && ends[0] == process_all_reduce::ending::failed) why.clear(); // rank 0's own reason first
            if (!whole && local == nullptr && why.empty())
                fail("internal: a tensor-parallel step failed on no rank of its own accord");
        } catch (const std::exception &e) {
            check_pipeline(); // a rank that stopped taking the step: already stopped, with its reason
            fail_pipeline(*link_, fmt::format("the tensor-parallel ranks (processes) cannot go on together: {}",
                                              e.what()));
        }
        if (!why.empty()) fail("{}", why);
        if (local) std::rethrow_exception(local);
        join_vocab_pieces(pieces_.data(), n_ranks, step.n_logits, n_vocab_, logits_.data());
        step_output out;
        out.logits = logits_.data();
        out.n_rows = step.n_logits;
        out.n_vocab = n_vocab_;
        return out;
    }

    // "<rank's name>: <its reason>", the text a remote rank whose step failed sends rank 0, within the rank timeout.
    std::string reason_of(const remote_rank &r) {
        text_.resize(pipeline_protocol::max_reason_bytes);
        size_t got = 0;
        if (!link_->recv_within(r.stage().rank, pipeline_protocol::tag_text, text_.data(), text_.size(), timeout_s_,
                                got))
            fail("{} failed the step but did not say why within {} s", r.name(), timeout_s_);
        return fmt::format("{}: {}", r.name(), std::string_view(text_.data(), got));
    }

    std::vector<std::unique_ptr<worker>> workers_;
    std::vector<std::unique_ptr<remote_rank>> remote_;
    std::unique_ptr<process_all_reduce> reducer_; // tensor-parallel ranks that are processes
    std::vector<std::vector<float>> remote_logits_; // their pieces of the logits, rank by rank
    std::vector<const float *> pieces_;
    std::vector<char> text_; // a rank's reason for a failed step
    std::vector<std::unique_ptr<tensor_parallel_group>> tensor_parallel_; // a group per pipeline stage in this process
    distributed::transport *link_ = nullptr;
    double timeout_s_ = 0;
    int32_t n_embd_ = 0, n_vocab_ = 0;
    std::vector<float> stream_;
    std::vector<float> stream_next_; // tensor-parallel stages: the next stage's stream while one reads stream_
    std::vector<float> logits_;   // the last remote rank's logits rows
    std::vector<int32_t> packed_; // the step as sent to the remote ranks
};

} // namespace strata::engine
