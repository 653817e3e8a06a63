// The prefetch ring's device path (a device whose memory the CPU cannot write), driven without a model: a fake tier
// whose regions hold a per-layer byte pattern and a fake device that records every fence and copy. With fences
// (ABI 1.7) each slot's load is a copy_after the fence recorded when the slot was released, and a slot's first fill
// (at start and after recover) is a plain copy; without them every load is a plain copy and no fence is recorded.
#include "engine/prefetch_ring.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

// The fake device: its memory is host memory; it records what the ring asks of it.
struct strata_device {
    struct copy_call {
        uint64_t fence = 0; // 0: plain `copy`
        const uint8_t *dst = nullptr;
        uint8_t first_byte = 0; // the pattern byte of the layer copied
    };
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint64_t> fences;
    std::vector<copy_call> copies;
};

// The fake tier: region r is layer r's bytes, each byte r + 1. A read of `gated_region` waits until the device has
// recorded `gate_fences` fences, holding the (single) I/O thread so that the loads queued meanwhile are taken and
// copied only once a newer fence exists than the one each must use.
struct strata_tier {
    strata_device *dev = nullptr;
    uint64_t gated_region = ~uint64_t{0};
    size_t gate_fences = 0;
};

namespace {

using namespace strata::engine;

constexpr int32_t n_layers = 6;  // all streamed
constexpr int32_t n_slots = 3;   // prefetch_depth 2
constexpr uint64_t slot_bytes = 64;

uint8_t pattern_byte(int32_t layer) { return static_cast<uint8_t>(layer + 1); }

int32_t fake_tier_read(strata_tier *tier, uint64_t region, uint64_t offset, void *dst, uint64_t bytes, strata_status *) {
    if (region == tier->gated_region) {
        // A ring that never records the fences would hold the gate shut; after a while the read goes on so that the
        // test fails on its assertions rather than hanging (a correct ring never waits that long).
        std::unique_lock lock(tier->dev->mu);
        tier->dev->cv.wait_for(lock, std::chrono::seconds(10),
                               [&] { return tier->dev->fences.size() >= tier->gate_fences; });
    }
    (void)offset;
    std::memset(dst, pattern_byte(static_cast<int32_t>(region)), bytes);
    return STRATA_OK;
}

int32_t record_copy(strata_device *dev, uint64_t fence, void *dst, const void *src, uint64_t bytes) {
    std::memcpy(dst, src, bytes);
    std::lock_guard lock(dev->mu);
    dev->copies.push_back({fence, static_cast<const uint8_t *>(dst), static_cast<const uint8_t *>(src)[0]});
    return STRATA_OK;
}

int32_t fake_copy(strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t, strata_status *) {
    return record_copy(dev, 0, dst, src, bytes);
}

int32_t fake_copy_after(strata_device *dev, uint64_t fence, void *dst, const void *src, uint64_t bytes, int32_t,
                        strata_status *) {
    return record_copy(dev, fence, dst, src, bytes);
}

int32_t fake_fence_record(strata_device *dev, uint64_t *fence, strata_status *) {
    std::lock_guard lock(dev->mu);
    *fence = dev->fences.size() + 1;
    dev->fences.push_back(*fence);
    dev->cv.notify_all();
    return STRATA_OK;
}

strata_device_desc device_desc(bool fences) {
    strata_device_desc d{};
    d.header.struct_size = sizeof d;
    d.copy = fake_copy;
    if (fences) {
        d.fence_record = fake_fence_record;
        d.copy_after = fake_copy_after;
    }
    return d;
}

struct ring_setup {
    strata_device dev;
    strata_tier tier;
    strata_tier_desc tier_desc{};
    std::vector<uint8_t> slots = std::vector<uint8_t>(n_slots * slot_bytes, 0);

    ring_setup() {
        tier.dev = &dev;
        tier_desc.header.struct_size = sizeof tier_desc;
        tier_desc.read = fake_tier_read;
    }

    std::unique_ptr<prefetch_ring> make(const strata_device_desc &desc) {
        std::vector<streamed_layer> layers;
        for (int32_t l = 0; l < n_layers; ++l) {
            tier_read r;
            r.desc = &tier_desc;
            r.tier = &tier;
            r.tier_name = "fake";
            r.region = static_cast<uint64_t>(l);
            r.bytes = slot_bytes;
            layers.push_back({l, {r}});
        }
        device_stager sg;
        sg.desc = &desc;
        sg.dev = &dev;
        return std::make_unique<prefetch_ring>(std::move(layers), n_layers, slots.data(), slot_bytes, n_slots, 1, sg);
    }

