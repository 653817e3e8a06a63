#include "engine/engine.hpp"
#include "engine/requested_formats.hpp"
#include "engine/tensor_check.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine_util.hpp"
#include "engine/model_fingerprint.hpp"
#include "engine/pipeline_split.hpp"
#include "engine/prefix_store_adapter.hpp"
#include "engine/tensor_parallel_split.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

#include <algorithm>

namespace strata::engine {

using namespace detail;

// Start-up in order (the model file, its tokenizer and chat templates, the worker's phases: device, model, memory plan,
// step memory; the KV cache and the scheduler) and releasing everything; the KV cache's sizing, the request API and
// the step loop live in engine_kv_setup.cpp, engine_requests.cpp and engine_step_loop.cpp, the worker's phases in
// worker*.cpp.
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
    plugins::handle<strata_model_arch_desc> arch_plugin = registry_.find_model_arch_for(arch);
    if (arch_plugin.desc == nullptr) {
        fail("{}: no model_arch plugin handles architecture '{}' (loaded: {}); add a plugin for it or check [plugins] paths",
             opts_.model_path, arch, fmt::join(registry_.names(STRATA_KIND_MODEL_ARCH), ", "));
    }
    model_name_ = std::string(file_->get_string("general.name").value_or(arch));
    // `runtime plan` on an HF folder holding only config.json: the plan needs no vocabulary.
    if (!opts_.plan_only || has_vocabulary(*file_)) {
        tokenizer_ = make_tokenizer(load_model_vocab(*file_));
        setup_chat();
    }

