// AVX2+FMA(+F16C) versions of the hot loops. Built with -mavx2 -mfma -mf16c; only called after select_kernels()
// checked the CPU. Calls no inline function shared with other translation units (they could be linked from here;
// kv_loads_avx2.hpp's have internal linkage).
// Results match the scalar set within float rounding (different summation order, FMA contraction, and a vector
// exp accurate to about 2 ulp).
#include "cpu_kernels.hpp"
#include "kv_loads_avx2.hpp"

#include <immintrin.h>

#include <strata/avx2_sum.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace strata::cpu {
namespace {

double hsum(__m256d v) {
    __m128d lo = _mm256_castpd256_pd128(v);
    lo = _mm_add_pd(lo, _mm256_extractf128_pd(v, 1));
    lo = _mm_add_sd(lo, _mm_unpackhi_pd(lo, lo));
    return _mm_cvtsd_f64(lo);
}

// Adds the 8 floats of v to acc as doubles.
__m256d add_as_double(__m256d acc, __m256 v) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// exp(x) for 8 floats: x = k*ln2 + r with |r| <= ln2/2, exp(r) by the Cephes minimax polynomial (~1 ulp), scaled by
// 2^k through the exponent bits. Inputs below -87.33 give 0 (so -inf masks work), above 88.37 give +inf.
__m256 exp_ps(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f);
    const __m256 lo = _mm256_set1_ps(-87.3365447504f);
    const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    const __m256 overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    // min/max return their second operand when one is NaN: with x second in both, a NaN stays a NaN (and comes out
    // of the polynomial as one) instead of being clamped to a finite value.
    x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));

    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);

    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));

    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    result = _mm256_andnot_ps(underflow, result);
    return _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), overflow);
}

// The dots of the float, f16, bf16 and FP8 rows: four accumulators over 32-element steps, then 8-element steps into the
// first, the fixed reduction, the scalar tail. dot_body computes R rows at once, each with exactly those steps (its
// own accumulators), so the multi-row kernels give every row the single-row kernel's bits; the single-row kernels are
// dot_body<1>.
__m256 load_f32(const float *p) { return _mm256_loadu_ps(p); }
float f32_scalar(float v) { return v; }

template <class T, __m256 (*Load)(const T *), float (*Scalar)(T), int R>
inline __attribute__((always_inline)) void dot_body(const float *a, const T *b, int64_t stride, int64_t n, float *out) {
    __m256 acc[R][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j)
                acc[r][j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), Load(b + r * stride + i + 8 * j), acc[r][j]);
    for (; i + 8 <= n; i += 8)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), Load(b + r * stride + i), acc[r][0]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        float sum = strata::plugin::avx2_sum(
            _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3])));
        for (int64_t t = i; t < n; ++t) sum += a[t] * Scalar(b[r * stride + t]);
        out[r] = sum;
    }
}

template <class T, __m256 (*Load)(const T *), float (*Scalar)(T)> float dot_one(const float *a, const T *b, int64_t n) {
    float out;
    dot_body<T, Load, Scalar, 1>(a, b, 0, n, &out);
    return out;
}

// Two rows at a time (their eight accumulators and the activations' loads fit the sixteen registers), the last alone.
template <class T, __m256 (*Load)(const T *), float (*Scalar)(T)>
void dot_rows_of(const float *a, const T *b, int64_t stride, int32_t n_rows, int64_t n, float *out) {
    int32_t r = 0;
    for (; r + 2 <= n_rows; r += 2) dot_body<T, Load, Scalar, 2>(a, b + r * stride, stride, n, out + r);
    if (r < n_rows) dot_body<T, Load, Scalar, 1>(a, b + r * stride, stride, n, out + r);
}

