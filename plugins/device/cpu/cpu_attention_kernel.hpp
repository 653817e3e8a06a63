// The inner loop of attention, shared by the contiguous `attention` op and `paged_attention`: one query head against
// n_kv key/value rows. The rows reach it as runs of consecutive rows `stride` floats apart — one run for a
// contiguous cache, one per block for the paged cache — and per row the arithmetic and its order are the same
// whatever the runs, so both ops produce the same bits for the same rows (ABI 1.5 promises that).
#pragma once

#include "cpu_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace strata::cpu {

// Elements of the 16-bit KV caches (ABI 1.20): the bits of one IEEE half or bfloat16, read exactly by the kernels.
struct f16_element { uint16_t bits; };
struct bf16_element { uint16_t bits; };
// Elements of the FP8 KV caches: one e4m3 or e5m2 byte, read exactly through its value table.
struct e4m3_element { uint8_t bits; };
struct e5m2_element { uint8_t bits; };

// A q8_0 cache's rows are groups of 32 values (strata/kv_q8_0.hpp): one element of the row pointer is one group.
template <class E> inline constexpr int64_t values_per_element = 1;
template <> inline constexpr int64_t values_per_element<kv_q8_0::group> = kv_q8_0::group_values;

inline float kv_dot(const kernels &k, const float *q, const float *row, int64_t n) noexcept { return k.dot(q, row, n); }
inline float kv_dot(const kernels &k, const float *q, const f16_element *row, int64_t n) noexcept {
    return k.dot_f16(q, &row->bits, n);
}
inline float kv_dot(const kernels &k, const float *q, const bf16_element *row, int64_t n) noexcept {
    return k.dot_bf16(q, &row->bits, n);
}
inline float kv_dot(const kernels &k, const float *q, const e4m3_element *row, int64_t n) noexcept {
    return k.dot_e4m3(q, &row->bits, n);
}
inline float kv_dot(const kernels &k, const float *q, const e5m2_element *row, int64_t n) noexcept {
    return k.dot_e5m2(q, &row->bits, n);
}
inline float kv_dot(const kernels &k, const float *q, const kv_q8_0::group *row, int64_t n) noexcept {
    return k.dot_q8_0(q, row, n);
}
inline void kv_axpy(const kernels &k, float a, const float *row, float *y, int64_t n) noexcept { k.axpy(a, row, y, n); }
inline void kv_axpy(const kernels &k, float a, const f16_element *row, float *y, int64_t n) noexcept {
    k.axpy_f16(a, &row->bits, y, n);
}
inline void kv_axpy(const kernels &k, float a, const bf16_element *row, float *y, int64_t n) noexcept {
    k.axpy_bf16(a, &row->bits, y, n);
}
inline void kv_axpy(const kernels &k, float a, const e4m3_element *row, float *y, int64_t n) noexcept {
    k.axpy_e4m3(a, &row->bits, y, n);
}
inline void kv_axpy(const kernels &k, float a, const e5m2_element *row, float *y, int64_t n) noexcept {
    k.axpy_e5m2(a, &row->bits, y, n);
}
inline void kv_axpy(const kernels &k, float a, const kv_q8_0::group *row, float *y, int64_t n) noexcept {
    k.axpy_q8_0(a, row, y, n);
}

// What ABI 1.14 adds to a score: soft-capping (softcap > 0) and a sliding window (rows before `first` are not
// attended). The defaults change nothing.
struct score_terms {
    float softcap = 0.0f;
    int64_t first = 0;
};

// The first row a query at position pos attends with a sliding window of `window` rows (0: none).
inline int64_t first_attended(int64_t pos, int32_t window) noexcept {
    return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

// for_each_run(fn) must call fn(j0, count, keys, values, stride) for runs that cover rows [0, n_kv) in ascending
// order: row j0 + i has its key at keys + i * stride and its value at values + i * stride (i < count); keys and
// values point to float, one of the *_element types above or q8_0 groups (then stride and the rows' offsets count
// groups). It is called
// twice (scores, then the weighted sum). scores holds n_kv floats of scratch. q is fully read before out is
// written, so out may alias q. Rows before terms.first are skipped, and with first 0 and no softcap the arithmetic is
// what it was before ABI 1.14.
template <class ForEachRun>
inline void attend_head(const kernels &k, const float *q, int32_t head_dim, float scale, int64_t n_kv,
                        const ForEachRun &for_each_run, float *scores, float *out,
                        const score_terms &terms = {}) noexcept {
    const int64_t first = terms.first;
    const float cap = terms.softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
    for_each_run([&](int64_t j0, int64_t count, const auto *keys, const auto *, int64_t stride) {
        for (int64_t i = 0; i < count; ++i) {
            if (j0 + i < first) continue;
            const float s = kv_dot(k, q, keys + i * stride, head_dim) * scale;
            scores[j0 + i] = cap > 0.0f ? std::tanh(s * inv_cap) * cap : s;
        }
    });
    float *window = scores + first;
    const int64_t n = n_kv - first;
    const float m = k.max(window, n);
    const float inv_sum = static_cast<float>(1.0 / k.exp_sub_sum(window, m, window, n));
    std::memset(out, 0, sizeof(float) * static_cast<size_t>(head_dim));
    for_each_run([&](int64_t j0, int64_t count, const auto *, const auto *values, int64_t stride) {
        for (int64_t i = 0; i < count; ++i)
            if (j0 + i >= first) kv_axpy(k, scores[j0 + i] * inv_sum, values + i * stride, out, head_dim);
    });
}

} // namespace strata::cpu
