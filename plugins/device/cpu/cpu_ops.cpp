// Op implementations: argument checks, then a split of the work over the device's thread pool. The float math sits
// in the kernel table (scalar or AVX2); matmul's inner loop is the quant plugin's gemm_act or dot_act (integer
// path, when the format has one) or dot_f32.
#include "cpu_ops.hpp"

#include "cpu_attention_driver.hpp"
#include "cpu_device_state.hpp"
#include "cpu_op_support.hpp"

#include <strata/device_args.hpp>
#include <strata/kv_layout.hpp>
#include <strata/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <cstring>
#include <mutex>

namespace strata::cpu {
namespace {

using strata::plugin::fail;
using strata::plugin::guarded;
using strata::plugin::ok;

// Tokens whose activations are reused against one weight row while it sits in L1 (matmul cache blocking).
constexpr int32_t matmul_token_block = 16;
// Tokens per gemm_act call: their quantized activations (cols / 32 * 40 bytes each, or cols / 256 * 292 for Q8_K)
// stay in L2.
constexpr int32_t gemm_token_block = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Chunk size for an elementwise loop over n floats: a few chunks per thread, whole cache lines, and everything on
// the calling thread when n is small.
int64_t elementwise_grain(int64_t n, int threads) {
    if (n < parallel_min_work || threads <= 1) return n;
    const int64_t grain = ceil_div(n, int64_t{threads} * 4);
    return std::max<int64_t>(4096, ceil_div(grain, 16) * 16);
}

} // namespace

// Checks a weight view the way matmul and embedding need it; `what` names the op in messages.
int32_t check_tensor(const strata_tensor_view *w, const char *what, bool need_dot, strata_status *st,
                     bool input_order_ok) {
    if (w == nullptr) return fail(st, invalid, "cpu %s: the tensor view is NULL", what);
    const char *name = w->name != nullptr ? w->name : "(unnamed)";
    if (w->struct_size < offsetof(strata_tensor_view, name) + sizeof(w->name))
        return fail(st, invalid, "cpu %s: tensor '%s' view has struct_size %u, smaller than this plugin's %zu; "
                                 "rebuild the host against the current plugin_abi.h",
                    what, name, w->struct_size, sizeof(strata_tensor_view));
    const strata_quant_desc *q = w->quant;
    if (q == nullptr) return fail(st, invalid, "cpu %s: tensor '%s' has no quant descriptor", what, name);
    if (need_dot ? q->dot_f32 == nullptr : q->dequantize_row == nullptr)
        return fail(st, invalid, "cpu %s: tensor '%s': quant format %u lacks %s", what, name, q->ggml_type,
                    need_dot ? "dot_f32" : "dequantize_row");
    if (w->ggml_type != q->ggml_type)
        return fail(st, invalid, "cpu %s: tensor '%s' has ggml type %u but its quant descriptor is for type %u", what,
                    name, w->ggml_type, q->ggml_type);
    if (w->data == nullptr) return fail(st, invalid, "cpu %s: tensor '%s' has no data", what, name);
    if (w->rows <= 0 || w->cols <= 0)
        return fail(st, invalid, "cpu %s: tensor '%s' has shape %lld x %lld; both must be > 0", what, name,
                    static_cast<long long>(w->rows), static_cast<long long>(w->cols));
    if (q->block_elems == 0 || w->cols % q->block_elems != 0)
        return fail(st, invalid, "cpu %s: tensor '%s' has %lld columns, not a multiple of its block size %u", what,
                    name, static_cast<long long>(w->cols), q->block_elems);
    const int64_t min_row_bytes = w->cols / q->block_elems * q->block_bytes;
    if (w->row_bytes < min_row_bytes)
        return fail(st, invalid, "cpu %s: tensor '%s' has row_bytes %lld but %lld columns need %lld", what, name,
                    static_cast<long long>(w->row_bytes), static_cast<long long>(w->cols),
                    static_cast<long long>(min_row_bytes));
    if (strata::plugin::input_order_of(w) != nullptr && !input_order_ok)
        return fail(st, STRATA_ERR_UNSUPPORTED, "cpu %s: tensor '%s' has an input order (GPTQ act-order); only matmul "
                                                "takes one", what, name);
    return STRATA_OK;
}

// ABI 1.17: a weight is computed when check_tensor takes it for matmul; attention and RoPE take any positive shape,
// and (1.20) a KV cache of any type strata/kv_layout.hpp knows whose groups the heads hold whole (q8_0, 1.23: heads
// of a multiple of 32 values).
int32_t supports(strata_device *, const strata_support_query *q, char *why, uint32_t why_cap) {
    if (q == nullptr || q->struct_size < offsetof(strata_support_query, kv_type)) return 1; // nothing to refuse
    if (q->kind == STRATA_SUPPORT_ATTENTION) { // ABI 1.20: the KV cache's type
        const uint32_t type = strata::kv_layout::type_of(q);
        if (strata::kv_layout::holds_heads_of(type, q->head_dim)) return 1;
        if (why != nullptr && why_cap > 0) {
            if (strata::kv_layout::known(type))
                std::snprintf(why, why_cap, "cpu: a %s KV cache keeps heads in groups of %lld values; heads of %d "
                              "values are not whole groups", strata::kv_layout::type_name(type),
                              static_cast<long long>(strata::kv_layout::group_values(type)), q->head_dim);
            else
                std::snprintf(why, why_cap, "cpu: a KV cache of type %u; this device stores %s", type,
                              strata::kv_layout::type_list);
        }
        return 0;
    }
    if (q->kind != STRATA_SUPPORT_WEIGHT) return 1;
    strata_status st{};
    // A tensor of experts is read by matmul_id, which takes no input order.
    const strata_tensor_view *w = q->weight;
    const bool experts = strata::plugin::holds_experts(w);
    if (check_tensor(w, experts ? "matmul_id" : "matmul", true, &st, !experts) == STRATA_OK) return 1;
    if (why != nullptr && why_cap > 0) std::snprintf(why, why_cap, "%s", st.message);
    return 0;
}

// True when the weight's format offers the integer dot path (ABI 1.1): quantize x once, then integer block dots.
bool has_integer_path(const strata_quant_desc *q) {
    return STRATA_HAS_SLOT(q, quantize_activations) && q->act_block_bytes > 0;
}

namespace {

// Chunk of weight rows per pool task: a few chunks per thread for balance; smaller chunks when many tokens so a
// chunk stays in L2.
int64_t row_grain(const strata_device *dev, int64_t rows, int64_t cols, int32_t n_tokens) {
    const int threads = dev->pool.size();
    if (threads <= 1 || rows * cols * n_tokens < parallel_min_work) return rows;
    const int64_t cap = n_tokens > 1 ? 32 : 256;
    return std::clamp<int64_t>(rows / (int64_t{threads} * 4), 1, cap);
}

// Like run_rows, for a kernel that computes one row against a block of tokens: dot_block(row, t0, count, out)
// writes y[t0 + i][row] to out[i] for i < count (count <= matmul_token_block).
template <class DotBlock>
void run_row_blocks(strata_device *dev, int64_t rows, int64_t cols, int32_t n_tokens, float *y,
                    const DotBlock &dot_block) {
    auto body = [&](int64_t r0, int64_t r1, int) noexcept {
        float out[matmul_token_block];
        for (int32_t t0 = 0; t0 < n_tokens; t0 += matmul_token_block) {
            const int32_t count = std::min(n_tokens - t0, matmul_token_block);
            for (int64_t r = r0; r < r1; ++r) {
                dot_block(r, t0, count, out);
                for (int32_t i = 0; i < count; ++i) y[(t0 + i) * rows + r] = out[i];
            }
        }
    };
    dev->pool.parallel_for(rows, row_grain(dev, rows, cols, n_tokens), body);
}

// Splits weight rows across the pool; dot(row, t) computes y[t][row]. Rows x all tokens per chunk: a weight row is
// read from memory once and reused for a block of tokens.
template <class Dot>
void run_rows(strata_device *dev, int64_t rows, int64_t cols, int32_t n_tokens, float *y, const Dot &dot) {
    auto body = [&](int64_t r0, int64_t r1, int) noexcept {
        for (int32_t t0 = 0; t0 < n_tokens; t0 += matmul_token_block) {
            const int32_t t1 = std::min(n_tokens, t0 + matmul_token_block);
            for (int64_t r = r0; r < r1; ++r)
                for (int32_t t = t0; t < t1; ++t) y[t * rows + r] = dot(r, t);
        }
    };
    dev->pool.parallel_for(rows, row_grain(dev, rows, cols, n_tokens), body);
}

// For the GEMM slots (ABI 1.22): each pool task takes whole tiles of q->gemm_row_tile rows and walks the tokens in
// blocks whose activations stay in L2 while its rows are reread from L1/L2; gemm(r0, r1, t0, count) computes rows
// [r0, r1) for tokens [t0, t0 + count).
template <class Gemm>
void run_row_tiles(strata_device *dev, const strata_quant_desc *q, int64_t rows, int64_t cols, int32_t n_tokens,
                   const Gemm &gemm) {
    const int64_t tile = std::max<int64_t>(1, q->gemm_row_tile);
    auto body = [&](int64_t g0, int64_t g1, int) noexcept {
        const int64_t r0 = g0 * tile, r1 = std::min(rows, g1 * tile);
        for (int32_t t0 = 0; t0 < n_tokens; t0 += gemm_token_block)
            gemm(r0, r1, t0, std::min(n_tokens - t0, gemm_token_block));
    };
    dev->pool.parallel_for(ceil_div(rows, tile), ceil_div(row_grain(dev, rows, cols, n_tokens), tile), body);
}

} // namespace

int32_t matmul(strata_device *dev, const strata_tensor_view *w, const float *x, int32_t n_tokens, float *y,
               strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu matmul: device is NULL");
        if (int32_t rc = check_tensor(w, "matmul", true, st, true); rc != STRATA_OK) return rc;
        if (x == nullptr || y == nullptr) return fail(st, invalid, "cpu matmul: x or y is NULL");
        if (n_tokens <= 0) return fail(st, invalid, "cpu matmul: n_tokens = %d; must be > 0", n_tokens);
        const uint64_t fl = sizeof(float) * static_cast<uint64_t>(n_tokens);
        STRATA_REQUIRE_DEVICE(w->data, static_cast<uint64_t>(w->rows * w->row_bytes), "matmul", "the weight");
        STRATA_REQUIRE_DEVICE(x, fl * static_cast<uint64_t>(w->cols), "matmul", "x");
        STRATA_REQUIRE_DEVICE(y, fl * static_cast<uint64_t>(w->rows), "matmul", "y");
        const int32_t *order = strata::plugin::input_order_of(w);
        if (order != nullptr)
            STRATA_REQUIRE_DEVICE(order, sizeof(int32_t) * static_cast<uint64_t>(w->cols), "matmul", "the input order");

        const strata_quant_desc *q = w->quant;
        const auto *data = static_cast<const unsigned char *>(w->data);
        const int64_t rows = w->rows, cols = w->cols, row_bytes = w->row_bytes;
        std::lock_guard lock(dev->op_mutex);
        if (order != nullptr) {
            // GPTQ act-order (ABI 1.19): column j of the weight meets x[order[j]]; gather each token's activations
            // into that order once, then the rows are dotted as any other weight's.
            for (int64_t j = 0; j < cols; ++j)
                if (order[j] < 0 || order[j] >= cols)
                    return fail(st, invalid, "cpu matmul: tensor '%s' input_order[%lld] = %d is outside [0, %lld)",
                                w->name != nullptr ? w->name : "(unnamed)", static_cast<long long>(j), order[j],
                                static_cast<long long>(cols));
            dev->reserve_gathered(cols * n_tokens);
            float *gathered = dev->gathered.get();
            auto gather = [&](int64_t t0, int64_t t1, int) noexcept {
                for (int64_t t = t0; t < t1; ++t)
                    for (int64_t j = 0; j < cols; ++j) gathered[t * cols + j] = x[t * cols + order[j]];
            };
            dev->pool.parallel_for(n_tokens, std::max<int64_t>(1, parallel_min_work / cols), gather);
            x = gathered;
        }

        if (!has_integer_path(q) && STRATA_HAS_SLOT(q, gemm_f32)) {
            // The float formats' GEMM (ABI 1.22), for one token as for a prompt, split as gemm_act below.
            run_row_tiles(dev, q, rows, cols, n_tokens, [&](int64_t r0, int64_t r1, int32_t t0, int32_t count) {
                q->gemm_f32(data + r0 * row_bytes, row_bytes, r1 - r0, x + t0 * cols, cols, count, cols,
                            y + t0 * rows + r0, rows);
            });
            ok(st);
            return STRATA_OK;
        }
        if (!has_integer_path(q)) {
            const auto dot = q->dot_f32;
            run_rows(dev, rows, cols, n_tokens, y,
                     [&](int64_t r, int32_t t) { return dot(data + r * row_bytes, x + t * cols, cols); });
            ok(st);
            return STRATA_OK;
        }

        // Integer path, as llama.cpp: each token's activations are quantized once into the device scratch, then
        // every row is dotted with them in integers.
        const int64_t act_row_bytes = cols / q->block_elems * q->act_block_bytes;
        dev->reserve_activations(act_row_bytes * n_tokens);
        unsigned char *xq = dev->activations.get();
        const auto quantize = q->quantize_activations;
        auto quantize_tokens = [&](int64_t t0, int64_t t1, int) noexcept {
            for (int64_t t = t0; t < t1; ++t) quantize(x + t * cols, xq + t * act_row_bytes, cols);
        };
        dev->pool.parallel_for(n_tokens, std::max<int64_t>(1, parallel_min_work / cols), quantize_tokens);

        if (STRATA_HAS_SLOT(q, gemm_act)) {
            // GEMM (ABI 1.22), for one token as for a prompt: the plugin's tiles take gemm_row_tile rows against
            // several tokens at once; each output's bits are the same in any call, so threads and chunks change
            // nothing.
            run_row_tiles(dev, q, rows, cols, n_tokens, [&](int64_t r0, int64_t r1, int32_t t0, int32_t count) {
                q->gemm_act(data + r0 * row_bytes, row_bytes, r1 - r0, xq + t0 * act_row_bytes, act_row_bytes, count,
                            cols, y + t0 * rows + r0, rows);
            });
            ok(st);
            return STRATA_OK;
        }
        if (n_tokens > 1 && STRATA_HAS_SLOT(q, dot_act_multi)) {
            // Prefill (ABI 1.2): each weight block is unpacked once for a whole block of tokens; the plugin
            // guarantees every result equals dot_act's bit for bit, so chunking the prompt changes nothing.
            run_row_blocks(dev, rows, cols, n_tokens, y, [&](int64_t r, int32_t t0, int32_t count, float *out) {
                q->dot_act_multi(data + r * row_bytes, xq + t0 * act_row_bytes, act_row_bytes, count, cols, out);
            });
            ok(st);
            return STRATA_OK;
        }
        const auto dot = q->dot_act;
        run_rows(dev, rows, cols, n_tokens, y,
                 [&](int64_t r, int32_t t) { return dot(data + r * row_bytes, xq + t * act_row_bytes, cols); });
        ok(st);
        return STRATA_OK;
    });
}

