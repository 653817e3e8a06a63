#include "engine/prefetch_ring.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

namespace strata::engine {

namespace {
double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
} // namespace

int32_t prefetch_ring::slots_needed(int32_t n_streamed, int32_t prefetch_depth) {
    if (n_streamed <= 0) return 0;
    return std::min(n_streamed, std::max(prefetch_depth, 0) + 1);
}

prefetch_ring::prefetch_ring(std::vector<streamed_layer> layers, int32_t n_layer, uint8_t *slots, uint64_t slot_bytes,
                             int32_t slot_count, int32_t io_threads, device_stager stager)
    : layers_(std::move(layers)), ordinal_of_layer_(static_cast<size_t>(n_layer), -1), slots_(slots), stager_(stager),
      slot_bytes_(slot_bytes), slot_count_(slot_count), loaded_(static_cast<size_t>(slot_count), -1),
      release_fence_(static_cast<size_t>(slot_count), 0) {
    for (size_t k = 0; k < layers_.size(); ++k) {
        ordinal_of_layer_[static_cast<size_t>(layers_[k].layer)] = static_cast<int32_t>(k);
    }
    for (int32_t i = 0; i < std::max(io_threads, 1); ++i) io_threads_.emplace_back([this] { io_loop(); });
}

prefetch_ring::~prefetch_ring() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto &t : io_threads_) t.join();
}

uint8_t *prefetch_ring::slot_for_layer(int32_t layer) const {
    if (layer < 0 || layer >= static_cast<int32_t>(ordinal_of_layer_.size())) return nullptr;
    const int32_t k = ordinal_of_layer_[static_cast<size_t>(layer)];
    return k < 0 ? nullptr : slots_ + static_cast<uint64_t>(k % slot_count_) * slot_bytes_;
}

void prefetch_ring::start() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t j = 0; j < slot_count_ && j < static_cast<int32_t>(layers_.size()); ++j) queue_.push_back(j);
    cv_.notify_all();
}

// A fence after the ops queued so far (the released layer's are the last), or 0 where the device has none. A failed
// record also gives 0: the load then waits for all the queued compute, which is correct, only slower.
uint64_t prefetch_ring::record_fence() {
    if (!stager_.has_fences()) return 0;
    uint64_t fence = 0;
    strata_status st{};
    return stager_.desc->fence_record(stager_.dev, &fence, &st) == STRATA_OK ? fence : 0;
}

// Called with mu_ held, on the engine thread. The next occupant of ordinal's slot is ordinal + S, or the slot's first
// occupant again.
void prefetch_ring::release(int32_t ordinal) {
    const int32_t K = static_cast<int32_t>(layers_.size());
    const int32_t slot = ordinal % slot_count_;
    const int32_t next = ordinal + slot_count_ < K ? ordinal + slot_count_ : slot;
    if (next == ordinal) return; // sole occupant: stays loaded
    loaded_[static_cast<size_t>(slot)] = -1;
    release_fence_[static_cast<size_t>(slot)] = record_fence(); // one event record; the device lock is brief
    queue_.push_back(next);
    cv_.notify_all();
}

int32_t prefetch_ring::layer_begin(int32_t layer, strata_status *st) {
    std::unique_lock<std::mutex> lock(mu_);
    if (last_executed_ >= 0) {
        release(last_executed_);
        last_executed_ = -1;
    }
    if (layer < 0 || layer >= static_cast<int32_t>(ordinal_of_layer_.size())) return STRATA_OK;
    const int32_t k = ordinal_of_layer_[static_cast<size_t>(layer)];
    if (k < 0) return STRATA_OK; // resident or in place
    const size_t slot = static_cast<size_t>(k % slot_count_);
    if (loaded_[slot] != k && io_error_.empty()) {
        const double t0 = now_seconds();
        cv_.wait(lock, [&] { return loaded_[slot] == k || !io_error_.empty() || stopping_; });
        stats_.stall_seconds += now_seconds() - t0;
    }
    if (stopping_ && loaded_[slot] != k) {
        if (st != nullptr) {
            st->code = STRATA_ERR_CANCELLED;
            std::snprintf(st->message, sizeof st->message, "the prefetch ring is stopping");
        }
        return STRATA_ERR_CANCELLED;
    }
    if (!io_error_.empty()) {
        if (st != nullptr) {
            st->code = STRATA_ERR_IO;
            std::snprintf(st->message, sizeof st->message, "%s", io_error_.c_str());
        }
        return STRATA_ERR_IO;
    }
    last_executed_ = k;
    return STRATA_OK;
}

