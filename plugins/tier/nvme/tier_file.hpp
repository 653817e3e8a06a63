// The nvme tier's backing store: a preallocated file (or a whole block device) opened for O_DIRECT I/O.
//
// open() either returns a usable file of at least `size` bytes or fills the status and leaves nothing behind: a file
// it created is unlinked again on every failure path. The file is deleted when the object dies unless keep_file.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <memory>
#include <string>

namespace strata::nvme {

struct tier_file_options {
    std::string path;
    uint64_t size = 0; // a multiple of 4096
    bool direct_io = true;
    bool keep_file = false;
};

class tier_file {
  public:
    // nullptr with *st filled on failure. Warnings (no O_DIRECT on this filesystem, no fallocate) go to host->log.
    static std::unique_ptr<tier_file> open(const tier_file_options &opts, const strata_host_services *host,
                                           strata_status *st);
    ~tier_file();
    tier_file(const tier_file &) = delete;
    tier_file &operator=(const tier_file &) = delete;

    int fd() const { return fd_; }
    bool direct() const { return direct_; }
    bool block_device() const { return block_device_; }
    const std::string &path() const { return path_; }
    // For a create that fails after open(): takes back the file if open() created it, whatever keep_file says.
    void remove_if_created();

  private:
    tier_file() = default;

    std::string path_;
    int fd_ = -1;
    bool direct_ = false;
    bool block_device_ = false;
    bool delete_on_close_ = false;
    bool created_ = false;
};

} // namespace strata::nvme