int32_t embedding(strata_device *dev, const strata_tensor_view *table, const int32_t *tokens, int32_t n_tokens,
                  float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu embedding: device is NULL");
        if (int32_t rc = check_tensor(table, "embedding", false, st); rc != STRATA_OK) return rc;
        if (tokens == nullptr || out == nullptr) return fail(st, invalid, "cpu embedding: tokens or out is NULL");
        if (n_tokens <= 0) return fail(st, invalid, "cpu embedding: n_tokens = %d; must be > 0", n_tokens);
        STRATA_REQUIRE_DEVICE(table->data, static_cast<uint64_t>(table->rows * table->row_bytes), "embedding", "the table");
        STRATA_REQUIRE_DEVICE(out, sizeof(float) * static_cast<uint64_t>(n_tokens * table->cols), "embedding", "out");
        // Check every id before writing anything, so a bad one leaves out untouched.
        for (int32_t t = 0; t < n_tokens; ++t)
            if (tokens[t] < 0 || tokens[t] >= table->rows)
                return fail(st, invalid, "cpu embedding: token id %d at index %d is outside the vocabulary [0, %lld) "
                                         "of '%s'",
                            tokens[t], t, static_cast<long long>(table->rows),
                            table->name != nullptr ? table->name : "(unnamed)");
        const auto *data = static_cast<const unsigned char *>(table->data);
        for (int32_t t = 0; t < n_tokens; ++t)
            table->quant->dequantize_row(data + tokens[t] * table->row_bytes, out + t * table->cols, table->cols);
        ok(st);
        return STRATA_OK;
    });
}

