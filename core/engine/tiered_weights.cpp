#include "engine/tiered_weights.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

namespace strata::engine {

namespace {

constexpr uint64_t k_align = 4096; // tier regions and slot offsets: O_DIRECT reads land straight in place

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string status_text(const strata_status &st) {
    return st.message[0] != '\0' ? std::string(st.message) : "error code " + std::to_string(st.code);
}

// Offloaded tensors must not stay in this process's memory through the file mapping: drop their pages.
void drop_mapped_pages(const uint8_t *data, uint64_t bytes) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t begin = round_up(reinterpret_cast<uint64_t>(data), page);
    const uint64_t end = (reinterpret_cast<uint64_t>(data) + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

} // namespace

plugins::plugin_ptr<strata_tier> create_tier(const plugins::registry &registry, const strata_host_services *host,
                                             const std::string &name, const strata_config_view *config,
                                             uint64_t capacity, int32_t rank) {
    auto h = registry.find_tier(name);
    if (!h) {
        fail("tier '{}' is not provided by any loaded plugin (available: {}); fix [memory] tiers", name,
             fmt::join(registry.names(STRATA_KIND_TIER), ", "));
    }
    strata_tier_create_args args{};
    args.struct_size = sizeof args;
    args.host = host;
    args.config = config;
    args.capacity_bytes = capacity;
    args.rank = rank;
    return plugins::create_guarded(h, [&](strata_status *st) { return h.desc->create(&args, st); }, h.desc->destroy);
}

std::pair<const strata_tier_desc *, strata_tier *> tiered_weights::tier(const std::string &name) const {
    auto it = tiers_.find(name);
    if (it == tiers_.end()) return {nullptr, nullptr};
    return {it->second.handle.desc, it->second.tier.get()};
}

tiered_weights::tiered_weights(const model_file &file, const plugins::registry &registry,
                               const strata_host_services *host, const offload_options &opts,
                               const planner::plan &plan, int32_t n_layer, const strata_device_desc *device_desc,
                               strata_device *device, bool device_reads_host)
    : device_desc_(device_desc), device_(device) {
    if (!device_reads_host) upload_resident(file, plan);
    // 1. One instance per tier that holds anything, sized for its tensors (regions are 4 KiB aligned).
    std::map<std::string, uint64_t> need;
    uint64_t offloaded = 0;
    for (const auto &p : plan.placements) {
        if (p.home == "device") continue;
        if (p.home.empty()) fail("tensor '{}' has no home in the plan", p.tensor);
        need[p.home] += round_up(p.bytes, k_align);
        offloaded += p.bytes;
    }
    for (const auto &[name, bytes] : opts.kv_tier_bytes) need[name] += round_up(bytes, k_align);
    for (const auto &[name, bytes] : need) {
        auto it = opts.tier_configs.find(name);
        const strata_config_view *cfg = it == opts.tier_configs.end() ? nullptr : it->second;
        tier_instance ti;
        ti.handle = registry.find_tier(name);
        ti.tier = create_tier(registry, host, name, cfg, bytes + k_align, opts.rank);
        tiers_.emplace(name, std::move(ti));
    }

    if (offloaded == 0) return; // the tiers serve only the KV cache

    // 2. Copy each offloaded tensor into a region of its tier.
    progress bar(fmt::format("placing {:.1f} MiB of weights in tiers", static_cast<double>(offloaded) / 1048576.0),
                 offloaded);
    uint64_t done = 0;
    streamed_tensors streamed, host_streamed; // layer -> (tensor, region); host layers apart (hybrid)
    for (const auto &p : plan.placements) {
        if (p.home == "device") continue;
        const gguf::tensor_info *t = file.find_tensor(p.tensor);
        if (t == nullptr) fail("planned tensor '{}' is not in {}", p.tensor, file.name());
        tier_instance &ti = tiers_.at(p.home);
        strata_status st{};
        uint64_t region = 0;
        if (ti.handle.desc->region_alloc(ti.tier.get(), t->n_bytes, &region, &st) != STRATA_OK) {
            fail("tier '{}' could not hold tensor '{}' ({} bytes): {}", p.home, p.tensor, t->n_bytes, status_text(st));
        }
        regions_.push_back({p.tensor, {p.home, region}});
        if (ti.handle.desc->write(ti.tier.get(), region, 0, t->data, t->n_bytes, &st) != STRATA_OK) {
            fail("writing tensor '{}' to tier '{}' failed: {}", p.tensor, p.home, status_text(st));
        }
        ti.bytes += t->n_bytes;
        if (!opts.may_drop_pages || opts.may_drop_pages(*t)) drop_mapped_pages(t->data, t->n_bytes);
        if (p.how == planner::mode::in_place && !device_reads_host) {
            fail("the plan computes '{}' in place in tier '{}', but device '{}' cannot read host memory; stream it",
                 p.tensor, p.home, device_desc_->header.name);
        }
        if (p.how == planner::mode::in_place) {
            void *addr = STRATA_HAS_SLOT(ti.handle.desc, map) ? ti.handle.desc->map(ti.tier.get(), region) : nullptr;
            if (addr == nullptr) fail("tier '{}' cannot be computed on in place (no map); use streaming", p.home);
            address_[p.tensor] = addr;
        } else if (p.how == planner::mode::on_cpu) {
            // Hybrid: the host device computes this layer from the tier's memory; large batches may stream it.
            void *addr = STRATA_HAS_SLOT(ti.handle.desc, map) ? ti.handle.desc->map(ti.tier.get(), region) : nullptr;
            if (addr == nullptr) fail("tier '{}' cannot be computed on by the CPU in place (no map)", p.home);
            host_address_[p.tensor] = addr;
            if (plan.on_cpu_ring_bytes > 0) host_streamed[p.layer].push_back({&p, region});
        } else if (p.how == planner::mode::cpu_experts) {
            // Experts on the CPU: the host device computes them from the tier's memory; the device never reads them.
            void *addr = STRATA_HAS_SLOT(ti.handle.desc, map) ? ti.handle.desc->map(ti.tier.get(), region) : nullptr;
            if (addr == nullptr) fail("tier '{}' cannot be computed on by the CPU in place (no map)", p.home);
            host_address_[p.tensor] = addr;
        } else if (p.how == planner::mode::streamed) {
            streamed[p.layer].push_back({&p, region});
        }
        done += t->n_bytes;
        bar.update(done);
    }
    bar.finish();

    // 3. The staging rings: one for the streamed layers, one for the host layers' large batches (hybrid).
    ring_ = make_ring(file, streamed, n_layer, opts, device_reads_host, slots_);
    host_ring_ = make_ring(file, host_streamed, n_layer, opts, device_reads_host, host_slots_);
}

// A staging ring for `streamed`: each layer's tensors at fixed, aligned offsets within its slot; the tensors' device
// addresses become slot addresses. nullptr when nothing is streamed.
std::unique_ptr<prefetch_ring> tiered_weights::make_ring(const model_file &file, const streamed_tensors &streamed,
                                                         int32_t n_layer, const offload_options &opts,
                                                         bool device_reads_host, void *&slots) {
    if (streamed.empty()) return nullptr;
    for (const auto &[layer, list] : streamed) {
        if (layer < 0 || layer >= n_layer) {
            fail("the plan streams '{}', which is outside the layers; only layer weights can be streamed",
                 list.front().first->tensor);
        }
    }
    std::vector<streamed_layer> layers;
    std::map<std::string, std::pair<int32_t, uint64_t>> slot_offset; // tensor -> (layer, offset)
    uint64_t slot_bytes = 0;
    for (const auto &[layer, list] : streamed) {
        streamed_layer sl;
        sl.layer = layer;
        uint64_t off = 0;
        for (const auto &[p, region] : list) {
            const auto &ti = tiers_.at(p->home);
            tier_read r;
            r.desc = ti.handle.desc;
            r.tier = ti.tier.get();
            r.tier_name = p->home;
            r.region = region;
            r.bytes = file.find_tensor(p->tensor)->n_bytes;
            r.slot_offset = off;
            slot_offset[p->tensor] = {layer, off};
            off = round_up(off + r.bytes, k_align);
            sl.reads.push_back(r);
        }
        slot_bytes = std::max(slot_bytes, off);
        layers.push_back(std::move(sl));
    }
    const int32_t slot_count = prefetch_ring::slots_needed(static_cast<int32_t>(layers.size()), opts.prefetch_depth);
    strata_status st{};
    slots = device_desc_->mem_alloc(device_, slot_bytes * static_cast<uint64_t>(slot_count), &st);
    if (slots == nullptr) fail("could not allocate the {}-slot staging ring ({} bytes): {}", slot_count,
                                slot_bytes * static_cast<uint64_t>(slot_count), status_text(st));
    device_stager stager;
    if (!device_reads_host) {
        stager.desc = device_desc_;
        stager.dev = device_;
    }
    auto ring = std::make_unique<prefetch_ring>(std::move(layers), n_layer, static_cast<uint8_t *>(slots), slot_bytes,
                                                slot_count, opts.io_threads, stager);
    for (const auto &[tensor, lo] : slot_offset) address_[tensor] = ring->slot_for_layer(lo.first) + lo.second;
    ring->start();
    // The thread count is the ring's own, so the line shows what [memory] io_threads became.
    log::info("offload",
              "streaming {} layers{} through a {}-slot ring of {:.1f} MiB per slot (prefetch_depth {}) and {} I/O threads",
              streamed.size(), &slots == &host_slots_ ? " (for large batches; the CPU computes them otherwise)" : "",
              slot_count, static_cast<double>(slot_bytes) / 1048576.0, opts.prefetch_depth, ring->io_thread_count());
    return ring;
}

// Copies every tensor the plan keeps on the device into one device allocation (4 KiB aligned offsets), in chunks,
// with progress; the model then computes from those copies.
void tiered_weights::upload_resident(const model_file &file, const planner::plan &plan) {
    uint64_t total = 0;
    std::vector<const gguf::tensor_info *> list;
    for (const auto &p : plan.placements) {
        if (p.home != "device") continue;
        const gguf::tensor_info *t = file.find_tensor(p.tensor);
        if (t == nullptr) fail("planned tensor '{}' is not in {}", p.tensor, file.name());
        list.push_back(t);
        total += round_up(t->n_bytes, k_align);
    }
    if (total == 0) return;
    strata_status st{};
    resident_ = device_desc_->mem_alloc(device_, total, &st);
    if (resident_ == nullptr) {
        fail("device '{}' could not allocate {:.1f} MiB for the resident weights: {}; offload layers with "
             "--cpu-offload-layers or --cpu-offload-gb",
             device_desc_->header.name, static_cast<double>(total) / 1048576.0, status_text(st));
    }
    progress bar(fmt::format("uploading {:.1f} MiB of weights to device '{}'", static_cast<double>(total) / 1048576.0,
                             device_desc_->header.name),
                 total);
    constexpr uint64_t chunk = uint64_t{64} << 20;
    uint64_t off = 0;
    for (const gguf::tensor_info *t : list) {
        auto *dst = static_cast<uint8_t *>(resident_) + off;
        for (uint64_t done = 0; done < t->n_bytes; done += chunk) {
            const uint64_t n = std::min(chunk, t->n_bytes - done);
            if (device_desc_->copy(device_, dst + done, t->data + done, n, STRATA_COPY_H2D, &st) != STRATA_OK)
                fail("uploading '{}' to device '{}' failed: {}", t->name, device_desc_->header.name, status_text(st));
            bar.update(off + done + n);
        }
        address_[t->name] = dst;
        off += round_up(t->n_bytes, k_align);
    }
    bar.finish();
}

tiered_weights::~tiered_weights() {
    ring_.reset(); // joins the I/O threads before the slots and tiers go
    host_ring_.reset();
    if (slots_ != nullptr) device_desc_->mem_free(device_, slots_);
    if (host_slots_ != nullptr) device_desc_->mem_free(device_, host_slots_);
    if (resident_ != nullptr) device_desc_->mem_free(device_, resident_);
    for (const auto &[tensor, home] : regions_) {
        auto &ti = tiers_.at(home.tier);
        ti.handle.desc->region_free(ti.tier.get(), home.region);
    }
}

const void *tiered_weights::address_of(const std::string &tensor) const {
    auto it = address_.find(tensor);
    return it == address_.end() ? nullptr : it->second;
}

const void *tiered_weights::host_address_of(const std::string &tensor) const {
    auto it = host_address_.find(tensor);
    return it == host_address_.end() ? nullptr : it->second;
}

std::string tiered_weights::report() const {
    std::string out;
    for (const auto &[name, ti] : tiers_) {
        if (ti.bytes == 0) continue; // a tier serving only the KV cache
        out += fmt::format("tier {:<10} holds {:.1f} MiB of weights\n", name, static_cast<double>(ti.bytes) / 1048576.0);
    }
    for (const auto *ring : {ring_.get(), host_ring_.get()}) {
        if (ring == nullptr) continue;
        const ring_stats s = ring->stats();
        const char *what = ring == host_ring_.get() ? " (CPU-computed layers, large batches)" : "";
        for (const auto &[name, c] : s.tiers) {
            out += fmt::format("tier {:<10} streamed {:.1f} MiB/pass{}, read at {:.2f} GB/s\n", name,
                               s.forwards ? static_cast<double>(c.bytes_read) / 1048576.0 / static_cast<double>(s.forwards) : 0.0,
                               what, c.read_seconds > 0 ? static_cast<double>(c.bytes_read) / c.read_seconds / 1e9 : 0.0);
        }
        out += fmt::format("prefetch stall {:.3f} s over {} forward passes{}\n", s.stall_seconds, s.forwards, what);
    }
    return out;
}

} // namespace strata::engine
