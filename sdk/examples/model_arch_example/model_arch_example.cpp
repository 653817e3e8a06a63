// Example model_arch plugin: a bigram model, the smallest thing with the shape of a transformer's ends.
//   logits = output.weight · token_embd.weight[last token]
// It handles GGUF files whose general.architecture is "example_bigram" and shows how an architecture reads
// hyperparameters and weights from the model source and runs its forward pass with the device's ops (it never
// touches weights itself, so it works on any device and with any quant format).
#include <strata/plugin.hpp>

#include <cstddef>
#include <cstring>
#include <new>

namespace {

using strata::plugin::fail;
using strata::plugin::ok;

constexpr const char *arch_name = "example_bigram";

struct model {
    strata_tensor_view token_embd{}; // views borrowed from the model source; valid for the model's lifetime
    strata_tensor_view output{};
    int32_t n_vocab = 0;
    int32_t n_embd = 0;
    int32_t n_ctx_train = 0;
};

int32_t matches(const char *arch) { return arch != nullptr && std::strcmp(arch, arch_name) == 0; }

strata_model *create(const strata_model_source *src, strata_status *st) {
    model m;
    m.token_embd.struct_size = sizeof(strata_tensor_view);
    m.output.struct_size = sizeof(strata_tensor_view);
    if (!src->get_tensor(src->ctx, "token_embd.weight", &m.token_embd) ||
        !src->get_tensor(src->ctx, "output.weight", &m.output)) {
        fail(st, STRATA_ERR_NOT_FOUND, "%s: the model needs tensors token_embd.weight and output.weight", arch_name);
        return nullptr;
    }
    if (m.token_embd.cols != m.output.cols || m.token_embd.rows != m.output.rows) {
        fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: token_embd.weight and output.weight must have the same shape",
             arch_name);
        return nullptr;
    }
    m.n_vocab = static_cast<int32_t>(m.token_embd.rows);
    m.n_embd = static_cast<int32_t>(m.token_embd.cols);
    uint64_t ctx = 0;
    m.n_ctx_train = src->get_u64(src->ctx, "example_bigram.context_length", &ctx) ? static_cast<int32_t>(ctx) : 2048;

    model *out = new (std::nothrow) model(m);
    if (out == nullptr) {
        fail(st, STRATA_ERR_OUT_OF_MEMORY, "%s: out of memory", arch_name);
        return nullptr;
    }
    ok(st);
    return reinterpret_cast<strata_model *>(out); // caller owns; frees with destroy
}

void destroy(strata_model *m) { delete reinterpret_cast<model *>(m); }

void get_hparams(const strata_model *handle, strata_model_hparams *out) {
    const model *m = reinterpret_cast<const model *>(handle);
    strata_model_hparams h{};
    h.struct_size = sizeof h;
    h.n_vocab = m->n_vocab;
    h.n_ctx_train = m->n_ctx_train;
    h.n_embd = m->n_embd;
    h.n_layer = 0; // no layers, so the host allocates no KV cache
    h.n_head = 1;
    h.n_head_kv = 1;
    h.head_dim = m->n_embd;
    h.n_ff = 0;
    h.norm_eps = 1e-5f;
    h.rope_theta = 10000.0f;
    h.rope_dims = 0;
    h.rope_mode = STRATA_ROPE_PAIRS;
    *out = h;
}

// Only the last token's embedding is needed for its logits.
uint64_t workspace_bytes(const strata_model *handle, int32_t) {
    return static_cast<uint64_t>(reinterpret_cast<const model *>(handle)->n_embd) * sizeof(float);
}

int32_t forward(strata_model *handle, const strata_forward_args *a, strata_status *st) {
    const model *m = reinterpret_cast<const model *>(handle);
    if (a->n_tokens <= 0) return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: forward with no tokens", arch_name);
    if (a->workspace_size < workspace_bytes(handle, a->n_tokens)) {
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: workspace too small", arch_name);
    }
    float *hidden = static_cast<float *>(a->workspace); // host-owned scratch; no allocation per token
    const strata_device_desc *ops = a->device_ops;
    const int32_t last = a->tokens[a->n_tokens - 1];
    int32_t rc = ops->embedding(a->device, &m->token_embd, &last, 1, hidden, st);
    if (rc != STRATA_OK) return rc; // the device filled the status
    return ops->matmul(a->device, &m->output, hidden, 1, a->logits, st);
}

// Optional slots (tensor_count/tensor_at) let the memory planner place weights tensor by tensor; they stay NULL
// here, and the host tests STRATA_HAS_SLOT before calling any optional slot.

const strata_model_arch_desc &descriptor() {
    static const strata_model_arch_desc desc = [] {
        strata_model_arch_desc d{};
        d.header = strata::plugin::make_header<strata_model_arch_desc>(
            STRATA_KIND_MODEL_ARCH, arch_name, offsetof(strata_model_arch_desc, tensor_count));
        // --- required ---
        d.matches = &matches;
        d.create = &create;
        d.destroy = &destroy;
        d.get_hparams = &get_hparams;
        d.workspace_bytes = &workspace_bytes;
        d.forward = &forward;
        // --- optional: tensor_count, tensor_at stay NULL ---
        return d;
    }();
    return desc;
}

const strata_plugin_info &plugin_info() {
    static const strata_descriptor_header *const descriptors[] = {&descriptor().header};
    // make_info takes the counts from the arrays and the ABI version from the SDK it is built against.
    static const strata_plugin_info info = strata::plugin::make_info("example_model_arch", "0.1.0", "MIT", "SDK example: bigram model (embedding -> output projection)", descriptors);
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info())