int32_t rms_norm(strata_device *dev, const float *x, const float *weight, int32_t n_tokens, int32_t dim, float eps,
                 float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu rms_norm: device is NULL");
        if (x == nullptr || weight == nullptr || out == nullptr)
            return fail(st, invalid, "cpu rms_norm: x, weight or out is NULL");
        if (n_tokens <= 0 || dim <= 0)
            return fail(st, invalid, "cpu rms_norm: n_tokens = %d, dim = %d; both must be > 0", n_tokens, dim);
        const uint64_t rows = sizeof(float) * static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(dim);
        STRATA_REQUIRE_DEVICE(x, rows, "rms_norm", "x");
        STRATA_REQUIRE_DEVICE(weight, sizeof(float) * static_cast<uint64_t>(dim), "rms_norm", "weight");
        STRATA_REQUIRE_DEVICE(out, rows, "rms_norm", "out");
        if (!(eps >= 0.0f) || !std::isfinite(eps))
            return fail(st, invalid, "cpu rms_norm: eps = %g; must be finite and >= 0", static_cast<double>(eps));

        const kernels &k = dev->kern;
        auto body = [&](int64_t t0, int64_t t1, int) noexcept {
            for (int64_t t = t0; t < t1; ++t) {
                const float *xt = x + t * dim;
                // Same rounding steps as ggml: mean in double, narrowed to float before adding eps.
                const float mean = static_cast<float>(k.sum_squares(xt, dim) / dim);
                const float scale = 1.0f / std::sqrt(mean + eps);
                k.scale_mul(xt, scale, weight, out + t * dim, dim);
            }
        };
        std::lock_guard lock(dev->op_mutex);
        const int64_t grain = std::max<int64_t>(1, parallel_min_work / dim);
        dev->pool.parallel_for(n_tokens, grain, body);
        ok(st);
        return STRATA_OK;
    });
}

