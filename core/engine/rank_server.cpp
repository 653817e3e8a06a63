#include "engine/rank_server.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "distributed/transport.hpp"
#include "engine/engine_util.hpp"
#include "engine/model_fingerprint.hpp"
#include "engine/pipeline_protocol.hpp"
#include "engine/process_all_reduce.hpp"
#include "engine/tensor_parallel_split.hpp"
#include "engine/vocab_pieces.hpp"
#include "engine/worker.hpp"
#include "model_file/open_model_file.hpp"
#include "model_file/tensor_parallel_shard.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace strata::engine {

namespace proto = pipeline_protocol;
using namespace detail;

namespace {

class rank_server {
  public:
    rank_server(const plugins::registry &registry, const strata_host_services *host, const engine_options &opts)
        : registry_(registry), host_(host), opts_(opts), link_(*opts.pipeline_transport), me_(link_.rank()),
          what_(fmt::format("{} rank {}", opts.tensor_parallel_size > 1 ? "tensor-parallel" : "pipeline", me_)) {}

    int run() {
        proto::command c = next_command();
        if (c.what == proto::op::stop) return 0; // rank 0 stopped before starting the ranks
        if (c.what != proto::op::start) fail("{}: expected start-up from rank 0, got command {}", what_,
                                             static_cast<int>(c.what));
        const std::string device = link_.recv_text(0, proto::tag_text);
        proto::shared_options shared;
        if (link_.recv(0, proto::tag_options, &shared, sizeof shared) != sizeof shared)
            fail("{}: start-up options of the wrong size from rank 0", what_);
        try {
            start(c, device, shared);
        } catch (const std::exception &e) {
            log::error("engine", "{}: {}", what_, e.what());
            refuse(e.what());
            // Rank 0 names this rank in its error and stops every rank.
            while (next_command().what != proto::op::stop) {
            }
            release(false);
            answer_ok();
            return 2;
        }
        for (;;) {
            c = next_command();
            if (c.what == proto::op::stop) break;
            try {
                serve(c);
            } catch (const std::exception &e) {
                // A step's part that fails leaves rank 0 waiting for this rank's residual stream or logits: the job
                // cannot go on. (KV block moves and allocations answer their error instead: see serve.)
                log::error("engine", "{} failed: {}; ending every rank", what_, e.what());
                if (reducer_) {
                    // (A tensor-parallel step that fails answers rank 0 and goes on: this is a rank that hung, or
                    // an error talking to the ranks.) When another rank hung, this one and rank 0 time out about
                    // together, and rank 0 answers the requests in flight naming that rank before it ends the job
                    // (2 s): give it the time.
                    link_.abort_after(5, 3);
                    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
                }
                link_.abort(3);
            }
        }
        release(true);
        answer_ok(); // rank 0 waits for every rank's stop before MPI_Finalize
        return 0;
    }

  private:
    proto::command next_command() {
        proto::command c;
        if (link_.recv(0, proto::tag_command, &c, sizeof c) != sizeof c)
            fail("{}: a command of the wrong size from rank 0", what_);
        return c;
    }

    void answer_ok(uint64_t a = 0, uint64_t b = 0) {
        proto::reply r;
        r.a = a, r.b = b;
        link_.send(0, proto::tag_reply, &r, sizeof r);
    }

    // Runs `fn` and answers rank 0 with ok or with its error (the pipeline goes on: rank 0 fails what needed it);
    // true when it succeeded.
    template <class Fn> bool answer_after(Fn &&fn) {
        try {
            fn();
        } catch (const std::exception &e) {
            refuse(e.what());
            return false;
        }
        answer_ok();
        return true;
    }

    void refuse(const std::string &why) {
        proto::reply r;
        r.ok = 0;
        link_.send(0, proto::tag_reply, &r, sizeof r);
        link_.send(0, proto::tag_text, why.data(), why.size());
    }

