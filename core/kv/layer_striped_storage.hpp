// A pool's blocks split by layer across pipeline ranks: rank r keeps layers [first_r, end_r) of every block in a
// storage of its own (its device memory, its host tier). A block's layers are consecutive in the whole model's layout
// (strata/kv_layout.hpp), so the parts joined in rank order are that layout byte for byte: whole-block copies (swap,
// spill, copy-on-write, the prefix store) move the same bytes as one process does, and a prefix saved by N ranks
// reads back in one and the other way round. Each rank's forward pass addresses only its own part.
#pragma once

#include "kv/block_storage.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace strata::kv {

class layer_striped_storage final : public block_storage {
  public:
    struct part {
        uint64_t block_bytes = 0; // this rank's share of a block: its layers
        std::unique_ptr<block_storage> storage;
    };
    explicit layer_striped_storage(std::vector<part> parts);

    size_t n_parts() const { return parts_.size(); }
    block_storage &part_storage(size_t rank) { return *parts_[rank].storage; }

    // No single address holds a whole block: each rank finds its part's (part_storage(rank).device_address).
    void *device_address(uint32_t) override { return nullptr; }
    void *host_address(uint32_t) override { return nullptr; }
    void load(uint32_t i, void *host_dst) override;
    void store(uint32_t i, const void *host_src) override;

  private:
    std::vector<part> parts_;
};

} // namespace strata::kv