int32_t rope(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
             const int32_t *positions, float theta_base, int32_t mode, strata_status *st) {
    return rope_ext(dev, x, n_tokens, n_heads, head_dim, rot_dims, positions, theta_base, mode, 1.0f, nullptr, st);
}

int32_t rope_ext(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                 const int32_t *positions, float theta_base, int32_t mode, float freq_scale, const float *freq_factors,
                 strata_status *st) {
    const strata_rope_args a = strata::plugin::rope_ext_args(n_tokens, n_heads, head_dim, rot_dims, positions,
                                                             theta_base, mode, freq_scale, freq_factors);
    return rope_scaled(dev, x, &a, st);
}

int32_t rope_scaled(strata_device *dev, float *x, const strata_rope_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu rope: device is NULL");
        if (x == nullptr) return fail(st, invalid, "cpu rope: x is NULL");
        if (a == nullptr) return fail(st, invalid, "cpu rope: args is NULL");
        if (a->struct_size < sizeof(strata_rope_args))
            return fail(st, invalid, "cpu rope: args.struct_size = %u, expected >= %zu", a->struct_size,
                        sizeof(strata_rope_args));
        const int32_t n_tokens = a->n_tokens, n_heads = a->n_heads, head_dim = a->head_dim, rot_dims = a->rot_dims;
        const int32_t mode = a->mode;
        STRATA_REQUIRE_DEVICE(x, sizeof(float) * static_cast<uint64_t>(std::max(0, n_tokens)) *
                                     static_cast<uint64_t>(std::max(0, n_heads)) * static_cast<uint64_t>(std::max(0, head_dim)),
                              "rope", "x");
        if (n_tokens <= 0 || n_heads <= 0 || head_dim <= 0)
            return fail(st, invalid, "cpu rope: n_tokens = %d, n_heads = %d, head_dim = %d; all must be > 0", n_tokens,
                        n_heads, head_dim);
        if (rot_dims <= 0 || rot_dims > head_dim || rot_dims % 2 != 0)
            return fail(st, invalid, "cpu rope: rot_dims = %d; must be even and in [2, head_dim = %d]", rot_dims,
                        head_dim);
        if (mode != STRATA_ROPE_PAIRS && mode != STRATA_ROPE_NEOX)
            return fail(st, invalid, "cpu rope: mode %d is unknown; use STRATA_ROPE_PAIRS (0) or STRATA_ROPE_NEOX (2)",
                        mode);
        if (!(a->theta_base > 0.0f) || !std::isfinite(a->theta_base))
            return fail(st, invalid, "cpu rope: theta_base = %g; must be finite and > 0",
                        static_cast<double>(a->theta_base));
        if (!(a->freq_scale > 0.0f) || !std::isfinite(a->freq_scale))
            return fail(st, invalid, "cpu rope: freq_scale = %g; must be finite and > 0",
                        static_cast<double>(a->freq_scale));
        if (!(a->attn_factor > 0.0f) || !std::isfinite(a->attn_factor))
            return fail(st, invalid, "cpu rope: attn_factor = %g; must be finite and > 0",
                        static_cast<double>(a->attn_factor));
        if (!(a->ext_factor >= 0.0f && a->ext_factor <= 1.0f) || !std::isfinite(a->corr_low) ||
            !std::isfinite(a->corr_high))
            return fail(st, invalid, "cpu rope: ext_factor = %g must be in [0, 1] and corr_low/corr_high (%g, %g) finite",
                        static_cast<double>(a->ext_factor), static_cast<double>(a->corr_low),
                        static_cast<double>(a->corr_high));
        const int32_t *positions = a->positions;
        if (int32_t rc = check_positions(positions, n_tokens, "rope", st); rc != STRATA_OK) return rc;

        // ggml's recipe, in float, for output identical to llama.cpp: theta_i = pos * theta_scale^i built by repeated
        // multiplication, divided by the frequency factor and times freq_scale, YaRN's ramp mix and magnitude when
        // ext_factor is set (ggml_rope_cache_init, rope_yarn), then cosf/sinf times mscale. Each (cos, sin) pair is
        // computed once per token and applied to all heads.
        const float theta_scale = std::pow(a->theta_base, -2.0f / static_cast<float>(rot_dims));
        const float *freq_factors = a->freq_factors;
        const float freq_scale = a->freq_scale, ext_factor = a->ext_factor;
        const float corr_low = a->corr_low, ramp_width = std::max(0.001f, a->corr_high - a->corr_low);
        const float mscale =
            ext_factor != 0.0f ? a->attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale)) : a->attn_factor;
        const int32_t half = rot_dims / 2;
        const int64_t row = int64_t{n_heads} * head_dim;
        const int32_t pair_stride = mode == STRATA_ROPE_NEOX ? 1 : 2;
        const int32_t partner = mode == STRATA_ROPE_NEOX ? half : 1;
        auto body = [&](int64_t t0, int64_t t1, int) noexcept {
            for (int64_t t = t0; t < t1; ++t) {
                float *xt = x + t * row;
                float theta = static_cast<float>(positions[t]);
                for (int32_t i = 0; i < half; ++i) {
                    const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
                    const float extrap = theta / ff;
                    float angle = freq_scale * extrap;
                    if (ext_factor != 0.0f) {
                        const float y = (static_cast<float>(i) - corr_low) / ramp_width;
                        const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
                        angle = angle * (1.0f - ramp_mix) + extrap * ramp_mix;
                    }
                    const float c = std::cos(angle) * mscale, s = std::sin(angle) * mscale;
                    for (int32_t h = 0; h < n_heads; ++h) {
                        float *v = xt + int64_t{h} * head_dim + int64_t{i} * pair_stride;
                        const float x0 = v[0], x1 = v[partner];
                        v[0] = x0 * c - x1 * s;
                        v[partner] = x0 * s + x1 * c;
                    }
                    theta *= theta_scale;
                }
            }
        };
        std::lock_guard lock(dev->op_mutex);
        const int64_t grain = std::max<int64_t>(1, parallel_min_work / (row * 4));
        dev->pool.parallel_for(n_tokens, grain, body);
        ok(st);
        return STRATA_OK;
    });
}

