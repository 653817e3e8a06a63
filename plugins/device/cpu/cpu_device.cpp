// The "cpu" device descriptor and plugin info: creation from config + host topology, memory, and the op table.
#include "cpu_device.hpp"

#include "cpu_device_state.hpp"
#include "cpu_ops.hpp"

#include <strata/device_args.hpp>
#include <strata/plugin.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

strata_device::strata_device(int n_threads, std::span<const int> pin_cpus, const strata::cpu::kernels &k,
                             const strata_host_services *h)
    : pool(n_threads, pin_cpus), kern(k), host(h) {
    reserve_scores(strata::cpu::initial_score_positions);
    reserve_activations(strata::cpu::initial_activation_bytes);
}

void strata_device::reserve_scores(int64_t n_positions) {
    if (n_positions <= scores_per_thread) return;
    // Round to whole cache lines so threads never share one.
    const int64_t per_thread = (std::max(n_positions, scores_per_thread * 2) + 15) / 16 * 16;
    scores = std::make_unique<float[]>(static_cast<size_t>(per_thread * pool.size()));
    scores_per_thread = per_thread;
}

void strata_device::reserve_activations(int64_t bytes) {
    if (bytes <= activation_bytes) return;
    const int64_t size = (std::max(bytes, activation_bytes * 2) + 63) / 64 * 64;
    auto *p = static_cast<unsigned char *>(std::aligned_alloc(64, static_cast<size_t>(size)));
    if (p == nullptr) throw std::bad_alloc(); // ops report it as STRATA_ERR_OUT_OF_MEMORY through guarded()
    activations.reset(p);
    activation_bytes = size;
}

void strata_device::reserve_gathered(int64_t floats) {
    if (floats <= gathered_floats) return;
    const int64_t size = std::max(floats, gathered_floats * 2);
    gathered = std::make_unique<float[]>(static_cast<size_t>(size));
    gathered_floats = size;
}