    const int32_t n_ranks = opts_.pipeline_parallel_size;
    if (n_ranks < 1) fail("pipeline_parallel_size {} must be at least 1", n_ranks);
    const int32_t n_tp = opts_.tensor_parallel_size;
    if (n_tp < 1) fail("tensor_parallel_size {} must be at least 1", n_tp);
    // Under mpirun the other ranks are processes (remote_rank): only rank 0's worker lives here.
    distributed::transport *link = opts_.pipeline_transport;
    if (link != nullptr && (link->rank() != 0 || link->size() != n_ranks * n_tp))
        fail("internal: the engine runs on rank 0 of {} processes, not rank {} of {}", n_ranks * n_tp, link->rank(),
             link->size());
    std::vector<std::unique_ptr<worker>> workers;
    strata_model_hparams whole{};
    if (n_tp > 1) {
        whole = start_tensor_parallel_ranks(arch_plugin, workers);
    } else {
        for (int32_t r = 0; r < (link != nullptr ? 1 : n_ranks); ++r)
            workers.push_back(std::make_unique<worker>(registry_, host_, opts_, *file_, arch_plugin));
    }
    executor_ = std::make_unique<executor>(std::move(workers));
    worker &w = executor_->driver_worker();
    // Tensor-parallel ranks inside pipeline stages (in this process): the workers are rank-major, worker t * S + s
    // being tensor-parallel rank t of stage s, so that the ranks' shares of a KV block join in one process's -tp
    // layout (each rank's heads of every layer, stage after stage: its layers in order).
    const int32_t n_stages = n_tp > 1 && link == nullptr ? n_ranks : 1;
    if (n_tp > 1) {
        // device = "auto" takes the CPU: a device with memory of its own cannot join the partial sums yet.
        const std::string first = opts_.device == "auto" ? std::string("cpu") : std::string();
        int32_t i = 0;
        for (const auto &rank : executor_->workers()) {
            rank->init_device(i++ % n_stages, n_stages, &*rank == &w ? first : w.device_name());
            if (!rank->device_reads_host())
                fail("tensor_parallel_size {}: device '{}' has memory of its own, and joining the ranks' partial sums "
                     "there needs NCCL's all-reduce, which is not built yet; run tensor parallel on the CPU device, or "
                     "split the layers into stages instead (--pipeline-parallel-size {}, a GPU each)",
                     n_tp, rank->device_name(), n_tp);
            rank->load_model();
        }
    } else if (link != nullptr) {
        // A process's device is its host's: the processes on one host take its devices in turn (a GPU each).
        w.init_device(link->local_rank(), link->local_size());
        w.load_model();
    } else {
        w.init_device(0, n_ranks);
        w.load_model();
    }
    hp_ = w.hparams();
    if (n_tp > 1) {
        // The model's sizes, not a rank's part of them (the KV block is every rank's heads).
        hp_ = whole;
        log::info("engine", "tensor parallel: {} ranks of {} heads ({} KV) and {} feed-forward columns each, on device "
                  "'{}' with {} threads each", n_tp, w.hparams().n_head, w.hparams().n_head_kv, w.hparams().n_ff,
                  w.device_name(), w.device_threads());
    }
    std::vector<pipeline_stage> remote_stages;
    if (n_tp > 1 && link != nullptr) {
        // Tensor-parallel ranks that are processes: each holds its share of every layer.
        for (int32_t r = 1; r < n_tp; ++r) remote_stages.push_back(pipeline_stage{r, n_tp, 0, hp_.n_layer});
    } else if (n_ranks > 1 || !opts_.pipeline_layer_partition.empty()) {
        // The split is known from rank 0's model before the other ranks start their devices.
        const std::vector<layer_range> ranges =
            split_layers(w.layer_slot_bytes(), n_ranks, opts_.pipeline_layer_partition);
        for (int32_t r = 0; r < n_ranks; ++r) {
            const layer_range &range = ranges[static_cast<size_t>(r)];
            const pipeline_stage stage{r, n_ranks, range.first, range.end};
            if (link != nullptr && r > 0) {
                remote_stages.push_back(stage); // started below, once the context length is known
                continue;
            }
            if (n_tp > 1) { // each tensor-parallel rank's worker of the stage, started above
                for (int32_t t = 0; t < n_tp; ++t)
                    executor_->workers()[static_cast<size_t>(t * n_ranks + r)]->set_stage(stage);
            } else {
                worker &rank = *executor_->workers()[static_cast<size_t>(r)];
                if (r > 0) {
                    rank.init_device(r, n_ranks, w.device_name()); // rank 0's device kind, never a fallback
                    rank.load_model();
                }
                rank.set_stage(stage);
            }
            log::info("engine", "pipeline rank {} of {}: layers [{}, {}) on device '{}'{}{}", r, n_ranks,
                      stage.layer_first, stage.layer_end, executor_->workers()[static_cast<size_t>(r)]->device_name(),
                      n_tp > 1 ? fmt::format(", {} tensor-parallel ranks", n_tp) : std::string(),
                      link != nullptr ? fmt::format(" (process on {})", link->host_name()) : std::string());
        }
    }
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
    const bool device_reads_host = w.device_reads_host();
    check_cpu_kv_cache(opts_.cpu_kv_cache, device_reads_host, w.device_name());
    if (opts_.kv.block_size < 1 || opts_.kv.block_size > 4096)
        fail("block_size {} must be in [1, 4096] (--block-size)", opts_.kv.block_size);
    if (opts_.kv.swap_space_gib > 0 && !registry_.find_tier(opts_.kv.host_tier)) {
        fail("[memory] kv_host_tier = '{}' is not provided by any loaded plugin (available: {}); set --kv-host-tier, "
             "or --swap-space 0 for no host KV tier",
             opts_.kv.host_tier, fmt::join(registry_.names(STRATA_KIND_TIER), ", "));
    }
    // The KV tiers' bytes join the weights' plan ([memory] swap_space, kv_nvme_space).
    const offload_options offload = offload_with_kv_tiers(opts_, device_reads_host);
    if (link != nullptr) {
        if (opts_.plan_only) fail("internal: a plan of pipeline ranks that are processes");
        // The ranks open the file, check its fingerprint, load and place their layers while this one does.
        fingerprint_ = strata::engine::model_fingerprint(*file_);
        const pipeline_protocol::shared_options shared{opts_.kv.block_size, opts_.kv.kv_type,
                                                       opts_.scheduler.max_num_batched_tokens,
                                                       opts_.scheduler.max_num_seqs, n_tp,
                                                       std::max(0, opts_.max_model_len)};
        for (const pipeline_stage &stage : remote_stages) {
            auto rank = std::make_unique<remote_rank>(*link, stage, opts_.rank_timeout_s, n_tp > 1);
            rank->begin_start(w.device_name(), n_ctx_, fingerprint_, shared);
            executor_->add_remote(*link, opts_.rank_timeout_s, std::move(rank));
        }
    }
    for (const auto &rank : executor_->workers()) rank->place_weights(offload, n_ctx_);
    for (const auto &rank : executor_->remote_ranks()) {
        rank->finish_start(opts_.rank_start_timeout_s);
        if (n_tp > 1)
            log::info("engine", "tensor-parallel rank {} of {}: in its own process", rank->stage().rank, n_tp);
        else
            log::info("engine", "pipeline rank {} of {}: layers [{}, {}) in its own process", rank->stage().rank,
                      n_ranks, rank->stage().layer_first, rank->stage().layer_end);
    }
    if (opts_.plan_only) return;
    if (opts_.max_model_len > hp_.n_ctx_train) {
        log::warn("engine", "max_model_len {} exceeds the model's trained context {}; quality may degrade",
                  opts_.max_model_len, hp_.n_ctx_train);
    }
    if (link == nullptr) fingerprint_ = strata::engine::model_fingerprint(*file_);

