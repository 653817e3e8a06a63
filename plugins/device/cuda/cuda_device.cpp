// The "cuda" device descriptor and plugin info: capability score, creation from [cuda] config, device memory, the
// synchronous copy slots (copy, and copy_after a recorded fence), and the op table.
#include "cuda_device.hpp"

#include "cuda_device_state.hpp"
#include "cuda_kernels.hpp"
#include "cuda_ops.hpp"

#include <strata/device_args.hpp>
#include <strata/plugin.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>

namespace strata::cuda {

cudaError_t make_current(const strata_device *dev) { return cudaSetDevice(dev->index); }

int32_t fail_cuda(strata_status *st, int32_t code, cudaError_t err, const char *what) {
    (void)cudaGetLastError();
    return strata::plugin::fail(st, code, "%s: %s: %s", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

} // namespace strata::cuda

strata_device::~strata_device() {
    // Nothing may still run on the streams when their buffers go; errors here have nowhere to go and are ignored.
    (void)cudaSetDevice(index);
    if (compute != nullptr) (void)cudaStreamSynchronize(compute);
    if (copy != nullptr) (void)cudaStreamSynchronize(copy);
    if (prefetch != nullptr) (void)cudaStreamSynchronize(prefetch);
    staging.release();
    if (gathered != nullptr) (void)cudaFree(gathered);
    if (compute_done != nullptr) (void)cudaEventDestroy(compute_done);
    for (cudaEvent_t &ev : fence_events)
        if (ev != nullptr) (void)cudaEventDestroy(ev);
    if (compute != nullptr) (void)cudaStreamDestroy(compute);
    if (copy != nullptr) (void)cudaStreamDestroy(copy);
    if (prefetch != nullptr) (void)cudaStreamDestroy(prefetch);
    (void)cudaGetLastError();
}

cudaError_t strata_device::reserve_gathered(size_t bytes) {
    if (bytes <= gathered_bytes) return cudaSuccess;
    const size_t size = bytes > 2 * gathered_bytes ? bytes : 2 * gathered_bytes;
    if (gathered != nullptr) {
        // cudaFree waits for the device, so no queued kernel still reads the old buffer.
        if (cudaError_t e = cudaFree(gathered); e != cudaSuccess) return e;
        gathered = nullptr;
        gathered_bytes = 0;
    }
    void *p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, size); e != cudaSuccess) return e;
    gathered = static_cast<float *>(p);
    gathered_bytes = size;
    return cudaSuccess;
}

namespace {

using strata::cuda::fail_cuda;
using strata::plugin::fail;

constexpr const char *plugin_name = "cuda";
// The kernels are built for sm_80 and sm_90 (+ compute_90 PTX); older GPUs cannot run them.
constexpr int min_compute_major = 8;
constexpr int64_t max_device_index = 1023;
constexpr int32_t cuda_score = 100; // the CPU device scores 1

int32_t score() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); // no driver or no device: not an error of any later call
        return 0;
    }
    for (int d = 0; d < count; ++d) {
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess &&
            major >= min_compute_major)
            return cuda_score;
    }
    (void)cudaGetLastError();
    return 0;
}

