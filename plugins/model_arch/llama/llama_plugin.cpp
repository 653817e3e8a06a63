// Plugin entry for the `llama` model architecture: wraps llama_model.cpp in the C ABI.
#include "llama_model.hpp"

#include <strata/plugin.hpp>

#include <cstring>

namespace {

using strata::llama::model;

struct llama_handle {
    model *m;
};

int32_t llama_matches(const char *arch) {
    if (arch == nullptr) return 0;
    // Mistral-shaped GGUFs are written with architecture "llama" by llama.cpp's converter; some tools say "mistral".
    return std::strcmp(arch, "llama") == 0 || std::strcmp(arch, "mistral") == 0;
}

strata_model *llama_create(const strata_model_source *src, strata_status *st) {
    return strata::plugin::guarded_create<strata_model>(st, [&]() -> strata_model * {
        if (src == nullptr || src->get_u64 == nullptr || src->get_tensor == nullptr) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "llama: model source is incomplete");
            return nullptr;
        }
        try {
            return reinterpret_cast<strata_model *>(strata::llama::load(src));
        } catch (const std::exception &e) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "llama: %s", e.what());
            return nullptr;
        }
    });
}

void llama_destroy(strata_model *m) { delete reinterpret_cast<model *>(m); }

void llama_get_hparams(const strata_model *m, strata_model_hparams *out) {
    if (m && out) *out = reinterpret_cast<const model *>(m)->hp;
}

uint64_t llama_workspace_bytes(const strata_model *m, int32_t n_tokens) {
    return strata::llama::workspace_bytes(*reinterpret_cast<const model *>(m), n_tokens);
}

int32_t llama_forward(strata_model *m, const strata_forward_args *args, strata_status *st) {
    return strata::plugin::guarded(st, [&] { return strata::llama::forward(*reinterpret_cast<model *>(m), args, st); });
}

// Weights in use order: embedding, per layer the nine matrices/norms, then the output norm and classifier.
int32_t llama_tensor_count(const strata_model *mp) {
    const model *m = reinterpret_cast<const model *>(mp);
    return 3 + 9 * m->hp.n_layer;
}

int32_t llama_tensor_at(const strata_model *mp, int32_t index, strata_tensor_view *out, int32_t *layer) {
    const model *m = reinterpret_cast<const model *>(mp);
    const int32_t n = llama_tensor_count(mp);
    if (index < 0 || index >= n || out == nullptr) return STRATA_ERR_INVALID_ARGUMENT;
    if (index == 0) {
        *out = m->tok_embd;
        if (layer) *layer = -1;
    } else if (index >= n - 2) {
        *out = index == n - 2 ? m->output_norm : m->output;
        if (layer) *layer = m->hp.n_layer;
    } else {
        const int32_t l = (index - 1) / 9;
        const auto &w = m->layers[static_cast<size_t>(l)];
        const strata_tensor_view *all[9] = {&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo,
                                            &w.ffn_norm, &w.w_gate, &w.w_up, &w.w_down};
        *out = *all[(index - 1) % 9];
        if (layer) *layer = l;
    }
    return STRATA_OK;
}

const strata_model_arch_desc k_llama_desc = {
    strata::plugin::make_header<strata_model_arch_desc>(STRATA_KIND_MODEL_ARCH, "llama",
                                                        offsetof(strata_model_arch_desc, tensor_count)),
    llama_matches,
    llama_create,
    llama_destroy,
    llama_get_hparams,
    llama_workspace_bytes,
    llama_forward,
    llama_tensor_count,
    llama_tensor_at,
};

const strata_descriptor_header *const k_descriptors[] = {&k_llama_desc.header};

const strata_plugin_info k_info = strata::plugin::make_info(
    "llama", "0.1.0", "MIT",
    "Llama-family decoder from GGUF (Llama 1/2/3.x, Mistral 7B; linear RoPE scaling and rope_freqs factors); files "
    "with other RoPE scaling types, biases or experts are refused",
    k_descriptors);

} // namespace

STRATA_PLUGIN_DEFINE(k_info)
