// tier `nvme`: weights kept in a preallocated file (or a whole block device) on fast storage, streamed back into RAM
// with O_DIRECT reads through io_uring.
//
// Key decisions:
//  - Backing store (tier_file.cpp): the file is preallocated with fallocate at create so a full disk is reported
//    then ("needs N bytes, filesystem has M free"), not halfway through loading; every failure unlinks what create
//    made, and destroy deletes the file unless keep_file. A non-empty existing file is only reused with keep_file
//    (it could be anything, e.g. the model itself). Its contents never carry over: a fresh tier reads zeros.
//  - O_DIRECT keeps streamed weights out of the page cache (they are about to live in a RAM tier; caching them
//    twice would halve what fits). Filesystems without it (tmpfs, overlayfs) get a WARNING and buffered I/O.
//  - I/O (io_queue_*.cpp): io_uring with up to queue_depth requests of at most block_size bytes in flight per
//    call; pread/pwrite where io_uring is unavailable (old kernel, seccomp), with a warning. Short transfers are
//    continued, EINTR/EAGAIN retried.
//  - Integrity (region_io.cpp): an XXH3-64 checksum per block_size chunk of every region, set on write and checked
//    on read, so a modified file or a device returning bad data is an error, never silently wrong weights.
//  - Streaming speed: no allocation per call. Each of `concurrent_calls` I/O contexts (its own ring, staging slots
//    and job records, all made at create) serves one read/write call at a time; more callers wait on a condition
//    variable. Reads whose destination and offset are 4096-aligned go straight into the caller's buffer; only
//    unaligned edges pass through a staging slot. Staging is min(queue_depth, 8) slots of block_size per context.
//  - Fault injection (fault_inject.hpp, TEST ONLY): `inject_faults` wraps every context's queue in a decorator that
//    fails chosen requests (EIO, ENOSPC, a transfer that ends early); unset, the queues are the bare engines.
//  - Regions are 4096-aligned extents from the shared first-fit allocator (../common/region_allocator.hpp). map()
//    is absent: the CPU cannot address this tier; devices read it through a RAM tier.
#include "../common/byte_text.hpp"
#include "../common/region_allocator.hpp"
#include "fault_inject.hpp"
#include "io_queue.hpp"
#include "region_io.hpp"
#include "tier_file.hpp"

#include <strata/plugin.hpp>

#include <sys/statvfs.h>

#include <algorithm>
#include <cstddef>
#include <condition_variable>
#include <iterator>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using strata::nvme::io_context;
using strata::nvme::region_state;
using strata::tier::byte_text;

constexpr const char *plugin_name = "nvme";
constexpr uint64_t page = 4096;
constexpr int64_t max_queue_depth = 4096;
constexpr int64_t max_concurrent_calls = 64;
constexpr uint64_t min_block_size = page;
constexpr uint64_t max_block_size = 256ull << 20;
constexpr uint32_t max_staging_slots = 8;

struct nvme_tier {
    const strata_host_services *host = nullptr;
    std::unique_ptr<strata::nvme::tier_file> file; // declared first: closed (and deleted) after the contexts
    std::unique_ptr<strata::nvme::fault_plan> faults; // TEST ONLY (inject_faults); outlives the contexts' queues
    std::unique_ptr<strata::tier::region_allocator> extents;
    uint64_t block_size = 0;

    std::shared_mutex regions_lock; // guards `regions`; each region guards its own data
    std::unordered_map<uint64_t, std::shared_ptr<region_state>> regions;

    std::mutex pool_lock;
    std::condition_variable pool_returned;
    std::vector<std::unique_ptr<io_context>> contexts;
    std::vector<io_context *> idle;
};

nvme_tier *as_tier(strata_tier *t) { return reinterpret_cast<nvme_tier *>(t); }

