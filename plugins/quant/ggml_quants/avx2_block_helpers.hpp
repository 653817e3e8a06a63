// The two helpers every AVX2 kernel file of this plugin needs: a horizontal sum and a block's fp16 scale. Include
// only from files compiled with -mavx2 -mfma -mf16c (or more). Internal linkage, so each file keeps a copy built
// for its own instruction set (see the note at the top of dot_avx2.cpp).
#pragma once

#include "block_formats.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace strata::quants {
namespace {

// The per-block helpers are called several times per loop; GCC would otherwise keep them out of line.
#ifndef STRATA_KERNEL_INLINE
#define STRATA_KERNEL_INLINE inline __attribute__((always_inline))
#endif

STRATA_KERNEL_INLINE float horizontal_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

STRATA_KERNEL_INLINE float block_scale(const half_bits *d) { return _cvtsh_ss(*d); }

// An empty asm that takes and gives back v in a vector register: the compiler must have it there, as it stands. After
// each step of a chain of integer adds it keeps the adds in order: otherwise GCC may reassociate them (integer addition
// is associative), compute every step's products first and spill them to the stack to add them later.
STRATA_KERNEL_INLINE void keep_in_register(__m256i &v) { __asm__("" : "+x"(v)); }

// A multi-vector kernel's passes over n_x activation vectors: pass(i, std::make_index_sequence<W>{}) for vectors
// [i, i + W), in passes of Widest (4, 8 or 12), then at most one of 8 or of 4, then one pass of the 3, 2 or 1 left.
template <int Widest, class Pass> STRATA_KERNEL_INLINE void in_passes(int32_t n_x, const Pass &pass) {
    static_assert(Widest == 4 || Widest == 8 || Widest == 12);
    int32_t i = 0;
    for (; i + Widest <= n_x; i += Widest) pass(i, std::make_index_sequence<Widest>{});
    if constexpr (Widest > 8)
        if (i + 8 <= n_x) {
            pass(i, std::make_index_sequence<8>{});
            i += 8;
        }
    if constexpr (Widest > 4)
        if (i + 4 <= n_x) {
            pass(i, std::make_index_sequence<4>{});
            i += 4;
        }
    switch (n_x - i) {
    case 3: pass(i, std::make_index_sequence<3>{}); break;
    case 2: pass(i, std::make_index_sequence<2>{}); break;
    case 1: pass(i, std::make_index_sequence<1>{}); break;
    default: break;
    }
}

STRATA_KERNEL_INLINE uint16_t load_u16(const unsigned char *p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The 32-bit word at p (any alignment).
STRATA_KERNEL_INLINE int32_t load_word(const unsigned char *p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The binary16 scales at p[r] + offset of eight rows (a GEMM tile's rows), in one register.
STRATA_KERNEL_INLINE __m128i eight_row_scales(const unsigned char *const *p, int64_t offset) {
    __m128i h = _mm_cvtsi32_si128(load_u16(p[0] + offset));
    h = _mm_insert_epi16(h, load_u16(p[1] + offset), 1);
    h = _mm_insert_epi16(h, load_u16(p[2] + offset), 2);
    h = _mm_insert_epi16(h, load_u16(p[3] + offset), 3);
    h = _mm_insert_epi16(h, load_u16(p[4] + offset), 4);
    h = _mm_insert_epi16(h, load_u16(p[5] + offset), 5);
    h = _mm_insert_epi16(h, load_u16(p[6] + offset), 6);
    return _mm_insert_epi16(h, load_u16(p[7] + offset), 7);
}

} // namespace
} // namespace strata::quants
