#include "engine/process_all_reduce.hpp"

#include "engine/pipeline_protocol.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

namespace strata::engine {

process_all_reduce::process_all_reduce(distributed::transport &link, size_t max_floats, double timeout_s)
    : link_(link), max_floats_(max_floats), timeout_s_(timeout_s),
      gathered_(static_cast<size_t>(link.size()) * max_floats) {}

int32_t process_all_reduce::all_reduce(void *user, float *data, int64_t n, strata_status *st) {
    return static_cast<process_all_reduce *>(user)->reduce(data, n, st);
}

int32_t process_all_reduce::reduce(float *data, int64_t n, strata_status *st) {
    auto failed = [&](int32_t code, const std::string &why) {
        if (st != nullptr) {
            st->code = code;
            std::snprintf(st->message, sizeof st->message, "%s", why.c_str());
        }
        return code;
    };
    // Nothing may leave through the plugin's C frames: a failure (the transport's, or formatting its message) becomes
    // the status.
    try {
        if (n < 0 || static_cast<size_t>(n) > max_floats_)
            return failed(STRATA_ERR_INVALID_ARGUMENT,
                          fmt::format("tensor parallel: all_reduce of {} floats exceeds the {} a step holds", n,
                                      max_floats_));
        const auto count = static_cast<size_t>(n);
        int late = -1;
        if (!link_.all_gather_within(pipeline_protocol::tag_partial, data, count * sizeof(float), gathered_.data(),
                                     timeout_s_, late))
            return failed(STRATA_ERR_IO, fmt::format("tensor-parallel rank {} sent no partial sums within {} s: it "
                                                     "hung or died (see its log; [parallel] rank_timeout_s)",
                                                     late, timeout_s_));
        // Rank k's partial sums are at gathered_ + k * n: added in rank order, as the ranks in one process add them.
        const auto size = static_cast<size_t>(link_.size());
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
        return STRATA_ERR_IO;
    }
}

} // namespace strata::engine
