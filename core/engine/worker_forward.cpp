// Worker: one step's forward pass (the model runner). The step's blocks are looked up in the KV memory, the model's
// forward runs over them with the prefetch rings and, for hybrid placement, the host device; the logits rows come
// back to host memory in one copy.
#include "engine/worker.hpp"

#include "common/error.hpp"
#include "engine/engine_options.hpp"
#include "engine/engine_util.hpp"
#include "engine/prefetch_ring.hpp"

#include <strata/device_copy.hpp>

namespace strata::engine {

using namespace detail;

step_output worker::execute_model(const step_input &step, const float *hidden_in, float *hidden_out) {
    forward(step, hidden_in, hidden_out);
    step_output out;
    if (!last_stage()) return out; // the residual stream went to hidden_out; the last stage has the logits
    fetch_logits(step.n_logits);
    out.logits = logits_host_.empty() ? logits_ : logits_host_.data();
    out.n_rows = step.n_logits;
    out.n_vocab = hp_.n_vocab;
    return out;
}

// Brings the step's logits rows to host memory in one copy when the device has its own memory.
void worker::fetch_logits(int32_t n_logits) {
    if (logits_host_.empty() || n_logits == 0) return;
    copy_from_device(logits_host_.data(), logits_,
                     sizeof(float) * static_cast<uint64_t>(n_logits) * static_cast<uint64_t>(hp_.n_vocab));
}

void worker::forward(const step_input &step, const float *hidden_in, float *hidden_out) {
    const int32_t n_blocks = step.seq_block_start[step.n_seqs];
    block_base_.resize(static_cast<size_t>(n_blocks)); // reserved for every pool at bind: no allocation per step
    for (int32_t k = 0; k < step.n_seqs; ++k) {
        for (int32_t i = step.seq_block_start[k]; i < step.seq_block_start[k + 1]; ++i) {
            const kv::block_ref b = step.blocks[i];
            kv::block_storage *pool = kv_storage_[static_cast<int>(b.where)];
            void *addr = pool != nullptr ? pool->device_address(b.index) : nullptr;
            if (addr == nullptr)
                fail("internal: sequence {} of the step has its KV block {} outside device memory", k,
                     i - step.seq_block_start[k]);
            block_base_[static_cast<size_t>(i)] = addr;
        }
    }
    strata_paged_kv pk{};
    pk.struct_size = sizeof pk;
    pk.block_size = opts_.kv.block_size;
    pk.kv_dim = hp_.n_head_kv * hp_.head_dim;
    pk.kv_type = opts_.kv.kv_type;
    pk.n_seqs = step.n_seqs;
    pk.seq_block_start = step.seq_block_start;
    pk.block_base = block_base_.data();
    strata_forward_args a{};
    a.struct_size = sizeof a;
    a.device_ops = device_desc_.desc;
    a.device = device_;
    a.tokens = step.tokens;
    a.positions = step.positions;
    a.n_tokens = step.n_tokens;
    a.workspace = workspace_;
    a.workspace_size = workspace_size_;
    a.logits = logits_;
    a.paged_kv = &pk;
    a.token_seq = step.token_seq;
    a.logits_tokens = step.logits_tokens;
    a.n_logits = step.n_logits;
    a.all_reduce = tp_.all_reduce; // a tensor-parallel rank: the ranks' partial sums joined (ABI 1.29)
    a.all_reduce_user = tp_.user;
    if (stage_.n_ranks > 1) {
        // A pipeline rank: its layers, over KV blocks holding only them; the residual stream crosses in host memory.
        const uint64_t stream_bytes = sizeof(float) * static_cast<uint64_t>(step.n_tokens) * hp_.n_embd;
        a.layer_first = stage_.layer_first;
        a.layer_end = stage_.layer_end;
        a.kv_first_layer = stage_.layer_first;
        if (!stage_.first()) {
            if (hidden_in == nullptr) fail("internal: pipeline rank {} got no residual stream", stage_.rank);
            copy_to_device(hidden_in_, hidden_in, stream_bytes);
            a.hidden_in = hidden_in_;
        }
        if (!last_stage()) {
            if (hidden_out == nullptr) fail("internal: pipeline rank {} has nowhere to put its residual stream", stage_.rank);
            a.hidden_out = hidden_out_;
            a.logits = nullptr;
        }
    }
    // Hybrid placement: the CPU computes its layers where they live, unless this step is large enough that
    // streaming them to the device is cheaper (then their own ring streams them).
    // Experts on the CPU (--n-cpu-moe) run there in every step.
    const bool host_layers = host_device_ != nullptr && !layer_on_host_.empty();
    const bool host_experts = host_device_ != nullptr && !experts_on_host_.empty();
    const bool stream_host_layers = host_layers && hybrid_min_batch_ > 0 && step.n_tokens >= hybrid_min_batch_;
    if ((host_layers && !stream_host_layers) || host_experts) {
        a.host_device_ops = host_desc_.desc;
        a.host_device = host_device_;
        a.host_workspace = host_workspace_.data();
        a.host_workspace_size = host_workspace_.size();
        if (host_experts) a.experts_on_host = experts_on_host_.data();
    }
    if (host_layers && !stream_host_layers) {
        a.layer_on_host = layer_on_host_.data();
        ++hybrid_steps_;
    } else if (stream_host_layers) {
        ++hybrid_streamed_steps_;
    }
    // The rings number a rank's layers from 0, as its plan does; the model calls layer_begin with the model's number.
    struct ring_hook {
        prefetch_ring *rings[2];
        int32_t layer_first;
    } hook{{weights_ ? weights_->ring() : nullptr, stream_host_layers ? weights_->host_layer_ring() : nullptr},
           stage_.layer_first};
    prefetch_ring *const(&rings)[2] = hook.rings;
    if (rings[0] != nullptr || rings[1] != nullptr) {
        a.layer_begin = [](void *user, int32_t layer, strata_status *st) {
            const auto *h = static_cast<const ring_hook *>(user);
            for (prefetch_ring *r : h->rings) {
                if (r == nullptr) continue;
                if (int32_t rc = r->layer_begin(layer - h->layer_first, st); rc != STRATA_OK) return rc;
            }
            return static_cast<int32_t>(STRATA_OK);
        };
        a.user = &hook;
    }
    strata_status st{};
    const int32_t rc = arch_.desc->forward(model_, &a, &st);
    for (prefetch_ring *ring : rings) {
        if (ring == nullptr) continue;
        if (rc == STRATA_OK) ring->forward_done();
        else ring->recover(); // a pass that stopped partway leaves slots mid-cycle
    }
    if (rc != STRATA_OK) fail("forward pass failed: {}", status_text(st));
    if (a.hidden_out != nullptr)
        copy_from_device(hidden_out, hidden_out_, sizeof(float) * static_cast<uint64_t>(step.n_tokens) * hp_.n_embd);
}

// Host memory to and from the worker's device memory (strata::device_copy).
void worker::copy_to_device(void *dst, const void *src, uint64_t bytes) {
    strata_status st{};
    if (device_copy(device_desc_.desc, device_, dst, src, bytes, STRATA_COPY_H2D, &st) != STRATA_OK)
        fail("copying to device '{}' failed: {}", device_name_, status_text(st));
}

void worker::copy_from_device(void *dst, const void *src, uint64_t bytes) {
    strata_status st{};
    if (device_copy(device_desc_.desc, device_, dst, src, bytes, STRATA_COPY_D2H, &st) != STRATA_OK)
        fail("copying from device '{}' failed: {}", device_name_, status_text(st));
}

} // namespace strata::engine
