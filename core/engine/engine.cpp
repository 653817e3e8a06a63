#include "engine/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "engine/model_fingerprint.hpp"
#include "engine/model_source.hpp"
#include "engine/plan_inputs.hpp"
#include "engine/prefix_store_adapter.hpp"
#include "planner/plan_report.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace strata::engine {

namespace {

std::string status_text(const strata_status &st) {
    return st.message[0] != '\0' ? std::string(st.message) : std::string("error code ") + std::to_string(st.code);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr uint64_t gib = uint64_t{1} << 30;

uint64_t gib_bytes(double g) { return static_cast<uint64_t>(std::llround(g * static_cast<double>(gib))); }

std::string human(uint64_t b) {
    if (b >= gib) return fmt::format("{:.2f} GiB", static_cast<double>(b) / static_cast<double>(gib));
    if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / 1048576.0);
    if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024.0);
    return fmt::format("{} B", b);
}

} // namespace

engine::engine(const plugins::registry &registry, const strata_host_services *host, engine_options opts)
    : registry_(registry), host_(host), opts_(std::move(opts)) {
    // If start-up fails part way, what was already made (device memory, page-locked regions, the device) is released
    // before the error leaves: the destructor does not run for a constructor that throws.
    try {
        init();
    } catch (...) {
        release_resources(false);
        throw;
    }
}