namespace {

using strata::plugin::fail;

constexpr const char *plugin_name = "cpu";
constexpr int64_t max_threads = 1024;
// Large buffers (weights, KV cache) get 2 MiB alignment so transparent huge pages can back them.
constexpr uint64_t huge_alignment = 2u << 20;
constexpr uint64_t huge_threshold = 4u << 20;
constexpr uint64_t line_alignment = 64;

// Host service slots are optional by size: a NULL host or an older, shorter struct means "not offered".
template <class Fn> bool host_offers(const strata_host_services *host, Fn strata_host_services::*slot, size_t offset) {
    return host != nullptr && host->struct_size >= offset + sizeof(Fn) && host->*slot != nullptr;
}

int default_thread_count(const strata_host_services *host) {
    if (host_offers(host, &strata_host_services::physical_cores, offsetof(strata_host_services, physical_cores))) {
        const int32_t cores = host->physical_cores(host->ctx);
        if (cores > 0) return static_cast<int>(std::min<int64_t>(cores, max_threads));
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(std::min<unsigned>(hw, max_threads)) : 1;
}

std::vector<int> pinning_cpus(const strata_host_services *host, int n_threads) {
    std::vector<int> cpus;
    if (!host_offers(host, &strata_host_services::pinning_cpus, offsetof(strata_host_services, pinning_cpus))) return cpus;
    cpus.resize(static_cast<size_t>(n_threads));
    const int32_t n = host->pinning_cpus(host->ctx, cpus.data(), n_threads);
    cpus.resize(static_cast<size_t>(std::clamp<int32_t>(n, 0, n_threads)));
    return cpus;
}

int32_t score() { return 1; } // the CPU can always run the ops

strata_device *create(const strata_device_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_device>(st, [&]() -> strata_device * {
        if (args != nullptr && args->struct_size < offsetof(strata_device_create_args, config) + sizeof(args->config)) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT, "cpu create: args.struct_size = %u is too small (expected %zu)",
                 args->struct_size, sizeof(strata_device_create_args));
            return nullptr;
        }
        const strata_host_services *host = args != nullptr ? args->host : nullptr;
        const strata::plugin::config cfg(args != nullptr ? args->config : nullptr);

        const int64_t threads_key = cfg.get_int("threads").value_or(0);
        if (threads_key < 0 || threads_key > max_threads) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT,
                 "cpu create: [cpu] threads = %lld is out of range; use 0 (one per physical core) to %lld",
                 static_cast<long long>(threads_key), static_cast<long long>(max_threads));
            return nullptr;
        }
        const int all_threads = threads_key > 0 ? static_cast<int>(threads_key) : default_thread_count(host);
        // Data-parallel replicas in one process (ABI 1.27): replica i takes the i-th of n equal shares of the
        // threads and of the cores they are pinned to, so replicas never compute on the same core.
        // Pipeline stages (ABI 1.28) run one after another: every stage of a replica computes on its whole share.
        int32_t instance = 0, n_instances = 1, stage = 0, n_stages = 1;
        if (strata::plugin::device_instance(args, "cpu", &instance, &n_instances, st) != STRATA_OK) return nullptr;
        if (strata::plugin::device_pipeline_rank(args, "cpu", &stage, &n_stages, st) != STRATA_OK) return nullptr;
        if (n_instances > all_threads) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT,
                 "cpu create: %d data-parallel replicas need a thread each (tensor-parallel ranks count as replicas "
                 "here: each computes at the same time), but the cpu device has %d ([cpu] threads); lower "
                 "--data-parallel-size or --tensor-parallel-size, or raise --threads",
                 n_instances, all_threads);
            return nullptr;
        }
        const int threads = all_threads / n_instances;
        const bool pin = cfg.get_bool("pin_threads").value_or(true);
        std::vector<int> cpus = pin ? pinning_cpus(host, threads * n_instances) : std::vector<int>{};
        if (n_instances > 1 && !cpus.empty()) {
            // This replica's consecutive share (cores wrap round when there are fewer than threads, as unshared).
            std::vector<int> mine;
            for (int k = 0; k < threads; ++k)
                mine.push_back(cpus[static_cast<size_t>(instance * threads + k) % cpus.size()]);
            cpus = std::move(mine);
        }

        auto dev = std::make_unique<strata_device>(threads, cpus, strata::cpu::select_kernels(), host);
        dev->separate_memory = cfg.get_bool("separate_memory").value_or(false);
        if (host != nullptr) {
            if (n_instances > 1)
                strata::plugin::log(host, STRATA_LOG_INFO, plugin_name,
                                    "instance %d of %d (data-parallel replicas x tensor-parallel ranks): %d thread%s, %s "
                                    "kernels, %s %d", instance,
                                    n_instances, threads, threads == 1 ? "" : "s", dev->kern.name,
                                    cpus.empty() ? "unpinned; share" : "workers pinned from cpu",
                                    cpus.empty() ? instance : cpus.front());
            else
                strata::plugin::log(host, STRATA_LOG_INFO, plugin_name, "%d threads, %s kernels, %s", threads,
                                    dev->kern.name, cpus.empty() ? "unpinned" : "workers pinned");
            if (dev->pool.pin_failures() > 0)
                strata::plugin::log(host, STRATA_LOG_WARN, plugin_name,
                                    "could not pin %d of %d workers (pthread_setaffinity_np failed); running unpinned",
                                    dev->pool.pin_failures(), threads - 1);
        }
        strata::plugin::ok(st);
        return dev.release();
    });
}

void destroy(strata_device *dev) { delete dev; }

