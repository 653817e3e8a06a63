// Plugin entry for the `decoder` model architectures: one model_arch descriptor per row of k_families
// (decoder_family.hpp), each wrapping decoder_model.cpp in the C ABI.
#include "decoder_model.hpp"

#include <strata/plugin.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace {

using strata::decoder::family;
using strata::decoder::k_families;
using strata::decoder::model;

const model &as_model(const strata_model *m) { return *reinterpret_cast<const model *>(m); }

template <size_t I> int32_t matches(const char *arch) {
    return arch != nullptr && std::strcmp(arch, k_families[I].arch) == 0 ? 1 : 0;
}

template <size_t I> strata_model *create(const strata_model_source *src, strata_status *st) {
    return strata::plugin::guarded_create<strata_model>(st, [&]() -> strata_model * {
        if (src == nullptr || src->get_u64 == nullptr || src->get_tensor == nullptr) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: model source is incomplete", k_families[I].arch);
            return nullptr;
        }
        try {
            return reinterpret_cast<strata_model *>(strata::decoder::load(k_families[I], src));
        } catch (const std::exception &e) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: %s", k_families[I].arch, e.what());
            return nullptr;
        }
    });
}

void destroy(strata_model *m) { delete reinterpret_cast<model *>(m); }

void get_hparams(const strata_model *m, strata_model_hparams *out) {
    if (m && out) *out = as_model(m).hp;
}

uint64_t workspace_bytes(const strata_model *m, int32_t n_tokens) {
    return strata::decoder::workspace_bytes(as_model(m), n_tokens);
}

int32_t forward(strata_model *m, const strata_forward_args *args, strata_status *st) {
    return strata::plugin::guarded(st, [&] { return strata::decoder::forward(as_model(m), args, st); });
}

// Weights in use order: the embedding, each layer's tensors (those its file has), the output norm and classifier.
int32_t tensor_count(const strata_model *m) { return static_cast<int32_t>(as_model(m).listed.size()); }

int32_t tensor_at(const strata_model *m, int32_t index, strata_tensor_view *out, int32_t *layer) {
    const auto &listed = as_model(m).listed;
    if (index < 0 || static_cast<size_t>(index) >= listed.size() || out == nullptr) return STRATA_ERR_INVALID_ARGUMENT;
    *out = listed[static_cast<size_t>(index)].view;
    if (layer) *layer = listed[static_cast<size_t>(index)].layer;
    return STRATA_OK;
}

int32_t device_op_need(const strata_model *m, int32_t index, int32_t *op, const char **what) {
    const auto &needs = as_model(m).op_needs;
    if (index < 0 || static_cast<size_t>(index) >= needs.size() || op == nullptr || what == nullptr) return 0;
    *op = needs[static_cast<size_t>(index)].op;
    *what = needs[static_cast<size_t>(index)].what.c_str();
    return 1;
}

// A mixture of experts runs its routed experts on the host device when asked (experts_on_host, ABI 1.17).
int32_t host_experts(const strata_model *m) { return as_model(m).experts.n_expert > 0 ? 1 : 0; }

// Every family runs as pipeline stages (layer ranges with the residual stream in and out, ABI 1.24).
int32_t pipeline_stages(const strata_model *) { return 1; }

// Every family splits by tensor parallel (ABI 1.29: heads and FFN columns, all_reduce after attn_output and
// ffn_down); a mixture of experts only for a host that cuts stacked experts (ABI 1.30: each expert's inner columns,
// all_reduce after the experts' weighted sum).
int32_t tensor_parallel(const strata_model *m) {
    const auto &model = as_model(m);
    return model.experts.n_expert == 0 || model.host_1_30 ? 1 : 0;
}

int32_t tensor_split(const strata_model *m, int32_t index, strata_tensor_split *out) {
    const auto &listed = as_model(m).listed;
    if (index < 0 || static_cast<size_t>(index) >= listed.size() || out == nullptr) return STRATA_ERR_INVALID_ARGUMENT;
    const strata_tensor_split split = strata::decoder::tensor_split(as_model(m), listed[static_cast<size_t>(index)]);
    std::memcpy(out, &split, std::min<size_t>(sizeof split, std::max<size_t>(out->struct_size, sizeof(uint32_t))));
    out->struct_size = static_cast<uint32_t>(std::min<size_t>(sizeof split, std::max<size_t>(out->struct_size, sizeof(uint32_t))));
    return STRATA_OK;
}

template <size_t I> constexpr strata_model_arch_desc make_desc() {
    return {
        strata::plugin::make_header<strata_model_arch_desc>(STRATA_KIND_MODEL_ARCH, k_families[I].arch,
                                                            offsetof(strata_model_arch_desc, tensor_count)),
        matches<I>,
        create<I>,
        destroy,
        get_hparams,
        workspace_bytes,
        forward,
        tensor_count,
        tensor_at,
        device_op_need,
        host_experts,
        pipeline_stages,
        tensor_parallel,
        tensor_split,
    };
}

template <size_t... I> constexpr auto make_descs(std::index_sequence<I...>) {
    return std::array<strata_model_arch_desc, sizeof...(I)>{make_desc<I>()...};
}

const auto k_descs = make_descs(std::make_index_sequence<strata::decoder::family_count>{});

template <size_t... I> constexpr auto make_headers(std::index_sequence<I...>) {
    return std::array<const strata_descriptor_header *, sizeof...(I)>{&k_descs[I].header...};
}

const auto k_descriptors = make_headers(std::make_index_sequence<strata::decoder::family_count>{});

const strata_plugin_info k_info{
    static_cast<uint32_t>(sizeof(strata_plugin_info)), STRATA_ABI_MAJOR, STRATA_ABI_MINOR,
    static_cast<uint32_t>(k_descriptors.size()), "decoder", "0.2.0", "MIT",
    "Pre-norm decoders from GGUF, one descriptor per architecture: llama (Llama 1/2/3.x, Mistral 7B, Mixtral's "
    "experts; rope_freqs factors, optional biases), mistral, qwen2 (Qwen2/2.5), qwen2moe, qwen3, qwen3moe, phi3 "
    "(Phi-3/3.5/4, LongRoPE), gemma2 and gemma3 (GeGLU, post-norms, soft-caps, sliding windows); fused or separate "
    "Q/K/V; linear, YaRN and LongRoPE scaling. Other RoPE scaling types and expert layouts are refused by name",
    k_descriptors.data(), nullptr, 0};

} // namespace

STRATA_PLUGIN_DEFINE(k_info)
