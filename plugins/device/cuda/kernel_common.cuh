// What every kernel header shares: warp reductions and the launch helper. Compiled by nvcc for the plugin, or by the
// host compiler under tests/device_cuda/cuda_host_emulation.hpp (included first), which supplies the CUDA built-ins
// (threadIdx, __syncthreads, warp shuffles, dim3, cudaError_t) and runs kernels on fibers.
#pragma once

#include "kernel_types.hpp"

#if !defined(__CUDACC__) && !defined(STRATA_CUDA_HOST_EMULATION)
#error "kernel headers compile with nvcc, or on the host after tests/device_cuda/cuda_host_emulation.hpp"
#endif

namespace strata::cuda {

inline constexpr int warp_size = 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// x[0..7] into out; x 16-byte aligned (two 16-byte loads on the GPU).
__device__ __forceinline__ void load_floats8(const float *x, float (&out)[8]) {
#if defined(__CUDA_ARCH__)
    const float4 a = reinterpret_cast<const float4 *>(x)[0], b = reinterpret_cast<const float4 *>(x)[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
#else
    for (int i = 0; i < 8; ++i) out[i] = x[i];
#endif
}

// kernel<<<grid, block, 0, stream>>>(args...) and its launch error.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
#if defined(__CUDACC__)
    kernel<<<grid, block, 0, stream>>>(args...);
    return cudaGetLastError();
#else
    return ::cuda_emulation::launch(kernel, grid, block, stream, args...);
#endif
}

} // namespace strata::cuda