int32_t check_attention_heads(const char *op, int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                              const float *q, const float *out, float scale, strata_status *st) {
    if (n_tokens <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0)
        return fail(st, invalid, "cpu %s: n_tokens = %d, n_heads = %d, n_kv_heads = %d, head_dim = %d; all must be > 0",
                    op, n_tokens, n_heads, n_kv_heads, head_dim);
    if (n_heads % n_kv_heads != 0)
        return fail(st, invalid, "cpu %s: n_heads = %d is not a multiple of n_kv_heads = %d", op, n_heads, n_kv_heads);
    if (q == nullptr || out == nullptr) return fail(st, invalid, "cpu %s: q or out is NULL", op);
    if (!std::isfinite(scale)) return fail(st, invalid, "cpu %s: scale = %g; must be finite", op, static_cast<double>(scale));
    return STRATA_OK;
}

int32_t attention(strata_device *dev, const strata_attention_args *a, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu attention: device is NULL");
        if (a == nullptr) return fail(st, invalid, "cpu attention: args is NULL");
        if (a->struct_size < offsetof(strata_attention_args, softcap))
            return fail(st, invalid, "cpu attention: args.struct_size = %u, expected >= %zu", a->struct_size,
                        offsetof(strata_attention_args, softcap));
        score_terms terms;
        int32_t window = 0;
        if (int32_t rc = strata::plugin::attention_score_terms(a, "cpu attention", &terms.softcap, &window, st);
            rc != STRATA_OK)
            return rc;
        if (int32_t rc = check_attention_heads("attention", a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, a->q,
                                               a->out, a->scale, st);
            rc != STRATA_OK)
            return rc;
        const uint64_t q_bytes = sizeof(float) * static_cast<uint64_t>(a->n_tokens) * static_cast<uint64_t>(a->n_heads) *
                                 static_cast<uint64_t>(a->head_dim);
        STRATA_REQUIRE_DEVICE(a->q, q_bytes, "attention", "q");
        STRATA_REQUIRE_DEVICE(a->out, q_bytes, "attention", "out");
        STRATA_REQUIRE_DEVICE(a->k_cache, sizeof(float), "attention", "k_cache");
        STRATA_REQUIRE_DEVICE(a->v_cache, sizeof(float), "attention", "v_cache");
        if (int64_t{a->kv_row_stride} < int64_t{a->n_kv_heads} * a->head_dim)
            return fail(st, invalid, "cpu attention: kv_row_stride = %d is less than n_kv_heads * head_dim = %lld",
                        a->kv_row_stride, static_cast<long long>(int64_t{a->n_kv_heads} * a->head_dim));
        if (a->k_cache == nullptr || a->v_cache == nullptr)
            return fail(st, invalid, "cpu attention: k_cache or v_cache is NULL");
        if (int32_t rc = check_positions(a->positions, a->n_tokens, "attention", st); rc != STRATA_OK) return rc;

        int64_t n_positions = 0;
        for (int32_t t = 0; t < a->n_tokens; ++t) n_positions = std::max<int64_t>(n_positions, int64_t{a->positions[t]} + 1);

        const attention_items items(a->n_tokens, a->n_heads, a->n_kv_heads, a->head_dim, n_positions,
                                    dev->pool.size(), parallel_min_work);
        std::lock_guard lock(dev->op_mutex);
        dev->reserve_scores(items.scores_per_thread());

        const int64_t stride = a->kv_row_stride;
        // Items as in paged_attention; the whole cache is one run of rows, every token's.
        auto rows_of = [&](int64_t t) {
            return token_context{int64_t{a->positions[t]} + 1, first_attended(a->positions[t], window)};
        };
        auto runs_of = [&](int64_t item, int64_t) {
            const float *keys = a->k_cache + items.kv_offset(item, a->head_dim);
            const float *values = a->v_cache + items.kv_offset(item, a->head_dim);
            return [keys, values, stride](const auto &fn, int64_t lo, int64_t hi, kv_part, bool) {
                fn(lo, hi - lo, keys + lo * stride, values + lo * stride, stride);
            };
        };
        attend_items(*dev, items, a->q, a->out, a->scale, terms.softcap, a->head_dim, rows_of, runs_of);
        ok(st);
        return STRATA_OK;
    });
}