// Streams, events and the index staging of a device whose ordinal is current.
int32_t open_queues(strata_device &dev, strata_status *st) {
    if (cudaError_t e = cudaStreamCreateWithFlags(&dev.compute, cudaStreamNonBlocking); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaStreamCreate (compute)");
    if (cudaError_t e = cudaStreamCreateWithFlags(&dev.copy, cudaStreamNonBlocking); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaStreamCreate (copy)");
    if (cudaError_t e = cudaStreamCreateWithFlags(&dev.prefetch, cudaStreamNonBlocking); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaStreamCreate (prefetch)");
    if (cudaError_t e = cudaEventCreateWithFlags(&dev.compute_done, cudaEventDisableTiming); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaEventCreate");
    for (cudaEvent_t &ev : dev.fence_events)
        if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
            return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaEventCreate (fences)");
    if (cudaError_t e = dev.staging.init(); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_OUT_OF_MEMORY, e, "cuda create: allocating the index staging buffers");
    return STRATA_OK;
}

strata_device *create(const strata_device_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_device>(st, [&]() -> strata_device * {
        if (args != nullptr && args->struct_size < offsetof(strata_device_create_args, config) + sizeof(args->config)) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda create: args.struct_size = %u is too small (expected %zu)",
                 args->struct_size, sizeof(strata_device_create_args));
            return nullptr;
        }
        const strata_host_services *host = args != nullptr ? args->host : nullptr;
        const strata::plugin::config cfg(args != nullptr ? args->config : nullptr);
        const int64_t configured = cfg.get_int("device_index").value_or(0);
        // Data-parallel replicas (ABI 1.27) and pipeline stages (1.28) in one process: each gets a GPU of its own,
        // stage s of replica i the one i * stages + s ordinals past the configured one.
        int32_t instance = 0, n_instances = 1, stage = 0, n_stages = 1;
        if (strata::plugin::device_instance(args, "cuda", &instance, &n_instances, st) != STRATA_OK) return nullptr;
        if (strata::plugin::device_pipeline_rank(args, "cuda", &stage, &n_stages, st) != STRATA_OK) return nullptr;
        const int64_t index = configured + int64_t{instance} * n_stages + stage;
        const int64_t n_gpus = int64_t{n_instances} * n_stages;

        int count = 0;
        if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
            fail_cuda(st, STRATA_ERR_UNSUPPORTED, e,
                      "cuda create: no CUDA device visible: cudaGetDeviceCount returned an error");
            return nullptr;
        }
        if (count == 0) {
            fail(st, STRATA_ERR_UNSUPPORTED, "cuda create: no CUDA device visible: cudaGetDeviceCount found 0 devices");
            return nullptr;
        }
        if (n_gpus > 1 && configured + n_gpus > count) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT,
                 "cuda create: %d data-parallel replica%s of %d pipeline stage%s need %lld GPUs, one each, from [cuda] "
                 "device_index = %lld, but %d CUDA device%s visible; lower --data-parallel-size or "
                 "--pipeline-parallel-size, or make more GPUs visible (CUDA_VISIBLE_DEVICES)",
                 n_instances, n_instances == 1 ? "" : "s", n_stages, n_stages == 1 ? "" : "s",
                 static_cast<long long>(n_gpus), static_cast<long long>(configured), count,
                 count == 1 ? " is" : "s are");
            return nullptr;
        }
        if (index < 0 || index >= count) {
            fail(st, STRATA_ERR_INVALID_ARGUMENT,
                 "cuda create: [cuda] device_index = %lld, but %d CUDA device%s visible (0 to %d)",
                 static_cast<long long>(index), count, count == 1 ? " is" : "s are", count - 1);
            return nullptr;
        }

        auto dev = std::make_unique<strata_device>();
        dev->index = static_cast<int>(index);
        dev->host = host;
        cudaDeviceProp prop{};
        if (cudaError_t e = cudaGetDeviceProperties(&prop, dev->index); e != cudaSuccess) {
            fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaGetDeviceProperties");
            return nullptr;
        }
        dev->name = prop.name;
        dev->cc_major = prop.major;
        dev->cc_minor = prop.minor;
        if (prop.major < min_compute_major) {
            fail(st, STRATA_ERR_UNSUPPORTED,
                 "cuda create: device %d (%s) has compute capability %d.%d; this plugin's kernels need 8.0 or newer "
                 "(built for sm_80, sm_90 and compute_90)",
                 dev->index, prop.name, prop.major, prop.minor);
            return nullptr;
        }
        if (cudaError_t e = cudaSetDevice(dev->index); e != cudaSuccess) {
            fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda create: cudaSetDevice");
            return nullptr;
        }
        if (cudaError_t e = strata::cuda::kernels_loadable(); e != cudaSuccess) {
            fail_cuda(st, STRATA_ERR_UNSUPPORTED, e, "cuda create: the plugin's kernels cannot run on this GPU");
            return nullptr;
        }
        if (open_queues(*dev, st) != STRATA_OK) return nullptr;

        if (host != nullptr)
            strata::plugin::log(host, STRATA_LOG_INFO, plugin_name,
                                "device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB", dev->index, prop.name,
                                prop.major, prop.minor, prop.multiProcessorCount,
                                static_cast<double>(prop.totalGlobalMem) / (1u << 30));
        strata::plugin::ok(st);
        return dev.release();
    });
}

