// Worker: creating the model on the device, planning and placing its weights, the step's buffers, and releasing
// everything. Choosing the device, hybrid placement, pinned staging's NUMA node, the KV pools' memory and the forward
// pass live in worker_device.cpp, worker_hybrid.cpp, worker_pinned_staging.cpp, worker_kv_memory.cpp and
// worker_forward.cpp.
#include "engine/worker.hpp"

#include "distributed/transport.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "engine/config_override_view.hpp"
#include "engine/device_capability.hpp"
#include "engine/engine_options.hpp"
#include "engine/engine_util.hpp"
#include "engine/hybrid_policy.hpp"
#include "engine/model_coverage.hpp"
#include "engine/plan_inputs.hpp"
#include "engine/process_all_reduce.hpp"
#include "engine/tensor_parallel_group.hpp"
#include "engine/vocab_pieces.hpp"
#include "planner/plan_report.hpp"

#include <algorithm>
#include <unordered_set>

namespace strata::engine {

using namespace detail;

worker::worker(const plugins::registry &registry, const strata_host_services *host, const engine_options &opts,
               const model_file &file, plugins::handle<strata_model_arch_desc> arch)
    : registry_(registry), host_(host), opts_(opts), offload_(opts.offload), file_(file), arch_(std::move(arch)) {}

worker::~worker() { release(false); }

void worker::load_model() {
    strata_status st{};
    check_model_reads_input_order(file_, arch_, opts_.model_path);
    source_ = std::make_unique<model_source>(file_, registry_, host_);
    source_->set_context_per_sequence(std::max(0, opts_.max_model_len));
    if (tp_.size > 1) source_->set_tensor_parallel(tp_.rank, tp_.size, tp_.n_vocab);
    model_ = arch_.desc->create(source_->view(), &st);
    if (model_ == nullptr) fail("{}: {}", opts_.model_path, status_text(st));
    const std::string arch = arch_.desc->header.name;
    check_model_covers_file(file_, std::string(file_.get_string("general.architecture").value_or("")), *arch_.desc,
                            model_, source_->keys_read(), source_->tensors_read(), arch, opts_.model_path);
    // A device that cannot read host memory may leave a mixture's experts to the CPU (--cpu-moe): whether it needs
    // the expert ops itself is known once the plan is made (place_weights).
    check_device_offers_model_ops(*arch_.desc, model_, *device_desc_.desc, "device", opts_.model_path,
                                  can_host_experts() ? STRATA_DEVICE_OP_MOE : -1);
    hp_.struct_size = sizeof hp_;
    arch_.desc->get_hparams(model_, &hp_);
    stage_ = pipeline_stage{0, 1, 0, hp_.n_layer};
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
}

bool worker::has_device_per_stage() const {
    const uint32_t minor = device_desc_.lib ? device_desc_.lib->info->abi_minor : STRATA_ABI_MINOR;
    return !device_reads_host_ && device_stages_ > 1 && minor >= k_pipeline_rank_minor;
}

std::vector<uint64_t> worker::layer_slot_bytes() const {
    return engine::layer_slot_bytes(arch_.desc, model_, hp_.n_layer);
}

void worker::set_stage(const pipeline_stage &stage) {
    if (stage.n_ranks < 1 || stage.rank < 0 || stage.rank >= stage.n_ranks || stage.layer_first < 0 ||
        stage.layer_first >= stage.layer_end || stage.layer_end > hp_.n_layer)
        fail("internal: pipeline rank {} of {} with layers [{}, {}) of {}", stage.rank, stage.n_ranks,
             stage.layer_first, stage.layer_end, hp_.n_layer);
    // (A rank that is a process started its device as its host's local rank: no relation to its stage.)
    if (device_stages_ > 1 && opts_.pipeline_transport == nullptr &&
        (stage.rank != device_stage_ || stage.n_ranks != device_stages_))
        fail("internal: pipeline rank {} of {} on a device started for rank {} of {}", stage.rank, stage.n_ranks,
             device_stage_, device_stages_);
    if (stage.n_ranks > 1) {
        const std::string why = unsupported_pipeline_ranks(arch_, model_, opts_.model_path);
        if (!why.empty()) fail("{}", why);
    }
    stage_ = stage;
}

// Plans every weight's place (device, or a tier in place, or a tier streamed through the prefetch ring), prints the
// plan, and when anything leaves the device copies it to its tier and re-creates the model on the new addresses.
void worker::place_weights(offload_options offload, int32_t max_model_len) {
    offload_ = std::move(offload);
    offload_.device_reads_host = device_reads_host_;
    // Several ranks in this process read one file: an offloaded tensor's source pages are dropped only where this
    // rank owns them alone (a tensor-parallel rank's gathered columns); the file's stay for the others.
    if (tp_.size > 1 || (stage_.n_ranks > 1 && opts_.pipeline_transport == nullptr))
        offload_.may_drop_pages = [this](const gguf::tensor_info &t) { return file_.tensor_memory_is_private(t); };
    // Tier instances are numbered across the process's replicas and ranks. Replicas and ranks on the CPU device share
    // the host's RAM; a device with memory of its own gives each replica, and since ABI 1.28 each rank, a device of its
    // own (cuda: a GPU each), while an older one's ranks share their replica's.
    offload_.rank = (opts_.data_parallel_rank * tp_.size + tp_.rank) * stage_.n_ranks + stage_.rank;
    // Ranks that are processes share the memory of their host with the other processes on it (a GPU each has its
    // own); ranks in one process share its device.
    const distributed::transport *link = opts_.pipeline_transport;
    const int32_t sharing = link != nullptr ? link->local_size() : stage_.n_ranks;
    // (Under mpirun every rank on the host is a process there: tensor-parallel ones too.)
    const int32_t host_share = link != nullptr ? sharing : sharing * opts_.data_parallel_size * tp_.size;
    offload_.device_share = device_reads_host_                        ? host_share
                            : has_device_per_stage() || link != nullptr ? 1
                                                                        : stage_.n_ranks;
    // The ranks run one after another: on one device they divide its memory, not the time.
    const bool first_here = link != nullptr ? link->local_rank() == 0 : stage_.rank == 0;
    if (first_here && sharing > 1 && offload_.device_share > 1 && tp_.size == 1)
        log::info("engine", "the {} pipeline ranks{} share device '{}' (each plans 1/{} of its memory) and run one "
                  "after another each step: they split the model's memory, not its time",
                  sharing, link != nullptr ? " on host " + link->host_name() : std::string(),
                  device_name_, offload_.device_share);
    max_model_len_ = max_model_len;
    bind_pinned_staging();
    strata_status st{};
    if (STRATA_HAS_SLOT(device_desc_.desc, mem_info)) {
        uint64_t free_b = 0, total_b = 0;
        if (device_desc_.desc->mem_info(device_, &free_b, &total_b, &st) == STRATA_OK && total_b > 0)
            offload_.device_total = total_b;
    }
    model_shape shape;
    shape.arch = arch_.desc;
    shape.model = model_;
    shape.hp = hp_;
    shape.max_model_len = max_model_len_;
    shape.activation_bytes = activation_bytes(arch_.desc, model_, hp_, opts_.scheduler);
    // A pipeline rank's residual stream in and out (allocate_step_memory).
    const uint64_t stream_bytes = sizeof(float) * static_cast<uint64_t>(opts_.scheduler.max_num_batched_tokens) *
                                  static_cast<uint64_t>(hp_.n_embd);
    shape.activation_bytes += (stage_.first() ? 0 : stream_bytes) + (last_stage() ? 0 : stream_bytes);
    // The executor's residual stream between the stages (host memory: this process's, or rank 0's with ranks as
    // processes; two with tensor-parallel stages, one read while the other is written), counted once, by the first
    // stage's first rank, where the host is the device (a GPU's plan counts the GPU only).
    if (device_reads_host_ && stage_.n_ranks > 1 && stage_.rank == 0 && tp_.rank == 0)
        shape.activation_bytes += (tp_.size > 1 ? 2 : 1) * stream_bytes;
    // A tensor-parallel rank's part of the buffers the ranks exchange through: a rank that is a process holds every
    // rank's partial sums (process_all_reduce), and rank 0 the other ranks' logits pieces and the rows joined from
    // all pieces (executor: remote_logits_, logits_); ranks in one process share their group's sum and joined logits
    // (tensor_parallel_group; inside pipeline stages their stage's group: no logits before the last stage, but the
    // residual stream of each rank past the first), a 1/size share each. (The logits rows every plan counts cover a
    // rank's own piece.)
    if (tp_.size > 1) {
        const auto &sc = opts_.scheduler;
        const size_t max_floats =
            static_cast<size_t>(sc.max_num_batched_tokens) * static_cast<size_t>(hp_.n_embd);
        const size_t rows = static_cast<size_t>(sc.max_num_seqs);
        const size_t others_pieces =
            static_cast<size_t>(hp_.n_vocab - vocab_piece_width(hp_.n_vocab, 0, tp_.size));
        const size_t floats =
            link != nullptr
                ? process_all_reduce::held_floats(tp_.size, max_floats) +
                      (tp_.rank == 0 ? rows * (static_cast<size_t>(hp_.n_vocab) + others_pieces) : 0)
                : (tensor_parallel_group::held_floats(max_floats, hp_.n_vocab, last_stage() ? sc.max_num_seqs : 0,
                                                      static_cast<size_t>(tp_.size), last_stage() ? 0 : max_floats) +
                   static_cast<size_t>(tp_.size) - 1) / static_cast<size_t>(tp_.size);
        shape.activation_bytes += sizeof(float) * static_cast<uint64_t>(floats);
    }
    shape.kv_type = opts_.kv.kv_type;
    if (tp_.size > 1 && opts_.print_plan) {
        uint64_t bytes = 0;
        for (const auto &t : file_.tensors()) bytes += t.n_bytes;
        std::fprintf(stderr, "tensor-parallel rank %d of %d: its heads and feed-forward columns (%s of the file's "
                     "tensors)\n", tp_.rank, tp_.size, human(bytes).c_str());
    }
    if (stage_.n_ranks > 1) {
        shape.layer_first = stage_.layer_first;
        shape.layer_end = stage_.layer_end;
        if (opts_.print_plan)
            std::fprintf(stderr, "pipeline rank %d of %d: layers [%d, %d)\n", stage_.rank, stage_.n_ranks,
                         stage_.layer_first, stage_.layer_end);
    }
    if (opts_.plan_gpu_memory) {
        plan_for_gpu(shape);
        return;
    }
    planner::inputs in = make_plan_inputs(shape, offload_, registry_, host_, device_name_, opts_.machine);
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
    } else if (offload_.offload_compute != "auto" && plan_.offloaded_bytes > 0) {
        plan_.notes.push_back(fmt::format("offload_compute = '{}' changes nothing on device '{}': it reads host tiers "
                                          "itself (in place, or streamed with stream_weights)",
                                          offload_.offload_compute, device_name_));
    }
    plan_inputs_ = in;
    if (opts_.print_plan) std::fprintf(stderr, "%s", planner::to_table(plan_, in).c_str());
    if (opts_.plan_only) return; // `runtime plan` prints it (and says when it does not fit)
    if (!plan_.fits) {
        std::string all;
        for (const auto &p : plan_.problems) all += "\n  " + p;
        if (tp_.size > 1)
            fail("tensor-parallel rank {} of {} does not fit as configured:{}", tp_.rank, tp_.size, all);
        if (stage_.n_ranks > 1)
            fail("pipeline rank {} of {} (layers [{}, {})) does not fit as configured:{}", stage_.rank, stage_.n_ranks,
                 stage_.layer_first, stage_.layer_end, all);
        fail("the model does not fit as configured:{}", all);
    }
    bool moved = false;
    for (const auto &p : plan_.placements) moved = moved || p.home != "device";
    if (moved || !offload_.kv_tier_bytes.empty() || !device_reads_host_) {
        weights_ = std::make_unique<tiered_weights>(file_, registry_, host_, offload_, plan_, hp_.n_layer,
                                                    device_desc_.desc, device_, device_reads_host_);
    }
    if (moved || (weights_ && weights_->uploaded())) {
        // The architecture resolved its weights against the file; resolve them again against their new homes.
        arch_.desc->destroy(model_);
        model_ = nullptr;
        source_->set_placement(weights_.get());
        model_ = arch_.desc->create(source_->view(), &st);
        if (model_ == nullptr) fail("{}: {}", opts_.model_path, status_text(st));
    }
    prefault_weights();
}

