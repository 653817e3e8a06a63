// Run-time choice between the AVX2 and the scalar kernels, and the two descriptor tables that carry them.
//
// STRATA_FORCE_SCALAR: when this environment variable is set to anything but "" or "0" before the plugin is loaded,
// the scalar kernels are used even on an AVX2 CPU (for debugging and for tests that compare both paths).
#include "ggml_quants.hpp"

#include <strata/cpu_features.hpp>
#include <strata/plugin.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

namespace strata::quants {
namespace {

const char *kernel_name_scalar() { return "scalar"; }
const char *kernel_name_avx2() { return "avx2+fma"; }

struct kernel_row {
    dot_fn f32, f16, bf16, q8_0, q4_0;
    gemm_f32_fn gemm_f32, gemm_f16, gemm_bf16;
    quantize_fn quantize_activations_q8; // Q8_0 and Q4_0 both take block_q8_act activations
    dot_act_fn dot_act_q8_0, dot_act_q4_0;
    dot_act_multi_fn dot_act_multi_q8_0, dot_act_multi_q4_0;
    gemm_act_fn gemm_act_q8_0, gemm_act_q4_0;
    const char *(*name)();
    format_kernels (*added)(uint32_t type); // the formats added after Q4_0
};

// find_nonfinite per type: a captureless function for each type the table has.
template <uint32_t Type> int64_t find_nonfinite_of(const void *row, int64_t n) { return find_nonfinite(Type, row, n); }

int64_t (*nonfinite_check(uint32_t type))(const void *, int64_t) {
    switch (type) {
    case ggml_type_f32: return find_nonfinite_of<ggml_type_f32>;
    case ggml_type_f16: return find_nonfinite_of<ggml_type_f16>;
    case ggml_type_bf16: return find_nonfinite_of<ggml_type_bf16>;
    case ggml_type_q8_0: return find_nonfinite_of<ggml_type_q8_0>;
    case ggml_type_q4_0: return find_nonfinite_of<ggml_type_q4_0>;
    case ggml_type_q4_1: return find_nonfinite_of<ggml_type_q4_1>;
    case ggml_type_q5_0: return find_nonfinite_of<ggml_type_q5_0>;
    case ggml_type_q5_1: return find_nonfinite_of<ggml_type_q5_1>;
    case ggml_type_iq4_nl: return find_nonfinite_of<ggml_type_iq4_nl>;
    case ggml_type_q2_k: return find_nonfinite_of<ggml_type_q2_k>;
    case ggml_type_q3_k: return find_nonfinite_of<ggml_type_q3_k>;
    case ggml_type_q4_k: return find_nonfinite_of<ggml_type_q4_k>;
    case ggml_type_q5_k: return find_nonfinite_of<ggml_type_q5_k>;
    case ggml_type_q6_k: return find_nonfinite_of<ggml_type_q6_k>;
    case ggml_type_iq4_xs: return find_nonfinite_of<ggml_type_iq4_xs>;
    default: return nullptr;
    }
}

bool sixteen_row_tiles(gemm_act_fn gemm); // below, beside the x86 entries it names

strata_quant_desc describe(const char *name, uint32_t ggml_type, uint32_t block_elems, uint32_t block_bytes,
                           void (*dequantize)(const void *, float *, int64_t), quantize_fn quantize, dot_fn dot,
                           const char *(*kernel_name)(), format_kernels path = {}) {
    strata_quant_desc d = plugin::make_quant_desc(name, ggml_type, block_elems, block_bytes,
                                                  {dequantize, quantize, dot, kernel_name, nonfinite_check(ggml_type)});
    d.act_block_bytes = path.act_block_bytes;
    d.quantize_activations = path.quantize_activations;
    d.dot_act = path.dot_act;
    d.dot_act_multi = path.dot_act_multi;
    if (path.gemm_act != nullptr) {
        d.gemm_row_tile = sixteen_row_tiles(path.gemm_act) ? avx512_gemm_row_tile : gemm_row_tile;
        d.gemm_act = path.gemm_act;
    }
    return d;
}

// A float format's descriptor with its GEMM kernel (ABI 1.22 gemm_f32) and the rows that kernel computes at once (the
// CPU device hands its threads whole tiles): 12 where the x86 F16 / BF16 entries take the tall AVX-512 tile, else 4.
strata_quant_desc with_float_gemm(strata_quant_desc d, gemm_f32_fn gemm) {
    const bool tall = (gemm == gemm_f32_f16_x86 || gemm == gemm_f32_bf16_x86) && avx512_tall_float_tiles();
    d.gemm_row_tile = tall ? tall_float_gemm_row_tile : float_gemm_row_tile;
    d.gemm_f32 = gemm;
    return d;
}

// One of the formats added after Q4_0: its reference conversions and the kernel set's dots.
struct added_format {
    const char *name;
    uint32_t ggml_type;
    uint32_t block_elems, block_bytes;
    void (*dequantize)(const void *, float *, int64_t);
    quantize_fn quantize;
};

constexpr added_format added_formats[] = {
    {"q4_1", ggml_type_q4_1, qk32, sizeof(block_q4_1), dequantize_row_q4_1, quantize_row_q4_1},
    {"q5_0", ggml_type_q5_0, qk32, sizeof(block_q5_0), dequantize_row_q5_0, quantize_row_q5_0},
    {"q5_1", ggml_type_q5_1, qk32, sizeof(block_q5_1), dequantize_row_q5_1, quantize_row_q5_1},
    {"iq4_nl", ggml_type_iq4_nl, qk32, sizeof(block_iq4_nl), dequantize_row_iq4_nl, quantize_row_iq4_nl},
    {"q2_k", ggml_type_q2_k, qk_k, sizeof(block_q2_k), dequantize_row_q2_k, quantize_row_q2_k},
    {"q3_k", ggml_type_q3_k, qk_k, sizeof(block_q3_k), dequantize_row_q3_k, quantize_row_q3_k},
    {"q4_k", ggml_type_q4_k, qk_k, sizeof(block_q4_k), dequantize_row_q4_k, quantize_row_q4_k},
    {"q5_k", ggml_type_q5_k, qk_k, sizeof(block_q5_k), dequantize_row_q5_k, quantize_row_q5_k},
    {"q6_k", ggml_type_q6_k, qk_k, sizeof(block_q6_k), dequantize_row_q6_k, quantize_row_q6_k},
    {"iq4_xs", ggml_type_iq4_xs, qk_k, sizeof(block_iq4_xs), dequantize_row_iq4_xs, quantize_row_iq4_xs},
};
static_assert(5 + std::size(added_formats) == descriptor_count);

strata_quant_desc make_table_entry(const kernel_row &k, int index) {
    switch (index) {
    case 0:
        return with_float_gemm(describe("f32", ggml_type_f32, 1, 4, dequantize_row_f32, quantize_row_f32, k.f32, k.name),
                               k.gemm_f32);
    case 1:
        return with_float_gemm(describe("f16", ggml_type_f16, 1, 2, dequantize_row_f16, quantize_row_f16, k.f16, k.name),
                               k.gemm_f16);
    case 2:
        return with_float_gemm(
            describe("bf16", ggml_type_bf16, 1, 2, dequantize_row_bf16, quantize_row_bf16, k.bf16, k.name), k.gemm_bf16);
    case 3:
        return describe("q8_0", ggml_type_q8_0, qk8_0, sizeof(block_q8_0), dequantize_row_q8_0, quantize_row_q8_0,
                        k.q8_0, k.name,
                        {nullptr, act_block_bytes_q8, k.quantize_activations_q8, k.dot_act_q8_0, k.dot_act_multi_q8_0,
                         k.gemm_act_q8_0});
    case 4:
        return describe("q4_0", ggml_type_q4_0, qk4_0, sizeof(block_q4_0), dequantize_row_q4_0, quantize_row_q4_0,
                        k.q4_0, k.name,
                        {nullptr, act_block_bytes_q8, k.quantize_activations_q8, k.dot_act_q4_0, k.dot_act_multi_q4_0,
                         k.gemm_act_q4_0});
    default: {
        const added_format &f = added_formats[index - 5];
        const format_kernels kernels = k.added(f.ggml_type);
        return describe(f.name, f.ggml_type, f.block_elems, f.block_bytes, f.dequantize, f.quantize, kernels.dot,
                        k.name, kernels);
    }
    }
}

// The AVX2 table's added formats: with their AVX-512 integer dots where the CPU has them (the same bits).
format_kernels added_format_kernels_avx2_or_avx512(uint32_t type) {
    return cpu_has_avx512_vnni() ? added_format_kernels_avx512(type) : added_format_kernels_avx2(type);
}

const kernel_row scalar_kernels{dot_f32_scalar,
                                dot_f16_scalar,
                                dot_bf16_scalar,
                                dot_q8_0_scalar,
                                dot_q4_0_scalar,
                                gemm_f32_f32_scalar,
                                gemm_f32_f16_scalar,
                                gemm_f32_bf16_scalar,
                                quantize_activations_q8_scalar,
                                dot_act_q8_0_scalar,
                                dot_act_q4_0_scalar,
                                dot_act_multi_q8_0_scalar,
                                dot_act_multi_q4_0_scalar,
                                gemm_act_q8_0_scalar,
                                gemm_act_q4_0_scalar,
                                kernel_name_scalar,
                                added_format_kernels_scalar};
const kernel_row avx2_kernels{dot_f32_avx2,
                              dot_f16_avx2,
                              dot_bf16_avx2,
                              dot_q8_0_avx2,
                              dot_q4_0_avx2,
                              gemm_f32_f32_x86,
                              gemm_f32_f16_x86,
                              gemm_f32_bf16_x86,
                              quantize_activations_q8_avx2,
                              dot_act_q8_0_avx2,
                              dot_act_q4_0_avx2,
                              dot_act_multi_q8_0_avx2_or_vnni,
                              dot_act_multi_q4_0_avx2_or_vnni,
                              gemm_act_q8_0_x86,
                              gemm_act_q4_0_x86,
                              kernel_name_avx2,
                              added_format_kernels_avx2_or_avx512};

struct descriptor_table {
    strata_quant_desc entries[descriptor_count];
    explicit descriptor_table(const kernel_row &k) {
        for (int i = 0; i < descriptor_count; ++i) entries[i] = make_table_entry(k, i);
    }
};

} // namespace

bool cpu_has_avx2_fma() { return plugin::cpu_has_avx2_fma_f16c(); }

bool cpu_has_avx_vnni() {
#if defined(__x86_64__) || defined(_M_X64)
    if (!cpu_has_avx2_fma()) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID leaf 7, subleaf 1: EAX bit 4 is AVX-VNNI (VEX-encoded, 256-bit; the YMM state check is done above).
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
#else
    return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(_M_X64)
    if (!cpu_has_avx2_fma() || plugin::avx512_disabled_by_environment()) return false;
    __builtin_cpu_init();
    // __builtin_cpu_supports checks the OS's XSAVE state for ZMM and the mask registers too.
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

namespace {
// Checked once when the plugin is loaded; the AVX2 descriptors' multi kernels branch on it per call (one predictable
// branch per weight row and token block).
const bool avx_vnni_available = cpu_has_avx_vnni();
} // namespace

void dot_act_multi_q8_0_avx2_or_vnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x,
                                     int64_t n, float *out) {
    if (avx_vnni_available) return dot_act_multi_q8_0_avxvnni(row, xq, xq_stride_bytes, n_x, n, out);
    dot_act_multi_q8_0_avx2(row, xq, xq_stride_bytes, n_x, n, out);
}

void dot_act_multi_q4_0_avx2_or_vnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x,
                                     int64_t n, float *out) {
    if (avx_vnni_available) return dot_act_multi_q4_0_avxvnni(row, xq, xq_stride_bytes, n_x, n, out);
    dot_act_multi_q4_0_avx2(row, xq, xq_stride_bytes, n_x, n, out);
}