void destroy(strata_device *dev) { delete dev; }

void *mem_alloc(strata_device *dev, uint64_t bytes, strata_status *st) {
    if (dev == nullptr) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda mem_alloc: device is NULL");
        return nullptr;
    }
    if (bytes == 0) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda mem_alloc: 0 bytes requested");
        return nullptr;
    }
    std::lock_guard lock(dev->mutex);
    if (cudaError_t e = strata::cuda::make_current(dev); e != cudaSuccess) {
        fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda mem_alloc: cudaSetDevice");
        return nullptr;
    }
    void *p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes)); e != cudaSuccess) {
        char what[128];
        std::snprintf(what, sizeof what, "cuda mem_alloc: cudaMalloc of %llu bytes on device %d failed",
                      static_cast<unsigned long long>(bytes), dev->index);
        fail_cuda(st, e == cudaErrorMemoryAllocation ? STRATA_ERR_OUT_OF_MEMORY : STRATA_ERR_INTERNAL, e, what);
        return nullptr;
    }
    strata::plugin::ok(st);
    return p;
}

void mem_free(strata_device *dev, void *ptr) {
    if (dev == nullptr || ptr == nullptr) return;
    std::lock_guard lock(dev->mutex);
    (void)strata::cuda::make_current(dev);
    (void)cudaFree(ptr); // waits for work still using it
    (void)cudaGetLastError();
}

cudaMemcpyKind memcpy_kind(int32_t kind) {
    switch (kind) {
    case STRATA_COPY_H2D: return cudaMemcpyHostToDevice;
    case STRATA_COPY_D2H: return cudaMemcpyDeviceToHost;
    default: return cudaMemcpyDeviceToDevice;
    }
}

const char *copy_kind_text(int32_t kind) {
    return kind == STRATA_COPY_H2D ? "host to device" : kind == STRATA_COPY_D2H ? "device to host" : "device to device";
}

// The checks copy and copy_after share; `op` names the slot in the message.
int32_t check_copy(const char *op, const strata_device *dev, const void *dst, const void *src, uint64_t bytes,
                   int32_t kind, strata_status *st) {
    if (dev == nullptr) return fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda %s: device is NULL", op);
    if (kind != STRATA_COPY_H2D && kind != STRATA_COPY_D2H && kind != STRATA_COPY_D2D)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "cuda %s: kind %d is unknown; use STRATA_COPY_H2D (1), STRATA_COPY_D2H (2) or STRATA_COPY_D2D (3)",
                    op, kind);
    if (bytes > 0 && (dst == nullptr || src == nullptr))
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda %s: dst or src is NULL", op);
    return STRATA_OK;
}

