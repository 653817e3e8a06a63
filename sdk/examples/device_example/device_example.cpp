// Example device plugin: a single-threaded reference CPU device. Every op is the plain textbook loop, so this file
// doubles as a readable specification of what each op computes. It scores 1 ("works, but prefer anything else"),
// so a real device plugin wins whenever both are loaded.
//
// Device rules shown here: ops never allocate (attention uses an online softmax instead of a scores buffer), every
// failure is a status, and weights are read through the tensor's quant descriptor so any quant plugin works.
#include <strata/plugin.hpp>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

using strata::plugin::fail;
using strata::plugin::ok;

struct device {
    const strata_host_services *host = nullptr; // borrowed; outlives the device
};

int32_t score() { return 1; } // no side effects: the host may call it many times

strata_device *create(const strata_device_create_args *args, strata_status *st) {
    device *d = new (std::nothrow) device;
    if (d == nullptr) {
        fail(st, STRATA_ERR_OUT_OF_MEMORY, "example_device: out of memory");
        return nullptr;
    }
    d->host = args != nullptr ? args->host : nullptr;
    ok(st);
    return reinterpret_cast<strata_device *>(d); // caller owns; frees with destroy
}

void destroy(strata_device *d) { delete reinterpret_cast<device *>(d); }

// Host memory, 64-byte aligned for SIMD loads. Caller owns; frees with mem_free.
void *mem_alloc(strata_device *, uint64_t bytes, strata_status *st) {
    constexpr uint64_t alignment = 64;
    const uint64_t rounded = (bytes + alignment - 1) / alignment * alignment; // aligned_alloc wants a multiple
    void *p = rounded > 0 ? std::aligned_alloc(alignment, static_cast<size_t>(rounded)) : nullptr;
    if (p == nullptr) {
        fail(st, STRATA_ERR_OUT_OF_MEMORY, "example_device: cannot allocate %llu bytes",
             static_cast<unsigned long long>(bytes));
        return nullptr;
    }
    ok(st);
    return p;
}

void mem_free(strata_device *, void *p) { std::free(p); }

// Weights can be in any quant format; the format's own plugin knows how to read it.
bool usable_weights(const strata_tensor_view *w, strata_status *st) {
    if (w == nullptr || w->quant == nullptr || w->data == nullptr) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_device: weight tensor without data or quant descriptor");
        return false;
    }
    return true;
}

int32_t matmul(strata_device *, const strata_tensor_view *w, const float *x, int32_t n_tokens, float *y,
               strata_status *st) {
    if (!usable_weights(w, st)) return STRATA_ERR_INVALID_ARGUMENT;
    const auto *rows = static_cast<const unsigned char *>(w->data);
    for (int32_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < w->rows; ++r) {
            y[t * w->rows + r] = w->quant->dot_f32(rows + r * w->row_bytes, x + t * w->cols, w->cols);
        }
    }
    ok(st);
    return STRATA_OK;
}

int32_t embedding(strata_device *, const strata_tensor_view *table, const int32_t *tokens, int32_t n_tokens,
                  float *out, strata_status *st) {
    if (!usable_weights(table, st)) return STRATA_ERR_INVALID_ARGUMENT;
    const auto *rows = static_cast<const unsigned char *>(table->data);
    for (int32_t t = 0; t < n_tokens; ++t) {
        if (tokens[t] < 0 || tokens[t] >= table->rows) {
            return fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_device: token %d outside the %lld-row table",
                        tokens[t], static_cast<long long>(table->rows));
        }
        table->quant->dequantize_row(rows + tokens[t] * table->row_bytes, out + t * table->cols, table->cols);
    }
    ok(st);
    return STRATA_OK;
}

int32_t rms_norm(strata_device *, const float *x, const float *weight, int32_t n_tokens, int32_t dim, float eps,
                 float *out, strata_status *st) {
    for (int32_t t = 0; t < n_tokens; ++t) {
        const float *row = x + static_cast<int64_t>(t) * dim;
        double sum_sq = 0.0;
        for (int32_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(row[i]) * row[i];
        const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / dim) + eps);
        for (int32_t i = 0; i < dim; ++i) out[static_cast<int64_t>(t) * dim + i] = row[i] * inv_rms * weight[i];
    }
    ok(st);
    return STRATA_OK;
}

// PAIRS rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + rot_dims/2]).
int32_t rope(strata_device *, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
             const int32_t *positions, float theta_base, int32_t mode, strata_status *st) {
    if (rot_dims > head_dim || rot_dims % 2 != 0) {
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_device: rot_dims %d invalid for head_dim %d", rot_dims,
                    head_dim);
    }
    const int32_t half = rot_dims / 2;
    for (int32_t t = 0; t < n_tokens; ++t) {
        for (int32_t h = 0; h < n_heads; ++h) {
            float *head = x + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
            for (int32_t i = 0; i < half; ++i) {
                const float theta = positions[t] * std::pow(theta_base, -2.0f * i / rot_dims);
                const float c = std::cos(theta), s = std::sin(theta);
                float &a = mode == STRATA_ROPE_NEOX ? head[i] : head[2 * i];
                float &b = mode == STRATA_ROPE_NEOX ? head[i + half] : head[2 * i + 1];
                const float a0 = a, b0 = b;
                a = a0 * c - b0 * s;
                b = a0 * s + b0 * c;
            }
        }
    }
    ok(st);
    return STRATA_OK;
}