    const auto &sc = opts_.scheduler;
    const size_t max_partial = static_cast<size_t>(sc.max_num_batched_tokens) * static_cast<size_t>(hp_.n_embd);
    if (n_tp > 1 && link != nullptr)
        executor_->make_tensor_parallel_across_processes(max_partial, hp_.n_vocab, sc.max_num_seqs);
    else if (n_tp > 1)
        executor_->make_tensor_parallel(max_partial, hp_.n_vocab, sc.max_num_seqs, n_stages);
    executor_->allocate_step_memory(sc.max_num_batched_tokens, hp_.n_embd, sc.max_num_seqs, hp_.n_vocab);
    setup_kv();
    executor_->bind_kv(step_block_reserve(*kv_, sc.max_num_seqs), sc.max_num_batched_tokens, sc.max_num_seqs);
    const size_t max_tokens = static_cast<size_t>(sc.max_num_batched_tokens);
    step_.reserve(static_cast<int32_t>(max_tokens), sc.max_num_seqs, step_block_reserve(*kv_, sc.max_num_seqs));
    step_logits_owner_.resize(static_cast<size_t>(sc.max_num_seqs));
    step_sampled_.resize(static_cast<size_t>(sc.max_num_seqs));
    // A step with many rows draws them on as many threads as the device computes with (the user's --threads on the
    // CPU), at most 8, the step thread one of them; idle between steps. A device that reports no thread count (a GPU)
    // reads as one: its rows are drawn on the step thread.
    const int sampling_threads = std::clamp(device_threads(), 1, 8);
    if (sampling_threads > 1 && sc.max_num_seqs > 1) sampling_pool_ = std::make_unique<thread_pool>(sampling_threads, std::span<const int>{});
    batch_.reserve(static_cast<size_t>(sc.max_num_seqs));
    live_.reserve(static_cast<size_t>(sc.max_num_seqs));

    log::info("engine", "model '{}' ({}): {} layers, dim {}, {} heads ({} KV), vocab {}, context {}", model_name_, arch,
              hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.n_vocab, n_ctx_);
    log::info("engine", "device '{}' with {} threads; up to {} sequences and {} tokens per step", device_name(),
              device_threads(), sc.max_num_seqs, sc.max_num_batched_tokens);
    publish_stats();
    step_thread_ = std::thread([this] { step_loop(); });
}

// Tensor parallel (#16 item 3): the model's plugin says how each weight splits, each rank gets a file of its part
// (tensor_parallel_shard) and a worker over it; their devices start in init.
strata_model_hparams engine::start_tensor_parallel_ranks(const plugins::handle<strata_model_arch_desc> &arch,
                                                         std::vector<std::unique_ptr<worker>> &workers) {
    const int32_t n_tp = opts_.tensor_parallel_size;
    // Under mpirun rank 0's part is made here and each other rank's in its own process (rank_server); in this process
    // every tensor-parallel rank has a worker per pipeline stage (rank-major), over one shard of its part.
    const bool processes = opts_.pipeline_transport != nullptr;
    if (processes && opts_.pipeline_parallel_size > 1)
        fail("internal: tensor-parallel ranks inside pipeline stages as processes");
    if (opts_.plan_gpu_memory)
        fail("tensor_parallel_size {} with plan_gpu_memory: tensor-parallel ranks run on the CPU device only so far "
             "(GPU ranks need NCCL's all-reduce); plan GPUs with --pipeline-parallel-size {} instead", n_tp, n_tp);
    const tensor_splits splits = read_tensor_splits(*file_, registry_, host_, arch, opts_.model_path, n_tp);
    const int32_t here = processes ? 1 : n_tp;
    const int32_t stages = processes ? 1 : opts_.pipeline_parallel_size;
    for (int32_t r = 0; r < here; ++r) {
        shards_.push_back(std::make_unique<tensor_parallel_shard>(*file_, splits.rules, r, n_tp, quant_blocks(registry_),
                                                                  opts_.plan_only));
        for (int32_t s = 0; s < stages; ++s) {
            workers.push_back(std::make_unique<worker>(registry_, host_, opts_, *shards_.back(), arch));
            workers.back()->set_tensor_parallel({r, n_tp, splits.whole.n_vocab, nullptr, nullptr});
        }
    }
    return splits.whole;
}

engine::~engine() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (step_thread_.joinable()) step_thread_.join();
    release_resources(true);
}

// Everything the engine holds, in reverse order of creation. `persist`: a clean shutdown writes cached prefixes to the
// store first.
void engine::release_resources(bool persist) {
    if (kv_) {
        kv_->release(testing_kv_);
        if (store_ && persist) {
            // Never from a destructor's path: a block that cannot be read (a pipeline rank that stopped answering)
            // costs the prefixes not yet written, not the process.
            try {
                const uint64_t n = kv_->persist_prefixes();
                if (n > 0) log::info("kv", "prefix store: {} blocks written to {}", n, opts_.kv.prefix_store_dir);
            } catch (const std::exception &e) {
                log::error("kv", "prefix store: cached prefixes not written to {}: {}", opts_.kv.prefix_store_dir,
                           e.what());
            }
        }
    }
    kv_.reset();
    store_.reset();
    if (executor_) executor_->release(persist); // the device, the model, the weights' tiers
}

const char *engine::metadata_string(const char *key) const {
    try {
        if (auto v = file_->get_string(key)) return v->data(); // the reader keeps strings NUL-terminated
    } catch (const std::exception &) {
        // present with another type: not a string
    }
    return nullptr;
}

} // namespace strata::engine
