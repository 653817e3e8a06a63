#include "kv/block_storage.hpp"

#include "common/error.hpp"

#include <strata/device_copy.hpp>

#include <cstring>
#include <string>

namespace strata::kv {

namespace {

std::string why(const strata_status &st) {
    return st.message[0] != '\0' ? std::string(st.message) : "error code " + std::to_string(st.code);
}

class device_storage final : public block_storage {
  public:
    device_storage(const strata_device_desc *desc, strata_device *dev, void *base, uint64_t block_bytes)
        : desc_(desc), dev_(dev), base_(static_cast<char *>(base)), bytes_(block_bytes),
          // `host_addressable` says the device reads host memory, not that the CPU may touch device memory: only a
          // device without a copy slot has plain host memory.
          has_copy_(STRATA_HAS_SLOT(desc, copy)) {}

    void *device_address(uint32_t i) override { return base_ + i * bytes_; }
    void *host_address(uint32_t i) override { return has_copy_ ? nullptr : base_ + i * bytes_; }
    void load(uint32_t i, void *dst) override { move(dst, base_ + i * bytes_, STRATA_COPY_D2H); }
    void store(uint32_t i, const void *src) override { move(base_ + i * bytes_, src, STRATA_COPY_H2D); }

  private:
    void move(void *dst, const void *src, int32_t kind) {
        strata_status st{};
        if (device_copy(desc_, dev_, dst, src, bytes_, kind, &st) != STRATA_OK) fail("KV block copy on the device failed: {}", why(st));
    }

    const strata_device_desc *desc_;
    strata_device *dev_;
    char *base_;
    uint64_t bytes_;
    bool has_copy_;
};

class tier_storage final : public block_storage {
  public:
    tier_storage(const strata_tier_desc *desc, strata_tier *tier, uint64_t region, uint64_t stride, uint64_t block_bytes,
                 bool device_reads_host)
        : desc_(desc), tier_(tier), region_(region), stride_(stride), bytes_(block_bytes),
          mapped_(STRATA_HAS_SLOT(desc, map) ? static_cast<char *>(desc->map(tier, region)) : nullptr),
          device_reads_host_(device_reads_host) {}

    void *device_address(uint32_t i) override { return device_reads_host_ ? host_address(i) : nullptr; }
    void *host_address(uint32_t i) override { return mapped_ ? mapped_ + i * stride_ : nullptr; }
    void load(uint32_t i, void *dst) override {
        if (mapped_) {
            std::memcpy(dst, mapped_ + i * stride_, bytes_);
            return;
        }
        strata_status st{};
        if (desc_->read(tier_, region_, i * stride_, dst, bytes_, &st) != STRATA_OK)
            fail("reading a KV block from tier '{}' failed: {}", desc_->header.name, why(st));
    }
    void store(uint32_t i, const void *src) override {
        if (mapped_) {
            std::memcpy(mapped_ + i * stride_, src, bytes_);
            return;
        }
        strata_status st{};
        if (desc_->write(tier_, region_, i * stride_, src, bytes_, &st) != STRATA_OK)
            fail("writing a KV block to tier '{}' failed: {}", desc_->header.name, why(st));
    }

  private:
    const strata_tier_desc *desc_;
    strata_tier *tier_;
    uint64_t region_, stride_, bytes_;
    char *mapped_;
    bool device_reads_host_;
};

} // namespace

std::unique_ptr<block_storage> make_device_storage(const strata_device_desc *desc, strata_device *dev, void *base,
                                                   uint64_t block_bytes) {
    return std::make_unique<device_storage>(desc, dev, base, block_bytes);
}

std::unique_ptr<block_storage> make_tier_storage(const strata_tier_desc *desc, strata_tier *tier, uint64_t region,
                                                 uint64_t stride, uint64_t block_bytes, bool device_reads_host) {
    return std::make_unique<tier_storage>(desc, tier, region, stride, block_bytes, device_reads_host);
}

void copy_block(block_storage &src, uint32_t si, block_storage &dst, uint32_t di, void *bounce) {
    if (void *d = dst.host_address(di)) {
        src.load(si, d);
    } else if (void *s = src.host_address(si)) {
        dst.store(di, s);
    } else {
        src.load(si, bounce);
        dst.store(di, bounce);
    }
}

} // namespace strata::kv