void engine::init() {
    if (opts_.model_path.empty()) {
        fail("no model given: set [model] path in the config or pass --model FILE.gguf");
    }
    file_ = std::make_unique<gguf::file>(gguf::file::open(opts_.model_path));
    const std::string arch = std::string(file_->get_string("general.architecture").value_or(""));
    if (arch.empty()) fail("{}: no general.architecture key; is this a model GGUF (not a vocab-only file)?", opts_.model_path);
    arch_ = registry_.find_model_arch_for(arch);
    if (arch_.desc == nullptr) {
        fail("{}: no model_arch plugin handles architecture '{}' (loaded: {}); add a plugin for it or check [plugins] paths",
             opts_.model_path, arch, fmt::join(registry_.names(STRATA_KIND_MODEL_ARCH), ", "));
    }
    model_name_ = std::string(file_->get_string("general.name").value_or(arch));
    tokenizer_ = std::make_unique<spm_tokenizer>(load_spm_vocab(*file_));

    // Device: by name (an error that says why when it cannot run), or "auto": the best scoring one, falling back to
    // the next (the CPU) with one warning when it is missing, unusable here or fails to start.
    strata_status st{};
    auto start = [&](const plugins::handle<strata_device_desc> &h, strata_status *why) -> strata_device * {
        strata_device_create_args dargs{};
        dargs.struct_size = sizeof dargs;
        dargs.host = host_;
        auto it = opts_.device_configs.find(h.desc->header.name);
        dargs.config = it != opts_.device_configs.end() ? it->second : opts_.device_config;
        return h.desc->create(&dargs, why);
    };
    if (opts_.device == "auto") {
        std::vector<plugins::handle<strata_device_desc>> ranked;
        for (const std::string &name : registry_.names(STRATA_KIND_DEVICE)) ranked.push_back(registry_.find_device(name));
        std::stable_sort(ranked.begin(), ranked.end(),
                         [](const auto &a, const auto &b) { return a.desc->score() > b.desc->score(); });
        std::string skipped;
        // Devices that cannot run here are named with their reason (a GPU plugin without a GPU or driver).
        for (const auto &h : ranked) {
            if (h.desc->score() > 0) continue;
            strata_status why{};
            strata_device *d = start(h, &why); // for its reason; a device that scores 0 refuses to start
            if (d != nullptr) h.desc->destroy(d);
            skipped += fmt::format("{}'{}' ({})", skipped.empty() ? "" : ", ", h.desc->header.name,
                                   why.message[0] ? std::string(why.message) : std::string("not usable here"));
        }
        for (const auto &h : ranked) {
            if (h.desc->score() <= 0) continue;
            strata_status why{};
            device_ = start(h, &why);
            if (device_ == nullptr) {
                skipped += fmt::format("{}'{}' ({})", skipped.empty() ? "" : ", ", h.desc->header.name, status_text(why));
                continue;
            }
            device_desc_ = h;
            break;
        }
        if (device_ == nullptr) {
            fail("no usable device plugin found (device = \"auto\"){}; is the cpu plugin in [plugins] paths?",
                 skipped.empty() ? std::string() : ": " + skipped);
        }
        if (!skipped.empty()) {
            log::warn("engine", "device = \"auto\": using '{}'; skipped {}", device_desc_.desc->header.name, skipped);
        }
    } else {
        device_desc_ = registry_.find_device(opts_.device);
        if (device_desc_.desc == nullptr) {
            fail("device '{}' is not provided by any loaded plugin (available: {}); set [engine] device",
                 opts_.device, fmt::join(registry_.names(STRATA_KIND_DEVICE), ", "));
        }
        device_ = start(device_desc_, &st);
        if (device_desc_.desc->score() <= 0 || device_ == nullptr) {
            if (device_ != nullptr) device_desc_.desc->destroy(device_);
            device_ = nullptr;
            fail("device '{}' cannot run on this machine: {}; set [engine] device = \"auto\" or \"cpu\"", opts_.device,
                 st.message[0] ? status_text(st) : std::string("the plugin scores 0 here"));
        }
    }
    device_name_ = device_desc_.desc->header.name;

    source_ = std::make_unique<model_source>(*file_, registry_, host_);
    model_ = arch_.desc->create(source_->view(), &st);
    if (model_ == nullptr) fail("{}: {}", opts_.model_path, status_text(st));
    hp_.struct_size = sizeof hp_;
    arch_.desc->get_hparams(model_, &hp_);
    if (hp_.n_vocab != tokenizer_->n_vocab()) {
        fail("{}: the model has {} vocabulary rows but the tokenizer has {} tokens", opts_.model_path, hp_.n_vocab,
             tokenizer_->n_vocab());
    }

    n_ctx_ = opts_.max_model_len > 0 ? opts_.max_model_len : hp_.n_ctx_train;
    if (opts_.prefill_chunk < 1) fail("prefill_chunk {} must be at least 1 (--prefill-chunk)", opts_.prefill_chunk);
    opts_.scheduler.prefill_chunk = std::min(opts_.prefill_chunk, opts_.scheduler.max_num_batched_tokens);
    // A device without its own memory (no copy slot) or one that says so reads host tiers in place.
    device_reads_host_ = STRATA_HAS_SLOT(device_desc_.desc, host_addressable)
                             ? device_desc_.desc->host_addressable(device_) != 0
                             : !STRATA_HAS_SLOT(device_desc_.desc, copy);
    if (opts_.kv.block_size < 1 || opts_.kv.block_size > 4096)
        fail("block_size {} must be in [1, 4096] (--block-size)", opts_.kv.block_size);
    if (opts_.kv.swap_space_gib > 0 && !registry_.find_tier(opts_.kv.host_tier)) {
        fail("[memory] kv_host_tier = '{}' is not provided by any loaded plugin (available: {}); set --kv-host-tier, "
             "or --swap-space 0 for no host KV tier",
             opts_.kv.host_tier, fmt::join(registry_.names(STRATA_KIND_TIER), ", "));
    }
    if (opts_.kv.swap_space_gib > 0) {
        opts_.offload.kv_tier_bytes[opts_.kv.host_tier] += gib_bytes(opts_.kv.swap_space_gib);
        if (device_reads_host_) opts_.offload.kv_spill_bytes = gib_bytes(opts_.kv.swap_space_gib);
    }
    if (opts_.kv.nvme_space_gib > 0) opts_.offload.kv_tier_bytes["nvme"] += gib_bytes(opts_.kv.nvme_space_gib);
    opts_.offload.device_reads_host = device_reads_host_;
    if (STRATA_HAS_SLOT(device_desc_.desc, mem_info)) {
        uint64_t free_b = 0, total_b = 0;
        if (device_desc_.desc->mem_info(device_, &free_b, &total_b, &st) == STRATA_OK && total_b > 0)
            opts_.offload.device_total = total_b;
    }
    place_weights();
    if (opts_.max_model_len > hp_.n_ctx_train) {
        log::warn("engine", "max_model_len {} exceeds the model's trained context {}; quality may degrade",
                  opts_.max_model_len, hp_.n_ctx_train);
    }
    fingerprint_ = strata::engine::model_fingerprint(*file_);

    auto alloc = [&](uint64_t bytes) {
        void *p = device_desc_.desc->mem_alloc(device_, bytes, &st);
        if (p == nullptr) fail("device '{}' could not allocate {} bytes: {}", device_name_, bytes, status_text(st));
        device_allocations_.push_back(p);
        return p;
    };
    const auto &sc = opts_.scheduler;
    workspace_size_ = arch_.desc->workspace_bytes(model_, sc.max_num_batched_tokens);
    workspace_ = alloc(workspace_size_);
    const uint64_t logits_floats = static_cast<uint64_t>(sc.max_num_seqs) * static_cast<uint64_t>(hp_.n_vocab);
    logits_ = static_cast<float *>(alloc(sizeof(float) * logits_floats));
    if (STRATA_HAS_SLOT(device_desc_.desc, copy)) logits_host_.resize(logits_floats);
    setup_kv();
    const size_t max_tokens = static_cast<size_t>(sc.max_num_batched_tokens);
    step_tokens_.resize(max_tokens);
    step_positions_.resize(max_tokens);
    step_token_seq_.resize(max_tokens);
    step_logits_tokens_.resize(static_cast<size_t>(sc.max_num_seqs));
    step_logits_owner_.resize(static_cast<size_t>(sc.max_num_seqs));
    step_seq_block_start_.resize(static_cast<size_t>(sc.max_num_seqs) + 1);
    step_block_base_.reserve(kv_->capacity(kv::tier::device) + kv_->capacity(kv::tier::host) +
                             kv_->capacity(kv::tier::nvme) + static_cast<size_t>(sc.max_num_seqs));
    batch_.reserve(static_cast<size_t>(sc.max_num_seqs));
    live_.reserve(static_cast<size_t>(sc.max_num_seqs));

    log::info("engine", "model '{}' ({}): {} layers, dim {}, {} heads ({} KV), vocab {}, context {}", model_name_, arch,
              hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.n_vocab, n_ctx_);
    log::info("engine", "device '{}' with {} threads; up to {} sequences and {} tokens per step", device_name_,
              device_threads(), sc.max_num_seqs, sc.max_num_batched_tokens);
    publish_stats();
    worker_ = std::thread([this] { worker_loop(); });
}