// `runtime plan --plan-gpu-memory SIZE`: the plan a GPU of SIZE bytes would get, made on whatever device is here. The
// GPU's rules apply (gpu_memory_utilization of SIZE, its overhead, tiers streamed to it; experts in host RAM computed
// by the offload device, which is started to check it can); nothing is measured on a GPU, so whole layers in host RAM
// are planned streamed (on a real card the start-up measurement may compute them on the CPU instead). Each pipeline
// stage and each data-parallel replica is planned on a GPU of SIZE of its own, as the cuda device runs them.
void worker::plan_for_gpu(const model_shape &shape) {
    if (!opts_.plan_only)
        fail("--plan-gpu-memory {} plans for a GPU this machine does not have: use it with `runtime plan` only",
             human(*opts_.plan_gpu_memory));
    offload_options gpu = offload_;
    gpu.device_reads_host = false;
    gpu.device_total = *opts_.plan_gpu_memory;
    gpu.device_share = 1;
    gpu.device_memory.reset();
    gpu.kv_spill_bytes = 0; // a GPU attends only the KV in its own memory
    planner::inputs in = make_plan_inputs(shape, gpu, registry_, host_, "cuda", opts_.machine);
    const bool experts = STRATA_HAS_SLOT(arch_.desc, host_experts) && arch_.desc->host_experts(model_) == 1 &&
                         parse_offload_compute(offload_.offload_compute) != offload_compute::device;
    in.experts_on_cpu = experts;
    plan_ = planner::make_plan(in);
    if (plan_.fits && experts_on_cpu_planned() && !start_host_device(false)) {
        in.experts_on_cpu = false;
        plan_ = planner::make_plan(in);
    }
    if (experts_on_cpu_planned())
        plan_.notes.push_back(fmt::format("the CPU ('{}') would compute the routed experts kept in host RAM",
                                          offload_.offload_device));
    plan_.notes.insert(plan_.notes.begin(),
                       fmt::format("planned for a GPU of {} (--plan-gpu-memory), not for device '{}' here: nothing "
                                   "was measured on a GPU, so layers in host RAM are planned streamed",
                                   human(*opts_.plan_gpu_memory), device_name_));
    plan_inputs_ = in;
    if (opts_.print_plan) std::fprintf(stderr, "%s", planner::to_table(plan_, in).c_str());
}

