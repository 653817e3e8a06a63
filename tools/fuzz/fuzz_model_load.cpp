// libFuzzer target for the decoder plugin's reading of a model: a fuzzed GGUF file, parsed by the GGUF reader, given
// to its family's load through a strata_model_source over it (as the engine's model_source builds one: metadata by
// key, tensors as row views, any GGML type). Every key the families read (RoPE scaling, YaRN, LongRoPE, Gemma's caps
// and windows, experts), every shape check and the fused splits run on hostile values. Only a refusal
// (std::runtime_error, which strata::error is) may come out; a crash, a sanitizer report, another exception, or a
// weight view outside the input is a bug. A model that loads is then cut into the tensor-parallel parts of 2, 3 or 4
// ranks (the last byte picks) as the engine cuts them (tensor_parallel_shard, from the model's own tensor_split: stacked
// experts too), and each part is loaded as its rank's model: a cut or a part may be refused; a part that loads must hold
// its share of the heads and FFN columns (the experts' too) and the whole vocabulary, and its views must lie inside its
// shard's tensors, and those inside the input or the shard's own memory.
#include "common/error.hpp"
#include "decoder_model.hpp"
#include "gguf/gguf_file.hpp"
#include "model_file/tensor_parallel_shard.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
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

// A strata_model_source over a parsed file, or a tensor-parallel rank's part of one (rank of size, the whole model's
// vocabulary n_vocab). Getters never throw
// (the C ABI): a wrong-typed key reads as absent.
struct gguf_source {
    const strata::model_file &f;
    strata_model_source view{};

    explicit gguf_source(const strata::model_file &file, int32_t rank = 0, int32_t size = 1, int32_t n_vocab = 0)
        : f(file) {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.tensor_parallel_rank = rank;
        view.tensor_parallel_size = size;
        view.tensor_parallel_n_vocab = n_vocab;
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

// Inside [base, base + size): [p, p + bytes) (addresses compared as integers: p may point anywhere).
bool within(const void *p, uint64_t bytes, const void *base, uint64_t size) {
    const auto at = reinterpret_cast<uintptr_t>(p), first = reinterpret_cast<uintptr_t>(base);
    return at >= first && at - first <= size && bytes <= size - (at - first);
}

// Inside the input.
bool in_input(const void *p, uint64_t bytes, const uint8_t *data, size_t size) { return within(p, bytes, data, size); }

// A model that loaded must describe only bytes of the input: every weight view (fused parts included) inside it.
void check_views(const strata::decoder::model &m, const uint8_t *data, size_t size) {
    auto inside = [&](const strata_tensor_view &v) {
        if (v.data == nullptr) return;
        check(v.rows > 0 && v.cols > 0 &&
              in_input(v.data, static_cast<uint64_t>(v.rows) * static_cast<uint64_t>(v.row_bytes), data, size));
    };
    for (const auto &t : m.listed) inside(t.view);
    for (const auto &layer : m.layers)
        for (const strata_tensor_view &v : layer.t) inside(v);
    check(m.windowed.size() == m.layers.size());
    check(strata::decoder::workspace_bytes(m, 1) > 0 && strata::decoder::workspace_bytes(m, 7) > 0);
}

void check_parts(const strata::decoder::family &fam, const strata::decoder::model &whole, const strata::gguf::file &f,
                 const uint8_t *data, size_t size, int32_t n) {
    // The rules as the engine reads them (read_tensor_splits): every split one the ABI knows, a tensor listed twice
    // (a tied classifier) split the same way each time.
    std::map<std::string, strata::tensor_split_rule> rules;
    for (const auto &t : whole.listed) {
        const std::optional<strata::tensor_split_rule> rule =
            strata::split_rule_of(strata::decoder::tensor_split(whole, t));
        check(rule.has_value());
        const auto [it, fresh] = rules.emplace(t.view.name, *rule);
        check(fresh || (it->second.along == rule->along && it->second.groups == rule->groups));
    }
    const auto blocks = [](uint32_t type) -> std::pair<int64_t, int64_t> {
        const strata::gguf::type_traits *t = strata::gguf::ggml_type_traits(type);
        return t != nullptr ? std::pair<int64_t, int64_t>{t->block_elems, t->block_bytes} : std::pair<int64_t, int64_t>{0, 0};
    };
    for (int32_t r = 0; r < n; ++r) {
        try {
            const strata::tensor_parallel_shard shard(f, rules, r, n, blocks);
            for (const auto &t : shard.tensors())
                check(shard.tensor_memory_is_private(t) || in_input(t.data, t.n_bytes, data, size));
            gguf_source src(shard, r, n, whole.hp.n_vocab);
            const std::unique_ptr<strata::decoder::model> part(strata::decoder::load(fam, &src.view));
            check(part != nullptr && part->tp_rank == r && part->tp_size == n);
            check(part->hp.n_head * n == whole.hp.n_head && part->hp.n_head_kv * n == whole.hp.n_head_kv &&
                  part->hp.n_ff * n == whole.hp.n_ff && part->hp.n_embd == whole.hp.n_embd &&
                  part->hp.n_vocab == whole.hp.n_vocab && part->experts.n_expert == whole.experts.n_expert &&
                  part->experts.n_ff * n == whole.experts.n_ff &&
                  part->experts.n_ff_shared * n == whole.experts.n_ff_shared);
            auto inside_shard = [&](const strata_tensor_view &v) {
                if (v.data == nullptr) return;
                const strata::gguf::tensor_info *t = shard.find_tensor(v.name);
                check(t != nullptr && v.rows > 0 && v.cols > 0);
                check(within(v.data, static_cast<uint64_t>(v.rows) * static_cast<uint64_t>(v.row_bytes), t->data,
                             t->n_bytes));
            };
            for (const auto &t : part->listed) inside_shard(t.view);
            for (const auto &layer : part->layers)
                for (const strata_tensor_view &v : layer.t) inside_shard(v);
            check(strata::decoder::workspace_bytes(*part, 3) > 0);
        } catch (const std::runtime_error &) {
        }
    }
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
                check_parts(fam, *m, f, data, size, 2 + data[size - 1] % 3);
            } catch (const std::runtime_error &) {
            }
        }
    } catch (const std::runtime_error &) {
    }
    return 0;
}