    std::vector<strata_device::copy_call> copies() {
        std::lock_guard lock(dev.mu);
        return dev.copies;
    }
    size_t fence_count() {
        std::lock_guard lock(dev.mu);
        return dev.fences.size();
    }
};

// One forward pass over every layer, checking the bytes each layer computes from.
void run_pass(prefetch_ring &ring) {
    for (int32_t l = 0; l < n_layers; ++l) {
        strata_status st{};
        ASSERT_EQ(ring.layer_begin(l, &st), STRATA_OK) << st.message;
        const uint8_t *slot = ring.slot_for_layer(l);
        for (uint64_t i = 0; i < slot_bytes; ++i)
            ASSERT_EQ(slot[i], pattern_byte(l)) << "layer " << l << " byte " << i;
    }
    ring.forward_done();
}

// The ordinal a release queues: ordinal + S, or the slot's first occupant again.
int32_t queued_after_release(int32_t released) {
    return released + n_slots < n_layers ? released + n_slots : released % n_slots;
}

TEST(PrefetchRingFences, EachSlotLoadIsCopiedAfterTheFenceRecordedAtItsRelease) {
    ring_setup s;
    // The first fill of slot 2 holds the I/O thread until fence 2 (ordinal 1's release) exists, so layer 3's load,
    // queued behind fence 1 (ordinal 0's release), is taken off the queue and copied when fence 2 is the newest: a
    // ring that passed the newest fence instead of its slot's would be caught.
    s.tier.gated_region = 2;
    s.tier.gate_fences = 2;
    const strata_device_desc desc = device_desc(true);
    auto ring = s.make(desc);
    ring->start();
    run_pass(*ring);
    run_pass(*ring);

    // The engine thread releases ordinals 0,1,...,K-1,0,1,... in order, one fence each (ids 1, 2, 3, ...).
    const size_t n_fences = s.fence_count();
    EXPECT_EQ(n_fences, size_t{2 * n_layers}) << "one fence per release, K releases per pass";
    {
        std::lock_guard lock(s.dev.mu);
        for (size_t i = 0; i < s.dev.fences.size(); ++i) EXPECT_EQ(s.dev.fences[i], i + 1);
    }
    const auto copies = s.copies();
    int plain = 0, fenced = 0;
    for (const auto &c : copies) {
        const int32_t layer = c.first_byte - 1;
        const uint8_t *slot = s.slots.data() + static_cast<uint64_t>(layer % n_slots) * slot_bytes;
        EXPECT_EQ(c.dst, slot) << "layer " << layer << " is copied into its slot";
        if (c.fence == 0) {
            ++plain;
            EXPECT_LT(layer, n_slots) << "only the first fill is a plain copy";
            continue;
        }
        ++fenced;
        ASSERT_LE(c.fence, n_fences);
        const int32_t released = static_cast<int32_t>((c.fence - 1) % n_layers);
        EXPECT_EQ(layer, queued_after_release(released))
            << "fence " << c.fence << " was recorded when ordinal " << released << " was released";
    }
    EXPECT_EQ(plain, n_slots) << "the first fill of each slot: nothing released yet";
    // Pass 1 needs layers 3..5 and pass 2 layers 0..5 reloaded: 9 loads done; the last releases may be loading still.
    EXPECT_GE(fenced, n_layers - n_slots + n_layers);
    bool layer3_first_load_seen = false;
    for (const auto &c : copies)
        if (c.first_byte - 1 == 3) {
            EXPECT_EQ(c.fence, 1u) << "layer 3's first load waits for the fence of ordinal 0's release only";
            layer3_first_load_seen = true;
            break;
        }
    EXPECT_TRUE(layer3_first_load_seen);

    // After recover the slots are filled again from scratch, with plain copies.
    ring->recover();
    strata_status st{};
    for (int32_t l = 0; l < n_slots; ++l) ASSERT_EQ(ring->layer_begin(l, &st), STRATA_OK) << st.message;
    int plain_after = 0;
    for (const auto &c : s.copies()) plain_after += c.fence == 0 ? 1 : 0;
    EXPECT_EQ(plain_after, 2 * n_slots);
}

// A device without both fence slots (a pre-1.7 plugin, or one with only fence_record) gets plain copies only.
TEST(PrefetchRingFences, ADeviceWithoutBothSlotsUsesPlainCopy) {
    for (int variant = 0; variant < 2; ++variant) {
        SCOPED_TRACE(variant == 0 ? "descriptor shorter than 1.7" : "copy_after NULL");
        ring_setup s;
        strata_device_desc desc = device_desc(true);
        if (variant == 0) desc.header.struct_size = offsetof(strata_device_desc, fence_record);
        else desc.copy_after = nullptr;
        auto ring = s.make(desc);
        ring->start();
        run_pass(*ring);
        run_pass(*ring);
        EXPECT_EQ(s.fence_count(), 0u) << "no fence is recorded when copy_after cannot use it";
        const auto copies = s.copies();
        EXPECT_GE(copies.size(), size_t{n_slots + n_layers - n_slots + n_layers});
        for (const auto &c : copies) EXPECT_EQ(c.fence, 0u);
    }
}

} // namespace