// The weights are mmapped; reading the resident ones once up front (with progress) keeps page faults out of the
// first tokens. Offloaded tensors are skipped: their bytes now live in their tiers.
void worker::prefault_weights() {
    uint64_t bytes = 0;
    // Tensors in a tier (moved, or host copies the CPU computes) are not read through the file mapping.
    // A pipeline rank reads only the tensors of its plan (its layers).
    std::unordered_set<std::string> mine;
    if (stage_.n_ranks > 1)
        for (const auto &p : plan_.placements) mine.insert(p.tensor);
    auto not_read_here = [&](const std::string &name) {
        return (weights_ && (weights_->address_of(name) != nullptr || weights_->host_address_of(name) != nullptr)) ||
               (stage_.n_ranks > 1 && mine.count(name) == 0);
    };
    for (const auto &t : file_.tensors()) {
        if (!not_read_here(t.name)) bytes += t.n_bytes;
    }
    if (bytes < (uint64_t{32} << 20)) return; // small models load instantly; no progress noise
    progress bar(fmt::format("loading {:.1f} MiB of weights", static_cast<double>(bytes) / 1048576.0), bytes);
    uint64_t done = 0;
    for (const auto &t : file_.tensors()) {
        if (not_read_here(t.name)) continue;
        prefault(t.data, t.n_bytes);
        done += t.n_bytes;
        bar.update(done);
    }
}

