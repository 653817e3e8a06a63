// AVX-512 integer dots of the 256-element formats (Q2_K..Q6_K, IQ4_XS) and, on 256 bits, the 32-element ones. Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni (and the AVX2 flags) and called only on CPUs that have all four (cpu_has_avx512_vnni():
// Ice Lake, Sapphire Rapids, Zen 4 and later), where the AVX2 table's integer-dot slots point here instead.
//
// Two chunks of a block go through one 512-bit register: chunks 2p and 2p+1 (decoded as the AVX2 kernel decodes
// them, k_chunks_avx2.hpp) side by side, their 64 activation bytes in one load, one maddubs and one vpdpwssd (the
// AVX2 kernel's madd and add in one instruction) per activation vector. After a block the register's two halves are
// added: every lane then holds the same int32 sum the AVX2 kernel's lane holds (integer sums are exact, so their
// order does not matter), and the block's FMAs are the AVX2 kernel's (block_fma). dot_act and dot_act_multi
// therefore give the AVX2 and scalar kernels' bits exactly (AddedFormats.Avx512IntegerPathEqualsAvx2AndScalar).
#include "ggml_quants.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "int_dot_added_avx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif
#include <immintrin.h>

#include "k_chunks_avx2.hpp"
#include "small_blocks_avx2.hpp"

#include <type_traits>
#include <utility>

namespace strata::quants {
namespace {

// The masked forms with every lane selected: the plain intrinsics pass GCC 12's "undefined" register (a
// self-initialized variable) as the unused merge source, which -Wmaybe-uninitialized reports; these compile to the
// same instructions.
STRATA_KERNEL_INLINE __m512i join(__m256i low, __m256i high) {
    const __m512i wide = _mm512_maskz_inserti64x4(0xff, _mm512_setzero_si512(), low, 0);
    return _mm512_maskz_inserti64x4(0xff, wide, high, 1);
}

// 32 int16 pair sums of value * activation, as pair_products: AVX-512 has no byte sign instruction, so a signed
// format's activations are negated where the value is negative (where it is zero, |value| is zero and so is the
// product, as with _mm256_sign_epi8).
template <bool Signed> STRATA_KERNEL_INLINE __m512i pair_products_512(__m512i values, __m512i act) {
    if constexpr (Signed) {
        const __mmask64 negative = _mm512_movepi8_mask(values);
        return _mm512_maddubs_epi16(_mm512_abs_epi8(values),
                                    _mm512_mask_sub_epi8(act, negative, _mm512_setzero_si512(), act));
    } else {
        return _mm512_maddubs_epi16(values, act);
    }
}

// Chunks 2P and 2P+1 of a block against N activation vectors.
template <class F, int P, size_t... I>
STRATA_KERNEL_INLINE void pair_step(const typename F::block &w, const k_block_vectors &s, const block_q8_k *const *a,
                                    int64_t b, __m512i *isum, std::index_sequence<I...>) {
    const __m512i v = join(chunk(w, 2 * P), chunk(w, 2 * P + 1));
    const __m512i sc = join(chunk_scales<2 * P>(s), chunk_scales<2 * P + 1>(s));
    ((isum[I] = _mm512_dpwssd_epi32(
          isum[I], pair_products_512<F::signed_values>(v, _mm512_loadu_si512(a[I][b].qs + 64 * P)), sc)),
     ...);
}

template <class F, size_t... I, int... P>
STRATA_KERNEL_INLINE void block_pairs(const typename F::block &w, const k_block_vectors &s, const block_q8_k *const *a,
                                      int64_t b, __m512i *isum, std::index_sequence<I...> vectors,
                                      std::integer_sequence<int, P...>) {
    (pair_step<F, P>(w, s, a, b, isum, vectors), ...);
}

STRATA_KERNEL_INLINE __m256i fold(__m512i v) {
    return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xf, v, 0), _mm512_maskz_extracti64x4_epi64(0xf, v, 1));
}

