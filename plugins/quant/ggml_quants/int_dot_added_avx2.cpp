// AVX2 kernels of the formats added after Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS). Compiled with
// -mavx2 -mfma -mf16c and, like dot_avx2.cpp, calling only intrinsics, functions with internal linkage and the
// plugin's scalar (non-inline) functions.
//
// Integer dot: each 32-element chunk of a weight block is decoded into one register of byte values; products with
// the activation bytes go through _mm256_maddubs_epi16 (unsigned x signed; signed formats feed |w| and a * sign(w)),
// then _mm256_madd_epi16 against the chunk's two 16-element scales (ones, for the 32-element formats) into int32 lanes. No pair saturates: |value| <=
// 127 only for IQ4's grid (2 * 127 * 127 < 32768), every other format stays below 64. The integer sums are exact, so
// each block's contribution is k_block_ints.hpp's float expression on the same integers as the scalar kernels.
#include "ggml_quants.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "int_dot_added_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif
#include <immintrin.h>

#include "avx2_block_helpers.hpp"
#include "k_block_ints.hpp"
#include "k_chunks_avx2.hpp"
#include "small_blocks_avx2.hpp"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

namespace strata::quants {
namespace {

// Chunk C of a block against N activation vectors: isum[i] += the chunk's scaled pair sums, in k_block_ints.hpp's
// lanes.
template <class F, int C, size_t... I>
STRATA_KERNEL_INLINE void chunk_step(const typename F::block &w, const k_block_vectors &s, const block_q8_k *const *a,
                                     int64_t b, __m256i *isum, std::index_sequence<I...>) {
    const __m256i v = chunk(w, C);
    const __m256i sc = chunk_scales<C>(s);
    ((isum[I] = _mm256_add_epi32(
          isum[I], _mm256_madd_epi16(pair_products<F::signed_values>(v, load32(a[I][b].qs + 32 * C)), sc))),
     ...);
    // Each sum in a register here, chunk after chunk (keep_in_register): reassociated, the products spilled.
    (keep_in_register(isum[I]), ...);
}

// The eight chunks unrolled, so every shift, mask and shuffle control is a constant.
template <class F, size_t... I, int... C>
STRATA_KERNEL_INLINE void block_chunks(const typename F::block &w, const k_block_vectors &s, const block_q8_k *const *a,
                                       int64_t b, __m256i *isum, std::index_sequence<I...> vectors,
                                       std::integer_sequence<int, C...>) {
    (chunk_step<F, C>(w, s, a, b, isum, vectors), ...);
}

// ---- 256-element formats: N = sizeof...(I) activation vectors per pass over the row, k_block_ints.hpp's lanes ----
template <class F, size_t... I>
STRATA_KERNEL_INLINE void dot_k_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                  float *out, std::index_sequence<I...>) {
    const block_q8_k *const a[] = {reinterpret_cast<const block_q8_k *>(xq + I * stride)...};
    __m256 lanes[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        k_block_vectors s;
        block_vectors<F>(w[b], s);
        __m256i isum[] = {(static_cast<void>(I), _mm256_setzero_si256())...};
        block_chunks<F>(w[b], s, a, b, isum, std::index_sequence<I...>{}, std::make_integer_sequence<int, 8>{});
        ((lanes[I] = block_fma<F>(lanes[I], isum[I], s, a[I][b])), ...);
    }
    ((out[I] = horizontal_sum(lanes[I])), ...);
}

template <class F, bool K>
void dot_multi(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    const auto *w = static_cast<const typename F::block *>(row);
    const auto *x = static_cast<const unsigned char *>(xq);
    const int64_t nb = n / (K ? qk_k : qk32);
    const auto pass = [&](int32_t i, auto seq) {
        if constexpr (K) dot_k_n<F>(w, x + i * stride, stride, nb, out + i, seq);
        else dot_32_n<F, maddubs_lanes>(w, x + i * stride, stride, nb, out + i, seq);
    };
    // The 256-element formats in passes of 8 vectors: each weight block is decoded once for twice as many vectors
    // as with 4 (some accumulators spill, but prefill was 6-12 % faster for IQ4_XS and Q6_K on a Zen 3 EPYC);
    // every vector's arithmetic is its own, so the pass changes no bit.
    in_passes<K ? 8 : 4>(n_x, pass);
}

template <void (*Multi)(const void *, const void *, int64_t, int32_t, int64_t, float *)>
float dot_single(const void *row, const void *xq, int64_t n) {
    float out;
    Multi(row, xq, 0, 1, n, &out);
    return out;
}

// ---- float dot: one block dequantized by the reference dequantizer, then an FMA dot ----
template <void (*Dequantize)(const void *, float *, int64_t), int64_t Elems, size_t Bytes>
float dot_by_block(const void *row, const float *x, int64_t n) {
    const auto *bytes = static_cast<const unsigned char *>(row);
    alignas(32) float values[Elems];
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / Elems; ++b) {
        Dequantize(bytes + b * Bytes, values, Elems);
        const float *xb = x + b * Elems;
        for (int64_t j = 0; j < Elems; j += 16) {
            acc0 = _mm256_fmadd_ps(_mm256_load_ps(values + j), _mm256_loadu_ps(xb + j), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_load_ps(values + j + 8), _mm256_loadu_ps(xb + j + 8), acc1);
        }
    }
    return horizontal_sum(_mm256_add_ps(acc0, acc1));
}

