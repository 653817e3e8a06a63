#include "engine/model_source.hpp"

#include "engine/tiered_weights.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace strata::engine {

model_source::model_source(const model_file &file, const plugins::registry &registry, const strata_host_services *host)
    : file_(file), registry_(registry) {
    view_.struct_size = sizeof view_;
    view_.ctx = this;
    view_.get_u64 = &model_source::get_u64;
    view_.get_f64 = &model_source::get_f64;
    view_.get_str = &model_source::get_str;
    view_.get_tensor = &model_source::get_tensor;
    view_.get_host_tensor = &model_source::get_host_tensor;
    view_.host = host;
}

int32_t model_source::get_u64(void *ctx, const char *key, uint64_t *out) {
    auto *self = static_cast<model_source *>(ctx);
    self->keys_read_.insert(key);
    if (auto v = self->file_.get_uint(key)) {
        *out = *v;
        return 1;
    }
    return 0;
}

int32_t model_source::get_f64(void *ctx, const char *key, double *out) {
    auto *self = static_cast<model_source *>(ctx);
    self->keys_read_.insert(key);
    if (auto v = self->file_.get_float(key)) {
        *out = *v;
        return 1;
    }
    return 0;
}

int32_t model_source::get_str(void *ctx, const char *key, const char **out) {
    auto *self = static_cast<model_source *>(ctx);
    self->keys_read_.insert(key);
    if (auto v = self->file_.get_string(key)) {
        *out = v->data(); // the reader keeps strings NUL-terminated
        return 1;
    }
    return 0;
}

int32_t model_source::get_tensor(void *ctx, const char *name, strata_tensor_view *out) {
    return static_cast<model_source *>(ctx)->resolve(name, false, out);
}

// Host memory holding the tensor: its tier's mapping when hybrid placement computes its layer on the host device,
// else the file mapping (valid host memory for every tensor, though only the host layers' views are used).
int32_t model_source::get_host_tensor(void *ctx, const char *name, strata_tensor_view *out) {
    return static_cast<model_source *>(ctx)->resolve(name, true, out);
}

// The file's tensor at the address the placement gave it: where the device computes from, or (host) where the host
// device does. The file mapping when the placement moved nothing.
int32_t model_source::resolve(const char *name, bool host, strata_tensor_view *out) const {
    tensors_read_.insert(name);
    const gguf::tensor_info *t = file_.find_tensor(name);
    if (t == nullptr) return 0;
    const void *data = t->data;
    if (placement_ != nullptr) {
        if (const void *moved = host ? placement_->host_address_of(t->name) : placement_->address_of(t->name))
            data = moved;
    }
    describe(*t, data, out);
    return 1;
}

void model_source::describe(const gguf::tensor_info &tensor, const void *data, strata_tensor_view *out) const {
    const gguf::tensor_info *t = &tensor;
    strata_tensor_view v{};
    v.ggml_type = t->type;
    v.data = data;
    v.cols = t->ne[0];
    v.rows = 1;
    bool overflow = false;
    for (uint32_t i = 1; i < t->n_dims; ++i) overflow = overflow || __builtin_mul_overflow(v.rows, t->ne[i], &v.rows);
    v.name = t->name.c_str();
    auto q = registry_.find_quant_by_type(t->type);
    v.quant = q.desc; // nullptr when no plugin provides the type; the architecture reports it
    const gguf::type_traits *tr = gguf::ggml_type_traits(t->type);
    const int64_t block_elems = q.desc != nullptr ? q.desc->block_elems : tr != nullptr ? tr->block_elems : 0;
    const int64_t block_bytes = q.desc != nullptr ? q.desc->block_bytes : tr != nullptr ? tr->block_bytes : 0;
    if (block_elems > 0) overflow = overflow || __builtin_mul_overflow(v.cols / block_elems, block_bytes, &v.row_bytes);
    // A tensor whose rows or row size do not fit int64 (an empty tensor with a huge dimension passes the reader):
    // 0 rows, which no model's shape check accepts.
    if (overflow) v.rows = v.row_bytes = 0;
    v.n_dims = static_cast<int32_t>(t->n_dims);
    for (size_t i = 0; i < 4; ++i) v.ne[i] = t->ne[i];
    if (t->input_order && !overflow)
        v.input_order = reinterpret_cast<const int32_t *>(static_cast<const unsigned char *>(data) + v.rows * v.row_bytes);
    // A plugin whose view has no input_order would compute such a weight in the wrong column order: it gets 0 rows,
    // which its shape check refuses (the engine refuses the plugin earlier, by name: check_model_reads_input_order).
    if (t->input_order && out->struct_size < offsetof(strata_tensor_view, input_order) + sizeof v.input_order)
        v.rows = v.row_bytes = 0;
    // A plugin built against an older ABI has a shorter view: write only what its struct_size says it holds.
    constexpr size_t v1_0 = offsetof(strata_tensor_view, n_dims);
    const size_t n = std::min(sizeof v, std::max<size_t>(out->struct_size, v1_0));
    v.struct_size = static_cast<uint32_t>(n);
    std::memcpy(out, &v, n);
}

} // namespace strata::engine