// Borrows one I/O context for the duration of a call; waits while all are busy.
class context_lease {
  public:
    explicit context_lease(nvme_tier &t) : t_(t) {
        std::unique_lock lock(t_.pool_lock);
        t_.pool_returned.wait(lock, [&] { return !t_.idle.empty(); });
        ctx_ = t_.idle.back();
        t_.idle.pop_back();
    }
    ~context_lease() {
        {
            std::lock_guard lock(t_.pool_lock);
            t_.idle.push_back(ctx_);
        }
        t_.pool_returned.notify_one();
    }
    context_lease(const context_lease &) = delete;
    context_lease &operator=(const context_lease &) = delete;
    io_context &operator*() const { return *ctx_; }

  private:
    nvme_tier &t_;
    io_context *ctx_ = nullptr;
};

struct nvme_options {
    std::string path;
    uint64_t size = 0;
    uint32_t queue_depth = 32;
    uint64_t block_size = 1 << 20;
    uint32_t concurrent_calls = 4;
    std::string engine = "auto";
    bool direct_io = true;
    bool keep_file = false;
    std::string inject_faults; // TEST ONLY
};

// Reads and checks the [nvme] table (the host validates ranges too, but a plugin must not trust its caller).
int32_t read_options(const strata_tier_create_args &args, nvme_options &o, strata_status *st) {
    using strata::plugin::fail;
    const strata::plugin::config cfg(args.config);
    o.path = cfg.get_string("path").value_or("");
    if (o.path.empty())
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "nvme: [nvme] path is not set; set it to a file on a fast disk (e.g. path = "
                    "\"/mnt/nvme/strata.tier\") or to a block device such as /dev/nvme1n1");
    // Pipeline ranks in one process (ABI 1.26) each keep a file of their own beside rank 0's.
    const int32_t rank =
        args.struct_size >= offsetof(strata_tier_create_args, rank) + sizeof(args.rank) ? args.rank : 0;
    if (rank < 0) return fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: rank %d is negative", rank);
    if (rank > 0) {
        if (o.path.rfind("/dev/", 0) == 0)
            return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                        "nvme: [nvme] path = \"%s\" is a block device, which pipeline rank %d cannot share with rank 0; "
                        "set path to a file (each rank then keeps its own file beside it)",
                        o.path.c_str(), rank);
        o.path += ".rank" + std::to_string(rank);
    }
    const int64_t size = cfg.get_int("size").value_or(0);
    const int64_t depth = cfg.get_int("queue_depth").value_or(32);
    const int64_t block = cfg.get_int("block_size").value_or(1 << 20);
    const int64_t calls = cfg.get_int("concurrent_calls").value_or(4);
    o.engine = cfg.get_string("io_engine").value_or("auto");
    o.direct_io = cfg.get_bool("direct_io").value_or(true);
    o.keep_file = cfg.get_bool("keep_file").value_or(false);
    o.inject_faults = cfg.get_string("inject_faults").value_or("");
    if (size < 0) return fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: [nvme] size must not be negative");
    if (depth < 1 || depth > max_queue_depth)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: [nvme] queue_depth = %lld is outside [1, %lld]",
                    static_cast<long long>(depth), static_cast<long long>(max_queue_depth));
    if (block < static_cast<int64_t>(min_block_size) || block > static_cast<int64_t>(max_block_size) ||
        block % static_cast<int64_t>(page) != 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "nvme: [nvme] block_size = %lld must be a multiple of 4096 between 4KiB and 256MiB",
                    static_cast<long long>(block));
    if (calls < 1 || calls > max_concurrent_calls)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: [nvme] concurrent_calls = %lld is outside [1, %lld]",
                    static_cast<long long>(calls), static_cast<long long>(max_concurrent_calls));
    if (o.engine != "auto" && o.engine != "io_uring" && o.engine != "psync")
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: [nvme] io_engine = \"%s\" is not one of auto, io_uring, psync",
                    o.engine.c_str());
    o.size = size > 0 ? static_cast<uint64_t>(size) : args.capacity_bytes;
    if (o.size == 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "nvme: no size: [nvme] size is 0 and the planner gave this tier no budget; set size (e.g. size = "
                    "\"200GiB\")");
    if (o.size > UINT64_MAX - page) o.size = UINT64_MAX - page; // the free-space check refuses it with a message
    o.size = (o.size + page - 1) / page * page;
    o.queue_depth = static_cast<uint32_t>(depth);
    o.block_size = static_cast<uint64_t>(block);
    o.concurrent_calls = static_cast<uint32_t>(calls);
    return STRATA_OK;
}