void *worker::allocate(uint64_t bytes, const char *what) {
    strata_status st{};
    void *p = device_desc_.desc->mem_alloc(device_, bytes, &st);
    if (p == nullptr)
        fail("device '{}' could not allocate {} ({} bytes): {}", device_name_, what, bytes, status_text(st));
    device_allocations_.push_back(p);
    return p;
}

void worker::allocate_step_memory() {
    const auto &sc = opts_.scheduler;
    workspace_size_ = arch_.desc->workspace_bytes(model_, sc.max_num_batched_tokens);
    workspace_ = allocate(workspace_size_, "the step's workspace");
    if (last_stage()) { // a pipeline rank before the last computes no logits
        const uint64_t logits_floats = static_cast<uint64_t>(sc.max_num_seqs) * static_cast<uint64_t>(hp_.n_vocab);
        logits_ = static_cast<float *>(allocate(sizeof(float) * logits_floats, "the logits buffer"));
        if (STRATA_HAS_SLOT(device_desc_.desc, copy)) logits_host_.resize(logits_floats);
    }
    const uint64_t stream_bytes =
        sizeof(float) * static_cast<uint64_t>(sc.max_num_batched_tokens) * static_cast<uint64_t>(hp_.n_embd);
    if (!stage_.first()) hidden_in_ = static_cast<float *>(allocate(stream_bytes, "the residual stream coming in"));
    if (!last_stage()) hidden_out_ = static_cast<float *>(allocate(stream_bytes, "the residual stream going out"));
}