// Sizes the KV pools (device, host tier, NVMe), the prefix store and the scheduler, and prints them.
void engine::setup_kv() {
    const kv_options &o = opts_.kv;
    const uint64_t kv_dim = static_cast<uint64_t>(hp_.n_head_kv) * static_cast<uint64_t>(hp_.head_dim);
    const uint64_t block_bytes = static_cast<uint64_t>(hp_.n_layer) * 2u * static_cast<uint64_t>(o.block_size) *
                                 kv_dim * sizeof(float);
    const uint64_t per_token = block_bytes / static_cast<uint64_t>(o.block_size);
    // Device KV as planned: kv_cache_memory when set, else what the device budget leaves (bounded on the CPU).
    const uint64_t device_kv = plan_.device_kv;
    const uint64_t n_device = device_kv / block_bytes;
    if (n_device == 0) {
        fail("the device KV cache ({}) holds no block of {} ({} tokens x {} per token); raise --kv-cache-memory or "
             "lower --block-size",
             human(device_kv), human(block_bytes), o.block_size, human(per_token));
    }
    if (n_device > UINT32_MAX / 2) fail("the device KV cache of {} blocks is too large; raise --block-size", n_device);
    kv::kv_cache_config kc;
    kc.block_size = o.block_size;
    kc.block_bytes = block_bytes;
    kc.prefix_caching = o.enable_prefix_caching;
    kc.fingerprint = fingerprint_;
    kc.device_reads_host = device_reads_host_;
    kv_ = std::make_unique<kv::kv_cache>(kc);
    strata_status st{};
    void *base = device_desc_.desc->mem_alloc(device_, n_device * block_bytes, &st);
    if (base == nullptr) {
        fail("device '{}' could not allocate the KV cache ({}): {}; lower --kv-cache-memory", device_name_,
             human(n_device * block_bytes), status_text(st));
    }
    device_allocations_.push_back(base);
    // Touch the whole pool now, as a GPU engine reserves its KV memory up front: resident memory is then flat under
    // load instead of growing as the prefix cache first reaches each block.
    if (device_reads_host_) { // host memory behind the device (a GPU's is reserved by its allocator)
        const uint64_t total = n_device * block_bytes;
        const uint64_t chunk = std::min<uint64_t>(uint64_t{64} << 20, total);
        const bool has_copy = STRATA_HAS_SLOT(device_desc_.desc, copy);
        std::vector<unsigned char> zeros(has_copy ? chunk : 0);
        std::unique_ptr<progress> bar;
        if (total >= (uint64_t{256} << 20)) bar = std::make_unique<progress>(fmt::format("reserving {} of KV cache", human(total)), total);
        for (uint64_t off = 0; off < total; off += chunk) {
            const uint64_t n = std::min<uint64_t>(chunk, total - off);
            char *dst = static_cast<char *>(base) + off;
            if (!has_copy) std::memset(dst, 0, n);
            else if (device_desc_.desc->copy(device_, dst, zeros.data(), n, STRATA_COPY_H2D, &st) != STRATA_OK)
                fail("device '{}' could not initialise its KV cache: {}", device_name_, status_text(st));
            if (bar) bar->update(off + n);
        }
        if (bar) bar->finish();
    }
    kv_->add_pool(kv::tier::device, static_cast<uint32_t>(n_device),
                  kv::make_device_storage(device_desc_.desc, device_, base, block_bytes, device_reads_host_));

    auto tier_pool = [&](kv::tier t, const std::string &name, uint64_t bytes, uint64_t align) -> uint64_t {
        if (bytes == 0) return 0;
        auto [desc, tier] = weights_ ? weights_->tier(name) : std::pair<const strata_tier_desc *, strata_tier *>{};
        if (desc == nullptr) fail("KV tier '{}' was not created", name);
        const uint64_t stride = (block_bytes + align - 1) / align * align;
        const uint64_t n = std::min<uint64_t>(bytes / stride, UINT32_MAX / 2);
        if (n == 0) return 0;
        uint64_t region = 0;
        if (desc->region_alloc(tier, n * stride, &region, &st) != STRATA_OK)
            fail("tier '{}' could not hold {} of KV cache: {}", name, human(n * stride), status_text(st));
        kv_->add_pool(t, static_cast<uint32_t>(n), kv::make_tier_storage(desc, tier, region, stride, block_bytes,
                                                                          device_reads_host_));
        // A GPU swaps KV blocks at the link's speed only from page-locked memory.
        void *mapped = STRATA_HAS_SLOT(desc, map) ? desc->map(tier, region) : nullptr;
        if (mapped != nullptr && !device_reads_host_ && STRATA_HAS_SLOT(device_desc_.desc, host_register)) {
            if (device_desc_.desc->host_register(device_, mapped, n * stride, &st) == STRATA_OK)
                registered_.push_back(mapped);
            else
                log::warn("kv", "could not page-lock the {} KV pool for device '{}' ({}); swaps run at pageable speed",
                          name, device_name_, status_text(st));
        }
        return n;
    };
    const uint64_t n_host = tier_pool(kv::tier::host, o.host_tier, gib_bytes(o.swap_space_gib), 64);
    const uint64_t n_nvme = tier_pool(kv::tier::nvme, "nvme", gib_bytes(o.nvme_space_gib), 4096);
    if (!o.prefix_store_dir.empty()) {
        if (!o.enable_prefix_caching)
            fail("prefix_store_dir is set but prefix caching is off; drop --prefix-store-dir or enable prefix caching");
        store_ = std::make_unique<prefix_store_adapter>(o.prefix_store_dir, gib_bytes(o.prefix_store_gib), fingerprint_,
                                                        o.block_size, block_bytes);
        kv_->set_store(store_.get());
    }

    // One sequence of max_model_len must fit: in device blocks, plus host blocks when the device reads them in place.
    const uint64_t need = (static_cast<uint64_t>(n_ctx_) + static_cast<uint64_t>(o.block_size) - 1) /
                          static_cast<uint64_t>(o.block_size);
    const uint64_t usable = n_device + (device_reads_host_ ? n_host : 0);
    if (usable < need) {
        fail("max_model_len {} needs {} KV blocks ({}) but the device holds {} ({}){}; raise --kv-cache-memory{}, or "
             "lower --max-model-len",
             n_ctx_, need, human(need * block_bytes), n_device, human(n_device * block_bytes),
             device_reads_host_ ? fmt::format(" and the host tier {}", n_host) : std::string(),
             device_reads_host_ ? " or --swap-space" : "");
    }
    sched_ = std::make_unique<scheduler>(*kv_, opts_.scheduler);

    if (opts_.print_plan) {
        std::string t = fmt::format("KV cache: blocks of {} tokens, {} each ({} per token); prefix caching {}\n",
                                    o.block_size, human(block_bytes), human(per_token),
                                    o.enable_prefix_caching ? "on" : "off");
        t += fmt::format("  {:<8} {:>10} {:>12} {:>12}  {}\n", "tier", "blocks", "tokens", "bytes", "where");
        auto row = [&](const char *name, uint64_t n, const std::string &where) {
            if (n == 0) return;
            t += fmt::format("  {:<8} {:>10} {:>12} {:>12}  {}\n", name, n, n * static_cast<uint64_t>(o.block_size),
                             human(n * block_bytes), where);
        };
        row("device", n_device, fmt::format("device '{}'{}", device_name_,
                                            opts_.offload.kv_cache_memory ? " (kv_cache_memory)" : ""));
        row("host", n_host, fmt::format("tier '{}' (swap_space){}", o.host_tier,
                                         device_reads_host_ ? "; long contexts are attended in place" : ""));
        row("nvme", n_nvme, "tier 'nvme' (kv_nvme_space), swapped sequences");
        if (store_) {
            t += fmt::format("  {:<8} {:>10} {:>12} {:>12}  prefix store {} ({} entries found)\n", "store",
                             store_->capacity_entries(), "", human(gib_bytes(o.prefix_store_gib)), o.prefix_store_dir,
                             store_->entries());
        }
        t += fmt::format("  scheduler: max_num_seqs {}, max_num_batched_tokens {}, prefill chunk {}, preemption {}\n",
                         opts_.scheduler.max_num_seqs, opts_.scheduler.max_num_batched_tokens,
                         opts_.scheduler.prefill_chunk,
                         opts_.scheduler.mode == preemption_mode::swap        ? "swap"
                         : opts_.scheduler.mode == preemption_mode::recompute ? "recompute"
                                                                              : "auto");
        std::fprintf(stderr, "%s", t.c_str());
    }
}

