// The hot float loops of the CPU device, as a table of function pointers so one op implementation can run on the
// scalar, the AVX2+FMA or the AVX-512 set (chosen per device at create()).
#pragma once

#include <strata/kv_q8_0.hpp>

#include <cstdint>

namespace strata::cpu {

struct kernels {
    const char *name;
    // sum_i a[i] * b[i]
    float (*dot)(const float *a, const float *b, int64_t n);
    // y[i] += a * x[i]
    void (*axpy)(float a, const float *x, float *y, int64_t n);
    // x[i] *= s
    void (*scale)(float *x, float s, int64_t n);
    // sum_i (double)(x[i] * x[i]) — squares in float, sum in double, as ggml's rms_norm does.
    double (*sum_squares)(const float *x, int64_t n);
    // out[i] = (x[i] * s) * w[i]  (rms_norm's scale-then-weight, same rounding order as ggml)
    void (*scale_mul)(const float *x, float s, const float *w, float *out, int64_t n);
    // out[i] = silu(g[i]) * u[i], silu(v) = v / (1 + exp(-v)); out may alias g or u.
    void (*swiglu)(const float *g, const float *u, float *out, int64_t n);
    // out[i] = a[i] + b[i]; out may alias a or b.
    void (*add)(const float *a, const float *b, float *out, int64_t n);
    // max_i x[i] (n >= 1)
    float (*max)(const float *x, int64_t n);
    // out[i] = exp(x[i] - m); returns the sum of out in double. out may alias x.
    double (*exp_sub_sum)(const float *x, float m, float *out, int64_t n);
    // The 16-bit KV caches (ABI 1.20): b and x hold IEEE half (f16) or bfloat16 (bf16) bits, read exactly.
    // sum_i a[i] * b[i]
    float (*dot_f16)(const float *a, const uint16_t *b, int64_t n);
    float (*dot_bf16)(const float *a, const uint16_t *b, int64_t n);
    // y[i] += a * x[i]
    void (*axpy_f16)(float a, const uint16_t *x, float *y, int64_t n);
    void (*axpy_bf16)(float a, const uint16_t *x, float *y, int64_t n);
    // out[i] = x[i] rounded to nearest even, as strata/float16.hpp (every kernel set stores the same bits)
    void (*to_f16)(const float *x, uint16_t *out, int64_t n);
    void (*to_bf16)(const float *x, uint16_t *out, int64_t n);
    // The FP8 KV caches: b and x hold e4m3 or e5m2 bytes, read exactly (the values of fp8_tables(); a NaN code
    // reads as NaN). sum_i a[i] * value(b[i])
    float (*dot_e4m3)(const float *a, const uint8_t *b, int64_t n);
    float (*dot_e5m2)(const float *a, const uint8_t *b, int64_t n);
    // y[i] += a * value(x[i])
    void (*axpy_e4m3)(float a, const uint8_t *x, float *y, int64_t n);
    void (*axpy_e5m2)(float a, const uint8_t *x, float *y, int64_t n);
    // The q8_0 KV cache (ABI 1.23): b and x hold n / 32 groups (n a multiple of 32), read exactly; the same bits as
    // dot and axpy over the values widened to float first (each d * q is exact in float32).
    float (*dot_q8_0)(const float *a, const kv_q8_0::group *b, int64_t n);
    void (*axpy_q8_0)(float a, const kv_q8_0::group *x, float *y, int64_t n);
    // Attention's passes over several rows in one call, for every cache type: rows r < n_rows of b (or x) start at
    // r * stride elements (groups for q8_0). dot_*_rows: out[r] = dot*(a, row r, n), each with that kernel's bits;
    // axpy_*_rows: y[i] += w[r] * row r[i] for r = 0, 1, ... in order, the bits of one axpy* call per row in that
    // order (y stays in registers between rows where the set can).
    void (*dot_rows)(const float *a, const float *b, int64_t stride, int32_t n_rows, int64_t n, float *out);
    void (*dot_f16_rows)(const float *a, const uint16_t *b, int64_t stride, int32_t n_rows, int64_t n, float *out);
    void (*dot_bf16_rows)(const float *a, const uint16_t *b, int64_t stride, int32_t n_rows, int64_t n, float *out);
    void (*axpy_rows)(const float *w, const float *x, int64_t stride, int32_t n_rows, float *y, int64_t n);
    void (*axpy_f16_rows)(const float *w, const uint16_t *x, int64_t stride, int32_t n_rows, float *y, int64_t n);
    void (*axpy_bf16_rows)(const float *w, const uint16_t *x, int64_t stride, int32_t n_rows, float *y, int64_t n);
    void (*dot_e4m3_rows)(const float *a, const uint8_t *b, int64_t stride, int32_t n_rows, int64_t n, float *out);
    void (*dot_e5m2_rows)(const float *a, const uint8_t *b, int64_t stride, int32_t n_rows, int64_t n, float *out);
    void (*dot_q8_0_rows)(const float *a, const kv_q8_0::group *b, int64_t stride, int32_t n_rows, int64_t n,
                          float *out);
    void (*axpy_e4m3_rows)(const float *w, const uint8_t *x, int64_t stride, int32_t n_rows, float *y, int64_t n);
    void (*axpy_e5m2_rows)(const float *w, const uint8_t *x, int64_t stride, int32_t n_rows, float *y, int64_t n);
    void (*axpy_q8_0_rows)(const float *w, const kv_q8_0::group *x, int64_t stride, int32_t n_rows, float *y,
                           int64_t n);
    // out[i] = the value of element i of a row, exactly (the values the dots and axpys above read; n values, n a
    // multiple of 32 for q8_0): a query block's tokens share one widening of each step's rows.
    void (*widen_f16)(const uint16_t *x, float *out, int64_t n);
    void (*widen_bf16)(const uint16_t *x, float *out, int64_t n);
    void (*widen_e4m3)(const uint8_t *x, float *out, int64_t n);
    void (*widen_e5m2)(const uint8_t *x, float *out, int64_t n);
    void (*widen_q8_0)(const kv_q8_0::group *x, float *out, int64_t n);
};

// The value of each of the 256 codes of the two FP8 formats (strata/float8.hpp), built once.
struct fp8_value_tables {
    float e4m3[256];
    float e5m2[256];
};
const fp8_value_tables &fp8_tables();

const kernels &scalar_kernels();
// nullptr when this build has no AVX2 translation unit (non-x86).
const kernels *avx2_kernels();
// The AVX2 set with AVX-512 dots and axpys of every cache type's rows, the same bits; nullptr where the build
// has no AVX-512 translation unit. Call it only where the CPU has AVX-512 F and VL (it runs their instructions).
const kernels *avx512_kernels();
// avx2_kernels() when the CPU supports AVX2, FMA and F16C and STRATA_FORCE_SCALAR is unset, "" or "0" (avx512_kernels()
// when it also supports AVX-512 F and VL and STRATA_NO_AVX512 is unset, "" or "0"); else scalar.
// Reads the environment on every call (devices call it once, in create()).
const kernels &select_kernels();

} // namespace strata::cpu