void prefetch_ring::recover() {
    std::unique_lock<std::mutex> lock(mu_);
    queue_.clear();
    cv_.wait(lock, [&] { return in_flight_ == 0 || stopping_; });
    std::fill(loaded_.begin(), loaded_.end(), -1);
    std::fill(release_fence_.begin(), release_fence_.end(), 0);
    last_executed_ = -1;
    io_error_.clear();
    for (int32_t j = 0; j < slot_count_ && j < static_cast<int32_t>(layers_.size()); ++j) queue_.push_back(j);
    cv_.notify_all();
}

void prefetch_ring::forward_done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_executed_ >= 0) {
        release(last_executed_);
        last_executed_ = -1;
    }
    ++stats_.forwards;
}

// Reads `r` into device memory at dst through `bounce` (chunk_bytes of host memory), chunk by chunk; each copy is
// ordered after `fence` (0: after all the compute queued when it is issued).
static bool staged_read(const device_stager &sg, const tier_read &r, uint8_t *dst, unsigned char *bounce,
                        uint64_t fence, std::string &error) {
    for (uint64_t off = 0; off < r.bytes; off += sg.chunk_bytes) {
        const uint64_t n = std::min(sg.chunk_bytes, r.bytes - off);
        strata_status st{};
        if (r.desc->read(r.tier, r.region, off, bounce, n, &st) != STRATA_OK) {
            error = std::string("tier '") + r.tier_name + "' read failed: " + st.message;
            return false;
        }
        const int32_t rc = fence != 0 ? sg.desc->copy_after(sg.dev, fence, dst + off, bounce, n, STRATA_COPY_H2D, &st)
                                      : sg.desc->copy(sg.dev, dst + off, bounce, n, STRATA_COPY_H2D, &st);
        if (rc != STRATA_OK) {
            error = std::string("copy to the device failed: ") + st.message;
            return false;
        }
    }
    return true;
}

void prefetch_ring::io_loop() {
    // This thread's staging buffer for a device the CPU cannot write, page-locked when the device offers it.
    std::unique_ptr<unsigned char[]> bounce;
    bool registered = false;
    if (stager_.desc != nullptr) {
        bounce = std::make_unique<unsigned char[]>(stager_.chunk_bytes);
        strata_status st{};
        registered = STRATA_HAS_SLOT(stager_.desc, host_register) &&
                     stager_.desc->host_register(stager_.dev, bounce.get(), stager_.chunk_bytes, &st) == STRATA_OK;
    }
    struct unregister_at_exit {
        const device_stager &sg;
        void *p;
        bool on;
        ~unregister_at_exit() {
            if (on && STRATA_HAS_SLOT(sg.desc, host_unregister)) sg.desc->host_unregister(sg.dev, p);
        }
    } unreg{stager_, bounce.get(), registered};
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        const int32_t k = queue_.front();
        queue_.pop_front();
        const uint64_t fence = release_fence_[static_cast<size_t>(k % slot_count_)];
        ++in_flight_;
        lock.unlock();
        const streamed_layer &L = layers_[static_cast<size_t>(k)];
        uint8_t *slot = slots_ + static_cast<uint64_t>(k % slot_count_) * slot_bytes_;
        std::string error;
        // The reads of one layer go in order; several I/O threads work on different layers at once.
        for (const tier_read &r : L.reads) {
            strata_status st{};
            const double t0 = now_seconds();
            if (stager_.desc != nullptr) {
                std::string why;
                if (!staged_read(stager_, r, slot + r.slot_offset, bounce.get(), fence, why)) {
                    error = "loading layer " + std::to_string(L.layer) + ": " + why;
                    break;
                }
            } else if (r.desc->read(r.tier, r.region, 0, slot + r.slot_offset, r.bytes, &st) != STRATA_OK) {
                error = "reading layer " + std::to_string(L.layer) + " from tier '" + r.tier_name + "' failed: " +
                        st.message;
                break;
            }
            const double dt = now_seconds() - t0;
            std::lock_guard<std::mutex> stats_lock(mu_);
            tier_counters &c = stats_.tiers[r.tier_name];
            c.bytes_read += r.bytes;
            c.read_seconds += dt;
        }
        lock.lock();
        --in_flight_;
        if (!error.empty()) io_error_ = error;
        else loaded_[static_cast<size_t>(k % slot_count_)] = k;
        ++stats_.layer_loads;
        cv_.notify_all();
    }
}

ring_stats prefetch_ring::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

} // namespace strata::engine