engine::~engine() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    release_resources(true);
}

// Everything the engine holds, in reverse order of creation. `persist`: a clean shutdown writes cached prefixes to the
// store first.
void engine::release_resources(bool persist) {
    if (kv_) {
        kv_->release(testing_kv_);
        if (store_ && persist) {
            const uint64_t n = kv_->persist_prefixes();
            if (n > 0) log::info("kv", "prefix store: {} blocks written to {}", n, opts_.kv.prefix_store_dir);
        }
    }
    kv_.reset();
    store_.reset();
    if (device_desc_.desc != nullptr && device_ != nullptr) {
        if (STRATA_HAS_SLOT(device_desc_.desc, host_unregister))
            for (void *p : registered_) device_desc_.desc->host_unregister(device_, p);
        for (void *p : device_allocations_) device_desc_.desc->mem_free(device_, p);
    }
    registered_.clear();
    device_allocations_.clear();
    if (model_ != nullptr) arch_.desc->destroy(model_);
    model_ = nullptr;
    if (weights_ && persist) {
        const std::string report = weights_->report();
        if (!report.empty()) log::info("offload", "{}", report.substr(0, report.size() - 1));
    }
    weights_.reset(); // stops the prefetch threads and frees the ring before the device goes
    if (device_ != nullptr) device_desc_.desc->destroy(device_);
    device_ = nullptr;
}