int32_t swiglu(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu swiglu: device is NULL");
        if (gate == nullptr || up == nullptr || out == nullptr)
            return fail(st, invalid, "cpu swiglu: gate, up or out is NULL");
        if (n <= 0) return fail(st, invalid, "cpu swiglu: n = %lld; must be > 0", static_cast<long long>(n));
        const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n);
        STRATA_REQUIRE_DEVICE(gate, bytes, "swiglu", "gate");
        STRATA_REQUIRE_DEVICE(up, bytes, "swiglu", "up");
        STRATA_REQUIRE_DEVICE(out, bytes, "swiglu", "out");
        const kernels &k = dev->kern;
        auto body = [&](int64_t i0, int64_t i1, int) noexcept { k.swiglu(gate + i0, up + i0, out + i0, i1 - i0); };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(n, elementwise_grain(n, dev->pool.size()), body);
        ok(st);
        return STRATA_OK;
    });
}

int32_t add(strata_device *dev, const float *a, const float *b, int64_t n, float *out, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu add: device is NULL");
        if (a == nullptr || b == nullptr || out == nullptr) return fail(st, invalid, "cpu add: a, b or out is NULL");
        if (n <= 0) return fail(st, invalid, "cpu add: n = %lld; must be > 0", static_cast<long long>(n));
        const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n);
        STRATA_REQUIRE_DEVICE(a, bytes, "add", "a");
        STRATA_REQUIRE_DEVICE(b, bytes, "add", "b");
        STRATA_REQUIRE_DEVICE(out, bytes, "add", "out");
        const kernels &k = dev->kern;
        auto body = [&](int64_t i0, int64_t i1, int) noexcept { k.add(a + i0, b + i0, out + i0, i1 - i0); };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(n, elementwise_grain(n, dev->pool.size()), body);
        ok(st);
        return STRATA_OK;
    });
}