// y[i] += a * x[i]: one FMA per element from y as it is; axpy_rows_of applies rows in order with y kept in a
// register between them (the same roundings as one call per row).
template <class T, __m256 (*Load)(const T *), float (*Scalar)(T)>
void axpy_rows_of(const float *w, const T *x, int64_t stride, int32_t n_rows, float *y, int64_t n) {
    int64_t i = 0;
    if (n_rows == 4) {
        // Four rows: their weights broadcast once.
        const __m256 w0 = _mm256_set1_ps(w[0]), w1 = _mm256_set1_ps(w[1]), w2 = _mm256_set1_ps(w[2]),
                     w3 = _mm256_set1_ps(w[3]);
        for (; i + 8 <= n; i += 8) {
            __m256 acc = _mm256_fmadd_ps(w0, Load(x + i), _mm256_loadu_ps(y + i));
            acc = _mm256_fmadd_ps(w1, Load(x + stride + i), acc);
            acc = _mm256_fmadd_ps(w2, Load(x + 2 * stride + i), acc);
            _mm256_storeu_ps(y + i, _mm256_fmadd_ps(w3, Load(x + 3 * stride + i), acc));
        }
    }
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_loadu_ps(y + i);
        for (int32_t r = 0; r < n_rows; ++r) acc = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), Load(x + r * stride + i), acc);
        _mm256_storeu_ps(y + i, acc);
    }
    for (; i < n; ++i)
        for (int32_t r = 0; r < n_rows; ++r) y[i] += w[r] * Scalar(x[r * stride + i]);
}

template <class T, __m256 (*Load)(const T *), float (*Scalar)(T)> void axpy_one(float a, const T *x, float *y, int64_t n) {
    axpy_rows_of<T, Load, Scalar>(&a, x, 0, 1, y, n);
}

float dot(const float *a, const float *b, int64_t n) { return dot_one<float, load_f32, f32_scalar>(a, b, n); }

void axpy(float a, const float *x, float *y, int64_t n) { axpy_one<float, load_f32, f32_scalar>(a, x, y, n); }

void scale(float *x, float s, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; ++i) x[i] *= s;
}

double sum_squares(const float *x, int64_t n) {
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i);
        const __m256 v1 = _mm256_loadu_ps(x + i + 8);
        acc0 = add_as_double(acc0, _mm256_mul_ps(v0, v0));
        acc1 = add_as_double(acc1, _mm256_mul_ps(v1, v1));
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc0 = add_as_double(acc0, _mm256_mul_ps(v, v));
    }
    double sum = hsum(_mm256_add_pd(acc0, acc1));
    for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    return sum;
}

void scale_mul(const float *x, float s, const float *w, float *out, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; ++i) out[i] = (x[i] * s) * w[i];
}

// silu(g) * u for 8 lanes, silu(v) = v / (1 + exp(-v)).
__m256 swiglu8(__m256 g, __m256 u) {
    const __m256 exp_neg = exp_ps(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_neg)), u);
}

void swiglu(const float *g, const float *u, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i == n) return;
    // The tail goes through the same vector code in a zero-padded register, not std::exp: an element's bits then
    // depend only on its inputs, never on where it sits. The op runs over a whole batch's n_tokens x n_ff elements,
    // so a token's elements fall in the tail or not depending on the batch, and batching must not change a bit.
    const size_t rest = static_cast<size_t>(n - i);
    alignas(32) float gt[8] = {}, ut[8] = {}, ot[8];
    std::memcpy(gt, g + i, rest * sizeof(float));
    std::memcpy(ut, u + i, rest * sizeof(float));
    _mm256_store_ps(ot, swiglu8(_mm256_load_ps(gt), _mm256_load_ps(ut)));
    std::memcpy(out + i, ot, rest * sizeof(float));
}

void add(const float *a, const float *b, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) out[i] = a[i] + b[i];
}

// The largest element, or NaN when any element is NaN (a NaN score must reach the logits, not be skipped).
float max(const float *x, int64_t n) {
    float m = x[0];
    int64_t i = 0;
    bool nan = false;
    if (n >= 8) {
        __m256 vm = _mm256_loadu_ps(x);
        __m256 unordered = _mm256_cmp_ps(vm, vm, _CMP_UNORD_Q);
        for (i = 8; i + 8 <= n; i += 8) {
            const __m256 v = _mm256_loadu_ps(x + i);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            vm = _mm256_max_ps(vm, v);
        }
        nan = _mm256_movemask_ps(unordered) != 0;
        __m128 lo = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
        lo = _mm_max_ps(lo, _mm_movehl_ps(lo, lo));
        lo = _mm_max_ss(lo, _mm_movehdup_ps(lo));
        m = _mm_cvtss_f32(lo);
    }
    for (; i < n; ++i) {
        nan |= x[i] != x[i];
        m = x[i] > m ? x[i] : m;
    }
    return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

double exp_sub_sum(const float *x, float m, float *out, int64_t n) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(out + i, e);
        acc = add_as_double(acc, e);
    }
    double sum = hsum(acc);
    for (; i < n; ++i) {
        const float e = std::exp(x[i] - m);
        out[i] = e;
        sum += static_cast<double>(e);
    }
    return sum;
}

