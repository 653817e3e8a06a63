// One thread's integer dot kernels, Strata's against ggml's own, side by side in one run: the same random weight
// matrix quantized by Strata's reference quantizer (ggml's bytes, bit for bit), one activation vector quantized by
// each side's own activation quantizer, and every row dotted, repeated; the best of the repeats for each. ggml's
// kernels come from llama.cpp's prebuilt CPU backend in the npm peer (libggml-cpu-haswell.so, the AVX2+FMA build
// node-llama-cpp picks on such a CPU), through ggml_get_type_traits_cpu(type)->vec_dot, the function llama.cpp's
// matmul calls per row. The two results of each row must agree to float rounding (a wrong kernel cannot look fast).
//   bench-quant-dot [--lib PATH/libggml-cpu-haswell.so] [--rows N] [--cols N] [--repeat N] [--types q4_k,q6_k,...]
// Prints per type: weight GB/s and ns per row for both, and Strata's time over ggml's. Exit 77 when the library
// cannot be loaded (the peer is not installed).
#include "best_seconds.hpp"
#include "ggml_quants.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

// ggml's CPU type traits (ggml-cpu.h): the first members of struct ggml_type_traits_cpu.
using ggml_from_float_t = void (*)(const float *x, void *y, int64_t k);
using ggml_vec_dot_t = void (*)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by,
                                int nrc);
struct ggml_type_traits_cpu {
    ggml_from_float_t from_float;
    ggml_vec_dot_t vec_dot;
    int vec_dot_type;
    int64_t nrows;
};
using get_traits_fn = const ggml_type_traits_cpu *(*)(int type);
using cpu_init_fn = void (*)();
using base_traits_fn = const void *(*)(int type);

const strata_quant_desc *find(const std::string &name) {
    const strata_quant_desc *table = strata::quants::descriptors(strata::quants::kernel_set::avx2_fma);
    for (int i = 0; i < strata::quants::n_descriptors(); ++i)
        if (name == table[i].header.name) return &table[i];
    return nullptr;
}

// ggml's block size of the activation type (Q8_0: 34 bytes per 32, Q8_K: 292 per 256).
size_t ggml_act_row_bytes(int type, int64_t cols) {
    if (type == 8) return static_cast<size_t>(cols / 32 * 34);
    if (type == 15) return static_cast<size_t>(cols / 256 * 292);
    if (type == 9) return static_cast<size_t>(cols / 32 * 36); // Q8_1
    return 0;
}

using strata::bench::best_seconds;

} // namespace

