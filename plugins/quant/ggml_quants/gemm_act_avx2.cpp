// AVX2 build of the Q8_0 / Q4_0 / Q5_0 / Q4_K GEMM tiles (gemm_act_tile.hpp; maddubs + madd). Compiled with -mavx2 -mfma -mf16c;
// called only after cpu_has_avx2_fma() said yes.
#include "ggml_quants.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "gemm_act_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif

#include "gemm_act_q4_k_tile.hpp"
#include "gemm_act_tile.hpp"

namespace strata::quants {

void gemm_act_q8_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows<false, block_q8_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride, gemm_one_q8_0);
}

void gemm_act_q4_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows<false, block_q4_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride, gemm_one_q4_0);
}

void gemm_act_q5_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows<false, block_q5_0>(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride, gemm_one_q5_0);
}

void gemm_act_q4_k_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_rows_q4_k(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx2_fma() is false; these exist only so the API links everywhere.

namespace strata::quants {
void gemm_act_q8_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q8_0_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
void gemm_act_q4_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q4_0_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
void gemm_act_q5_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q5_0_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
void gemm_act_q4_k_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    gemm_act_q4_k_scalar(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}
} // namespace strata::quants

#endif
