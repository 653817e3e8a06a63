// The CUDA device plugin ("cuda"): NVIDIA GPUs through the CUDA runtime (linked statically; only the driver is
// needed at run time). Device memory is cudaMalloc memory, not host-addressable: the host moves bytes with the
// `copy` slot. Weights (strata_tensor_view.data) and activations are device memory; index arrays (token ids,
// positions, block tables) are host memory and are staged to the device by the plugin (index_staging.hpp).
//
// score() is 0 when the CUDA runtime sees no usable GPU (no driver, no device, or none of compute capability 8.0+),
// so the registry never picks it there, and higher than the CPU device's otherwise.
#pragma once

#include <strata/plugin_abi.h>

const strata_device_desc *strata_cuda_device_descriptor();
const strata_plugin_info *strata_cuda_plugin_info();