// Causal attention with an online softmax: one pass over the cache rows, rescaling the running output whenever a
// new maximum appears, so no scores buffer (and no allocation) is needed.
int32_t attention(strata_device *, const strata_attention_args *a, strata_status *st) {
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads != 0) {
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_device: %d heads cannot share %d kv heads", a->n_heads,
                    a->n_kv_heads);
    }
    const int32_t group = a->n_heads / a->n_kv_heads;
    const int32_t row = a->n_heads * a->head_dim;
    for (int32_t t = 0; t < a->n_tokens; ++t) {
        for (int32_t h = 0; h < a->n_heads; ++h) {
            const float *q = a->q + static_cast<int64_t>(t) * row + static_cast<int64_t>(h) * a->head_dim;
            float *out = a->out + static_cast<int64_t>(t) * row + static_cast<int64_t>(h) * a->head_dim;
            const int64_t kv_offset = static_cast<int64_t>(h / group) * a->head_dim;
            for (int32_t i = 0; i < a->head_dim; ++i) out[i] = 0.0f;
            float max_score = -INFINITY, weight_sum = 0.0f;
            for (int32_t j = 0; j <= a->positions[t]; ++j) {
                const float *k = a->k_cache + static_cast<int64_t>(j) * a->kv_row_stride + kv_offset;
                const float *v = a->v_cache + static_cast<int64_t>(j) * a->kv_row_stride + kv_offset;
                float s = 0.0f;
                for (int32_t i = 0; i < a->head_dim; ++i) s += q[i] * k[i];
                s *= a->scale;
                if (s > max_score) { // rescale what we have so far to the new maximum
                    const float rescale = std::exp(max_score - s);
                    for (int32_t i = 0; i < a->head_dim; ++i) out[i] *= rescale;
                    weight_sum *= rescale;
                    max_score = s;
                }
                const float w = std::exp(s - max_score);
                for (int32_t i = 0; i < a->head_dim; ++i) out[i] += w * v[i];
                weight_sum += w;
            }
            for (int32_t i = 0; i < a->head_dim; ++i) out[i] /= weight_sum;
        }
    }
    ok(st);
    return STRATA_OK;
}

int32_t swiglu(strata_device *, const float *gate, const float *up, int64_t n, float *out, strata_status *st) {
    for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    ok(st);
    return STRATA_OK;
}

int32_t add(strata_device *, const float *a, const float *b, int64_t n, float *out, strata_status *st) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    ok(st);
    return STRATA_OK;
}

int32_t softmax(strata_device *, float *x, int32_t n_rows, int32_t n_cols, strata_status *st) {
    for (int32_t r = 0; r < n_rows; ++r) {
        float *row = x + static_cast<int64_t>(r) * n_cols;
        float max_v = -INFINITY;
        for (int32_t i = 0; i < n_cols; ++i) max_v = row[i] > max_v ? row[i] : max_v;
        float sum = 0.0f;
        for (int32_t i = 0; i < n_cols; ++i) sum += (row[i] = std::exp(row[i] - max_v));
        for (int32_t i = 0; i < n_cols; ++i) row[i] /= sum;
    }
    ok(st);
    return STRATA_OK;
}

// Optional slot: lets the engine report how many threads the device uses.
int32_t thread_count(strata_device *) { return 1; }

const strata_device_desc &descriptor() {
    static const strata_device_desc desc = [] {
        strata_device_desc d{};
        d.header = strata::plugin::make_header<strata_device_desc>(STRATA_KIND_DEVICE, "example",
                                                                   offsetof(strata_device_desc, thread_count));
        // --- required: the host refuses the plugin if any of these is NULL ---
        d.score = &score;
        d.create = &create;
        d.destroy = &destroy;
        d.mem_alloc = &mem_alloc;
        d.mem_free = &mem_free;
        d.matmul = &matmul;
        d.embedding = &embedding;
        d.rms_norm = &rms_norm;
        d.rope = &rope;
        d.attention = &attention;
        d.swiglu = &swiglu;
        d.add = &add;
        d.softmax = &softmax;
        // --- optional ---
        d.thread_count = &thread_count;
        return d;
    }();
    return desc;
}

const strata_plugin_info &plugin_info() {
    static const strata_descriptor_header *const descriptors[] = {&descriptor().header};
    // make_info takes the counts from the arrays and the ABI version from the SDK it is built against.
    static const strata_plugin_info info = strata::plugin::make_info("example_device", "0.1.0", "MIT", "SDK example: single-threaded reference CPU device", descriptors);
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info())