void worker::release(bool clean_shutdown) {
    if (device_desc_.desc != nullptr && device_ != nullptr) {
        if (STRATA_HAS_SLOT(device_desc_.desc, host_unregister))
            for (void *p : registered_) device_desc_.desc->host_unregister(device_, p);
        for (void *p : device_allocations_) device_desc_.desc->mem_free(device_, p);
    }
    registered_.clear();
    device_allocations_.clear();
    hidden_in_ = hidden_out_ = nullptr;
    for (auto &pool : kv_storage_) pool = nullptr;
    if (model_ != nullptr) arch_.desc->destroy(model_);
    model_ = nullptr;
    if (weights_ && clean_shutdown) {
        const std::string report = weights_->report();
        if (!report.empty()) log::info("offload", "{}", report.substr(0, report.size() - 1));
    }
    weights_.reset(); // stops the prefetch threads and frees the ring before the device goes
    if (device_ != nullptr) device_desc_.desc->destroy(device_);
    device_ = nullptr;
    if (host_device_ != nullptr) host_desc_.desc->destroy(host_device_);
    host_device_ = nullptr;
}

int32_t worker::device_threads() const {
    const strata_device_desc *d = device_desc_.desc;
    if (d && device_ != nullptr && STRATA_HAS_SLOT(d, thread_count)) return d->thread_count(device_);
    return 1;
}

} // namespace strata::engine