template <class F, size_t... I>
STRATA_KERNEL_INLINE void dot_k_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t nb,
                                  float *out, std::index_sequence<I...>) {
    const block_q8_k *const a[] = {reinterpret_cast<const block_q8_k *>(xq + I * stride)...};
    __m256 lanes[] = {(static_cast<void>(I), _mm256_setzero_ps())...};
    for (int64_t b = 0; b < nb; ++b) {
        k_block_vectors s;
        block_vectors<F>(w[b], s);
        __m512i isum[] = {(static_cast<void>(I), _mm512_setzero_si512())...};
        block_pairs<F>(w[b], s, a, b, isum, std::index_sequence<I...>{}, std::make_integer_sequence<int, 4>{});
        ((lanes[I] = block_fma<F>(lanes[I], fold(isum[I]), s, a[I][b])), ...);
    }
    ((out[I] = horizontal_sum(lanes[I])), ...);
}

// The 32-element formats: small_blocks_avx2.hpp's kernel with one vpdpbusd (AVX-512 VL + VNNI on 256 bits) in place
// of maddubs + madd; the same int32 lanes, so the same bits.
struct vpdpbusd_lanes {
    static STRATA_KERNEL_INLINE __m256i dot(__m256i u, __m256i s) {
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
    }
};

// K: a 256-element format (passes of up to 8 vectors in 512-bit registers), else a 32-element one (up to 4).
template <class F, bool K, size_t... I>
STRATA_KERNEL_INLINE void dot_n(const typename F::block *w, const unsigned char *xq, int64_t stride, int64_t n,
                                float *out, std::index_sequence<I...> vectors) {
    if constexpr (K) dot_k_n<F>(w, xq, stride, n / qk_k, out, vectors);
    else dot_32_n<F, vpdpbusd_lanes>(w, xq, stride, n / qk32, out, vectors);
}

template <class F, bool K>
void dot_multi(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    const auto *w = static_cast<const typename F::block *>(row);
    const auto *x = static_cast<const unsigned char *>(xq);
    in_passes<K ? 8 : 4>(n_x, [&](int32_t i, auto vectors) __attribute__((always_inline)) {
        dot_n<F, K>(w, x + i * stride, stride, n, out + i, vectors);
    });
}

template <class F, bool K> float dot_single(const void *row, const void *xq, int64_t n) {
    float out;
    dot_n<F, K>(static_cast<const typename F::block *>(row), static_cast<const unsigned char *>(xq), 0, n, &out,
                std::make_index_sequence<1>{});
    return out;
}

} // namespace

format_kernels added_format_kernels_avx512(uint32_t type) {
    format_kernels k = added_format_kernels_avx2(type); // the float dot and the activation quantizers
    with_added_format(
        type,
        [&]<class F, void (*Dequantize)(const void *, float *, int64_t), bool K>() {
            k.dot_act = dot_single<F, K>;
            k.dot_act_multi = dot_multi<F, K>;
            // Q4_K's GEMM has its own definition (gemm_one_q4_k): the 16-row tile of gemm_act_avx512.cpp.
            if constexpr (std::is_same_v<F, k_formats::q4_k>) k.gemm_act = gemm_act_q4_k_avx512;
            // Q5_0's (Q4_0's kind, gemm_one_q5_0): the 16-row tile there too.
            else if constexpr (std::is_same_v<F, small_formats::q5_0>) k.gemm_act = gemm_act_q5_0_avx512;
            else if constexpr (K) k.gemm_act = k_gemm_act<dot_multi<F, K>, dot_single<F, K>>;
        },
        [] {});
    return k;
}

} // namespace strata::quants

#else // not x86-64: cpu_has_avx512_vnni() is false; this exists only so the API links everywhere.

namespace strata::quants {
format_kernels added_format_kernels_avx512(uint32_t type) { return added_format_kernels_scalar(type); }
} // namespace strata::quants

#endif
