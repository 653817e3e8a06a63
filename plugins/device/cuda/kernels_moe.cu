// The plugin's mixture-of-experts routing, combine and shared-expert gate (kernels_moe.cuh, which tests/device_cuda also
// runs under host emulation).
#include "cuda_kernels.hpp"
#include "kernels_moe.cuh"
