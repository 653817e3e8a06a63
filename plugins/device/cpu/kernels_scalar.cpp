// Portable versions of the hot loops; the reference the AVX2 set is tested against.
#include "cpu_kernels.hpp"

#include <strata/float16.hpp>
#include <strata/float8.hpp>

#include <cmath>

namespace strata::cpu {
namespace {

float dot(const float *a, const float *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

void axpy(float a, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void scale(float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

double sum_squares(const float *x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    return sum;
}

void scale_mul(const float *x, float s, const float *w, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * s) * w[i];
}

void swiglu(const float *g, const float *u, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = g[i];
        out[i] = v / (1.0f + std::exp(-v)) * u[i];
    }
}

void add(const float *a, const float *b, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// The largest element, or NaN when any element is NaN (a NaN score must reach the logits, not be skipped).
float max(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; ++i) m = x[i] > m || x[i] != x[i] ? x[i] : m;
    return m;
}

double exp_sub_sum(const float *x, float m, float *out, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - m);
        out[i] = e;
        sum += static_cast<double>(e);
    }
    return sum;
}

using strata::float16::bf16_to_fp32;
using strata::float16::fp16_to_fp32;

float dot_f16(const float *a, const uint16_t *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * fp16_to_fp32(b[i]);
    return sum;
}

float dot_bf16(const float *a, const uint16_t *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * bf16_to_fp32(b[i]);
    return sum;
}

void axpy_f16(float a, const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

void axpy_bf16(float a, const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * bf16_to_fp32(x[i]);
}

void to_f16(const float *x, uint16_t *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = strata::float16::fp32_to_fp16(x[i]);
}

void to_bf16(const float *x, uint16_t *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = strata::float16::fp32_to_bf16(x[i]);
}

// The FP8 codes' values from fp8_tables() (defined below, outside this namespace).
const float *e4m3_values();
const float *e5m2_values();

template <const float *(*Values)()> float dot_fp8(const float *a, const uint8_t *b, int64_t n) {
    const float *table = Values();
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * table[b[i]];
    return sum;
}

template <const float *(*Values)()> void axpy_fp8(float a, const uint8_t *x, float *y, int64_t n) {
    const float *table = Values();
    for (int64_t i = 0; i < n; ++i) y[i] += a * table[x[i]];
}

float dot_q8_0(const float *a, const kv_q8_0::group *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * kv_q8_0::value(b[i / 32], static_cast<int>(i % 32));
    return sum;
}

void axpy_q8_0(float a, const kv_q8_0::group *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * kv_q8_0::value(x[i / 32], static_cast<int>(i % 32));
}

void widen_f16(const uint16_t *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(x[i]);
}
void widen_bf16(const uint16_t *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_fp32(x[i]);
}
template <const float *(*Values)()> void widen_fp8(const uint8_t *x, float *out, int64_t n) {
    const float *table = Values();
    for (int64_t i = 0; i < n; ++i) out[i] = table[x[i]];
}
void widen_q8_0(const kv_q8_0::group *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = kv_q8_0::value(x[i / 32], static_cast<int>(i % 32));
}

// The multi-row forms: the single-row kernels, row after row (the same bits by construction).
template <class T, float (*Dot)(const float *, const T *, int64_t)>
void dot_rows_of(const float *a, const T *b, int64_t stride, int32_t n_rows, int64_t n, float *out) {
    for (int32_t r = 0; r < n_rows; ++r) out[r] = Dot(a, b + r * stride, n);
}
template <class T, void (*Axpy)(float, const T *, float *, int64_t)>
void axpy_rows_of(const float *w, const T *x, int64_t stride, int32_t n_rows, float *y, int64_t n) {
    for (int32_t r = 0; r < n_rows; ++r) Axpy(w[r], x + r * stride, y, n);
}

constexpr kernels scalar_set{"scalar", dot,      axpy,      scale,     sum_squares, scale_mul, swiglu,  add,
                             max,      exp_sub_sum, dot_f16, dot_bf16, axpy_f16,   axpy_bf16, to_f16,  to_bf16,
                             dot_fp8<e4m3_values>, dot_fp8<e5m2_values>, axpy_fp8<e4m3_values>,
                             axpy_fp8<e5m2_values>, dot_q8_0, axpy_q8_0,
                             dot_rows_of<float, dot>, dot_rows_of<uint16_t, dot_f16>,
                             dot_rows_of<uint16_t, dot_bf16>, axpy_rows_of<float, axpy>,
                             axpy_rows_of<uint16_t, axpy_f16>, axpy_rows_of<uint16_t, axpy_bf16>,
                             dot_rows_of<uint8_t, dot_fp8<e4m3_values>>, dot_rows_of<uint8_t, dot_fp8<e5m2_values>>,
                             dot_rows_of<kv_q8_0::group, dot_q8_0>, axpy_rows_of<uint8_t, axpy_fp8<e4m3_values>>,
                             axpy_rows_of<uint8_t, axpy_fp8<e5m2_values>>, axpy_rows_of<kv_q8_0::group, axpy_q8_0>,
                             widen_f16, widen_bf16, widen_fp8<e4m3_values>, widen_fp8<e5m2_values>, widen_q8_0};

const float *e4m3_values() { return fp8_tables().e4m3; }
const float *e5m2_values() { return fp8_tables().e5m2; }

} // namespace

const kernels &scalar_kernels() { return scalar_set; }

const fp8_value_tables &fp8_tables() {
    static const fp8_value_tables tables = [] {
        fp8_value_tables t{};
        for (int q = 0; q < 256; ++q) {
            t.e4m3[q] = strata::float8::e4m3_to_fp32(static_cast<uint8_t>(q));
            t.e5m2[q] = strata::float8::e5m2_to_fp32(static_cast<uint8_t>(q));
        }
        return t;
    }();
    return tables;
}

} // namespace strata::cpu