// What the copy stream waits for before a copy: after_fence 0 is every op queued on the compute stream so far (copy),
// otherwise the ops up to that recorded fence (copy_after). The copy is complete on return and the compute queued
// later is ordered after it.
int32_t copy_on_copy_stream(const char *op, strata_device *dev, uint64_t after_fence, void *dst, const void *src,
                            uint64_t bytes, int32_t kind, strata_status *st) {
    if (bytes == 0) {
        strata::plugin::ok(st);
        return STRATA_OK;
    }
    // Each calling thread waits on its own event, outside the device lock: a prefetch thread's H2D copy then runs on
    // the copy stream while the engine thread keeps queueing kernels (which the lock would otherwise hold up).
    struct thread_event {
        cudaEvent_t ev = nullptr;
        ~thread_event() {
            if (ev != nullptr) (void)cudaEventDestroy(ev);
        }
    };
    thread_local thread_event done;
    cudaError_t e = cudaSuccess;
    {
        std::lock_guard lock(dev->mutex);
        e = strata::cuda::make_current(dev);
        if (e != cudaSuccess) {
            char what[64];
            std::snprintf(what, sizeof what, "cuda %s: cudaSetDevice", op);
            return fail_cuda(st, STRATA_ERR_INTERNAL, e, what);
        }
        if (done.ev == nullptr) e = cudaEventCreateWithFlags(&done.ev, cudaEventDisableTiming);
        cudaStream_t stream = after_fence == 0 ? dev->copy : dev->prefetch;
        if (after_fence == 0) {
            // Ordered after the compute queued so far (a ring slot's previous occupant has been read).
            if (e == cudaSuccess) e = cudaEventRecord(dev->compute_done, dev->compute);
            if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, dev->compute_done, 0);
        } else if (e == cudaSuccess) {
            // The pool entry holds this fence or a newer one with the same residue (never an older one).
            e = cudaStreamWaitEvent(stream, dev->fence_events[after_fence % strata_device::fence_pool_size], 0);
        }
        if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), memcpy_kind(kind), stream);
        if (e == cudaSuccess) e = cudaEventRecord(done.ev, stream);
        // The compute queued later is ordered after this copy.
        if (e == cudaSuccess) e = cudaStreamWaitEvent(dev->compute, done.ev, 0);
    }
    // Also where an earlier kernel's execution error (e.g. an illegal address) is reported.
    if (e == cudaSuccess) e = cudaEventSynchronize(done.ev);
    if (e != cudaSuccess) {
        char what[160];
        std::snprintf(what, sizeof what, "cuda %s: %llu bytes (%s) failed", op, static_cast<unsigned long long>(bytes),
                      copy_kind_text(kind));
        return fail_cuda(st, STRATA_ERR_IO, e, what);
    }
    strata::plugin::ok(st);
    return STRATA_OK;
}

// Ordered after the compute work enqueued before it, complete on return; later compute is ordered after it.
int32_t copy(strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t kind, strata_status *st) {
    if (int32_t rc = check_copy("copy", dev, dst, src, bytes, kind, st); rc != STRATA_OK) return rc;
    return copy_on_copy_stream("copy", dev, 0, dst, src, bytes, kind, st);
}