// Plans every weight's place (device, or a tier in place, or a tier streamed through the prefetch ring), prints the
// plan, and when anything leaves the device copies it to its tier and re-creates the model on the new addresses.
void engine::place_weights() {
    model_shape shape;
    shape.arch = arch_.desc;
    shape.model = model_;
    shape.hp = hp_;
    shape.max_model_len = n_ctx_;
    shape.activation_bytes = activation_bytes(arch_.desc, model_, hp_, opts_.scheduler);
    planner::inputs in = make_plan_inputs(shape, opts_.offload, registry_, host_, device_name_);
    plan_ = planner::make_plan(in);
    if (opts_.print_plan) std::fprintf(stderr, "%s", planner::to_table(plan_, in).c_str());
    if (!plan_.fits) {
        std::string all;
        for (const auto &p : plan_.problems) all += "\n  " + p;
        fail("the model does not fit as configured:{}", all);
    }
    bool moved = false;
    for (const auto &p : plan_.placements) moved = moved || p.home != "device";
    if (moved || !opts_.offload.kv_tier_bytes.empty() || !device_reads_host_) {
        weights_ = std::make_unique<tiered_weights>(*file_, registry_, host_, opts_.offload, plan_, hp_.n_layer,
                                                    device_desc_.desc, device_, device_reads_host_);
    }
    if (moved || (weights_ && weights_->uploaded())) {
        // The architecture resolved its weights against the file; resolve them again against their new homes.
        arch_.desc->destroy(model_);
        model_ = nullptr;
        source_->set_placement(weights_.get());
        strata_status st{};
        model_ = arch_.desc->create(source_->view(), &st);
        if (model_ == nullptr) fail("{}: {}", opts_.model_path, status_text(st));
    }
    prefault_weights();
}

// The weights are mmapped; reading the resident ones once up front (with progress) keeps page faults out of the
// first tokens. Offloaded tensors are skipped: their bytes now live in their tiers.
void engine::prefault_weights() {
    uint64_t bytes = 0;
    for (const auto &t : file_->tensors()) {
        if (!weights_ || weights_->address_of(t.name) == nullptr) bytes += t.n_bytes;
    }
    if (bytes < (uint64_t{32} << 20)) return; // small models load instantly; no progress noise
    progress bar(fmt::format("loading {:.1f} MiB of weights", static_cast<double>(bytes) / 1048576.0), bytes);
    uint64_t done = 0;
    for (const auto &t : file_->tensors()) {
        if (weights_ && weights_->address_of(t.name) != nullptr) continue;
        prefault(t.data, t.n_bytes);
        done += t.n_bytes;
        bar.update(done);
    }
}

const char *engine::metadata_string(const char *key) const {
    try {
        if (auto v = file_->get_string(key)) return v->data(); // the reader keeps strings NUL-terminated
    } catch (const std::exception &) {
        // present with another type: not a string
    }
    return nullptr;
}

int32_t engine::device_threads() const {
    const strata_device_desc *d = device_desc_.desc;
    if (d && STRATA_HAS_SLOT(d, thread_count)) return d->thread_count(device_);
    return 1;
}

