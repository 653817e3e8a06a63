// AVX-512 forms of attention's inner loops — the dots and axpys of every cache type's rows, one row or several —
// with the AVX2 set's bits, half its instructions: the AVX2 dot keeps four 8-lane accumulators over 32-element steps,
// and here one 16-lane register holds the first two and another the last two, each lane taking the same FMAs in the
// same order; the 8-element steps go into the first accumulator's lanes alone (a masked FMA); the reduction and the
// scalar tail are the AVX2 set's. An axpy is elementwise, so 16 lanes at a time round as 8 do. The rest of the set is
// the AVX2 set's. Built with -mavx512f -mavx512vl on top of the AVX2 flags; chosen at run time (select_kernels).
#include "cpu_kernels.hpp"

#include <strata/avx2_sum.hpp>

// GCC 12's avx512fintrin.h makes its "undefined" registers by self-initialisation (`__m512 __Y = __Y;`), which
// -Wuninitialized reports at every inlined widening intrinsic of this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kv_loads_avx2.hpp"

#include <cstring>

namespace strata::cpu {
namespace {

// A row type's three loads: 16 values, 8 values, one value, each widened to float exactly.
struct f32_rows {
    static __m512 wide(const float *p) { return _mm512_loadu_ps(p); }
    static __m256 narrow(const float *p) { return _mm256_loadu_ps(p); }
    static float one(float v) { return v; }
};
struct f16_rows {
    static __m512 wide(const uint16_t *p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    }
    static __m256 narrow(const uint16_t *p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    static float one(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }
};
struct bf16_rows {
    static __m512 wide(const uint16_t *p) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    static __m256 narrow(const uint16_t *p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    static float one(uint16_t h) {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
};

// FP8 rows (kv_loads_avx2.hpp's widening, 16 values at a time: an e4m3 NaN code reads as +-480 before the blend,
// a value no finite code has).
struct e5m2_rows {
    static __m512 wide(const uint8_t *p) {
        const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm512_cvtph_ps(_mm256_slli_epi16(w, 8));
    }
    static __m256 narrow(const uint8_t *p) { return load_e5m2(p); }
    static float one(uint8_t q) { return fp8_tables().e5m2[q]; }
};
struct e4m3_rows {
    static __m512 wide(const uint8_t *p) {
        const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        const __m256i magnitude = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
        const __m256i half = _mm256_or_si256(_mm256_slli_epi16(magnitude, 7),
                                             _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
        const __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(half), _mm512_set1_ps(256.0f));
        const __mmask16 nan = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(480.0f), _CMP_EQ_OQ);
        return _mm512_mask_blend_ps(nan, v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000))); // the quiet NaN
    }
    static __m256 narrow(const uint8_t *p) { return load_e4m3(p); }
    static float one(uint8_t q) { return fp8_tables().e4m3[q]; }
};

__m256 upper_half(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// The AVX2 dot's reduction of four rows at once, lane for lane in its order: row r's sum is avx2_sum((acc0 + acc1) +
// (acc2 + acc3)) with acc0, acc1 the halves of lo[r] and acc2, acc3 those of hi[r]; here the four rows' 8-lane sums
// sit in the 128-bit lanes of two registers and each of avx2_sum's steps (lane i + lane i + 4, then the pairs, then
// the last two) is one instruction for all four.
inline __attribute__((always_inline)) void reduce4(const __m512 *lo, const __m512 *hi, float *sums) {
    auto halves = [](__m512 a, __m512 b) { // [a's 8-lane halves added, b's]
        return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    };
    const __m512 t01 = _mm512_add_ps(halves(lo[0], lo[1]), halves(hi[0], hi[1]));
    const __m512 t23 = _mm512_add_ps(halves(lo[2], lo[3]), halves(hi[2], hi[3]));
    // 128-bit lane r: row r's lanes 0-3 plus its lanes 4-7.
    const __m512 s4 = _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, 0x88), _mm512_shuffle_f32x4(t01, t23, 0xdd));
    const __m512 s2 = _mm512_add_ps(s4, _mm512_permute_ps(s4, 0xee));
    const __m512 s1 = _mm512_add_ps(s2, _mm512_movehdup_ps(s2));
    const __m512 first = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s1);
    _mm_storeu_ps(sums, _mm512_castps512_ps128(first));
}

// Row r's sum from lo[r] and hi[r] as the AVX2 dot reduces its four accumulators, four rows at a time where R is 4.
template <int R> inline __attribute__((always_inline)) void reduce_rows(const __m512 *lo, const __m512 *hi, float *sums) {
    if constexpr (R == 4) {
        reduce4(lo, hi, sums);
    } else {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m256 acc0 = _mm512_castps512_ps256(lo[r]), acc1 = upper_half(lo[r]);
            const __m256 acc2 = _mm512_castps512_ps256(hi[r]), acc3 = upper_half(hi[r]);
            sums[r] = strata::plugin::avx2_sum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
        }
    }
}

