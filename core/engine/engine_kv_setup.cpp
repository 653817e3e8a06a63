// Engine: sizing the paged KV cache's pools (device, host tier, NVMe; their memory is the worker's), the prefix store
// and the scheduler, and printing the KV table at start-up.
#include "engine/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine_util.hpp"
#include "engine/model_fingerprint.hpp"
#include "engine/prefix_store_adapter.hpp"
#include "kv/layer_striped_storage.hpp"

#include <strata/kv_layout.hpp>

#include <algorithm>
#include <memory>
#include <vector>

namespace strata::engine {

using namespace detail;

// Sizes the KV pools (device, host tier, NVMe), the prefix store and the scheduler, and prints them.
void engine::setup_kv() {
    const kv_options &o = opts_.kv;
    const int64_t kv_dim = int64_t{hp_.n_head_kv} * hp_.head_dim;
    uint64_t block_bytes = kv_layout::block_bytes(hp_.n_layer, o.block_size, kv_dim, o.kv_type);
    const bool tensor_parallel = executor_->tensor_parallel();
    if (tensor_parallel) {
        // Each rank keeps its heads of every layer: the block is their shares one after another.
        block_bytes = 0;
        for (const pipeline_rank *r : executor_->ranks()) block_bytes += r->kv_block_bytes();
    }
    const uint64_t per_token = block_bytes / static_cast<uint64_t>(o.block_size);
    // Device KV as planned: kv_cache_memory when set, else what the device budget leaves (bounded on the CPU). Each
    // pipeline rank planned its own (kv_cache_memory is each rank's) for its layers' share of a block: the pool has
    // as many blocks as the tightest rank holds.
    const std::vector<pipeline_rank *> ranks = executor_->ranks();
    uint64_t n_device = UINT64_MAX;
    const pipeline_rank *tightest = ranks.front();
    for (const pipeline_rank *r : ranks) {
        const uint64_t n = r->device_kv_budget() / r->kv_block_bytes();
        if (n < n_device) n_device = n, tightest = r;
    }
    if (n_device == 0) {
        const pipeline_stage &st = tightest->stage();
        const std::string layers = fmt::format("pipeline rank {} (layers [{}, {}))", st.rank, st.layer_first, st.layer_end);
        const std::string who = tensor_parallel && st.n_ranks > 1 ? " of each tensor-parallel rank of " + layers
                                : tensor_parallel                  ? " of each tensor-parallel rank"
                                : ranks.size() > 1                 ? " of " + layers
                                                                   : std::string();
        const uint64_t share = tightest->kv_block_bytes();
        fail("the device KV cache{} ({}) holds no block of {} ({} tokens x {} per token); raise --kv-cache-memory or "
             "lower --block-size",
             who, human(tightest->device_kv_budget()), human(share), o.block_size,
             human(share / static_cast<uint64_t>(o.block_size)));
    }
    if (n_device > UINT32_MAX / 2) fail("the device KV cache of {} blocks is too large; raise --block-size", n_device);
    kv::kv_cache_config kc;
    kc.block_size = o.block_size;
    kc.block_bytes = block_bytes;
    kc.prefix_caching = o.enable_prefix_caching;
    const uint64_t kv_identity = kv_fingerprint(fingerprint_, o.kv_type, opts_.tensor_parallel_size);
    kc.fingerprint = kv_identity;
    const bool device_reads_host = executor_->driver_worker().device_reads_host();
    kc.device_reads_host = device_reads_host;
    kv_ = std::make_unique<kv::kv_cache>(kc);
    // The blocks' memory is the workers' (device, and the host and NVMe tiers); the KV cache decides what they hold.
    // Pipeline ranks each keep their layers' share of every block, tensor-parallel ranks their heads' share of every
    // layer; the shares joined are the whole block.
    auto pool_storage = [&](const auto &allocate_share) -> std::unique_ptr<kv::block_storage> {
        if (ranks.size() == 1) return allocate_share(*ranks.front());
        std::vector<kv::layer_striped_storage::part> shares;
        for (pipeline_rank *r : ranks) shares.push_back({r->kv_block_bytes(), allocate_share(*r)});
        return std::make_unique<kv::layer_striped_storage>(std::move(shares));
    };
    kv_->add_pool(kv::tier::device, static_cast<uint32_t>(n_device), pool_storage([&](pipeline_rank &r) {
                      return r.allocate_device_kv(n_device, r.kv_block_bytes());
                  }));
    // A tier's pool: as many blocks as `bytes` hold at each rank's stride (its share rounded up to `align`).
    auto tier_pool = [&](kv::tier t, const std::string &name, uint64_t bytes, uint64_t align) -> uint64_t {
        uint64_t n = UINT32_MAX / 2;
        for (const pipeline_rank *r : ranks)
            n = std::min(n, bytes / ((r->kv_block_bytes() + align - 1) / align * align));
        if (n == 0) return 0;
        kv_->add_pool(t, static_cast<uint32_t>(n), pool_storage([&](pipeline_rank &r) {
                          return r.allocate_tier_kv(t, name, n, align, r.kv_block_bytes());
                      }));
        return n;
    };
    const uint64_t n_host = tier_pool(kv::tier::host, o.host_tier, gib_bytes(o.swap_space_gib), 64);
    const uint64_t n_nvme = tier_pool(kv::tier::nvme, "nvme", gib_bytes(o.nvme_space_gib), 4096);
    if (!o.prefix_store_dir.empty()) {
        if (!o.enable_prefix_caching)
            fail("prefix_store_dir is set but prefix caching is off; drop --prefix-store-dir or enable prefix caching");
        store_ = std::make_unique<prefix_store_adapter>(o.prefix_store_dir, gib_bytes(o.prefix_store_gib), kv_identity,
                                                        o.block_size, block_bytes);
        kv_->set_store(store_.get());
    }

    // One sequence of max_model_len must fit: in device blocks, plus host blocks when the device reads them in place.
    const uint64_t need = (static_cast<uint64_t>(n_ctx_) + static_cast<uint64_t>(o.block_size) - 1) /
                          static_cast<uint64_t>(o.block_size);
    const uint64_t usable = n_device + (device_reads_host ? n_host : 0);
    if (usable < need) {
        fail("max_model_len {} needs {} KV blocks ({}) but the device holds {} ({}){}; raise --kv-cache-memory{}, or "
             "lower --max-model-len",
             n_ctx_, need, human(need * block_bytes), n_device, human(n_device * block_bytes),
             device_reads_host ? fmt::format(" and the host tier {}", n_host) : std::string(),
             device_reads_host ? " or --swap-space" : "");
    }
    sched_ = std::make_unique<scheduler>(*kv_, opts_.scheduler);

    if (opts_.print_plan) {
        std::string t = fmt::format("KV cache: {}, blocks of {} tokens, {} each ({} per token); prefix caching {}\n",
                                    kv_layout::type_name(o.kv_type), o.block_size, human(block_bytes), human(per_token),
                                    o.enable_prefix_caching ? "on" : "off");
        t += fmt::format("  {:<8} {:>10} {:>12} {:>12}  {}\n", "tier", "blocks", "tokens", "bytes", "where");
        auto row = [&](const char *name, uint64_t n, const std::string &where) {
            if (n == 0) return;
            t += fmt::format("  {:<8} {:>10} {:>12} {:>12}  {}\n", name, n, n * static_cast<uint64_t>(o.block_size),
                             human(n * block_bytes), where);
        };
        row("device", n_device, fmt::format("device '{}'{}", device_name(),
                                            opts_.offload.kv_cache_memory ? " (kv_cache_memory)" : ""));
        row("host", n_host, fmt::format("tier '{}' (swap_space){}", o.host_tier,
                                         device_reads_host ? "; long contexts are attended in place" : ""));
        row("nvme", n_nvme, "tier 'nvme' (kv_nvme_space), swapped sequences");
        if (store_) {
            t += fmt::format("  {:<8} {:>10} {:>12} {:>12}  prefix store {} ({} entries found)\n", "store",
                             store_->capacity_entries(), "", human(gib_bytes(o.prefix_store_gib)), o.prefix_store_dir,
                             store_->entries());
        }
        t += fmt::format("  scheduler: max_num_seqs {}, max_num_batched_tokens {}, prefill chunk {}, preemption {}, "
                         "max_waiting_requests {}\n",
                         opts_.scheduler.max_num_seqs, opts_.scheduler.max_num_batched_tokens,
                         opts_.scheduler.prefill_chunk,
                         opts_.scheduler.mode == preemption_mode::swap        ? "swap"
                         : opts_.scheduler.mode == preemption_mode::recompute ? "recompute"
                                                                              : "auto",
                         opts_.scheduler.max_waiting_requests);
        std::fprintf(stderr, "%s", t.c_str());
    }
}

} // namespace strata::engine
