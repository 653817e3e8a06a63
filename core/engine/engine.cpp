#include "engine/engine.hpp"
#include "engine/requested_formats.hpp"
#include "engine/tensor_check.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "engine/config_override_view.hpp"
#include "engine/device_capability.hpp"
#include "engine/engine_util.hpp"
#include "engine/model_fingerprint.hpp"
#include "engine/model_coverage.hpp"
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

using namespace detail;

// Loading the model, planning and placing its weights, and releasing everything; the KV cache, the device choice,
// pinned staging's NUMA node, the request API and the step loop live in engine_kv_setup.cpp, engine_device.cpp,
// engine_pinned_staging.cpp, engine_requests.cpp and engine_step_loop.cpp.
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
        fail("no model given: set [model] path in the config or pass --model FILE.gguf (or an HF checkpoint folder)");
    }
    check_quantization_before_load(opts_.quantization, opts_.model_path);
    file_ = open_model_file(opts_.model_path, opts_.file_open, opts_.plan_only);
    check_quantization(*file_, opts_.quantization, opts_.model_path);
    if (opts_.check_tensors && !opts_.plan_only) check_tensors(*file_, registry_, opts_.model_path);
    const std::string arch = std::string(file_->get_string("general.architecture").value_or(""));
    if (arch.empty()) fail("{}: no general.architecture key; is this a model GGUF (not a vocab-only file)?", opts_.model_path);
    arch_ = registry_.find_model_arch_for(arch);
    if (arch_.desc == nullptr) {
        fail("{}: no model_arch plugin handles architecture '{}' (loaded: {}); add a plugin for it or check [plugins] paths",
             opts_.model_path, arch, fmt::join(registry_.names(STRATA_KIND_MODEL_ARCH), ", "));
    }
    model_name_ = std::string(file_->get_string("general.name").value_or(arch));
    // `runtime plan` on an HF folder holding only config.json: the plan needs no vocabulary.
    if (!opts_.plan_only || has_vocabulary(*file_)) {
        tokenizer_ = make_tokenizer(load_model_vocab(*file_));
        setup_chat();
    }

    start_device();
    // A device without its own memory (no copy slot) or one that says so reads host tiers in place.
    device_reads_host_ = STRATA_HAS_SLOT(device_desc_.desc, host_addressable)
                             ? device_desc_.desc->host_addressable(device_) != 0
                             : !STRATA_HAS_SLOT(device_desc_.desc, copy);
    strata_status st{};

    check_model_reads_input_order(*file_, arch_, opts_.model_path);
    source_ = std::make_unique<model_source>(*file_, registry_, host_);
    source_->set_context_per_sequence(std::max(0, opts_.max_model_len));
    model_ = arch_.desc->create(source_->view(), &st);
    if (model_ == nullptr) fail("{}: {}", opts_.model_path, status_text(st));
    check_model_covers_file(*file_, arch, *arch_.desc, model_, source_->keys_read(), source_->tensors_read(),
                            arch_.desc->header.name, opts_.model_path);
    // A device that cannot read host memory may leave a mixture's experts to the CPU (--cpu-moe): whether it needs
    // the expert ops itself is known once the plan is made (place_weights).
    check_device_offers_model_ops(*arch_.desc, model_, *device_desc_.desc, "device", opts_.model_path,
                                  can_host_experts() ? STRATA_DEVICE_OP_MOE : -1);
    hp_.struct_size = sizeof hp_;
    arch_.desc->get_hparams(model_, &hp_);
    // Routed experts the CPU may compute (--cpu-moe) are asked about once the plan says where they run.
    const bool experts_may_leave = can_host_experts();
    if (const std::string why = unsupported_model_shapes(
            *arch_.desc, model_, hp_, device_desc_, device_, "device", opts_.model_path,
            [&](const std::string &t) { return !(experts_may_leave && is_routed_expert(t)); });
        !why.empty())
        fail("{}", why);
    if (const std::string why = unsupported_kv_type(opts_.kv.kv_type, hp_, device_desc_, device_, arch_,
                                                    opts_.model_path);
        !why.empty())
        fail("{}", why);
    if (tokenizer_ && hp_.n_vocab != tokenizer_->n_vocab()) {
        fail("{}: the model has {} vocabulary rows but the tokenizer has {} tokens", opts_.model_path, hp_.n_vocab,
             tokenizer_->n_vocab());
    }

    n_ctx_ = opts_.max_model_len > 0 ? opts_.max_model_len : hp_.n_ctx_train;
    if (opts_.prefill_chunk < 1) fail("prefill_chunk {} must be at least 1 (--prefill-chunk)", opts_.prefill_chunk);
    opts_.scheduler.prefill_chunk = std::min(opts_.prefill_chunk, opts_.scheduler.max_num_batched_tokens);
    if (opts_.prefill_chunk > opts_.scheduler.max_num_batched_tokens) {
        log::warn("engine", "prefill_chunk {} exceeds max_num_batched_tokens {}: prompts are prefilled {} tokens a step",
                  opts_.prefill_chunk, opts_.scheduler.max_num_batched_tokens, opts_.scheduler.max_num_batched_tokens);
    }
    check_cpu_kv_cache(opts_.cpu_kv_cache, device_reads_host_, device_desc_.desc->header.name);
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
    bind_pinned_staging();
    if (STRATA_HAS_SLOT(device_desc_.desc, mem_info)) {
        uint64_t free_b = 0, total_b = 0;
        if (device_desc_.desc->mem_info(device_, &free_b, &total_b, &st) == STRATA_OK && total_b > 0)
            opts_.offload.device_total = total_b;
    }
    place_weights();
    if (opts_.plan_only) return;
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
    if (host_device_ != nullptr) host_desc_.desc->destroy(host_device_);
    host_device_ = nullptr;
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
    shape.kv_type = opts_.kv.kv_type;
    if (opts_.plan_gpu_memory) {
        plan_for_gpu(shape);
        return;
    }
    planner::inputs in = make_plan_inputs(shape, opts_.offload, registry_, host_, device_name_, opts_.machine);
    in.experts_on_cpu = can_host_experts();
    plan_ = planner::make_plan(in);
    if (!device_reads_host_) {
        // A device with its own memory: the link's speed decides hybrid placement and is worth showing.
        measure_link();
        if (plan_.fits) plan_cpu_experts(in); // may plan again, streaming them
        if (plan_.fits) plan_hybrid(in); // may plan again
        prepare_host_compute();
        check_device_computes_experts();
        if (link_h2d_ > 0)
            plan_.notes.insert(plan_.notes.begin(),
                               fmt::format("link to device '{}': {:.1f} GB/s host to device, {:.1f} GB/s back "
                                           "(page-locked, measured once and cached; --remeasure), {:.0f} us per small copy",
                                           device_name_, link_h2d_ / 1e9, link_d2h_ / 1e9, link_latency_ * 1e6));
    } else if (opts_.offload.offload_compute != "auto" && plan_.offloaded_bytes > 0) {
        plan_.notes.push_back(fmt::format("offload_compute = '{}' changes nothing on device '{}': it reads host tiers "
                                          "itself (in place, or streamed with stream_weights)",
                                          opts_.offload.offload_compute, device_name_));
    }
    plan_inputs_ = in;
    if (opts_.print_plan) std::fprintf(stderr, "%s", planner::to_table(plan_, in).c_str());
    if (opts_.plan_only) return; // `runtime plan` prints it (and says when it does not fit)
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