    void start(const proto::command &c, const std::string &device, const proto::shared_options &shared) {
        // Each process reads its own command line and config file: what lays out the KV and sizes a step must be
        // rank 0's.
        auto same = [&](const char *key, int64_t mine, int64_t rank0) {
            if (mine != rank0)
                fail("{} is {} here but {} on rank 0; every rank must run with the same settings", key, mine, rank0);
        };
        same("[scheduler] block_size", opts_.kv.block_size, shared.block_size);
        same("[memory] kv_cache_dtype (as strata_kv_type)", opts_.kv.kv_type, shared.kv_type);
        same("[scheduler] max_num_batched_tokens", opts_.scheduler.max_num_batched_tokens, shared.max_num_batched_tokens);
        same("[scheduler] max_num_seqs", opts_.scheduler.max_num_seqs, shared.max_num_seqs);
        same("[parallel] tensor_parallel_size", opts_.tensor_parallel_size, shared.tensor_parallel_size);
        same("[model] max_model_len", std::max(0, opts_.max_model_len), shared.max_model_len);
        file_ = open_model_file(opts_.model_path, opts_.file_open, false);
        const uint64_t mine = model_fingerprint(*file_);
        if (mine != c.b)
            fail("{} on host {} is not rank 0's model (fingerprints {:016x} here, {:016x} on rank 0); every rank must "
                 "read the same file",
                 opts_.model_path, link_.host_name(), mine, c.b);
        const std::string arch = std::string(file_->get_string("general.architecture").value_or(""));
        plugins::handle<strata_model_arch_desc> arch_plugin = registry_.find_model_arch_for(arch);
        if (arch_plugin.desc == nullptr)
            fail("{}: no model_arch plugin here handles architecture '{}'; every rank needs the same plugins",
                 opts_.model_path, arch);
        const int32_t n_tp = opts_.tensor_parallel_size;
        if (n_tp > 1) {
            // A tensor-parallel rank: its share of every layer (the model plugin's split, as rank 0 cuts its own).
            const tensor_splits splits = read_tensor_splits(*file_, registry_, host_, arch_plugin, opts_.model_path,
                                                            n_tp);
            n_vocab_ = splits.whole.n_vocab;
            shard_ = std::make_unique<tensor_parallel_shard>(*file_, splits.rules, me_, n_tp, quant_blocks(registry_),
                                                             false);
            worker_ = std::make_unique<worker>(registry_, host_, opts_, *shard_, arch_plugin);
            worker_->set_tensor_parallel({me_, n_tp, n_vocab_, nullptr, nullptr});
            worker_->init_device(0, 1, device); // rank 0's device kind, no fallback; the host's share (worker)
        } else {
            worker_ = std::make_unique<worker>(registry_, host_, opts_, *file_, arch_plugin);
            worker_->init_device(link_.local_rank(), link_.local_size(), device); // rank 0's device kind
        }
        worker_->load_model();
        hp_ = worker_->hparams();
        if (n_tp > 1) {
            if (!worker_->device_reads_host())
                fail("tensor_parallel_size {}: device '{}' has memory of its own (NCCL's all-reduce is not built yet)",
                     n_tp, worker_->device_name());
            stage_ = pipeline_stage{me_, link_.size(), 0, hp_.n_layer};
            reducer_ = std::make_unique<process_all_reduce>(
                link_, static_cast<size_t>(shared.max_num_batched_tokens) * static_cast<size_t>(hp_.n_embd),
                opts_.rank_timeout_s);
            worker::tensor_parallel_link tp = worker_->tensor_parallel();
            tp.all_reduce = &process_all_reduce::all_reduce;
            tp.user = reducer_.get();
            worker_->set_tensor_parallel(tp);
            log::info("engine", "tensor-parallel rank {} of {}: {} heads ({} KV) and {} feed-forward columns of every "
                      "layer on device '{}' with {} threads (process on {})", me_, n_tp, hp_.n_head, hp_.n_head_kv,
                      hp_.n_ff, worker_->device_name(), worker_->device_threads(), link_.host_name());
        } else {
            stage_ = pipeline_stage{me_, link_.size(), c.x, c.y};
            worker_->set_stage(stage_);
            what_ = fmt::format("pipeline rank {} (layers [{}, {}))", me_, stage_.layer_first, stage_.layer_end);
            log::info("engine", "pipeline rank {} of {}: layers [{}, {}) on device '{}' (process on {})", me_,
                      link_.size(), stage_.layer_first, stage_.layer_end, worker_->device_name(), link_.host_name());
        }
        worker_->place_weights(offload_with_kv_tiers(opts_, worker_->device_reads_host()), static_cast<int32_t>(c.a));
        worker_->allocate_step_memory();
        answer_ok(worker_->kv_block_bytes(), worker_->device_kv_budget());
    }

