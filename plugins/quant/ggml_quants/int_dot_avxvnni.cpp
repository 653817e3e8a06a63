// AVX-VNNI build of dot_act_multi: the shared multi-vector kernel (int_dot_avx2_blocks.hpp) with vpdpbusd in place
// of maddubs + madd, one multiply-pipe instruction instead of two per block and vector, which is what bounds prefill.
// Compiled with -mavx2 -mfma -mf16c -mavxvnni; called only after cpu_has_avx_vnni() said yes.
#include "ggml_quants.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__) || !defined(__AVXVNNI__)
#error "int_dot_avxvnni.cpp must be compiled with -mavx2 -mfma -mf16c -mavxvnni"
#endif

#include "int_dot_avx2_blocks.hpp"

namespace strata::quants {

void dot_act_multi_q8_0_avxvnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                float *out) {
    dot_blocks_multi<vnni_i8, block_q8_0>(row, xq, xq_stride_bytes, n_x, n, out);
}

void dot_act_multi_q4_0_avxvnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                float *out) {
    dot_blocks_multi<vnni_i8, block_q4_0>(row, xq, xq_stride_bytes, n_x, n, out);
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx_vnni() is false; these exist only so the API links everywhere.

namespace strata::quants {
void dot_act_multi_q8_0_avxvnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                float *out) {
    dot_act_multi_q8_0_scalar(row, xq, xq_stride_bytes, n_x, n, out);
}
void dot_act_multi_q4_0_avxvnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                float *out) {
    dot_act_multi_q4_0_scalar(row, xq, xq_stride_bytes, n_x, n, out);
}
} // namespace strata::quants

#endif