// 8 halves or bfloats to 8 floats (exact).
__m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }
__m256 load_bf16(const uint16_t *p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
float f16_scalar(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }
float bf16_scalar(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// dot's and axpy's steps exactly, over rows widened on load: the same bits as dot and axpy over the rows widened to
// float first.
template <__m256 (*Load)(const uint16_t *), float (*Scalar)(uint16_t)>
float dot_16(const float *a, const uint16_t *b, int64_t n) {
    return dot_one<uint16_t, Load, Scalar>(a, b, n);
}
template <__m256 (*Load)(const uint16_t *), float (*Scalar)(uint16_t)>
void axpy_16(float a, const uint16_t *x, float *y, int64_t n) {
    axpy_one<uint16_t, Load, Scalar>(a, x, y, n);
}

float e4m3_scalar(uint8_t q) { return fp8_tables().e4m3[q]; }
float e5m2_scalar(uint8_t q) { return fp8_tables().e5m2[q]; }

// dot's and axpy's steps exactly over FP8 rows widened on load (kv_loads_avx2.hpp), one row or several: the same bits
// as dot and axpy over the rows widened to float first.
template <__m256 (*Load)(const uint8_t *), float (*Scalar)(uint8_t)>
float dot_fp8(const float *a, const uint8_t *b, int64_t n) {
    return dot_one<uint8_t, Load, Scalar>(a, b, n);
}
template <__m256 (*Load)(const uint8_t *), float (*Scalar)(uint8_t)>
void axpy_fp8(float a, const uint8_t *x, float *y, int64_t n) {
    axpy_one<uint8_t, Load, Scalar>(a, x, y, n);
}

// dot's steps exactly (its 32-value iteration is one group), over R rows of groups at once, each with its own four
// accumulators: every row gets the one-row kernel's bits.
template <int R>
inline __attribute__((always_inline)) void dot_q8_0_body(const float *a, const kv_q8_0::group *b, int64_t stride,
                                                         int64_t n, float *out) {
    __m256 acc[R][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
    for (int64_t i = 0; i + 32 <= n; i += 32)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const kv_q8_0::group &g = b[r * stride + i / 32];
            const __m256 d = _mm256_set1_ps(q8_scale(g));
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j)
                acc[r][j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), load_q8(g.q + 8 * j, d), acc[r][j]);
        }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
        out[r] = strata::plugin::avx2_sum(
            _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3])));
}

float dot_q8_0(const float *a, const kv_q8_0::group *b, int64_t n) {
    float out;
    dot_q8_0_body<1>(a, b, 0, n, &out);
    return out;
}

// Two rows at a time, as dot_rows_of.
void dot_q8_0_rows(const float *a, const kv_q8_0::group *b, int64_t stride, int32_t n_rows, int64_t n, float *out) {
    int32_t r = 0;
    for (; r + 2 <= n_rows; r += 2) dot_q8_0_body<2>(a, b + r * stride, stride, n, out + r);
    if (r < n_rows) dot_q8_0_body<1>(a, b + r * stride, stride, n, out + r);
}

// axpy's steps exactly, over the groups' values: a group's 32 outputs stay in four registers while every row's group
// is applied to them in row order (the roundings of one call per row).
void axpy_q8_0_rows(const float *w, const kv_q8_0::group *x, int64_t stride, int32_t n_rows, float *y, int64_t n) {
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        __m256 acc[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[j] = _mm256_loadu_ps(y + i + 8 * j);
        for (int32_t r = 0; r < n_rows; ++r) {
            const kv_q8_0::group &g = x[r * stride + i / 32];
            const __m256 d = _mm256_set1_ps(q8_scale(g)), wr = _mm256_set1_ps(w[r]);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) acc[j] = _mm256_fmadd_ps(wr, load_q8(g.q + 8 * j, d), acc[j]);
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm256_storeu_ps(y + i + 8 * j, acc[j]);
    }
}

