#include "engine/remote_rank.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "distributed/transport.hpp"
#include "engine/pipeline_protocol.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>

namespace strata::engine {

namespace proto = pipeline_protocol;

namespace {

std::mutex g_broken_mu;
std::string g_broken; // why the pipeline stopped ("" while it runs)

} // namespace

void fail_pipeline(distributed::transport &link, const std::string &why) {
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(g_broken_mu);
        first = g_broken.empty();
        if (first) g_broken = why;
    }
    if (first) {
        log::error("engine", "{}; the requests in flight fail with this reason and every rank ends in 2 s",
                   why);
        link.abort_after(2, 4);
    }
    fail("{}", why);
}

void check_pipeline() {
    std::lock_guard<std::mutex> lock(g_broken_mu);
    if (!g_broken.empty()) fail("{}", g_broken);
}

void send_to_rank(distributed::transport &link, int rank, int tag, const void *data, size_t bytes, double timeout_s) {
    if (!link.send_within(rank, tag, data, bytes, timeout_s))
        fail_pipeline(link, fmt::format("rank {} took no message within {} s: it hung or died (see its log; "
                                        "[parallel] rank_timeout_s)",
                                        rank, timeout_s));
}

namespace {

void send_command(distributed::transport &link, int rank, const proto::command &c, double timeout_s) {
    send_to_rank(link, rank, proto::tag_command, &c, sizeof c, timeout_s);
}

void send_text(distributed::transport &link, int rank, const std::string &s, double timeout_s) {
    send_to_rank(link, rank, proto::tag_text, s.data(), s.size(), timeout_s);
}

// A remote rank's part of every block of one pool: each access is a message to the rank and its answer.
class remote_block_storage final : public kv::block_storage {
  public:
    remote_block_storage(distributed::transport &link, int rank, std::string name, kv::tier t, uint64_t block_bytes,
                         double timeout_s)
        : link_(link), rank_(rank), name_(std::move(name)), tier_(t), block_bytes_(block_bytes), timeout_s_(timeout_s) {}
    void *device_address(uint32_t) override { return nullptr; }
    void *host_address(uint32_t) override { return nullptr; }
    void load(uint32_t i, void *host_dst) override {
        check_pipeline();
        send_command(link_, rank_, proto::command{proto::op::kv_load, static_cast<int32_t>(tier_), 0, 0, i, 0, 0},
                     timeout_s_);
        answer("read", i);
        size_t got = 0;
        if (!link_.recv_within(rank_, proto::tag_block, host_dst, block_bytes_, timeout_s_, got))
            fail_pipeline(link_, fmt::format("{} sent no KV block {} within {} s", name_, i, timeout_s_));
        if (got != block_bytes_)
            fail("{} sent {} bytes of KV block {} where its part is {}", name_, got, i, block_bytes_);
    }
    void store(uint32_t i, const void *host_src) override {
        check_pipeline();
        send_command(link_, rank_, proto::command{proto::op::kv_store, static_cast<int32_t>(tier_), 0, 0, i, 0, 0},
                     timeout_s_);
        send_to_rank(link_, rank_, proto::tag_block, host_src, block_bytes_, timeout_s_);
        answer("write", i);
    }

  private:
    void answer(const char *what, uint32_t i) {
        proto::reply r;
        size_t got = 0;
        if (!link_.recv_within(rank_, proto::tag_reply, &r, sizeof r, timeout_s_, got))
            fail_pipeline(link_, fmt::format("{} did not {} its part of KV block {} within {} s (the "
                                             "rank hung or died: see its log; [parallel] rank_timeout_s)",
                                             name_, what, i, timeout_s_));
        if (!r.ok)
            fail("{} could not {} its part of {} KV block {}: {}", name_, what, kv::tier_name(tier_), i,
                 link_.recv_text(rank_, proto::tag_text));
    }

    distributed::transport &link_;
    int rank_;
    std::string name_; // "pipeline rank 1", "tensor-parallel rank 1"
    kv::tier tier_;
    uint64_t block_bytes_;
    double timeout_s_;
};

} // namespace

remote_rank::remote_rank(distributed::transport &link, const pipeline_stage &stage, double timeout_s,
                         bool tensor_parallel)
    : link_(link), stage_(stage), timeout_s_(timeout_s),
      name_(fmt::format("{} rank {}", tensor_parallel ? "tensor-parallel" : "pipeline", stage.rank)),
      tensor_parallel_(tensor_parallel) {}

remote_rank::~remote_rank() {
    try {
        stop();
    } catch (const std::exception &e) {
        log::error("engine", "stopping {}: {}", name_, e.what());
    }
}