strata_tier *create(const strata_tier_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_tier>(st, [&]() -> strata_tier * {
        if (args == nullptr) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: create: args is NULL");
            return nullptr;
        }
        nvme_options o;
        if (read_options(*args, o, st) != STRATA_OK) return nullptr;

        auto t = std::make_unique<nvme_tier>();
        t->host = args->host;
        t->block_size = o.block_size;
        std::string fault_error;
        t->faults = strata::nvme::fault_plan::parse(o.inject_faults, args->host, &fault_error);
        if (!fault_error.empty()) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s", fault_error.c_str());
            return nullptr;
        }
        strata::nvme::tier_file_options fo{o.path, o.size, o.direct_io, o.keep_file};
        t->file = strata::nvme::tier_file::open(fo, args->host, st);
        if (!t->file) return nullptr;
        // Whatever fails from here on (also by exception) must not leave the file behind.
        struct unlink_unless_done {
            strata::nvme::tier_file &file;
            bool done = false;
            ~unlink_unless_done() {
                if (!done) file.remove_if_created();
            }
        } guard{*t->file};
        t->extents = std::make_unique<strata::tier::region_allocator>(o.size, page);

        // One I/O context per concurrent call, all made now so the read/write path never allocates.
        const uint32_t q = o.queue_depth;
        const uint32_t slots = std::min(q, max_staging_slots);
        bool uring = o.engine != "psync";
        for (uint32_t i = 0; i < o.concurrent_calls; ++i) {
            std::unique_ptr<strata::nvme::io_queue> queue;
            std::string why;
            if (uring) queue = strata::nvme::make_uring_queue(t->file->fd(), q, &why);
            if (uring && !queue) {
                if (o.engine == "io_uring") {
                    strata::plugin::fail(st, STRATA_ERR_UNSUPPORTED,
                                         "nvme: io_engine = \"io_uring\" but io_uring is unavailable here (%s); use "
                                         "\"auto\" or \"psync\"",
                                         why.c_str());
                    return nullptr;
                }
                strata::plugin::log(args->host, STRATA_LOG_WARN, plugin_name,
                                    "WARNING: io_uring is unavailable (%s); using pread/pwrite instead (one request "
                                    "at a time: slower streaming)",
                                    why.c_str());
                uring = false;
                t->contexts.clear(); // one engine for all contexts: drop the io_uring ones made so far
                i = 0;
            }
            if (!uring) queue = strata::nvme::make_psync_queue(t->file->fd(), q);
            if (t->faults) queue = strata::nvme::with_faults(std::move(queue), t->faults.get());
            t->contexts.push_back(std::make_unique<io_context>(std::move(queue), t->block_size, slots));
        }
        for (auto &c : t->contexts) t->idle.push_back(c.get());

        strata::plugin::log(args->host, STRATA_LOG_INFO, plugin_name,
                            "%s: %s, %s I/O through %s (queue depth %u, %s blocks, %u concurrent calls)",
                            o.path.c_str(), byte_text(o.size).c_str(), t->file->direct() ? "O_DIRECT" : "buffered",
                            uring ? "io_uring" : "pread/pwrite", q, byte_text(t->block_size).c_str(),
                            o.concurrent_calls);
        if (t->faults)
            strata::plugin::log(args->host, STRATA_LOG_WARN, plugin_name,
                                "WARNING: TEST ONLY: I/O fault injection is armed ([nvme] inject_faults = \"%s\"): "
                                "chosen reads and writes of this tier fail on purpose",
                                t->faults->spec().c_str());
        guard.done = true;
        strata::plugin::ok(st);
        return reinterpret_cast<strata_tier *>(t.release()); // caller owns; frees with destroy
    });
}