int main(int argc, char **argv) {
    std::string lib_path = STRATA_GGML_CPU_LIB;
    int64_t rows = 2048, cols = 4096;
    int repeat = 30;
    std::string types = "q4_0,q8_0,q4_1,q5_0,q5_1,iq4_nl,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_xs";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--lib") lib_path = argv[i + 1];
        else if (a == "--rows") rows = std::atoll(argv[i + 1]);
        else if (a == "--cols") cols = std::atoll(argv[i + 1]);
        else if (a == "--repeat") repeat = std::atoi(argv[i + 1]);
        else if (a == "--types") types = argv[i + 1];
        else {
            std::fprintf(stderr, "usage: bench-quant-dot [--lib PATH] [--rows N] [--cols N] [--repeat N] [--types a,b]\n");
            return 2;
        }
    }
    if (cols % 256 != 0) {
        std::fprintf(stderr, "bench-quant-dot: --cols must be a multiple of 256\n");
        return 2;
    }
    if (!strata::quants::cpu_has_avx2_fma()) {
        std::printf("SKIP bench-quant-dot: this CPU has no AVX2+FMA (the kernels compared)\n");
        return 77;
    }
    void *lib = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        std::printf("SKIP bench-quant-dot: cannot load %s: %s (npm ci --prefix tools/peer)\n", lib_path.c_str(), dlerror());
        return 77;
    }
    auto *get_traits = reinterpret_cast<get_traits_fn>(dlsym(lib, "ggml_get_type_traits_cpu"));
    auto *cpu_init = reinterpret_cast<cpu_init_fn>(dlsym(lib, "ggml_cpu_init"));
    if (get_traits == nullptr || cpu_init == nullptr) {
        std::printf("SKIP bench-quant-dot: %s exports no ggml_get_type_traits_cpu/ggml_cpu_init\n", lib_path.c_str());
        return 77;
    }
    cpu_init(); // ggml's fp16 tables

    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols));
    for (float &v : w) v = normal(rng);
    for (float &v : x) v = normal(rng);

    std::printf("rows %lld x cols %lld, best of %d, one thread; ggml: %s\n", static_cast<long long>(rows),
                static_cast<long long>(cols), repeat, lib_path.c_str());
    std::printf("%-8s %12s %12s %12s %12s %10s %12s\n", "type", "Strata GB/s", "ggml GB/s", "Strata ns/row",
                "ggml ns/row", "time ratio", "max rel diff");
    int failures = 0;
    std::stringstream list(types);
    for (std::string name; std::getline(list, name, ',');) {
        const strata_quant_desc *q = find(name);
        if (q == nullptr || !STRATA_HAS_SLOT(q, dot_act) || q->act_block_bytes == 0) {
            std::printf("%-8s (no integer kernel in Strata)\n", name.c_str());
            continue;
        }
        const ggml_type_traits_cpu *t = get_traits(static_cast<int>(q->ggml_type));
        const ggml_type_traits_cpu *ta = t == nullptr ? nullptr : get_traits(t->vec_dot_type);
        const size_t peer_act_bytes = t == nullptr ? 0 : ggml_act_row_bytes(t->vec_dot_type, cols);
        if (t == nullptr || t->vec_dot == nullptr || ta == nullptr || ta->from_float == nullptr || peer_act_bytes == 0) {
            std::printf("%-8s (ggml has no vec_dot for it here)\n", name.c_str());
            continue;
        }
        const size_t row_bytes = static_cast<size_t>(cols / q->block_elems * q->block_bytes);
        std::vector<unsigned char> wq(row_bytes * static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) q->quantize_row(w.data() + r * cols, wq.data() + r * row_bytes, cols);
        std::vector<unsigned char> ours_x(static_cast<size_t>(cols / q->block_elems * q->act_block_bytes) + 64);
        std::vector<unsigned char> peer_x(peer_act_bytes + 64);
        q->quantize_activations(x.data(), ours_x.data(), cols);
        ta->from_float(x.data(), peer_x.data(), cols);

        std::vector<float> ours(static_cast<size_t>(rows)), peer(static_cast<size_t>(rows));
        const double t_ours = best_seconds(repeat, [&] {
            for (int64_t r = 0; r < rows; ++r) ours[static_cast<size_t>(r)] = q->dot_act(wq.data() + r * row_bytes, ours_x.data(), cols);
        });
        const double t_peer = best_seconds(repeat, [&] {
            for (int64_t r = 0; r < rows; ++r)
                t->vec_dot(static_cast<int>(cols), &peer[static_cast<size_t>(r)], 0, wq.data() + r * row_bytes, 0,
                           peer_x.data(), 0, 1);
        });
        // Both quantize x the same way (ggml's reference rounding), so a row's two dots differ by float rounding
        // only: compare against the row's magnitude.
        double worst = 0, scale = 0;
        for (int64_t r = 0; r < rows; ++r) scale = std::max(scale, std::fabs(static_cast<double>(peer[static_cast<size_t>(r)])));
        for (int64_t r = 0; r < rows; ++r)
            worst = std::max(worst, std::fabs(static_cast<double>(ours[static_cast<size_t>(r)]) - peer[static_cast<size_t>(r)]) / scale);
        const double bytes = static_cast<double>(wq.size());
        std::printf("%-8s %12.2f %12.2f %12.1f %12.1f %10.2f %12.2e%s\n", name.c_str(), bytes / t_ours / 1e9,
                    bytes / t_peer / 1e9, t_ours / static_cast<double>(rows) * 1e9,
                    t_peer / static_cast<double>(rows) * 1e9, t_ours / t_peer, worst, worst > 1e-3 ? "  MISMATCH" : "");
        if (worst > 1e-3) ++failures;
    }
    return failures == 0 ? 0 : 1;
}