void gemm_act_q8_0_avx2_or_vnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                                int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    if (avx_vnni_available)
        return gemm_act_q8_0_avxvnni(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
    gemm_act_q8_0_avx2(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

void gemm_act_q4_0_avx2_or_vnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                                int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    if (avx_vnni_available)
        return gemm_act_q4_0_avxvnni(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
    gemm_act_q4_0_avx2(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

void gemm_act_q5_0_avx2_or_vnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                                int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    if (avx_vnni_available)
        return gemm_act_q5_0_avxvnni(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
    gemm_act_q5_0_avx2(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

namespace {
bool cpu_is_amd() {
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init(); // it may run before the runtime's own constructor has filled the CPU model in
    return __builtin_cpu_is("amd");
#else
    return false;
#endif
}
} // namespace

bool avx512_tall_float_tiles() { return cpu_has_avx512_vnni() && cpu_is_amd(); }

namespace {
const bool avx512_available = cpu_has_avx512_vnni();
// The F16 / BF16 tile shape (the same bits either way): 12 rows x 4 vectors on AMD, 4 x 8 elsewhere.
const bool tall_float_tiles = avx512_tall_float_tiles();
} // namespace

namespace {
// Whether an integer GEMM kernel computes 16 rows at once here: the AVX-512 tiles (Q5_0's and Q4_K's directly, Q8_0's and Q4_0's
// through their x86 entries, on the flag those entries branch on), whose descriptors say so in gemm_row_tile.
bool sixteen_row_tiles(gemm_act_fn gemm) {
    if (gemm == gemm_act_q4_k_avx512 || gemm == gemm_act_q5_0_avx512) return true;
    return (gemm == gemm_act_q8_0_x86 || gemm == gemm_act_q4_0_x86) && avx512_available;
}
} // namespace

void gemm_act_q8_0_x86(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                       int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    if (avx512_available) return gemm_act_q8_0_avx512(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
    gemm_act_q8_0_avx2_or_vnni(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

void gemm_act_q4_0_x86(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                       int32_t n_x, int64_t n, float *out, int64_t out_stride) {
    if (avx512_available) return gemm_act_q4_0_avx512(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
    gemm_act_q4_0_avx2_or_vnni(w, row_bytes, n_rows, xq, xq_stride_bytes, n_x, n, out, out_stride);
}

void gemm_f32_f32_x86(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                      int64_t n, float *out, int64_t out_stride) {
    if (avx512_available) return gemm_f32_f32_avx512(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
    gemm_f32_f32_avx2(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}

void gemm_f32_f16_x86(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                      int64_t n, float *out, int64_t out_stride) {
    if (tall_float_tiles)
        return gemm_f32_f16_avx512_tall(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
    if (avx512_available) return gemm_f32_f16_avx512(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
    gemm_f32_f16_avx2(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}

void gemm_f32_bf16_x86(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride) {
    if (tall_float_tiles)
        return gemm_f32_bf16_avx512_tall(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
    if (avx512_available) return gemm_f32_bf16_avx512(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
    gemm_f32_bf16_avx2(w, row_bytes, n_rows, x, x_stride, n_x, n, out, out_stride);
}

kernel_set select_kernel_set() {
    if (plugin::scalar_forced_by_environment() || !cpu_has_avx2_fma()) return kernel_set::scalar;
    return kernel_set::avx2_fma;
}

const char *kernel_set_name(kernel_set set) {
    return set == kernel_set::avx2_fma ? kernel_name_avx2() : kernel_name_scalar();
}

const strata_quant_desc *descriptors(kernel_set set) {
    static const descriptor_table scalar_table(scalar_kernels);
    static const descriptor_table avx2_table(avx2_kernels);
    return set == kernel_set::avx2_fma ? avx2_table.entries : scalar_table.entries;
}

const strata_quant_desc *descriptors() {
    static const strata_quant_desc *const chosen = descriptors(select_kernel_set());
    return chosen;
}

int n_descriptors() { return descriptor_count; }

} // namespace strata::quants
