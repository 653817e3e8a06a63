// One thread's float-format GEMM tiles (ABI 1.22 gemm_f32: F32, F16, BF16 weights x float32 activations), the AVX2
// and AVX-512 kernels side by side, against this core's own FMA bound: the multiply-adds per second a loop of
// independent FMAs with no memory operand reaches in the same run (AVX2 and, where the CPU has it, AVX-512), so the
// figure is a fraction of what the core can do, not a ratio between two kernels that could both be slow. Every
// kernel's outputs must have the scalar definition's bits (a wrong kernel cannot look fast).
//   bench-float-gemm [--rows N] [--cols N] [--repeat N]
// Prints per type, kernel and vector count (1, 4, 16, 64): GFLOP/s and the fraction of the FMA bound of its width.
#include "best_seconds.hpp"
#include "ggml_quants.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using strata::bench::best_seconds;

// FLOP/s of twelve independent FMA chains (enough to cover the latency on two FMA ports) in registers, no loads:
// the core's multiply-add bound at each width. (The chains cannot be folded: FMAs are not reassociated.)
constexpr int fma_steps = 1 << 22;

__attribute__((target("avx2,fma"))) float fma_loop_avx2() {
    __m256 a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm256_set1_ps(1.0f + static_cast<float>(c) * 1e-3f);
    const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < fma_steps; ++i) {
#pragma GCC unroll 12
        for (int c = 0; c < 12; ++c) a[c] = _mm256_fmadd_ps(a[c], m, b);
    }
    float s = 0.0f;
    for (auto &v : a) s += _mm256_cvtss_f32(v);
    return s;
}

__attribute__((target("avx512f"))) float fma_loop_avx512() {
    __m512 a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm512_set1_ps(1.0f + static_cast<float>(c) * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < fma_steps; ++i) {
#pragma GCC unroll 12
        for (int c = 0; c < 12; ++c) a[c] = _mm512_fmadd_ps(a[c], m, b);
    }
    float s = 0.0f;
    for (auto &v : a) s += _mm512_cvtss_f32(v);
    return s;
}

double fma_bound(bool wide, int repeat) {
    volatile float sink = 0.0f;
    const double s = best_seconds(std::max(5, repeat / 4), [&] { sink = wide ? fma_loop_avx512() : fma_loop_avx2(); });
    return 12.0 * fma_steps * (wide ? 16 : 8) * 2 / s;
}

struct kernel {
    const char *name;
    strata::quants::gemm_f32_fn gemm;
    bool wide; // AVX-512
};

} // namespace

