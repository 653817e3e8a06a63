// Strata's reference quantizers and dequantizers against ggml's own, from llama.cpp's prebuilt libggml-base.so (the
// npm peer node-llama-cpp ships it; tools/peer), and the q8_0 KV cache's (strata/kv_q8_0.hpp) against ggml's q8_0. For every block format both sides quantize the same >= 10^5 blocks
// (normal values at scales from 1e-6 to 1e4, outliers, constant, all-zero, tiny and huge blocks) and must write the
// same bytes; both dequantize those bytes and random bytes (any scale bits, NaN and infinity included) and must
// produce the same floats bit for bit (any NaN matching any NaN).
//   quant_vs_ggml --lib PATH/libggml-base.so [--blocks N]     exit 0 pass, 1 mismatch, 77 library missing (skip)
#include "ggml_quants.hpp"

#include <strata/kv_q8_0.hpp>

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace q = strata::quants;

namespace {

using quantize_fn = void (*)(const float *, void *, int64_t);
using dequantize_fn = void (*)(const void *, float *, int64_t);

struct format {
    const char *name;   // Strata's
    const char *ggml;   // ggml's suffix
    int64_t block_elems;
    size_t block_bytes;
    quantize_fn quantize;
    dequantize_fn dequantize;
    bool has_quantizer; // ggml exports quantize_row_<suffix>_ref
};

// The q8_0 KV cache's quantizer (the SDK's, which the CPU and CUDA devices run in kv_store) as rows.
void kv_quantize_row_q8_0(const float *x, void *out, int64_t n) {
    auto *g = static_cast<strata::kv_q8_0::group *>(out);
    for (int64_t i = 0; i < n / 32; ++i) strata::kv_q8_0::quantize(x + 32 * i, g + i);
}
void kv_dequantize_row_q8_0(const void *in, float *y, int64_t n) {
    const auto *g = static_cast<const strata::kv_q8_0::group *>(in);
    for (int64_t i = 0; i < n; ++i) y[i] = strata::kv_q8_0::value(g[i / 32], static_cast<int>(i % 32));
}

const format formats[] = {
    {"kv_q8_0", "q8_0", 32, sizeof(strata::kv_q8_0::group), kv_quantize_row_q8_0, kv_dequantize_row_q8_0, true},
    {"q8_0", "q8_0", 32, sizeof(q::block_q8_0), q::quantize_row_q8_0, q::dequantize_row_q8_0, true},
    {"q4_0", "q4_0", 32, sizeof(q::block_q4_0), q::quantize_row_q4_0, q::dequantize_row_q4_0, true},
    {"q4_1", "q4_1", 32, sizeof(q::block_q4_1), q::quantize_row_q4_1, q::dequantize_row_q4_1, true},
    {"q5_0", "q5_0", 32, sizeof(q::block_q5_0), q::quantize_row_q5_0, q::dequantize_row_q5_0, true},
    {"q5_1", "q5_1", 32, sizeof(q::block_q5_1), q::quantize_row_q5_1, q::dequantize_row_q5_1, true},
    {"iq4_nl", "iq4_nl", 32, sizeof(q::block_iq4_nl), q::quantize_row_iq4_nl, q::dequantize_row_iq4_nl, true},
    {"q2_k", "q2_K", 256, sizeof(q::block_q2_k), q::quantize_row_q2_k, q::dequantize_row_q2_k, true},
    {"q3_k", "q3_K", 256, sizeof(q::block_q3_k), q::quantize_row_q3_k, q::dequantize_row_q3_k, true},
    {"q4_k", "q4_K", 256, sizeof(q::block_q4_k), q::quantize_row_q4_k, q::dequantize_row_q4_k, true},
    {"q5_k", "q5_K", 256, sizeof(q::block_q5_k), q::quantize_row_q5_k, q::dequantize_row_q5_k, true},
    {"q6_k", "q6_K", 256, sizeof(q::block_q6_k), q::quantize_row_q6_k, q::dequantize_row_q6_k, true},
    {"iq4_xs", "iq4_xs", 256, sizeof(q::block_iq4_xs), q::quantize_row_iq4_xs, q::dequantize_row_iq4_xs, true},
    {"q8_k", "q8_K", 256, sizeof(q::block_q8_k), q::quantize_row_q8_k, q::dequantize_row_q8_k, true},
};

// One block of test input: its kind cycles so every kind appears in every format's run.
void fill_block(std::mt19937_64 &rng, int64_t index, float *x, int64_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(-6.0f, 4.0f);
    switch (index % 10) {
    case 0: std::fill(x, x + n, 0.0f); break;                                       // all zero
    case 1: std::fill(x, x + n, std::pow(10.0f, uniform(rng)) * (index % 20 == 1 ? -1.0f : 1.0f)); break; // constant
    case 2: for (int64_t j = 0; j < n; ++j) x[j] = normal(rng) * 1e-30f; break;     // below every group epsilon
    case 3: for (int64_t j = 0; j < n; ++j) x[j] = normal(rng) * 2e3f; break;       // large (scales stay < 65504)
    case 4: {                                                                        // one outlier
        const float s = std::pow(10.0f, uniform(rng));
        for (int64_t j = 0; j < n; ++j) x[j] = normal(rng) * s;
        x[rng() % static_cast<uint64_t>(n)] *= 40.0f;
        break;
    }
    case 5: for (int64_t j = 0; j < n; ++j) x[j] = std::fabs(normal(rng)) * 0.02f; break; // one-signed (min > 0)
    case 6: { // sparse: mostly zero
        for (int64_t j = 0; j < n; ++j) x[j] = (rng() % 8 == 0) ? normal(rng) : 0.0f;
        break;
    }
    default: {
        const float s = std::pow(10.0f, uniform(rng));
        for (int64_t j = 0; j < n; ++j) x[j] = normal(rng) * s;
    }
    }
}

bool same_float(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return true;
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    return ua == ub;
}

// Blocks whose bytes may legitimately differ: ggml leaves some fields of degenerate blocks unwritten.
bool bytes_may_differ(const format &f, const float *x) {
    if (std::strcmp(f.name, "iq4_nl") == 0 || std::strcmp(f.name, "q8_k") == 0) {
        float amax = 0;
        for (int64_t j = 0; j < f.block_elems; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        // IQ4_NL: an all-zero block keeps the previous block's (or uninitialised) indices behind d = 0; Q8_K: an
        // all-zero block's bsums stay as the buffer held them.
        return std::strcmp(f.name, "iq4_nl") == 0 ? amax < 1e-15f : amax == 0.0f;
    }
    return false;
}

int check_format(void *lib, const format &f, int64_t blocks) {
    const std::string qname = std::string("quantize_row_") + f.ggml + "_ref";
    const std::string dname = std::string("dequantize_row_") + f.ggml;
    auto *ggml_quantize = reinterpret_cast<quantize_fn>(dlsym(lib, qname.c_str()));
    auto *ggml_dequantize = reinterpret_cast<dequantize_fn>(dlsym(lib, dname.c_str()));
    if (ggml_quantize == nullptr || ggml_dequantize == nullptr) {
        std::printf("FAIL %s: libggml-base.so does not export %s / %s\n", f.name, qname.c_str(), dname.c_str());
        return 1;
    }
    std::mt19937_64 rng(0x5eed0000u + static_cast<uint64_t>(f.block_elems) + std::strlen(f.name) * 7919u);
    const int64_t n = blocks * f.block_elems;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t b = 0; b < blocks; ++b) fill_block(rng, b, x.data() + b * f.block_elems, f.block_elems);
    // Quantize block by block on both sides (ggml's IQ4_NL carries indices across blocks of one call).
    std::vector<unsigned char> ours(static_cast<size_t>(blocks) * f.block_bytes), theirs(ours.size(), 0xAB);
    int64_t byte_mismatches = 0, skipped = 0;
    for (int64_t b = 0; b < blocks; ++b) {
        const float *xb = x.data() + b * f.block_elems;
        unsigned char *o = ours.data() + b * f.block_bytes, *t = theirs.data() + b * f.block_bytes;
        f.quantize(xb, o, f.block_elems);
        std::memcpy(t, o, f.block_bytes); // fields ggml leaves unwritten then hold ours
        ggml_quantize(xb, t, f.block_elems);
        if (std::memcmp(o, t, f.block_bytes) != 0) {
            if (bytes_may_differ(f, xb)) {
                // Then the values must still agree: both sides' bytes dequantize (with Strata's code) to equal values
                // (+0 and -0 alike: d = 0 times a negative grid value is -0).
                std::vector<float> vo(static_cast<size_t>(f.block_elems)), vt(vo.size());
                f.dequantize(o, vo.data(), f.block_elems);
                f.dequantize(t, vt.data(), f.block_elems);
                bool same = true;
                for (size_t k = 0; k < vo.size(); ++k) same = same && vo[k] == vt[k];
                if (same) {
                    ++skipped;
                    continue;
                }
            }
            if (byte_mismatches++ < 3) {
                std::printf("  %s block %lld (kind %lld): bytes differ at", f.name, static_cast<long long>(b),
                            static_cast<long long>(b % 10));
                for (size_t k = 0; k < f.block_bytes; ++k) {
                    if (o[k] != t[k]) std::printf(" [%zu] %02x/%02x", k, o[k], t[k]);
                }
                std::printf("\n");
            }
        }
    }
    // Dequantize ggml's bytes and random bytes on both sides.
    std::vector<unsigned char> random_bytes(ours.size());
    for (auto &c : random_bytes) c = static_cast<unsigned char>(rng());
    int64_t float_mismatches = 0;
    std::vector<float> a(static_cast<size_t>(n)), c(static_cast<size_t>(n));
    for (const auto *src : {&theirs, &random_bytes}) {
        f.dequantize(src->data(), a.data(), n);
        ggml_dequantize(src->data(), c.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            if (!same_float(a[i], c[i]) && float_mismatches++ < 3) {
                std::printf("  %s element %lld of %s bytes: %a vs ggml %a\n", f.name, static_cast<long long>(i),
                            src == &theirs ? "quantized" : "random", a[i], c[i]);
            }
        }
    }
    const bool ok = byte_mismatches == 0 && float_mismatches == 0;
    std::printf("%s %-6s %lld blocks: quantized bytes %s (%lld degenerate blocks compared by value only), "
                "dequantized floats %s\n",
                ok ? "ok  " : "FAIL", f.name, static_cast<long long>(blocks),
                byte_mismatches == 0 ? "equal" : (std::to_string(byte_mismatches) + " blocks differ").c_str(),
                static_cast<long long>(skipped),
                float_mismatches == 0 ? "equal" : (std::to_string(float_mismatches) + " differ").c_str());
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    std::string lib_path;
    int64_t blocks = 100000;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--lib" && i + 1 < argc) lib_path = argv[++i];
        else if (arg == "--blocks" && i + 1 < argc) blocks = std::atoll(argv[++i]);
        else {
            std::fprintf(stderr, "usage: quant_vs_ggml --lib PATH/libggml-base.so [--blocks N]\n");
            return 2;
        }
    }
    void *lib = lib_path.empty() ? nullptr : dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        std::printf("SKIP quant_vs_ggml: cannot load llama.cpp's libggml-base.so (%s): %s; install the peer with "
                    "npm ci --prefix tools/peer --omit=optional\n",
                    lib_path.empty() ? "no --lib given" : lib_path.c_str(), lib_path.empty() ? "" : dlerror());
        return 77;
    }
    int failures = 0;
    for (const auto &f : formats) failures += check_format(lib, f, blocks);
    std::printf(failures == 0 ? "all formats equal ggml's\n" : "%d formats differ from ggml's\n", failures);
    return failures == 0 ? 0 : 1;
}