int32_t add_rows(strata_device *dev, const float *x, const float *row, int32_t n_rows, int32_t n_cols, float *out,
                 strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu add_rows: device is NULL");
        if (x == nullptr || row == nullptr || out == nullptr)
            return fail(st, invalid, "cpu add_rows: x, row or out is NULL");
        if (n_rows <= 0 || n_cols <= 0)
            return fail(st, invalid, "cpu add_rows: n_rows = %d, n_cols = %d; both must be > 0", n_rows, n_cols);
        const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n_rows) * static_cast<uint64_t>(n_cols);
        STRATA_REQUIRE_DEVICE(x, bytes, "add_rows", "x");
        STRATA_REQUIRE_DEVICE(row, sizeof(float) * static_cast<uint64_t>(n_cols), "add_rows", "row");
        STRATA_REQUIRE_DEVICE(out, bytes, "add_rows", "out");
        const kernels &k = dev->kern;
        auto body = [&](int64_t r0, int64_t r1, int) noexcept {
            for (int64_t r = r0; r < r1; ++r) k.add(x + r * n_cols, row, out + r * n_cols, n_cols);
        };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(n_rows, std::max<int64_t>(1, parallel_min_work / n_cols), body);
        ok(st);
        return STRATA_OK;
    });
}

namespace {

// out[i] = f(i) over n floats, split across the pool, after the shared checks of the element-wise ops.
template <class F>
int32_t map_elements(strata_device *dev, const char *op, std::initializer_list<const float *> inputs, int64_t n,
                     float *out, strata_status *st, const F &f) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu %s: device is NULL", op);
        for (const float *in : inputs)
            if (in == nullptr) return fail(st, invalid, "cpu %s: an input is NULL", op);
        if (out == nullptr) return fail(st, invalid, "cpu %s: out is NULL", op);
        if (n <= 0) return fail(st, invalid, "cpu %s: n = %lld; must be > 0", op, static_cast<long long>(n));
        const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n);
        for (const float *in : inputs) STRATA_REQUIRE_DEVICE(in, bytes, op, "input");
        STRATA_REQUIRE_DEVICE(out, bytes, op, "out");
        auto body = [&](int64_t i0, int64_t i1, int) noexcept {
            for (int64_t i = i0; i < i1; ++i) out[i] = f(i);
        };
        std::lock_guard lock(dev->op_mutex);
        dev->pool.parallel_for(n, elementwise_grain(n, dev->pool.size()), body);
        ok(st);
        return STRATA_OK;
    });
}