    void serve(const proto::command &c) {
        switch (c.what) {
        case proto::op::alloc_kv: {
            const std::string name = link_.recv_text(0, proto::tag_text);
            if (c.tier < 0 || c.tier >= kv::n_tiers) fail("{}: KV pool of tier {}", what_, c.tier);
            const auto t = static_cast<kv::tier>(c.tier);
            answer_after([&] {
                pools_[c.tier] = t == kv::tier::device ? worker_->allocate_device_kv(c.a, c.c)
                                                       : worker_->allocate_tier_kv(t, name, c.a, c.b, c.c);
                pool_bytes_[c.tier] = static_cast<size_t>(c.c);
                pool_blocks_[c.tier] = c.a;
                bounce_.resize(std::max<size_t>(bounce_.size(), pool_bytes_[c.tier]));
            });
            return;
        }
        case proto::op::bind: {
            // Sized for the usual largest step; a step listing more block references (sequences sharing prefix
            // blocks each list them) grows these once, as rank 0's step builder grows.
            const auto max_blocks = static_cast<size_t>(c.a);
            worker_->bind_kv(max_blocks);
            packed_.resize(proto::packed_step_words(static_cast<size_t>(c.x), static_cast<size_t>(c.y), max_blocks));
            blocks_.reserve(max_blocks);
            if (reducer_) return; // tensor-parallel ranks pass no residual stream
            const size_t stream = static_cast<size_t>(c.x) * static_cast<size_t>(hp_.n_embd);
            hidden_in_.resize(stream);
            if (!worker_->last_stage()) hidden_out_.resize(stream);
            return;
        }
        case proto::op::step: return step();
        case proto::op::kv_load:
        case proto::op::kv_store: return move_block(c);
        default: fail("{}: unknown command {} from rank 0", what_, static_cast<int>(c.what));
        }
    }

    void step() {
        const size_t size = link_.next_size(0, proto::tag_step);
        if (size > packed_.size() * sizeof(int32_t)) packed_.resize((size + sizeof(int32_t) - 1) / sizeof(int32_t));
        const size_t bytes = link_.recv(0, proto::tag_step, packed_.data(), packed_.size() * sizeof(int32_t));
        step_input s;
        if (bytes % sizeof(int32_t) != 0 || !proto::unpack_step(packed_.data(), bytes / sizeof(int32_t), blocks_, s))
            fail("a malformed step from rank 0 ({} bytes)", bytes);
        for (int32_t i = 0; i < s.seq_block_start[s.n_seqs]; ++i) {
            const kv::block_ref b = s.blocks[i];
            if (b.index >= pool_blocks_[static_cast<int>(b.where)])
                fail("the step names {} KV block {} of a pool of {}", kv::tier_name(b.where), b.index,
                     pool_blocks_[static_cast<int>(b.where)]);
        }
        if (reducer_) {
            // Every rank runs the step at once (their partial sums meet in process_all_reduce) and ends it together
            // (end_step); when every rank's forward returned, this one's piece of each logits row goes to rank 0,
            // which joins them; when this one's failed of itself, its reason goes instead (the step fails alone).
            reducer_->begin_step();
            step_output out;
            bool ok = true;
            std::string why;
            try {
                out = worker_->execute_model(s);
                if (out.n_rows != s.n_logits) fail("{} logits rows for a step of {}", out.n_rows, s.n_logits);
            } catch (const std::exception &e) {
                ok = false;
                why = e.what();
            } catch (...) {
                ok = false;
                why = "an unknown error";
            }
            const std::vector<process_all_reduce::ending> &ends = reducer_->end_step(ok);
            const bool whole = std::all_of(ends.begin(), ends.end(),
                                           [](auto e) { return e == process_all_reduce::ending::ok; });
            if (whole) {
                link_.send(0, proto::tag_logits, out.logits,
                           sizeof(float) * static_cast<size_t>(s.n_logits) *
                               static_cast<size_t>(vocab_piece_width(n_vocab_, me_, opts_.tensor_parallel_size)));
            } else if (ends[static_cast<size_t>(me_)] == process_all_reduce::ending::failed) {
                log::error("engine", "{}: a step failed: {}", what_, why);
                why.resize(std::min<size_t>(why.size(), proto::max_reason_bytes));
                link_.send(0, proto::tag_text, why.data(), why.size());
            }
            return;
        }
        const size_t stream = static_cast<size_t>(s.n_tokens) * static_cast<size_t>(hp_.n_embd);
        // No timeout here: rank 0 times every step (rank_timeout_s a rank) and, when one stops answering, fails its
        // requests with the reason and ends every rank; a rank 0 that hangs has no one left to answer anyway.
        const size_t got = link_.recv(me_ - 1, proto::tag_hidden, hidden_in_.data(), hidden_in_.size() * sizeof(float));
        // Where the step goes on from this rank: the next rank's residual stream, or rank 0's logits.
        const int next = worker_->last_stage() ? 0 : me_ + 1;
        const int next_tag = worker_->last_stage() ? proto::tag_logits : proto::tag_hidden;
        if (got == proto::failed_step_bytes) {
            // A rank before this one failed the step: pass its word on, compute nothing.
            link_.send(next, next_tag, hidden_in_.data(), got);
            return;
        }
        if (got != stream * sizeof(float))
            fail("rank {} sent {} bytes of the residual stream for {} tokens of {}", me_ - 1, got, s.n_tokens,
                 hp_.n_embd);
        step_output out;
        try {
            out = worker_->execute_model(s, hidden_in_.data(), worker_->last_stage() ? nullptr : hidden_out_.data());
        } catch (const std::exception &e) {
            // This step fails alone (as in one process): the word that it failed here goes down the pipeline to rank
            // 0 in place of the residual stream and the logits, then this rank's reason (in that order: rank 0 takes
            // the reason once the word has reached it).
            log::error("engine", "{}: a step failed: {}", what_, e.what());
            char word[proto::failed_step_bytes] = {};
            const int32_t rank = me_;
            std::memcpy(word, &rank, sizeof rank);
            link_.send(next, next_tag, word, sizeof word);
            std::string why = e.what();
            why.resize(std::min<size_t>(why.size(), proto::max_reason_bytes));
            link_.send(0, proto::tag_text, why.data(), why.size());
            return;
        }
        if (worker_->last_stage())
            link_.send(0, proto::tag_logits, out.logits,
                       sizeof(float) * static_cast<size_t>(s.n_logits) * static_cast<size_t>(out.n_vocab));
        else
            link_.send(me_ + 1, proto::tag_hidden, hidden_out_.data(), stream * sizeof(float));
    }