// `runtime plan --plan-gpu-memory SIZE`: the plan a GPU of SIZE bytes would get, made on whatever device is here. The
// GPU's rules apply (gpu_memory_utilization of SIZE, its overhead, tiers streamed to it; experts in host RAM computed
// by the offload device, which is started to check it can); nothing is measured on a GPU, so whole layers in host RAM
// are planned streamed (on a real card the start-up measurement may compute them on the CPU instead).
void engine::plan_for_gpu(const model_shape &shape) {
    if (!opts_.plan_only)
        fail("--plan-gpu-memory {} plans for a GPU this machine does not have: use it with `runtime plan` only",
             human(*opts_.plan_gpu_memory));
    offload_options gpu = opts_.offload;
    gpu.device_reads_host = false;
    gpu.device_total = *opts_.plan_gpu_memory;
    gpu.device_memory.reset();
    gpu.kv_spill_bytes = 0; // a GPU attends only the KV in its own memory
    planner::inputs in = make_plan_inputs(shape, gpu, registry_, host_, "cuda", opts_.machine);
    const bool experts = STRATA_HAS_SLOT(arch_.desc, host_experts) && arch_.desc->host_experts(model_) == 1 &&
                         parse_offload_compute(opts_.offload.offload_compute) != offload_compute::device;
    in.experts_on_cpu = experts;
    plan_ = planner::make_plan(in);
    if (plan_.fits && experts_on_cpu_planned() && !start_host_device(false)) {
        in.experts_on_cpu = false;
        plan_ = planner::make_plan(in);
    }
    if (experts_on_cpu_planned())
        plan_.notes.push_back(fmt::format("the CPU ('{}') would compute the routed experts kept in host RAM",
                                          opts_.offload.offload_device));
    plan_.notes.insert(plan_.notes.begin(),
                       fmt::format("planned for a GPU of {} (--plan-gpu-memory), not for device '{}' here: nothing "
                                   "was measured on a GPU, so layers in host RAM are planned streamed",
                                   human(*opts_.plan_gpu_memory), device_name_));
    plan_inputs_ = in;
    if (opts_.print_plan) std::fprintf(stderr, "%s", planner::to_table(plan_, in).c_str());
}

// The weights are mmapped; reading the resident ones once up front (with progress) keeps page faults out of the
// first tokens. Offloaded tensors are skipped: their bytes now live in their tiers.
void engine::prefault_weights() {
    uint64_t bytes = 0;
    // Tensors in a tier (moved, or host copies the CPU computes) are not read through the file mapping.
    auto in_tier = [&](const std::string &name) {
        return weights_ && (weights_->address_of(name) != nullptr || weights_->host_address_of(name) != nullptr);
    };
    for (const auto &t : file_->tensors()) {
        if (!in_tier(t.name)) bytes += t.n_bytes;
    }
    if (bytes < (uint64_t{32} << 20)) return; // small models load instantly; no progress noise
    progress bar(fmt::format("loading {:.1f} MiB of weights", static_cast<double>(bytes) / 1048576.0), bytes);
    uint64_t done = 0;
    for (const auto &t : file_->tensors()) {
        if (in_tier(t.name)) continue;
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

} // namespace strata::engine
