// The plugin's attention, paged attention and the paged cache writes (kernels_attention.cuh, which tests/device_cuda also runs under host emulation).
#include "cuda_kernels.hpp"
#include "kernels_attention.cuh"
