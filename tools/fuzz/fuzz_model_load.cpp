// libFuzzer target for the decoder plugin's reading of a model: a fuzzed GGUF file, parsed by the GGUF reader, given
// to its family's load through a strata_model_source over it (as the engine's model_source builds one: metadata by
// key, tensors as row views, any GGML type). Every key the families read (RoPE scaling, YaRN, LongRoPE, Gemma's caps
// and windows, experts), every shape check and the fused splits run on hostile values. Only a refusal
// (std::runtime_error, which strata::error is) may come out; a crash, a sanitizer report, another exception, or a
// weight view outside the input is a bug.
#include "common/error.hpp"
#include "decoder_model.hpp"
#include "gguf/gguf_file.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

using strata::decoder::k_families;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

// One quant descriptor per GGML type with the type's block shape (the decoder checks only types and shapes).
const strata_quant_desc *quant_for(uint32_t type) {
    static const auto descs = [] {
        std::array<strata_quant_desc, 64> d{};
        for (uint32_t t = 0; t < d.size(); ++t) {
            d[t].header.struct_size = sizeof(strata_quant_desc);
            d[t].header.kind = STRATA_KIND_QUANT;
            d[t].ggml_type = t;
            if (const strata::gguf::type_traits *tr = strata::gguf::ggml_type_traits(t)) {
                d[t].header.name = tr->name;
                d[t].block_elems = tr->block_elems;
                d[t].block_bytes = tr->block_bytes;
            }
        }
        return d;
    }();
    return type < descs.size() && descs[type].block_elems > 0 ? &descs[type] : nullptr;
}

// A strata_model_source over a parsed file. Getters never throw (the C ABI): a wrong-typed key reads as absent.
struct gguf_source {
    const strata::gguf::file &f;
    strata_model_source view{};

    explicit gguf_source(const strata::gguf::file &file) : f(file) {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.get_u64 = [](void *ctx, const char *key, uint64_t *out) -> int32_t {
            try {
                const auto v = static_cast<gguf_source *>(ctx)->f.get_uint(key);
                if (!v) return 0;
                *out = *v;
                return 1;
            } catch (const strata::error &) {
                return 0;
            }
        };
        view.get_f64 = [](void *ctx, const char *key, double *out) -> int32_t {
            try {
                const auto v = static_cast<gguf_source *>(ctx)->f.get_float(key);
                if (!v) return 0;
                *out = *v;
                return 1;
            } catch (const strata::error &) {
                return 0;
            }
        };
        view.get_str = [](void *ctx, const char *key, const char **out) -> int32_t {
            try {
                const auto v = static_cast<gguf_source *>(ctx)->f.get_string(key);
                if (!v) return 0;
                *out = v->data(); // NUL-terminated in the buffer (fuzz_gguf checks it)
                return 1;
            } catch (const strata::error &) {
                return 0;
            }
        };
        view.get_tensor = [](void *ctx, const char *name, strata_tensor_view *out) -> int32_t {
            const strata::gguf::tensor_info *t = static_cast<gguf_source *>(ctx)->f.find_tensor(name);
            const strata_quant_desc *q = t != nullptr ? quant_for(t->type) : nullptr;
            if (q == nullptr || t->ne[0] % q->block_elems != 0) return 0;
            out->struct_size = sizeof *out;
            out->ggml_type = t->type;
            out->quant = q;
            out->data = t->data;
            out->cols = t->ne[0];
            // As the engine's model_source: a row count or row size past int64 matches no shape (0 rows).
            int64_t rows = 0, row_bytes = 0;
            if (__builtin_mul_overflow(t->ne[1], t->ne[2], &rows) || __builtin_mul_overflow(rows, t->ne[3], &rows) ||
                __builtin_mul_overflow(t->ne[0] / q->block_elems, static_cast<int64_t>(q->block_bytes), &row_bytes))
                rows = row_bytes = 0;
            out->rows = rows;
            out->row_bytes = row_bytes;
            out->name = t->name.c_str();
            out->n_dims = static_cast<int32_t>(t->n_dims); // the decoder checks each dimension (ABI 1.17)
            for (size_t i = 0; i < 4; ++i) out->ne[i] = t->ne[i];
            return 1;
        };
    }
};

// A model that loaded must describe only bytes of the input: every weight view (fused parts included) inside it.
void check_views(const strata::decoder::model &m, const uint8_t *data, size_t size) {
    auto inside = [&](const strata_tensor_view &v) {
        if (v.data == nullptr) return;
        const auto *p = static_cast<const uint8_t *>(v.data);
        check(v.rows > 0 && v.cols > 0 && p >= data);
        check(static_cast<uint64_t>(p - data) + static_cast<uint64_t>(v.rows) * static_cast<uint64_t>(v.row_bytes) <=
              size);
    };
    for (const auto &t : m.listed) inside(t.view);
    for (const auto &layer : m.layers)
        for (const strata_tensor_view &v : layer.t) inside(v);
    check(m.windowed.size() == m.layers.size());
    check(strata::decoder::workspace_bytes(m, 1) > 0 && strata::decoder::workspace_bytes(m, 7) > 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const strata::gguf::file f = strata::gguf::file::parse(data, size, "fuzz.gguf");
        gguf_source src(f);
        const std::string arch(f.get_string("general.architecture").value_or(""));
        for (const auto &fam : k_families) {
            if (arch != fam.arch) continue;
            try {
                std::unique_ptr<strata::decoder::model> m(strata::decoder::load(fam, &src.view));
                check(m != nullptr);
                check_views(*m, data, size);
            } catch (const std::runtime_error &) {
            }
        }
    } catch (const std::runtime_error &) {
    }
    return 0;
}