// Marks the compute queued so far with the next fence id. Runs on the engine thread; copy_after on I/O threads.
int32_t fence_record(strata_device *dev, uint64_t *fence, strata_status *st) {
    if (dev == nullptr) return fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda fence_record: device is NULL");
    if (fence == nullptr) return fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda fence_record: fence is NULL");
    std::lock_guard lock(dev->mutex);
    if (cudaError_t e = strata::cuda::make_current(dev); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda fence_record: cudaSetDevice");
    const uint64_t id = dev->last_fence.load(std::memory_order_relaxed) + 1;
    if (cudaError_t e = cudaEventRecord(dev->fence_events[id % strata_device::fence_pool_size], dev->compute);
        e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda fence_record: cudaEventRecord");
    dev->last_fence.store(id, std::memory_order_relaxed); // the mutex orders it with copy_after's wait
    *fence = id;
    strata::plugin::ok(st);
    return STRATA_OK;
}

// `copy` ordered only after the compute up to `fence`, not after the ops queued since.
int32_t copy_after(strata_device *dev, uint64_t fence, void *dst, const void *src, uint64_t bytes, int32_t kind,
                   strata_status *st) {
    if (int32_t rc = check_copy("copy_after", dev, dst, src, bytes, kind, st); rc != STRATA_OK) return rc;
    // Ids only grow, so a fence recorded when this check passes stays recorded.
    const uint64_t last = dev->last_fence.load(std::memory_order_relaxed);
    if (fence == 0 || fence > last)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT,
                    "cuda copy_after: fence %llu was never returned by fence_record (the newest is %llu)",
                    static_cast<unsigned long long>(fence), static_cast<unsigned long long>(last));
    return copy_on_copy_stream("copy_after", dev, fence, dst, src, bytes, kind, st);
}

int32_t host_addressable(strata_device *) { return 0; }

// Page-locks host memory (tier regions, staging buffers) so copies from and to it run at the link's speed.
int32_t host_register(strata_device *dev, void *ptr, uint64_t bytes, strata_status *st) {
    if (dev == nullptr || ptr == nullptr || bytes == 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda host_register: device, pointer or size missing");
    std::lock_guard lock(dev->mutex);
    if (cudaError_t e = strata::cuda::make_current(dev); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda host_register: cudaSetDevice");
    if (cudaError_t e = cudaHostRegister(ptr, static_cast<size_t>(bytes), cudaHostRegisterDefault); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_IO, e, "cuda host_register: cudaHostRegister");
    strata::plugin::ok(st);
    return STRATA_OK;
}

void host_unregister(strata_device *dev, void *ptr) {
    if (dev == nullptr || ptr == nullptr) return;
    std::lock_guard lock(dev->mutex);
    if (strata::cuda::make_current(dev) == cudaSuccess) (void)cudaHostUnregister(ptr);
}

int32_t mem_info(strata_device *dev, uint64_t *free_bytes, uint64_t *total_bytes, strata_status *st) {
    if (dev == nullptr || free_bytes == nullptr || total_bytes == nullptr)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "cuda mem_info: device or output missing");
    std::lock_guard lock(dev->mutex);
    if (cudaError_t e = strata::cuda::make_current(dev); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda mem_info: cudaSetDevice");
    size_t f = 0, t = 0;
    if (cudaError_t e = cudaMemGetInfo(&f, &t); e != cudaSuccess)
        return fail_cuda(st, STRATA_ERR_INTERNAL, e, "cuda mem_info: cudaMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    strata::plugin::ok(st);
    return STRATA_OK;
}

// "0000:17:00.0": where the GPU sits on PCI, so the host can put pinned staging memory on the NUMA node nearest it.
// A buffer too small for the whole id gets an empty string and 0: a cut-off id would name another device.
int32_t pci_bus_id(strata_device *dev, char *buf, uint32_t cap) {
    if (buf != nullptr && cap > 0) buf[0] = '\0';
    if (dev == nullptr || buf == nullptr || cap == 0) return 0;
    char id[64] = {0};
    if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof id), dev->index) != cudaSuccess) {
        (void)cudaGetLastError(); // not an error of any later call
        return 0;
    }
    const size_t n = std::strlen(id);
    if (n == 0 || n + 1 > cap) return 0;
    std::memcpy(buf, id, n + 1);
    return 1;
}

const strata_device_desc cuda_device_desc = {
    strata::plugin::make_header<strata_device_desc>(STRATA_KIND_DEVICE, "cuda",
                                                    offsetof(strata_device_desc, thread_count)),
    score,
    create,
    destroy,
    mem_alloc,
    mem_free,
    strata::cuda::matmul,
    strata::cuda::embedding,
    strata::cuda::rms_norm,
    strata::cuda::rope,
    strata::cuda::attention,
    strata::cuda::swiglu,
    strata::cuda::add,
    strata::cuda::softmax,
    nullptr, // thread_count: not meaningful for a GPU
    strata::cuda::kv_store,
    strata::cuda::paged_attention,
    copy,
    host_addressable,
    host_register,
    host_unregister,
    mem_info,
    fence_record,
    copy_after,
    pci_bus_id,
    strata::cuda::rope_ext,
    strata::cuda::add_rows,
    strata::cuda::rope_scaled,
    strata::cuda::scale,
    strata::cuda::geglu,
    strata::cuda::softcap,
    strata::cuda::moe_route,
    strata::cuda::matmul_id,
    strata::cuda::moe_combine,
    strata::cuda::sigmoid_gate_add,
    strata::cuda::supports,
};

const strata_descriptor_header *const descriptors[] = {&cuda_device_desc.header};

const strata_config_key config_keys[] = {
    {"device_index", STRATA_CONFIG_INT, "0", 0.0, static_cast<double>(max_device_index),
     "CUDA device ordinal to run on (as CUDA numbers them; CUDA_VISIBLE_DEVICES applies)", nullptr, nullptr},
};

const strata_plugin_info plugin_info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT",
    "CUDA device: NVIDIA GPUs (compute capability 8.0+) with F32/F16/BF16, Q8_0/Q4_0/Q4_1/Q5_x/IQ4_NL, K-quant/IQ4_XS and GPTQ/AWQ group-integer kernels, "
    "mixture-of-experts routing and expert matmuls",
    descriptors, config_keys);

} // namespace

const strata_device_desc *strata_cuda_device_descriptor() { return &cuda_device_desc; }
const strata_plugin_info *strata_cuda_plugin_info() { return &plugin_info; }