// R rows at once, each with its own two registers (the AVX2 dot_body's acc[r][0..1] and acc[r][2..3]).
template <class T, class Rows, int R>
inline __attribute__((always_inline)) void dot_body(const float *a, const T *b, int64_t stride, int64_t n, float *out) {
    __m512 lo[R], hi[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a_lo = _mm512_loadu_ps(a + i), a_hi = _mm512_loadu_ps(a + i + 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            lo[r] = _mm512_fmadd_ps(a_lo, Rows::wide(b + r * stride + i), lo[r]);
            hi[r] = _mm512_fmadd_ps(a_hi, Rows::wide(b + r * stride + i + 16), hi[r]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m512 a8 = _mm512_zextps256_ps512(_mm256_loadu_ps(a + i));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
            lo[r] = _mm512_mask3_fmadd_ps(a8, _mm512_zextps256_ps512(Rows::narrow(b + r * stride + i)), lo[r], 0x00ff);
    }
    float sums[R];
    reduce_rows<R>(lo, hi, sums);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        float sum = sums[r];
        for (int64_t t = i; t < n; ++t) sum += a[t] * Rows::one(b[r * stride + t]);
        out[r] = sum;
    }
}

template <class T, class Rows> float dot_one(const float *a, const T *b, int64_t n) {
    float out;
    dot_body<T, Rows, 1>(a, b, 0, n, &out);
    return out;
}

// Up to four rows at a time (their eight registers and the activations' two fit the 32).
template <class T, class Rows>
void dot_rows_of(const float *a, const T *b, int64_t stride, int32_t n_rows, int64_t n, float *out) {
    int32_t r = 0;
    for (; r + 4 <= n_rows; r += 4) dot_body<T, Rows, 4>(a, b + r * stride, stride, n, out + r);
    switch (n_rows - r) {
    case 3: dot_body<T, Rows, 3>(a, b + r * stride, stride, n, out + r); break;
    case 2: dot_body<T, Rows, 2>(a, b + r * stride, stride, n, out + r); break;
    case 1: dot_body<T, Rows, 1>(a, b + r * stride, stride, n, out + r); break;
    default: break;
    }
}

// y[i] += w[r] * row r[i] for r in order, y in a register between rows: 16 elements a step, then 8, then the AVX2
// set's scalar tail.
template <class T, class Rows>
void axpy_rows_of(const float *w, const T *x, int64_t stride, int32_t n_rows, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 acc = _mm512_loadu_ps(y + i);
        for (int32_t r = 0; r < n_rows; ++r)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(w[r]), Rows::wide(x + r * stride + i), acc);
        _mm512_storeu_ps(y + i, acc);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_loadu_ps(y + i);
        for (int32_t r = 0; r < n_rows; ++r)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), Rows::narrow(x + r * stride + i), acc);
        _mm256_storeu_ps(y + i, acc);
    }
    for (; i < n; ++i)
        for (int32_t r = 0; r < n_rows; ++r) y[i] += w[r] * Rows::one(x[r * stride + i]);
}

template <class T, class Rows> void axpy_one(float a, const T *x, float *y, int64_t n) {
    axpy_rows_of<T, Rows>(&a, x, 0, 1, y, n);
}

// 16 of a q8_0 group's values (q[i0 .. i0 + 16) times its scale d), exactly, as load_q8.
__m512 wide_q8(const int8_t *q, __m512 d) {
    const __m512i wide = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(wide), d);
}

// The AVX2 dot_q8_0's steps: a group's first 16 values go into lo (the AVX2 acc0 and acc1), the last 16 into hi (acc2
// and acc3); R rows at once, then dot_body's reduction.
template <int R>
inline __attribute__((always_inline)) void dot_q8_0_body(const float *a, const kv_q8_0::group *b, int64_t stride,
                                                         int64_t n, float *out) {
    __m512 lo[R], hi[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        const __m512 a_lo = _mm512_loadu_ps(a + i), a_hi = _mm512_loadu_ps(a + i + 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const kv_q8_0::group &g = b[r * stride + i / 32];
            const __m512 d = _mm512_set1_ps(q8_scale(g));
            lo[r] = _mm512_fmadd_ps(a_lo, wide_q8(g.q, d), lo[r]);
            hi[r] = _mm512_fmadd_ps(a_hi, wide_q8(g.q + 16, d), hi[r]);
        }
    }
    reduce_rows<R>(lo, hi, out);
}

float dot_q8_0(const float *a, const kv_q8_0::group *b, int64_t n) {
    float out;
    dot_q8_0_body<1>(a, b, 0, n, &out);
    return out;
}

