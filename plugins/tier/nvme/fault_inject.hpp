// TEST ONLY: I/O fault injection for the nvme tier, armed by the `[nvme] inject_faults` key (empty = off, the default).
//
// A fault plan is a list of rules separated by ';':
//
//   RULE  = OP ":" KIND [":after=" N] [":count=" M]
//   OP    = read | write | any          which I/O requests the rule counts (one request = one chunk or part of one)
//   KIND  = eio                         the request fails with EIO (nothing is transferred)
//         | enospc                      the request fails with ENOSPC (nothing is transferred)
//         | short                       the transfer ends halfway (rounded down to 4096 bytes) as if the file ended
//                                       there: ENODATA, reported like a file truncated under the tier
//   N     = requests of OP let through first (default 0)
//   M     = requests that fail after those (default 1; 0 = every one from then on)
//
// e.g. "read:eio:after=40" fails the 41st read request once; "write:enospc:after=3:count=0" lets three writes through
// and fails every later one. Each rule counts its own requests over all of the tier's I/O contexts, from create.
//
// The plan wraps each I/O context's queue in a decorator (fault_queue), so with the key unset the read/write path is
// exactly the production one: no branch, no check. A failed request never reaches the device, so an injected write
// failure leaves the file as it was (as a refused write does), and an injected read failure leaves the buffer as it
// was. Every injected fault is logged at WARN with what it replaced.
#pragma once

#include "io_queue.hpp"

#include <strata/plugin_abi.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

namespace strata::nvme {

class fault_plan {
  public:
    // nullptr with *error set when the spec does not parse; nullptr with *error empty when it is empty (off).
    static std::unique_ptr<fault_plan> parse(const std::string &spec, const strata_host_services *host,
                                             std::string *error);

    // The completion to report instead of performing `r`, or nothing: perform it. Thread-safe.
    std::optional<io_completion> decide(const io_request &r);
    const std::string &spec() const { return spec_; }
    uint64_t injected() const { return injected_.load(); }

  private:
    struct rule {
        std::string text;
        bool any = false;
        io_kind op = io_kind::read;
        int error = 0;
        bool short_transfer = false;
        uint64_t after = 0;
        uint64_t count = 1; // 0: unlimited
        std::atomic<uint64_t> seen{0};
    };
    std::string spec_;
    const strata_host_services *host_ = nullptr;
    std::deque<rule> rules_; // a deque: rules hold atomics and never move
    std::atomic<uint64_t> injected_{0};
};

// `q` wrapped so that `plan` (borrowed; it outlives the queue) decides each request first.
std::unique_ptr<io_queue> with_faults(std::unique_ptr<io_queue> q, fault_plan *plan);

} // namespace strata::nvme