void axpy_q8_0(float a, const kv_q8_0::group *x, float *y, int64_t n) { axpy_q8_0_rows(&a, x, 0, 1, y, n); }

// The rows' values, widened by the loads the dots use (the tail by the scalar reads).
template <class T, __m256 (*Load)(const T *), float (*Scalar)(T)> void widen(const T *x, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, Load(x + i));
    for (; i < n; ++i) out[i] = Scalar(x[i]);
}
void widen_q8_0(const kv_q8_0::group *x, float *out, int64_t n) {
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        const kv_q8_0::group &g = x[i / 32];
        const __m256 d = _mm256_set1_ps(q8_scale(g));
        for (int j = 0; j < 32; j += 8) _mm256_storeu_ps(out + i + j, load_q8(g.q + j, d));
    }
}

void to_f16(const float *x, uint16_t *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i)
        out[i] = static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x[i]), _MM_FROUND_TO_NEAREST_INT), 0));
}

// ggml's GGML_FP32_TO_BF16: round to nearest even; a NaN keeps its top bits and is made quiet.
uint16_t bf16_of(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);
    return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

void to_bf16(const float *x, uint16_t *out, int64_t n) {
    int64_t i = 0;
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(64);
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        const __m256i rounded = _mm256_srli_epi32(
            _mm256_add_epi32(v, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(v, 16), one))), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
        const __m256i kept = _mm256_or_si256(_mm256_srli_epi32(v, 16), quiet);
        const __m256i bits = _mm256_and_si256(_mm256_blendv_epi8(rounded, kept, nan), _mm256_set1_epi32(0xffff));
        // 8 x 32-bit -> 8 x 16-bit (values fit: no saturation), lanes back in order.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), _mm256_castsi256_si128(packed));
    }
    for (; i < n; ++i) out[i] = bf16_of(x[i]);
}

constexpr kernels avx2_set{"avx2+fma",
                           dot,
                           axpy,
                           scale,
                           sum_squares,
                           scale_mul,
                           swiglu,
                           add,
                           max,
                           exp_sub_sum,
                           dot_16<load_f16, f16_scalar>,
                           dot_16<load_bf16, bf16_scalar>,
                           axpy_16<load_f16, f16_scalar>,
                           axpy_16<load_bf16, bf16_scalar>,
                           to_f16,
                           to_bf16,
                           dot_fp8<load_e4m3, e4m3_scalar>,
                           dot_fp8<load_e5m2, e5m2_scalar>,
                           axpy_fp8<load_e4m3, e4m3_scalar>,
                           axpy_fp8<load_e5m2, e5m2_scalar>,
                           dot_q8_0,
                           axpy_q8_0,
                           dot_rows_of<float, load_f32, f32_scalar>,
                           dot_rows_of<uint16_t, load_f16, f16_scalar>,
                           dot_rows_of<uint16_t, load_bf16, bf16_scalar>,
                           axpy_rows_of<float, load_f32, f32_scalar>,
                           axpy_rows_of<uint16_t, load_f16, f16_scalar>,
                           axpy_rows_of<uint16_t, load_bf16, bf16_scalar>,
                           dot_rows_of<uint8_t, load_e4m3, e4m3_scalar>,
                           dot_rows_of<uint8_t, load_e5m2, e5m2_scalar>,
                           dot_q8_0_rows,
                           axpy_rows_of<uint8_t, load_e4m3, e4m3_scalar>,
                           axpy_rows_of<uint8_t, load_e5m2, e5m2_scalar>,
                           axpy_q8_0_rows,
                           widen<uint16_t, load_f16, f16_scalar>,
                           widen<uint16_t, load_bf16, bf16_scalar>,
                           widen<uint8_t, load_e4m3, e4m3_scalar>,
                           widen<uint8_t, load_e5m2, e5m2_scalar>,
                           widen_q8_0};

} // namespace

const kernels *avx2_kernels() { return &avx2_set; }

} // namespace strata::cpu