strata_request_id engine::submit(const strata_request &req) {
    auto r = std::make_shared<sequence>();
    if (req.prompt_tokens != nullptr && req.n_prompt_tokens > 0) {
        r->tokens.assign(req.prompt_tokens, req.prompt_tokens + req.n_prompt_tokens);
        for (int32_t t : r->tokens) {
            if (t < 0 || t >= hp_.n_vocab) fail("prompt token id {} is outside the vocabulary [0, {})", t, hp_.n_vocab);
        }
    } else {
        r->tokens = tokenizer_->encode(req.prompt ? std::string_view(req.prompt) : std::string_view(), req.add_bos != 0);
    }
    if (r->tokens.empty()) r->tokens.push_back(tokenizer_->bos()); // generation needs at least one token to condition on
    r->n_prompt = static_cast<int32_t>(r->tokens.size());
    if (r->n_prompt >= n_ctx_) {
        fail("the prompt has {} tokens but max_model_len is {}; shorten the prompt or raise --max-model-len", r->n_prompt,
             n_ctx_);
    }
    r->sampling = req.sampling;
    // The 1.4 tail: a frontend built against an older ABI passes a smaller struct_size and gets the neutral values.
    if (req.struct_size >= offsetof(strata_request, logprobs) + sizeof req.logprobs) {
        for (const float p : {req.presence_penalty, req.frequency_penalty}) {
            if (!(p >= -2.f && p <= 2.f)) fail("presence_penalty/frequency_penalty is {}; it must be in [-2, 2]", p);
        }
        if (req.logprobs < -1 || req.logprobs > max_top_logprobs) {
            fail("logprobs is {}; it must be -1 (chosen token only), 0 (off) or 1..{} alternatives", req.logprobs,
                 max_top_logprobs);
        }
        r->presence_penalty = req.presence_penalty;
        r->frequency_penalty = req.frequency_penalty;
        r->logprobs = std::min(req.logprobs, hp_.n_vocab);
    }
    r->on_token = req.on_token;
    r->user = req.user;
    r->tokens.reserve(static_cast<size_t>(n_ctx_));
    // Sampling state is allocated here, once per request, never in the step loop.
    sampling_config sc;
    sc.temperature = r->sampling.temperature;
    sc.top_k = r->sampling.top_k;
    sc.top_p = r->sampling.top_p;
    sc.min_p = r->sampling.min_p;
    sc.repetition_penalty = r->sampling.repetition_penalty;
    sc.repetition_last_n = r->sampling.repetition_last_n;
    sc.presence_penalty = r->presence_penalty;
    sc.frequency_penalty = r->frequency_penalty;
    sc.seed = r->sampling.seed;
    r->smp = std::make_unique<sampler>(hp_.n_vocab, sc);
    // Logprobs are of the raw model output (vLLM's default): the sampler changes the logits in place.
    r->lp = std::make_unique<token_logprobs>(r->logprobs != 0 ? hp_.n_vocab : 0, std::max(r->logprobs, 0));
    r->max_tokens = r->sampling.max_tokens > 0 ? r->sampling.max_tokens : n_ctx_;
    // Text emitted so far is empty while only control tokens (BOS) precede: SPM then drops the dummy-prefix space.
    for (int32_t i = 0; i < r->n_prompt && !r->text_started; ++i) {
        r->text_started = tokenizer_->type(r->tokens[static_cast<size_t>(i)]) != token_type::control;
    }
    r->result.struct_size = sizeof r->result;
    r->result.n_prompt_tokens = r->n_prompt;
    r->t_submit = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) fail("the engine is shutting down");
    r->id = next_id_++;
    r->arrival = next_arrival_++;
    requests_[r->id] = r;
    incoming_.push_back(r);
    cv_.notify_all();
    return r->id;
}

strata_request_result engine::wait(strata_request_id id) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) fail("unknown request id {}", id);
    auto r = it->second;
    if (r->waited) fail("request {} is already being waited for", id);
    r->waited = true;
    cv_.wait(lock, [&] { return r->done; });
    strata_request_result res = r->result;
    requests_.erase(id);
    if (res.finish == STRATA_FINISH_ERROR) fail("{}", r->error);
    return res;
}

void engine::cancel(strata_request_id id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it != requests_.end()) it->second->cancelled = true;
    cv_.notify_all();
}

strata_engine_stats engine::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    strata_engine_stats s{};
    s.struct_size = sizeof s;
    s.requests_running = running_snapshot_;
    s.requests_waiting = waiting_snapshot_ + static_cast<int64_t>(incoming_.size());
    s.requests_finished = finished_;
    s.prompt_tokens_total = prompt_tokens_total_;
    s.generation_tokens_total = generation_tokens_total_;
    s.kv_block_size = opts_.kv.block_size;
    for (int t = 0; t < kv::n_tiers; ++t) {
        s.kv_blocks_total[t] = kv_snapshot_.blocks_total[t];
        s.kv_blocks_used[t] = kv_snapshot_.blocks_used[t];
        s.kv_blocks_cached[t] = kv_snapshot_.blocks_cached[t];
        s.prefix_hits[t] = kv_snapshot_.prefix_hits[t];
    }
    s.preemptions_swap = sched_snapshot_.preempt_swap;
    s.preemptions_recompute = sched_snapshot_.preempt_recompute;
    s.prefix_queries = kv_snapshot_.prefix_queries;
    s.kv_bytes_swapped_out = kv_snapshot_.bytes_out;
    s.kv_bytes_swapped_in = kv_snapshot_.bytes_in;
    return s;
}

// Called by the worker between steps.
void engine::publish_stats() {
    const kv::kv_cache_stats ks = kv_->stats();
    std::lock_guard<std::mutex> lock(mu_);
    kv_snapshot_ = ks;
    sched_snapshot_ = sched_->counters();
    running_snapshot_ = static_cast<int64_t>(sched_->n_running());
    waiting_snapshot_ = static_cast<int64_t>(sched_->n_waiting());
}

void engine::finish(sequence &s, int32_t reason, const std::string &error) {
    sched_->remove(&s); // frees its blocks now, so the next step can use them
    s.result.finish = reason;
    s.result.n_completion_tokens = s.generated;
    if (s.has_first_token) {
        s.result.prefill_seconds = std::chrono::duration<double>(s.t_first_token - s.t_submit).count();
        s.result.decode_seconds = seconds_since(s.t_first_token);
    } else {
        s.result.prefill_seconds = seconds_since(s.t_submit);
    }
    s.error = error;
    if (s.on_token) {
        strata_token_event ev{};
        ev.struct_size = sizeof ev;
        ev.id = s.id;
        ev.token = -1;
        ev.piece = "";
        ev.finish = reason;
        ev.error = s.error.empty() ? nullptr : s.error.c_str();
        s.on_token(s.user, &ev);
    }
    // The stats a waiter reads right after wait() returns already show this sequence's blocks back in their pools.
    const kv::kv_cache_stats ks = kv_->stats();
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++finished_;
        prompt_tokens_total_ += s.result.n_prompt_tokens;
        generation_tokens_total_ += s.generated;
        kv_snapshot_ = ks;
        sched_snapshot_ = sched_->counters();
        running_snapshot_ = static_cast<int64_t>(sched_->n_running());
        waiting_snapshot_ = static_cast<int64_t>(sched_->n_waiting());
        s.done = true;
    }
    cv_.notify_all();
}

