// The plugin's RMSNorm, RoPE, SwiGLU, add and softmax (kernels_elementwise.cuh, which tests/device_cuda also runs under host emulation).
#include "cuda_kernels.hpp"
#include "kernels_elementwise.cuh"