void dot_q8_0_rows(const float *a, const kv_q8_0::group *b, int64_t stride, int32_t n_rows, int64_t n, float *out) {
    int32_t r = 0;
    for (; r + 4 <= n_rows; r += 4) dot_q8_0_body<4>(a, b + r * stride, stride, n, out + r);
    switch (n_rows - r) {
    case 3: dot_q8_0_body<3>(a, b + r * stride, stride, n, out + r); break;
    case 2: dot_q8_0_body<2>(a, b + r * stride, stride, n, out + r); break;
    case 1: dot_q8_0_body<1>(a, b + r * stride, stride, n, out + r); break;
    default: break;
    }
}

// A group's 32 outputs in two registers while every row's group is applied in row order.
void axpy_q8_0_rows(const float *w, const kv_q8_0::group *x, int64_t stride, int32_t n_rows, float *y, int64_t n) {
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        __m512 lo = _mm512_loadu_ps(y + i), hi = _mm512_loadu_ps(y + i + 16);
        for (int32_t r = 0; r < n_rows; ++r) {
            const kv_q8_0::group &g = x[r * stride + i / 32];
            const __m512 d = _mm512_set1_ps(q8_scale(g)), wr = _mm512_set1_ps(w[r]);
            lo = _mm512_fmadd_ps(wr, wide_q8(g.q, d), lo);
            hi = _mm512_fmadd_ps(wr, wide_q8(g.q + 16, d), hi);
        }
        _mm512_storeu_ps(y + i, lo);
        _mm512_storeu_ps(y + i + 16, hi);
    }
}

void axpy_q8_0(float a, const kv_q8_0::group *x, float *y, int64_t n) { axpy_q8_0_rows(&a, x, 0, 1, y, n); }

// The rows' values 16, then 8 at a time, then one by one.
template <class T, class Rows> void widen(const T *x, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, Rows::wide(x + i));
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, Rows::narrow(x + i));
    for (; i < n; ++i) out[i] = Rows::one(x[i]);
}
void widen_q8_0(const kv_q8_0::group *x, float *out, int64_t n) {
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        const kv_q8_0::group &g = x[i / 32];
        const __m512 d = _mm512_set1_ps(q8_scale(g));
        _mm512_storeu_ps(out + i, wide_q8(g.q, d));
        _mm512_storeu_ps(out + i + 16, wide_q8(g.q + 16, d));
    }
}

kernels make_set(const kernels &avx2) {
    kernels k = avx2;
    k.name = "avx512+fma";
    k.dot = dot_one<float, f32_rows>;
    k.axpy = axpy_one<float, f32_rows>;
    k.dot_f16 = dot_one<uint16_t, f16_rows>;
    k.dot_bf16 = dot_one<uint16_t, bf16_rows>;
    k.axpy_f16 = axpy_one<uint16_t, f16_rows>;
    k.axpy_bf16 = axpy_one<uint16_t, bf16_rows>;
    k.dot_rows = dot_rows_of<float, f32_rows>;
    k.dot_f16_rows = dot_rows_of<uint16_t, f16_rows>;
    k.dot_bf16_rows = dot_rows_of<uint16_t, bf16_rows>;
    k.axpy_rows = axpy_rows_of<float, f32_rows>;
    k.axpy_f16_rows = axpy_rows_of<uint16_t, f16_rows>;
    k.axpy_bf16_rows = axpy_rows_of<uint16_t, bf16_rows>;
    k.dot_e4m3 = dot_one<uint8_t, e4m3_rows>;
    k.dot_e5m2 = dot_one<uint8_t, e5m2_rows>;
    k.axpy_e4m3 = axpy_one<uint8_t, e4m3_rows>;
    k.axpy_e5m2 = axpy_one<uint8_t, e5m2_rows>;
    k.dot_q8_0 = dot_q8_0;
    k.axpy_q8_0 = axpy_q8_0;
    k.dot_e4m3_rows = dot_rows_of<uint8_t, e4m3_rows>;
    k.dot_e5m2_rows = dot_rows_of<uint8_t, e5m2_rows>;
    k.dot_q8_0_rows = dot_q8_0_rows;
    k.axpy_e4m3_rows = axpy_rows_of<uint8_t, e4m3_rows>;
    k.axpy_e5m2_rows = axpy_rows_of<uint8_t, e5m2_rows>;
    k.axpy_q8_0_rows = axpy_q8_0_rows;
    k.widen_f16 = widen<uint16_t, f16_rows>;
    k.widen_bf16 = widen<uint16_t, bf16_rows>;
    k.widen_e4m3 = widen<uint8_t, e4m3_rows>;
    k.widen_e5m2 = widen<uint8_t, e5m2_rows>;
    k.widen_q8_0 = widen_q8_0;
    return k;
}

} // namespace

const kernels *avx512_kernels() {
    const kernels *avx2 = avx2_kernels();
    if (avx2 == nullptr) return nullptr;
    static const kernels set = make_set(*avx2);
    return &set;
}

} // namespace strata::cpu
