// The matmul kernels of the plugin (kernels_matmul.cuh) and the check that this build has code for the GPU.
#include "cuda_kernels.hpp"
#include "kernels_matmul.cuh"

namespace strata::cuda {

cudaError_t kernels_loadable() {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, kernels::matvec_kernel<weight_q8_0, 1>);
}

} // namespace strata::cuda
