#include "engine/process_all_reduce.hpp"

#include "common/error.hpp"
#include "engine/pipeline_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace strata::engine {

process_all_reduce::process_all_reduce(distributed::transport &link, size_t max_floats, double timeout_s)
    : link_(link), max_floats_(max_floats), timeout_s_(timeout_s), me_(link.rank()),
      gathered_(held_floats(link.size(), max_floats)),
      received_(static_cast<size_t>(link.size())), endings_(static_cast<size_t>(link.size()), ending::ok),
      ended_(static_cast<size_t>(link.size()), 0) {}

int32_t process_all_reduce::all_reduce(void *user, float *data, int64_t n, strata_status *st) {
    return static_cast<process_all_reduce *>(user)->reduce(data, n, st);
}

void process_all_reduce::begin_step() {
    if (!broken_.empty()) fail("{}", broken_);
    std::fill(ended_.begin(), ended_.end(), 0);
    std::fill(endings_.begin(), endings_.end(), ending::ok);
    cancelled_ = false;
}

std::string process_all_reduce::timeout_text(int rank) const {
    return fmt::format("tensor-parallel rank {} sent no partial sums within {} s: it hung or died (see its log; "
                       "[parallel] rank_timeout_s)",
                       rank, timeout_s_);
}

int32_t process_all_reduce::reduce(float *data, int64_t n, strata_status *st) {
    auto failed = [&](int32_t code, const char *why) {
        if (st != nullptr) {
            st->code = code;
            std::snprintf(st->message, sizeof st->message, "%s", why);
        }
        return code;
    };
    const char *cancelled = "tensor parallel: another rank failed in this step (its error is the step's)";
    // Nothing may leave through the plugin's C frames: a failure (the transport's, or formatting its message) becomes
    // the status.
    try {
        if (n < 0 || static_cast<size_t>(n) > max_floats_)
            return failed(STRATA_ERR_INVALID_ARGUMENT,
                          fmt::format("tensor parallel: all_reduce of {} floats exceeds the {} a step holds", n,
                                      max_floats_)
                              .c_str());
        if (!broken_.empty()) return failed(STRATA_ERR_IO, broken_.c_str());
        if (std::find(ended_.begin(), ended_.end(), 1) != ended_.end()) {
            cancelled_ = true; // a rank has ended its forward: its sums will not come
            return failed(STRATA_ERR_CANCELLED, cancelled);
        }
        if (n == 0) return STRATA_OK; // every rank's is empty too (the same step): nothing to exchange
        const auto count = static_cast<size_t>(n);
        const size_t bytes = count * sizeof(float);
        int late = -1;
        if (!link_.all_gather_within(pipeline_protocol::tag_partial, data, bytes, gathered_.data(), received_.data(),
                                     timeout_s_, late)) {
            // Messages of this exchange may still be under way: the ranks cannot go on together (end_step throws).
            broken_ = timeout_text(late);
            return failed(STRATA_ERR_IO, broken_.c_str());
        }
        // A rank that ended its forward (it failed) sent its one-byte end message in place of its sums.
        bool someone_ended = false;
        for (size_t k = 0; k < received_.size(); ++k) {
            if (static_cast<int>(k) == me_ || received_[k] == bytes) continue;
            if (received_[k] != 1)
                return failed(STRATA_ERR_INTERNAL,
                              fmt::format("tensor parallel: rank {} sent {} bytes where this rank's all_reduce has {} "
                                          "(the ranks' models called all_reduce differently)",
                                          k, received_[k], bytes)
                                  .c_str());
            ended_[k] = 1;
            endings_[k] = static_cast<ending>(
                reinterpret_cast<const unsigned char *>(gathered_.data())[k * bytes]);
            someone_ended = true;
        }
        if (someone_ended) {
            cancelled_ = true;
            return failed(STRATA_ERR_CANCELLED, cancelled);
        }
        // Rank k's partial sums are at gathered_ + k * n: added in rank order, as the ranks in one process add them.
        const size_t size = received_.size();
        for (size_t i = 0; i < count; ++i) {
            float s = gathered_[i];
            for (size_t k = 1; k < size; ++k) s += gathered_[k * count + i];
            data[i] = s;
        }
        return STRATA_OK;
    } catch (const std::exception &e) {
        if (st != nullptr) {
            st->code = STRATA_ERR_IO;
            std::snprintf(st->message, sizeof st->message, "tensor parallel: exchanging partial sums failed: %s",
                          e.what());
        }
        try {
            broken_ = std::string("exchanging partial sums failed: ") + e.what();
        } catch (...) {
        }
        return STRATA_ERR_IO;
    }
}

const std::vector<process_all_reduce::ending> &process_all_reduce::end_step(bool ok) {
    if (!broken_.empty()) fail("{}", broken_); // a rank hung in this step: no end of it is coming
    const ending mine = ok ? ending::ok : cancelled_ ? ending::cancelled : ending::failed;
    endings_[static_cast<size_t>(me_)] = mine;
    const auto byte = static_cast<unsigned char>(mine);
    const int size = link_.size();
    for (int k = 0; k < size; ++k)
        if (k != me_ && !link_.send_within(k, pipeline_protocol::tag_partial, &byte, 1, timeout_s_))
            fail("tensor-parallel rank {} took no end of the step within {} s: it hung or died (see its log; "
                 "[parallel] rank_timeout_s)",
                 k, timeout_s_);
    // Each other rank's messages until its end: partial sums it sent before it learned that this one had ended.
    auto *drain = gathered_.data();
    const size_t capacity = gathered_.size() * sizeof(float);
    for (int k = 0; k < size; ++k) {
        for (size_t got = 0; k != me_ && !ended_[static_cast<size_t>(k)];) {
            if (!link_.recv_within(k, pipeline_protocol::tag_partial, drain, capacity, timeout_s_, got))
                fail("{}", timeout_text(k));
            if (got == 1) {
                ended_[static_cast<size_t>(k)] = 1;
                endings_[static_cast<size_t>(k)] = static_cast<ending>(*reinterpret_cast<unsigned char *>(drain));
            }
        }
    }
    return endings_;
}

} // namespace strata::engine
