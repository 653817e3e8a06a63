// The prefetch ring: streamed layers are copied from their tiers into a fixed ring of staging slots on I/O threads
// while earlier layers compute.
//
// Streamed layers are numbered by ordinal k (0..K-1, in layer order) and layer k always uses slot k % S, so the
// weight views the model holds never change. A slot's occupants cycle k, k+S, k+2S, ... and back; when a layer has
// finished (observed at the next layer_begin or at forward_done) its slot is released and the next occupant's load
// is queued at once, so up to S-1 = prefetch_depth layers load ahead of compute. A slot with a single occupant is
// loaded once and stays (that layer then costs no I/O per token). Nothing is allocated per token.
#pragma once

#include <strata/plugin_abi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::engine {

struct tier_read {
    const strata_tier_desc *desc = nullptr;
    strata_tier *tier = nullptr;
    std::string tier_name;
    uint64_t region = 0;
    uint64_t bytes = 0;
    uint64_t slot_offset = 0; // where in the slot the bytes go
};

struct streamed_layer {
    int32_t layer = 0;
    std::vector<tier_read> reads;
};

struct tier_counters {
    uint64_t bytes_read = 0;
    double read_seconds = 0; // summed over I/O threads
};

struct ring_stats {
    std::map<std::string, tier_counters> tiers;
    double stall_seconds = 0; // compute waiting for a slot
    uint64_t layer_loads = 0;
    uint64_t forwards = 0;
};

// For a device whose memory the CPU cannot write (a GPU): each I/O thread reads into its own page-locked host buffer
// and the device moves it into the slot. When the device offers fences (fence_record and copy_after, ABI 1.7), the
// ring records one when a slot is released (after the ops of the slot's last reader were queued) and the copy is
// ordered after that fence only, so it overlaps the layers queued since; without them, and for a slot's first fill,
// `copy` orders it after all the compute already queued. Either way the slot's previous occupant has been read before
// its bytes change, so correctness never depends on the device's timing.
struct device_stager {
    const strata_device_desc *desc = nullptr;
    strata_device *dev = nullptr;
    uint64_t chunk_bytes = uint64_t{16} << 20;

    bool has_fences() const {
        return STRATA_HAS_SLOT(desc, fence_record) && STRATA_HAS_SLOT(desc, copy_after);
    }
};

class prefetch_ring {
  public:
    // `slots` points to slot_count x slot_bytes bytes (borrowed; device memory that outlives the ring).
    prefetch_ring(std::vector<streamed_layer> layers, int32_t n_layer, uint8_t *slots, uint64_t slot_bytes,
                  int32_t slot_count, int32_t io_threads, device_stager stager = {});
    ~prefetch_ring();
    prefetch_ring(const prefetch_ring &) = delete;
    prefetch_ring &operator=(const prefetch_ring &) = delete;

    // Base address of the slot the given layer computes from (fixed for the ring's life), or nullptr.
    uint8_t *slot_for_layer(int32_t layer) const;
    static int32_t slots_needed(int32_t n_streamed, int32_t prefetch_depth);
    // Threads reading layers from their tiers (io_threads, at least one).
    int32_t io_thread_count() const { return static_cast<int32_t>(io_threads_.size()); }

    // Queues the first occupant of every slot. Call once, after the tiers hold the weights.
    void start();
    // Before layer `layer` runs: releases the previous streamed layer's slot and waits until this layer's weights
    // are in place. Returns a strata_code; an I/O error is reported through st.
    int32_t layer_begin(int32_t layer, strata_status *st);
    // After a forward pass: releases the last slot so the next token's first streamed layer loads during sampling.
    void forward_done();
    // After a forward pass that stopped partway (an op or a read failed): waits for loads in flight, forgets the
    // error and starts over as after start(), so the next pass finds every slot in a known state.
    void recover();

    ring_stats stats() const;

  private:
    void release(int32_t ordinal);
    uint64_t record_fence();
    void io_loop();

    std::vector<streamed_layer> layers_;
    std::vector<int32_t> ordinal_of_layer_;
    uint8_t *slots_;
    device_stager stager_;
    uint64_t slot_bytes_;
    int32_t slot_count_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<int32_t> loaded_;  // per slot: ordinal whose bytes are in place, -1 while loading or empty
    // Per slot: the device fence recorded when its last occupant was released, which the next load is ordered after;
    // 0 when there is none (first fill, after recover(), no fences on the device): that load uses plain `copy`.
    std::vector<uint64_t> release_fence_;
    std::deque<int32_t> queue_;    // ordinals to load
    std::string io_error_;
    int32_t last_executed_ = -1;
    int32_t in_flight_ = 0; // loads taken off the queue and not finished
    bool stopping_ = false;
    ring_stats stats_;
    std::vector<std::thread> io_threads_;
};

} // namespace strata::engine