void *mem_alloc(strata_device *dev, uint64_t bytes, strata_status *st) {
    if (dev == nullptr) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT, "cpu mem_alloc: device is NULL");
        return nullptr;
    }
    if (bytes == 0) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT, "cpu mem_alloc: 0 bytes requested");
        return nullptr;
    }
    const uint64_t align = bytes >= huge_threshold ? huge_alignment : line_alignment;
    if (bytes > UINT64_MAX - align) {
        fail(st, STRATA_ERR_OUT_OF_MEMORY, "cpu mem_alloc: %llu bytes cannot be allocated",
             static_cast<unsigned long long>(bytes));
        return nullptr;
    }
    const uint64_t rounded = (bytes + align - 1) / align * align;
    void *p = std::aligned_alloc(align, rounded);
    if (p == nullptr) {
        fail(st, STRATA_ERR_OUT_OF_MEMORY, "cpu mem_alloc: out of host memory allocating %llu bytes",
             static_cast<unsigned long long>(bytes));
        return nullptr;
    }
    if (align == huge_alignment) (void)madvise(p, rounded, MADV_HUGEPAGE); // a hint; failure is harmless
    if (dev->separate_memory) dev->ranges.add(p, bytes);
    strata::plugin::ok(st);
    return p;
}

void mem_free(strata_device *dev, void *ptr) {
    if (dev != nullptr && dev->separate_memory && ptr != nullptr) dev->ranges.remove(ptr);
    std::free(ptr);
}

int32_t thread_count(strata_device *dev) { return dev != nullptr ? dev->pool.size() : 0; }

const strata_device_desc cpu_device_desc = {
    strata::plugin::make_header<strata_device_desc>(STRATA_KIND_DEVICE, "cpu",
                                                    offsetof(strata_device_desc, thread_count)),
    score,
    create,
    destroy,
    mem_alloc,
    mem_free,
    strata::cpu::matmul,
    strata::cpu::embedding,
    strata::cpu::rms_norm,
    strata::cpu::rope,
    strata::cpu::attention,
    strata::cpu::swiglu,
    strata::cpu::add,
    strata::cpu::softmax,
    thread_count,
    strata::cpu::kv_store,
    strata::cpu::paged_attention,
    strata::cpu::copy,
    strata::cpu::host_addressable,
    nullptr, // host_register: device memory is host memory
    nullptr, // host_unregister
    nullptr, // mem_info
    strata::cpu::fence_record,
    strata::cpu::copy_after,
    nullptr, // pci_bus_id: not a PCI device
    strata::cpu::rope_ext,
    strata::cpu::add_rows,
    strata::cpu::rope_scaled,
    strata::cpu::scale,
    strata::cpu::geglu,
    strata::cpu::softcap,
    strata::cpu::moe_route,
    strata::cpu::matmul_id,
    strata::cpu::moe_combine,
    strata::cpu::sigmoid_gate_add,
    strata::cpu::supports,
};

const strata_descriptor_header *const descriptors[] = {&cpu_device_desc.header};

const strata_config_key config_keys[] = {
    {"threads", STRATA_CONFIG_INT, "0", 0.0, static_cast<double>(max_threads),
     "worker threads for CPU compute (0 = one per physical core)", "--threads|-t|--cpu-parallelism", nullptr},
    {"pin_threads", STRATA_CONFIG_BOOL, "true", 0.0, 0.0, "pin each worker to one core reported by hwloc",
     "--pin-threads", nullptr},
    {"separate_memory", STRATA_CONFIG_BOOL, "false", 0.0, 0.0,
     "test mode: treat device memory as a discrete GPU's, so the host uploads weights and stages KV and logits "
     "through copies (exercises the GPU data paths without a GPU)",
     nullptr, nullptr},
};

const strata_plugin_info plugin_info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT",
    "CPU device: a persistent thread pool running AVX2+FMA (or scalar) float kernels",
    descriptors, config_keys);

} // namespace

const strata_device_desc *strata_cpu_device_descriptor() { return &cpu_device_desc; }
const strata_plugin_info *strata_cpu_plugin_info() { return &plugin_info; }
const char *strata_cpu_device_kernel_name(const strata_device *dev) { return dev != nullptr ? dev->kern.name : ""; }