// Frees every live region with the tier; the file goes too unless keep_file.
void destroy(strata_tier *t) { delete as_tier(t); }

uint64_t capacity(strata_tier *t) { return as_tier(t)->extents->capacity(); }

int32_t region_alloc(strata_tier *handle, uint64_t bytes, uint64_t *region, strata_status *st) {
    nvme_tier &t = *as_tier(handle);
    if (region == nullptr) return strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: region_alloc: region is NULL");
    if (bytes == 0) return strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: region_alloc: a region of 0 bytes");
    return strata::plugin::guarded(st, [&]() -> int32_t {
        const auto a = t.extents->allocate(bytes);
        if (!a) {
            const auto u = t.extents->usage();
            return strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY,
                                        "nvme: cannot allocate a region of %s: %s of %s free, largest free block %s "
                                        "(raise [nvme] size or free regions first)",
                                        byte_text(bytes).c_str(), byte_text(u.free_bytes).c_str(),
                                        byte_text(u.capacity).c_str(), byte_text(u.largest_free).c_str());
        }
        try {
            auto r = std::make_shared<region_state>();
            r->id = a->id;
            r->file_offset = a->where.offset;
            r->size = bytes;
            const uint64_t chunks = (bytes + t.block_size - 1) / t.block_size;
            r->chunk_hash.assign(chunks, 0);
            r->chunk_written.assign(chunks, 0);
            std::unique_lock lock(t.regions_lock);
            t.regions.emplace(a->id, std::move(r));
        } catch (...) {
            t.extents->release(a->id); // no half-made region stays reserved
            throw;
        }
        *region = a->id;
        strata::plugin::ok(st);
        return STRATA_OK;
    });
}

void region_free(strata_tier *handle, uint64_t region) {
    nvme_tier &t = *as_tier(handle);
    std::unique_lock lock(t.regions_lock);
    if (t.regions.erase(region) > 0) t.extents->release(region);
}

// The region, after checking [offset, offset + bytes) lies inside it; NULL with the status filled otherwise.
std::shared_ptr<region_state> checked_region(nvme_tier &t, uint64_t region, uint64_t offset, uint64_t bytes,
                                             const void *buffer, const char *op, strata_status *st) {
    std::shared_ptr<region_state> r;
    {
        std::shared_lock lock(t.regions_lock);
        auto it = t.regions.find(region);
        if (it != t.regions.end()) r = it->second;
    }
    if (!r) {
        strata::plugin::fail(st, STRATA_ERR_NOT_FOUND, "nvme: %s: no region %llu (never allocated, or already freed)", op,
                             static_cast<unsigned long long>(region));
        return nullptr;
    }
    if (offset > r->size || bytes > r->size - offset) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                             "nvme: %s of %llu bytes at offset %llu is outside region %llu of %llu bytes", op,
                             static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(offset),
                             static_cast<unsigned long long>(region), static_cast<unsigned long long>(r->size));
        return nullptr;
    }
    if (buffer == nullptr && bytes > 0) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "nvme: %s: buffer is NULL", op);
        return nullptr;
    }
    return r;
}

int32_t region_write(strata_tier *handle, uint64_t region, uint64_t offset, const void *src, uint64_t bytes,
                     strata_status *st) {
    nvme_tier &t = *as_tier(handle);
    return strata::plugin::guarded(st, [&]() -> int32_t {
        auto r = checked_region(t, region, offset, bytes, src, "write", st);
        if (!r) return st != nullptr ? st->code : STRATA_ERR_INVALID_ARGUMENT;
        if (bytes == 0) {
            strata::plugin::ok(st);
            return STRATA_OK;
        }
        std::unique_lock region_lock(r->lock); // a write replaces chunks and their checksums together
        context_lease ctx(t);
        return (*ctx).write(*r, offset, static_cast<const unsigned char *>(src), bytes, st);
    });
}