void remote_rank::begin_start(const std::string &device, int32_t n_ctx, uint64_t fingerprint,
                              const proto::shared_options &options) {
    proto::command c{proto::op::start, 0, stage_.layer_first, stage_.layer_end, static_cast<uint64_t>(n_ctx),
                     fingerprint, 0};
    send_command(link_, stage_.rank, c, timeout_s_);
    send_text(link_, stage_.rank, device, timeout_s_);
    send_to_rank(link_, stage_.rank, proto::tag_options, &options, sizeof options, timeout_s_);
    started_ = true;
}

void remote_rank::finish_start(double timeout_s) {
    proto::reply r;
    // Loading a large model takes minutes: say every 30 s whom start-up waits for, and give up after timeout_s (a rank
    // that hung; one that died ends the job through mpirun).
    using clock = std::chrono::steady_clock;
    const auto began = clock::now();
    for (size_t got = 0;;) {
        const double waited = std::chrono::duration<double>(clock::now() - began).count();
        if (waited >= timeout_s) {
            stopped_ = true; // it answers no stop either: the job ends with start-up's error
            fail("{} of {} did not finish loading its share of the model within {} s ([parallel] "
                 "rank_start_timeout_s, --rank-start-timeout): it hung (see its log), or it needs longer",
                 name_, stage_.n_ranks, timeout_s);
        }
        if (link_.recv_within(stage_.rank, proto::tag_reply, &r, sizeof r, std::min(30.0, timeout_s - waited), got))
            break;
        if (const double now = std::chrono::duration<double>(clock::now() - began).count(); now < timeout_s)
            log::info("engine", "start-up waits for {} to load its share of the model ({:.0f} s of at most {} s)",
                      name_, now, timeout_s);
    }
    if (!r.ok)
        fail("{} of {}{} could not start: {}", name_, stage_.n_ranks,
             tensor_parallel_ ? std::string()
                              : fmt::format(" (layers [{}, {}))", stage_.layer_first, stage_.layer_end),
             link_.recv_text(stage_.rank, proto::tag_text));
    kv_block_bytes_ = r.a;
    device_kv_ = r.b;
    if (kv_block_bytes_ == 0) fail("{} reported KV blocks of 0 bytes", name_);
}

std::unique_ptr<kv::block_storage> remote_rank::allocate(kv::tier t, const std::string &name, uint64_t n_blocks,
                                                         uint64_t align, uint64_t block_bytes) {
    send_command(link_, stage_.rank,
                 proto::command{proto::op::alloc_kv, static_cast<int32_t>(t), 0, 0, n_blocks, align, block_bytes},
                 timeout_s_);
    send_text(link_, stage_.rank, name, timeout_s_);
    proto::reply r;
    link_.recv(stage_.rank, proto::tag_reply, &r, sizeof r);
    if (!r.ok)
        fail("{} could not allocate its {} KV pool of {} blocks: {}", name_, kv::tier_name(t),
             n_blocks, link_.recv_text(stage_.rank, proto::tag_text));
    return std::make_unique<remote_block_storage>(link_, stage_.rank, name_, t, block_bytes, timeout_s_);
}

std::unique_ptr<kv::block_storage> remote_rank::allocate_device_kv(uint64_t n_blocks, uint64_t block_bytes) {
    return allocate(kv::tier::device, std::string(), n_blocks, 0, block_bytes);
}

std::unique_ptr<kv::block_storage> remote_rank::allocate_tier_kv(kv::tier t, const std::string &name,
                                                                 uint64_t n_blocks, uint64_t align,
                                                                 uint64_t block_bytes) {
    return allocate(t, name, n_blocks, align, block_bytes);
}

void remote_rank::bind(size_t max_step_blocks, int32_t max_tokens, int32_t max_seqs) {
    send_command(link_, stage_.rank, proto::command{proto::op::bind, 0, max_tokens, max_seqs, max_step_blocks, 0, 0},
                 timeout_s_);
}

void remote_rank::send_step(const int32_t *words, size_t n) {
    send_command(link_, stage_.rank, proto::command{proto::op::step, 0, 0, 0, 0, 0, 0}, timeout_s_);
    send_to_rank(link_, stage_.rank, proto::tag_step, words, n * sizeof(int32_t), timeout_s_);
}

void remote_rank::stop() {
    if (!started_ || stopped_) return;
    stopped_ = true;
    // The rank acknowledges once it has released everything; one that does not (it stopped answering, or the
    // pipeline broke already) makes the job end instead of MPI_Finalize waiting for it.
    const proto::command c{proto::op::stop, 0, 0, 0, 0, 0, 0};
    proto::reply r;
    size_t got = 0;
    bool broken = false;
    try {
        check_pipeline();
    } catch (const std::exception &) {
        broken = true;
    }
    if (broken || !link_.send_within(stage_.rank, proto::tag_command, &c, sizeof c, timeout_s_) ||
        !link_.recv_within(stage_.rank, proto::tag_reply, &r, sizeof r, timeout_s_, got)) {
        log::error("engine", "{} did not stop within {} s; ending every rank", name_, timeout_s_);
        link_.abort_after(0, 4);
    }
}

} // namespace strata::engine