// quantize_activations_q8k's bytes, eight floats at a time, for a block whose values are all finite and not all
// zero, whose scale is finite; any other block goes through the reference (its zero block, NaN marking and ggml's
// arithmetic on infinities as they are). The scale comes from the first element of the largest magnitude, as the reference's
// strict > search finds it; nearest_int (the 1.5 * 2^23 trick) is round-half-to-even for |v| <= 2^22, which
// _mm256_cvtps_epi32 is under the default rounding mode, and here |iscale * x| <= 127 (plus rounding).
void quantize_activations_q8k_avx2(const float *x, void *xq, int64_t n) {
    auto *y = static_cast<block_q8_k *>(xq);
    const __m256 magnitude_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
    const __m256i top = _mm256_set1_epi32(127);
    const __m256i byte_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / qk_k; ++b) {
        const float *xb = x + b * qk_k;
        __m256 amax = _mm256_setzero_ps();
        __m256 finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int j = 0; j < qk_k; j += 8) {
            const __m256 a = _mm256_and_ps(_mm256_loadu_ps(xb + j), magnitude_mask);
            finite = _mm256_and_ps(finite, _mm256_cmp_ps(a, largest, _CMP_LE_OQ));
            amax = _mm256_max_ps(amax, a);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        if (_mm256_movemask_ps(finite) != 0xff || m == 0.0f) {
            quantize_activations_q8k(xb, y + b, qk_k);
            continue;
        }
        int first = 0;
        for (int j = 0; j < qk_k; j += 8) {
            const __m256 a = _mm256_and_ps(_mm256_loadu_ps(xb + j), magnitude_mask);
            const int hits = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(m), _CMP_EQ_OQ));
            if (hits != 0) {
                first = j + __builtin_ctz(static_cast<unsigned>(hits));
                break;
            }
        }
        const float iscale = -127.f / xb[first];
        if (!(std::fabs(iscale) <= std::numeric_limits<float>::max())) { // a largest magnitude below 127 / FLT_MAX
            quantize_activations_q8k(xb, y + b, qk_k);
            continue;
        }
        const __m256 scale = _mm256_set1_ps(iscale);
        const auto quantized = [&](int j) {
            return _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j), scale)), top);
        };
        const auto sum8 = [](__m256i v) {
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
            return _mm_cvtsi128_si32(s);
        };
        for (int j = 0; j < qk_k; j += 32) {
            const __m256i q0 = quantized(j), q1 = quantized(j + 8), q2 = quantized(j + 16), q3 = quantized(j + 24);
            y[b].bsums[j / 16] = static_cast<int16_t>(sum8(_mm256_add_epi32(q0, q1)));
            y[b].bsums[j / 16 + 1] = static_cast<int16_t>(sum8(_mm256_add_epi32(q2, q3)));
            const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(y[b].qs + j),
                                _mm256_permutevar8x32_epi32(bytes, byte_order));
        }
        y[b].d = 1 / iscale;
    }
}

template <class F, void (*Dequantize)(const void *, float *, int64_t)> format_kernels kernels_k() {
    return {dot_by_block<Dequantize, qk_k, sizeof(typename F::block)>,
            sizeof(block_q8_k),
            quantize_activations_q8k_avx2,
            dot_single<dot_multi<F, true>>,
            dot_multi<F, true>,
            std::is_same_v<F, k_formats::q4_k> ? gemm_act_q4_k_avx2 // its own tile and definition (gemm_one_q4_k)
                                               : k_gemm_act<dot_multi<F, true>, dot_single<dot_multi<F, true>>>};
}

void quantize_activations_q8_sum_avx2(const float *x, void *xq, int64_t n) {
    quantize_activations_q8_avx2(x, xq, n);
    scale_activation_sums(xq, n);
}

template <class F, void (*Dequantize)(const void *, float *, int64_t)> format_kernels kernels_32() {
    return {dot_by_block<Dequantize, qk32, sizeof(typename F::block)>, sizeof(typename F::act_block),
            F::has_min ? quantize_activations_q8_sum_avx2 : quantize_activations_q8_avx2,
            dot_single<dot_multi<F, false>>, dot_multi<F, false>,
            std::is_same_v<F, small_formats::q5_0> ? gemm_act_q5_0_avx2_or_vnni : nullptr}; // Q4_0's kind of GEMM
}

} // namespace

format_kernels added_format_kernels_avx2(uint32_t type) {
    return with_added_format(
        type,
        []<class F, void (*Dequantize)(const void *, float *, int64_t), bool K>() {
            if constexpr (K) return kernels_k<F, Dequantize>();
            else return kernels_32<F, Dequantize>();
        },
        [] { return format_kernels{}; });
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx2_fma() is false; this exists only so the API links everywhere.

namespace strata::quants {
format_kernels added_format_kernels_avx2(uint32_t type) { return added_format_kernels_scalar(type); }
} // namespace strata::quants

#endif