void engine::emit_token(sequence &s, int32_t tok, bool eos) {
    if (!s.on_token) return;
    std::string_view piece = eos ? std::string_view() : tokenizer_->piece(tok);
    if (!s.text_started && !piece.empty()) {
        if (piece.front() == ' ') piece.remove_prefix(1);
        s.text_started = true;
    }
    strata_token_event ev{};
    ev.struct_size = sizeof ev;
    ev.id = s.id;
    ev.token = tok;
    ev.piece = piece.data() ? piece.data() : "";
    ev.piece_len = static_cast<int32_t>(piece.size());
    ev.finish = STRATA_FINISH_NONE;
    if (s.logprobs != 0) {
        ev.logprob = s.lp->of(tok);
        ev.n_top = s.lp->n_top();
        ev.top_tokens = s.lp->top_tokens();
        ev.top_logprobs = s.lp->top_logprobs();
    }
    s.on_token(s.user, &ev);
}

void engine::worker_loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !sched_->idle(); });
            if (stopping_) {
                for (auto &r : incoming_) live_.push_back(r);
                incoming_.clear();
            } else {
                while (!incoming_.empty()) {
                    live_.push_back(incoming_.front());
                    sched_->add(incoming_.front().get());
                    incoming_.pop_front();
                }
            }
        }
        // Cancelled requests (and all of them at shutdown) give their blocks back before anything is scheduled.
        bool stopping = false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            stopping = stopping_;
        }
        for (size_t i = 0; i < live_.size();) {
            sequence &s = *live_[i];
            if (stopping || s.cancelled) {
                finish(s, STRATA_FINISH_CANCELLED);
                live_[i] = std::move(live_.back());
                live_.pop_back();
            } else {
                ++i;
            }
        }
        if (stopping) {
            publish_stats();
            return;
        }
        failed_.clear();
        try {
            sched_->schedule(batch_, failed_);
        } catch (const std::exception &e) {
            // A KV copy or tier read failed while moving blocks: the requests in flight fail with the reason, the
            // server keeps serving.
            log::error("engine", "scheduling failed: {}; failing the {} requests in flight", e.what(), live_.size());
            for (auto &r : live_) {
                if (r->state != seq_state::finished) finish(*r, STRATA_FINISH_ERROR, std::string("KV cache: ") + e.what());
            }
            live_.clear();
            publish_stats();
            continue;
        }
        for (auto &[s, why] : failed_) finish(*s, STRATA_FINISH_ERROR, why);
        if (batch_.empty() && !sched_->idle() && failed_.empty()) {
            // Nothing could be scheduled although work remains: only swapped sequences that cannot come back remain.
            sched_->swapped_to_recompute();
        }
        if (!batch_.empty()) {
            try {
                run_step(batch_);
            } catch (const std::exception &e) {
                // A failed forward pass fails the sequences of this step, not the server.
                for (const auto &b : batch_) {
                    if (b.seq->state != seq_state::finished) finish(*b.seq, STRATA_FINISH_ERROR, e.what());
                }
            }
        }
        live_.erase(std::remove_if(live_.begin(), live_.end(), [](const auto &s) { return s->state == seq_state::finished; }),
                    live_.end());
        publish_stats();
    }
}