// GELU's tanh approximation in float (ggml_gelu_f32), the expression geglu applies.
float gelu_tanh(float g) {
    constexpr float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    constexpr float coef_a = 0.044715f;
    return 0.5f * g * (1.0f + std::tanh(sqrt_2_over_pi * g * (1.0f + coef_a * g * g)));
}

} // namespace

int32_t scale(strata_device *dev, const float *x, int64_t n, float s, float *out, strata_status *st) {
    if (!std::isfinite(s)) return fail(st, invalid, "cpu scale: s = %g; must be finite", static_cast<double>(s));
    return map_elements(dev, "scale", {x}, n, out, st, [&](int64_t i) { return x[i] * s; });
}

int32_t geglu(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st) {
    return map_elements(dev, "geglu", {gate, up}, n, out, st, [&](int64_t i) { return gelu_tanh(gate[i]) * up[i]; });
}

int32_t softcap(strata_device *dev, const float *x, int64_t n, float cap, float *out, strata_status *st) {
    if (!(cap > 0.0f) || !std::isfinite(cap))
        return fail(st, invalid, "cpu softcap: cap = %g; must be finite and > 0", static_cast<double>(cap));
    const float inv = 1.0f / cap;
    return map_elements(dev, "softcap", {x}, n, out, st, [&](int64_t i) { return std::tanh(x[i] * inv) * cap; });
}

int32_t softmax(strata_device *dev, float *x, int32_t n_rows, int32_t n_cols, strata_status *st) {
    return guarded(st, [&]() -> int32_t {
        if (dev == nullptr) return fail(st, invalid, "cpu softmax: device is NULL");
        if (x == nullptr) return fail(st, invalid, "cpu softmax: x is NULL");
        if (n_rows <= 0 || n_cols <= 0)
            return fail(st, invalid, "cpu softmax: n_rows = %d, n_cols = %d; both must be > 0", n_rows, n_cols);
        STRATA_REQUIRE_DEVICE(x, sizeof(float) * static_cast<uint64_t>(n_rows) * static_cast<uint64_t>(n_cols), "softmax",
                              "x");
        const kernels &k = dev->kern;
        auto body = [&](int64_t r0, int64_t r1, int) noexcept {
            for (int64_t r = r0; r < r1; ++r) {
                float *row = x + r * n_cols;
                const float m = k.max(row, n_cols);
                // ggml's order: exponentials summed in double, then one multiply by the float reciprocal.
                k.scale(row, static_cast<float>(1.0 / k.exp_sub_sum(row, m, row, n_cols)), n_cols);
            }
        };
        std::lock_guard lock(dev->op_mutex);
        const int64_t grain = std::max<int64_t>(1, parallel_min_work / n_cols);
        dev->pool.parallel_for(n_rows, grain, body);
        ok(st);
        return STRATA_OK;
    });
}

} // namespace strata::cpu