    void move_block(const proto::command &c) {
        kv::block_storage *pool = c.tier >= 0 && c.tier < kv::n_tiers ? pools_[c.tier].get() : nullptr;
        if (pool == nullptr || c.a >= pool_blocks_[c.tier])
            fail("KV block {} of a pool of tier {} this rank does not have", c.a, c.tier);
        const auto i = static_cast<uint32_t>(c.a);
        if (c.what == proto::op::kv_store) {
            const size_t got = link_.recv(0, proto::tag_block, bounce_.data(), bounce_.size());
            if (got != pool_bytes_[c.tier]) fail("{} bytes of KV block {} from rank 0 where a block is {}", got, i,
                                                 pool_bytes_[c.tier]);
            answer_after([&] { pool->store(i, bounce_.data()); });
            return;
        }
        if (answer_after([&] { pool->load(i, bounce_.data()); }))
            link_.send(0, proto::tag_block, bounce_.data(), pool_bytes_[c.tier]);
    }

    void release(bool clean) {
        for (auto &p : pools_) p.reset();
        if (worker_) worker_->release(clean);
        worker_.reset();
        shard_.reset();
    }

    const plugins::registry &registry_;
    const strata_host_services *host_;
    const engine_options &opts_;
    distributed::transport &link_;
    const int me_;
    std::unique_ptr<model_file> file_;
    std::unique_ptr<tensor_parallel_shard> shard_;  // a tensor-parallel rank's part of file_
    std::unique_ptr<process_all_reduce> reducer_;   // a tensor-parallel rank's all_reduce
    int32_t n_vocab_ = 0;                           // the whole vocabulary (a tensor-parallel rank writes its piece)
    std::string what_;                              // "pipeline rank 1 (layers [3, 5))", "tensor-parallel rank 1"
    std::unique_ptr<worker> worker_;
    strata_model_hparams hp_{};
    pipeline_stage stage_;
    std::unique_ptr<kv::block_storage> pools_[kv::n_tiers];
    size_t pool_bytes_[kv::n_tiers] = {};
    uint64_t pool_blocks_[kv::n_tiers] = {};
    std::vector<int32_t> packed_;
    std::vector<kv::block_ref> blocks_;
    std::vector<float> hidden_in_, hidden_out_;
    std::vector<unsigned char> bounce_;
};

} // namespace

int serve_pipeline_rank(const plugins::registry &registry, const strata_host_services *host,
                        const engine_options &opts) {
    if (opts.pipeline_transport == nullptr || opts.pipeline_transport->rank() == 0)
        fail("internal: serve_pipeline_rank on rank 0 or without a transport");
    rank_server server(registry, host, opts);
    return server.run();
}

} // namespace strata::engine