void engine::run_step(const std::vector<scheduled_seq> &batch) {
    const auto t0 = std::chrono::steady_clock::now();
    int32_t n = 0, n_logits = 0;
    step_block_base_.clear();
    const int32_t n_seqs = static_cast<int32_t>(batch.size());
    for (int32_t k = 0; k < n_seqs; ++k) {
        sequence &s = *batch[static_cast<size_t>(k)].seq;
        const int32_t n_new = batch[static_cast<size_t>(k)].n_new;
        for (int32_t j = 0; j < n_new; ++j) {
            step_tokens_[static_cast<size_t>(n)] = s.tokens[static_cast<size_t>(s.n_computed + j)];
            step_positions_[static_cast<size_t>(n)] = s.n_computed + j;
            step_token_seq_[static_cast<size_t>(n)] = k;
            ++n;
        }
        step_seq_block_start_[static_cast<size_t>(k)] = static_cast<int32_t>(step_block_base_.size());
        for (const kv::block_ref &b : s.kv.table) {
            void *addr = kv_->device_address(b);
            if (addr == nullptr) fail("internal: sequence {} runs with a KV block outside device memory", s.id);
            step_block_base_.push_back(addr);
        }
        if (s.n_computed + n_new == static_cast<int32_t>(s.tokens.size())) {
            step_logits_tokens_[static_cast<size_t>(n_logits)] = n - 1;
            step_logits_owner_[static_cast<size_t>(n_logits)] = &s;
            ++n_logits;
        }
    }
    step_seq_block_start_[static_cast<size_t>(n_seqs)] = static_cast<int32_t>(step_block_base_.size());
    forward_batch(n, n_seqs, n_logits);
    for (const auto &b : batch) {
        b.seq->n_computed += b.n_new;
        kv_->register_full_blocks(b.seq->kv, b.seq->tokens, b.seq->n_computed);
    }
    if (n > n_seqs) sched_->observe_prefill(seconds_since(t0) / n); // a step with prefill: time per token

    for (int32_t i = 0; i < n_logits; ++i) {
        sequence &s = *step_logits_owner_[static_cast<size_t>(i)];
        float *logits = const_cast<float *>(logits_row(i));
        if (s.logprobs != 0) s.lp->capture(logits);
        const int32_t tok = s.smp->sample(logits, s.tokens);
        s.tokens.push_back(tok);
        ++s.generated;
        if (!s.has_first_token) {
            s.has_first_token = true;
            s.t_first_token = std::chrono::steady_clock::now();
        }
        const bool eos = tokenizer_->is_eog(tok) && s.sampling.ignore_eos == 0;
        emit_token(s, tok, eos);
        if (eos) finish(s, STRATA_FINISH_STOP);
        else if (s.generated >= s.max_tokens || static_cast<int32_t>(s.tokens.size()) >= n_ctx_)
            finish(s, STRATA_FINISH_LENGTH);
    }
}

const float *engine::logits_row(int32_t i) {
    const uint64_t off = static_cast<uint64_t>(i) * static_cast<uint64_t>(hp_.n_vocab);
    if (logits_host_.empty()) return logits_ + off;
    strata_status st{};
    if (device_desc_.desc->copy(device_, logits_host_.data() + off, logits_ + off, sizeof(float) * hp_.n_vocab,
                                STRATA_COPY_D2H, &st) != STRATA_OK)
        fail("copying logits from the device failed: {}", status_text(st));
    return logits_host_.data() + off;
}

void engine::forward_batch(int32_t n_tokens, int32_t n_seqs, int32_t n_logits) {
    strata_paged_kv pk{};
    pk.struct_size = sizeof pk;
    pk.block_size = opts_.kv.block_size;
    pk.kv_dim = hp_.n_head_kv * hp_.head_dim;
    pk.n_seqs = n_seqs;
    pk.seq_block_start = step_seq_block_start_.data();
    pk.block_base = step_block_base_.data();
    strata_forward_args a{};
    a.struct_size = sizeof a;
    a.device_ops = device_desc_.desc;
    a.device = device_;
    a.tokens = step_tokens_.data();
    a.positions = step_positions_.data();
    a.n_tokens = n_tokens;
    a.workspace = workspace_;
    a.workspace_size = workspace_size_;
    a.logits = logits_;
    a.paged_kv = &pk;
    a.token_seq = step_token_seq_.data();
    a.logits_tokens = step_logits_tokens_.data();
    a.n_logits = n_logits;
    prefetch_ring *ring = weights_ ? weights_->ring() : nullptr;
    if (ring != nullptr) {
        a.layer_begin = [](void *user, int32_t layer, strata_status *st) {
            return static_cast<prefetch_ring *>(user)->layer_begin(layer, st);
        };
        a.user = ring;
    }
    strata_status st{};
    const int32_t rc = arch_.desc->forward(model_, &a, &st);
    if (ring != nullptr) {
        if (rc == STRATA_OK) ring->forward_done();
        else ring->recover(); // a pass that stopped partway leaves slots mid-cycle
    }
    if (rc != STRATA_OK) fail("forward pass failed: {}", status_text(st));
}

const float *engine::forward_for_testing(const int32_t *tokens, const int32_t *positions, int32_t n) {
    int32_t max_pos = 0;
    for (int32_t i = 0; i < n; ++i) max_pos = std::max(max_pos, positions[i]);
    if (max_pos >= n_ctx_) fail("position {} is outside max_model_len {}", max_pos, n_ctx_);
    if (!kv_->ensure_slots(testing_kv_, max_pos + 1))
        fail("the device KV cache cannot hold {} positions; raise --kv-cache-memory", max_pos + 1);
    const int32_t chunk = opts_.scheduler.max_num_batched_tokens;
    for (int32_t done = 0; done < n; done += chunk) {
        const int32_t m = std::min(chunk, n - done);
        step_block_base_.clear();
        for (const kv::block_ref &b : testing_kv_.table) step_block_base_.push_back(kv_->device_address(b));
        step_seq_block_start_[0] = 0;
        step_seq_block_start_[1] = static_cast<int32_t>(step_block_base_.size());
        for (int32_t i = 0; i < m; ++i) {
            step_tokens_[static_cast<size_t>(i)] = tokens[done + i];
            step_positions_[static_cast<size_t>(i)] = positions[done + i];
            step_token_seq_[static_cast<size_t>(i)] = 0;
        }
        step_logits_tokens_[0] = m - 1;
        forward_batch(m, 1, 1);
    }
    return logits_row(0);
}

} // namespace strata::engine