int32_t region_read(strata_tier *handle, uint64_t region, uint64_t offset, void *dst, uint64_t bytes,
                    strata_status *st) {
    nvme_tier &t = *as_tier(handle);
    return strata::plugin::guarded(st, [&]() -> int32_t {
        auto r = checked_region(t, region, offset, bytes, dst, "read", st);
        if (!r) return st != nullptr ? st->code : STRATA_ERR_INVALID_ARGUMENT;
        if (bytes == 0) {
            strata::plugin::ok(st);
            return STRATA_OK;
        }
        std::shared_lock region_lock(r->lock);
        context_lease ctx(t);
        return (*ctx).read(*r, offset, static_cast<unsigned char *>(dst), bytes, st);
    });
}

// Free space in the folder the file goes in (an existing block device: its size is not probed here; 0 = unknown).
uint64_t capacity_limit(const strata_tier_create_args *args, char *why, uint32_t why_cap) {
    const strata::plugin::config cfg(args != nullptr ? args->config : nullptr);
    const std::string path = cfg.get_string("path").value_or("");
    if (path.empty() || path.rfind("/dev/", 0) == 0) return 0;
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct statvfs fs {};
    if (statvfs(dir.c_str(), &fs) != 0) return 0;
    if (why != nullptr && why_cap > 0) std::snprintf(why, why_cap, "free space in %s", dir.c_str());
    return static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
}

const strata_tier_desc tier_desc = {
    strata::plugin::make_header<strata_tier_desc>(STRATA_KIND_TIER, plugin_name, offsetof(strata_tier_desc, map)),
    create,
    destroy,
    capacity,
    region_alloc,
    region_free,
    region_write,
    region_read,
    nullptr, // map: the CPU cannot address NVMe
    capacity_limit,
};

const strata_descriptor_header *const descriptors[] = {&tier_desc.header};

const strata_config_key config_keys[] = {
    {"path", STRATA_CONFIG_STRING, nullptr, 0.0, 0.0,
     "file (created and preallocated) or block device that holds this tier, e.g. \"/mnt/nvme/strata.tier\" "
     "(pipeline rank r > 0 in the same process: the file PATH.rank<r>)", nullptr,
     nullptr},
    {"size", STRATA_CONFIG_BYTES, "0", 0.0, 0.0, "bytes to preallocate (0 = the planner's budget for this tier)",
     nullptr, nullptr},
    {"queue_depth", STRATA_CONFIG_INT, "32", 1.0, static_cast<double>(max_queue_depth),
     "I/O requests in flight per read/write call", nullptr, nullptr},
    {"block_size", STRATA_CONFIG_BYTES, "\"1MiB\"", static_cast<double>(min_block_size),
     static_cast<double>(max_block_size), "I/O and checksum chunk size (a multiple of 4KiB)", nullptr, nullptr},
    {"keep_file", STRATA_CONFIG_BOOL, "false", 0.0, 0.0,
     "keep the file when the runtime exits (also allows reusing an existing file at path)", nullptr, nullptr},
    {"direct_io", STRATA_CONFIG_BOOL, "true", 0.0, 0.0,
     "bypass the page cache with O_DIRECT (falls back to buffered I/O with a warning where unsupported)", nullptr,
     nullptr},
    {"io_engine", STRATA_CONFIG_STRING, "\"auto\"", 0.0, 0.0,
     "auto (io_uring, else pread/pwrite), io_uring, or psync (pread/pwrite)", nullptr, "auto|io_uring|psync"},
    {"concurrent_calls", STRATA_CONFIG_INT, "4", 1.0, static_cast<double>(max_concurrent_calls),
     "read/write calls served at once; each has its own queue and min(queue_depth, 8) staging blocks", nullptr,
     nullptr},
    {"inject_faults", STRATA_CONFIG_STRING, "\"\"", 0.0, 0.0,
     "TEST ONLY: make chosen I/O requests fail, e.g. \"read:eio:after=40\" or \"write:enospc:count=0\" "
     "(rules in plugins/tier/nvme/fault_inject.hpp); empty = off",
     nullptr, nullptr},
};

const strata_plugin_info plugin_info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT",
    "Preallocated file or block device on NVMe, O_DIRECT through io_uring, checksummed",
    descriptors, config_keys);

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info)
