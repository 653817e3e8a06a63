// gpu-bandwidth: host<->device copy bandwidth (pinned and pageable host memory) and device memory bandwidth
// (device-to-device copy) of one GPU, timed with CUDA events, best of N. Prints one `key value` line per figure
// (GB/s = 1e9 bytes/s) so tools/gpu/check.sh can tabulate them.
//
//   gpu-bandwidth [--device N] [--mib 512] [--repeat 5]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char *what, cudaError_t e) {
    std::fprintf(stderr, "gpu-bandwidth: %s: %s: %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    std::exit(1);
}

void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) die(what, e);
}

// Best of `repeat` timed copies of `bytes` (after one untimed warm-up), in GB/s.
double best_gbps(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int repeat, cudaStream_t stream) {
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "warm-up copy");
    check(cudaStreamSynchronize(stream), "warm-up sync");
    float best_ms = 0.0f;
    for (int i = 0; i < repeat; ++i) {
        check(cudaEventRecord(start, stream), "cudaEventRecord");
        check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "timed copy");
        check(cudaEventRecord(stop, stream), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0.0f;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        if (i == 0 || ms < best_ms) best_ms = ms;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return static_cast<double>(bytes) / (static_cast<double>(best_ms) * 1e-3) / 1e9;
}

} // namespace

int main(int argc, char **argv) {
    int device = 0, repeat = 5;
    size_t mib = 512;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> long {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "gpu-bandwidth: missing value for %s\n", a.c_str());
                std::exit(2);
            }
            return std::strtol(argv[++i], nullptr, 10);
        };
        if (a == "--device") device = static_cast<int>(value());
        else if (a == "--mib") mib = static_cast<size_t>(std::max(1L, value()));
        else if (a == "--repeat") repeat = static_cast<int>(std::max(1L, value()));
        else {
            std::fprintf(stderr, "usage: gpu-bandwidth [--device N] [--mib 512] [--repeat 5]\n");
            return 2;
        }
    }
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (device < 0 || device >= count) {
        std::fprintf(stderr, "gpu-bandwidth: --device %d but %d devices are visible\n", device, count);
        return 1;
    }
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    std::printf("device %s\n", prop.name);
    std::printf("compute_capability %d.%d\n", prop.major, prop.minor);
    std::printf("memory_gib %.1f\n", static_cast<double>(prop.totalGlobalMem) / (1u << 30));
    std::printf("bytes_per_copy %zu\n", mib << 20);

    const size_t bytes = mib << 20;
    cudaStream_t stream;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    void *d0 = nullptr, *d1 = nullptr, *pinned = nullptr;
    check(cudaMalloc(&d0, bytes), "cudaMalloc");
    check(cudaMalloc(&d1, bytes), "cudaMalloc");
    check(cudaMallocHost(&pinned, bytes), "cudaMallocHost");
    std::vector<unsigned char> pageable(bytes, 1); // touched, so no first-touch faults are timed
    std::memset(pinned, 1, bytes);
    check(cudaMemset(d0, 1, bytes), "cudaMemset");

    std::printf("h2d_pinned_gbps %.2f\n", best_gbps(d0, pinned, bytes, cudaMemcpyHostToDevice, repeat, stream));
    std::printf("d2h_pinned_gbps %.2f\n", best_gbps(pinned, d0, bytes, cudaMemcpyDeviceToHost, repeat, stream));
    std::printf("h2d_pageable_gbps %.2f\n",
                best_gbps(d0, pageable.data(), bytes, cudaMemcpyHostToDevice, repeat, stream));
    std::printf("d2h_pageable_gbps %.2f\n",
                best_gbps(pageable.data(), d0, bytes, cudaMemcpyDeviceToHost, repeat, stream));
    // A device-to-device copy reads and writes every byte: report the bytes moved through memory (2x the copy).
    std::printf("d2d_copy_gbps %.2f\n", best_gbps(d1, d0, bytes, cudaMemcpyDeviceToDevice, repeat, stream));
    std::printf("device_memory_gbps %.2f\n", 2.0 * best_gbps(d1, d0, bytes, cudaMemcpyDeviceToDevice, repeat, stream));

    cudaFree(d0);
    cudaFree(d1);
    cudaFreeHost(pinned);
    cudaStreamDestroy(stream);
    return 0;
}