int main(int argc, char **argv) {
    namespace q = strata::quants;
    int64_t rows = 2048, cols = 768;
    int repeat = 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--rows") rows = std::atoll(argv[i + 1]);
        else if (a == "--cols") cols = std::atoll(argv[i + 1]);
        else if (a == "--repeat") repeat = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: bench-float-gemm [--rows N] [--cols N] [--repeat N]\n");
            return 2;
        }
    }
    if (rows <= 0 || cols <= 0 || repeat <= 0) {
        std::fprintf(stderr, "bench-float-gemm: --rows, --cols and --repeat must be > 0\n");
        return 2;
    }
    if (!q::cpu_has_avx2_fma()) {
        std::printf("SKIP bench-float-gemm: this CPU has no AVX2+FMA (the kernels compared)\n");
        return 77;
    }
    const bool avx512 = q::cpu_has_avx512_vnni();
    // The bounds are measured first and again after the kernels; the higher of each pair is used (a shared machine
    // can slow either measurement, never speed it past the core).
    double bound_avx2 = fma_bound(false, repeat), bound_avx512 = avx512 ? fma_bound(true, repeat) : 0.0;
    struct row {
        const char *type, *kernel;
        int32_t vectors;
        double flops;
        bool wide;
    };
    std::vector<row> results;

    constexpr int32_t max_vectors = 64;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(max_vectors * cols));
    for (float &v : w) v = normal(rng);
    for (float &v : x) v = normal(rng);

    struct format {
        const char *name;
        int bytes;
        void (*quantize)(const float *, void *, int64_t);
        float (*one)(const void *, const float *, int64_t);
        std::vector<kernel> kernels;
    };
    std::vector<format> formats = {
        {"f32", 4, q::quantize_row_f32, q::gemm_one_f32, {{"avx2", q::gemm_f32_f32_avx2, false}}},
        {"f16", 2, q::quantize_row_f16, q::gemm_one_f16, {{"avx2", q::gemm_f32_f16_avx2, false}}},
        {"bf16", 2, q::quantize_row_bf16, q::gemm_one_bf16, {{"avx2", q::gemm_f32_bf16_avx2, false}}}};
    if (avx512) {
        formats[0].kernels.push_back({"avx512", q::gemm_f32_f32_avx512, true});
        formats[1].kernels.push_back({"avx512", q::gemm_f32_f16_avx512, true});
        formats[2].kernels.push_back({"avx512", q::gemm_f32_bf16_avx512, true});
        // The 12-row x 4-vector tiles (the x86 entries' choice on AMD CPUs).
        formats[1].kernels.push_back({"avx512-tall", q::gemm_f32_f16_avx512_tall, true});
        formats[2].kernels.push_back({"avx512-tall", q::gemm_f32_bf16_avx512_tall, true});
    }

    int failures = 0;
    for (const format &f : formats) {
        const int64_t row_bytes = cols * f.bytes;
        std::vector<unsigned char> weights(static_cast<size_t>(rows * row_bytes));
        f.quantize(w.data(), weights.data(), rows * cols);
        // The definition's bits for the first rows and vectors, checked against every kernel's output.
        const int64_t check_rows = std::min<int64_t>(rows, 64);
        std::vector<float> out(static_cast<size_t>(max_vectors * rows));
        for (const kernel &k : f.kernels) {
            for (int32_t n_x : {1, 4, 16, 64}) {
                std::fill(out.begin(), out.end(), 0.0f);
                const double s = best_seconds(repeat, [&] {
                    k.gemm(weights.data(), row_bytes, rows, x.data(), cols, n_x, cols, out.data(), rows);
                });
                for (int32_t t = 0; t < n_x; ++t)
                    for (int64_t r = 0; r < check_rows; ++r) {
                        const float want = f.one(weights.data() + r * row_bytes, x.data() + t * cols, cols);
                        if (std::memcmp(&want, &out[t * rows + r], sizeof want) != 0) {
                            if (failures++ < 5)
                                std::fprintf(stderr, "bench-float-gemm: %s %s row %lld vector %d: %.9g, want %.9g\n",
                                             f.name, k.name, static_cast<long long>(r), t, out[t * rows + r], want);
                        }
                    }
                const double flops = 2.0 * static_cast<double>(rows * cols) * n_x / s;
                results.push_back({f.name, k.name, n_x, flops, k.wide});
            }
        }
    }
    bound_avx2 = std::max(bound_avx2, fma_bound(false, repeat));
    if (avx512) bound_avx512 = std::max(bound_avx512, fma_bound(true, repeat));
    std::printf("rows %lld x cols %lld, best of %d, one thread; FMA bound: AVX2 %.1f GFLOP/s", static_cast<long long>(rows),
                static_cast<long long>(cols), repeat, bound_avx2 / 1e9);
    if (avx512) std::printf(", AVX-512 %.1f GFLOP/s", bound_avx512 / 1e9);
    std::printf("\n%-5s %-7s %8s %10s %12s\n", "type", "kernel", "vectors", "GFLOP/s", "of FMA bound");
    for (const row &r : results)
        std::printf("%-5s %-11s %4d %10.1f %11.0f%%\n", r.type, r.kernel, r.vectors, r.flops / 1e9,
                    100.0 * r.flops / (r.wide ? bound_avx512 : bound_avx2));
    if (failures > 0) {
        std::fprintf(stderr, "bench-float-gemm: %d outputs differ from the scalar definition\n", failures);
        return 1;
    }
    return 0;
}
