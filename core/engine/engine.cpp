#include "engine/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "engine/model_source.hpp"
#include "engine/plan_inputs.hpp"
#include "engine/token_logprobs.hpp"
#include "planner/plan_report.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

#include <chrono>
#include <cstddef>
#include <cstring>

namespace strata::engine {

struct request_state {
    strata_request_id id = 0;
    std::vector<int32_t> tokens; // prompt, then generated tokens appended
    int32_t n_prompt = 0;
    strata_sampling_params sampling{};
    float presence_penalty = 0.f;  // since ABI 1.4 (strata_request tail)
    float frequency_penalty = 0.f;
    int32_t logprobs = 0;          // 0: none, -1: the chosen token's only, n > 0: also the top n
    strata_token_callback on_token = nullptr;
    void *user = nullptr;
    std::atomic<bool> cancelled{false};
    bool done = false;
    bool waited = false;
    strata_request_result result{};
    std::string error;
};

namespace {

std::string status_text(const strata_status &st) {
    return st.message[0] != '\0' ? std::string(st.message) : std::string("error code ") + std::to_string(st.code);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

engine::engine(const plugins::registry &registry, const strata_host_services *host, engine_options opts)
    : registry_(registry), host_(host), opts_(std::move(opts)) {
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

    // Device: by name, or the best scoring one.
    if (opts_.device == "auto") {
        device_desc_ = registry_.best_device();
        if (device_desc_.desc == nullptr) fail("no usable device plugin found (device = \"auto\"); is the cpu plugin in [plugins] paths?");
    } else {
        device_desc_ = registry_.find_device(opts_.device);
        if (device_desc_.desc == nullptr) {
            fail("device '{}' is not provided by any loaded plugin (available: {}); set [engine] device",
                 opts_.device, fmt::join(registry_.names(STRATA_KIND_DEVICE), ", "));
        }
        if (device_desc_.desc->score() <= 0) fail("device '{}' cannot run on this machine (score 0)", opts_.device);
    }
    device_name_ = device_desc_.desc->header.name;
    strata_status st{};
    strata_device_create_args dargs{};
    dargs.struct_size = sizeof dargs;
    dargs.host = host_;
    dargs.config = opts_.device_config;
    device_ = device_desc_.desc->create(&dargs, &st);
    if (device_ == nullptr) fail("device '{}' failed to start: {}", device_name_, status_text(st));

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
    if (opts_.prefill_chunk <= 0) opts_.prefill_chunk = 256;
    opts_.prefill_chunk = std::min(opts_.prefill_chunk, n_ctx_);
    place_weights();
    if (opts_.max_model_len > hp_.n_ctx_train) {
        log::warn("engine", "max_model_len {} exceeds the model's trained context {}; quality may degrade",
                  opts_.max_model_len, hp_.n_ctx_train);
    }

    auto alloc = [&](uint64_t bytes) {
        void *p = device_desc_.desc->mem_alloc(device_, bytes, &st);
        if (p == nullptr) fail("device '{}' could not allocate {} bytes: {}", device_name_, bytes, status_text(st));
        device_allocations_.push_back(p);
        return p;
    };
    const uint64_t kv_row = static_cast<uint64_t>(hp_.n_head_kv) * static_cast<uint64_t>(hp_.head_dim);
    const uint64_t kv_bytes = kv_row * static_cast<uint64_t>(n_ctx_) * sizeof(float);
    for (int32_t l = 0; l < hp_.n_layer; ++l) {
        k_cache_.push_back(static_cast<float *>(alloc(kv_bytes)));
        v_cache_.push_back(static_cast<float *>(alloc(kv_bytes)));
    }
    workspace_size_ = arch_.desc->workspace_bytes(model_, opts_.prefill_chunk);
    workspace_ = alloc(workspace_size_);
    logits_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(hp_.n_vocab)));
    positions_.resize(static_cast<size_t>(opts_.prefill_chunk));

    log::info("engine", "model '{}' ({}): {} layers, dim {}, {} heads ({} KV), vocab {}, context {}", model_name_, arch,
              hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.n_vocab, n_ctx_);
    log::info("engine", "device '{}' with {} threads; KV cache {:.1f} MiB", device_name_, device_threads(),
              2.0 * static_cast<double>(kv_bytes) * hp_.n_layer / (1024.0 * 1024.0));
    worker_ = std::thread([this] { worker_loop(); });
}

engine::~engine() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
        for (auto &r : queue_) r->cancelled = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    if (device_desc_.desc != nullptr && device_ != nullptr) {
        for (void *p : device_allocations_) device_desc_.desc->mem_free(device_, p);
    }
    if (model_ != nullptr) arch_.desc->destroy(model_);
    if (weights_) {
        const std::string report = weights_->report();
        if (!report.empty()) log::info("offload", "{}", report.substr(0, report.size() - 1));
    }
    weights_.reset(); // stops the prefetch threads and frees the ring before the device goes
    if (device_ != nullptr) device_desc_.desc->destroy(device_);
}

// Plans every weight's place (device, or a tier in place, or a tier streamed through the prefetch ring), prints the
// plan, and when anything leaves the device copies it to its tier and re-creates the model on the new addresses.
void engine::place_weights() {
    model_shape shape;
    shape.arch = arch_.desc;
    shape.model = model_;
    shape.hp = hp_;
    shape.max_model_len = n_ctx_;
    shape.activation_bytes = arch_.desc->workspace_bytes(model_, opts_.prefill_chunk) +
                             sizeof(float) * static_cast<uint64_t>(hp_.n_vocab);
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
    if (moved) {
        weights_ = std::make_unique<tiered_weights>(*file_, registry_, host_, opts_.offload, plan_, hp_.n_layer,
                                                    device_desc_.desc, device_);
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
    auto r = std::make_shared<request_state>();
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
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) fail("the engine is shutting down");
    r->id = next_id_++;
    requests_[r->id] = r;
    queue_.push_back(r);
    cv_.notify_all();
    return r->id;
}

strata_request_result engine::wait(strata_request_id id) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) fail("unknown request id {}", id);
    auto r = it->second;
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
}

strata_engine_stats engine::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    strata_engine_stats s{};
    s.struct_size = sizeof s;
    s.requests_running = running_;
    s.requests_waiting = static_cast<int64_t>(queue_.size());
    s.requests_finished = finished_;
    s.prompt_tokens_total = prompt_tokens_total_;
    s.generation_tokens_total = generation_tokens_total_;
    return s;
}

void engine::worker_loop() {
    for (;;) {
        std::shared_ptr<request_state> r;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return; // stopping
            r = queue_.front();
            queue_.pop_front();
            ++running_;
        }
        try {
            run_request(*r);
        } catch (const std::exception &e) {
            r->result.finish = STRATA_FINISH_ERROR;
            r->error = e.what();
        }
        if (r->on_token) {
            strata_token_event ev{};
            ev.struct_size = sizeof ev;
            ev.id = r->id;
            ev.token = -1;
            ev.piece = "";
            ev.finish = r->result.finish;
            ev.error = r->error.empty() ? nullptr : r->error.c_str();
            r->on_token(r->user, &ev);
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            --running_;
            ++finished_;
            prompt_tokens_total_ += r->result.n_prompt_tokens;
            generation_tokens_total_ += r->result.n_completion_tokens;
            r->done = true;
        }
        cv_.notify_all();
    }
}

void engine::forward(const int32_t *tokens, const int32_t *positions, int32_t n) {
    strata_forward_args a{};
    a.struct_size = sizeof a;
    a.device_ops = device_desc_.desc;
    a.device = device_;
    a.tokens = tokens;
    a.positions = positions;
    a.n_tokens = n;
    a.k_cache = k_cache_.data();
    a.v_cache = v_cache_.data();
    a.n_ctx = n_ctx_;
    a.workspace = workspace_;
    a.workspace_size = workspace_size_;
    a.logits = logits_;
    prefetch_ring *ring = weights_ ? weights_->ring() : nullptr;
    if (ring != nullptr) {
        a.layer_begin = [](void *user, int32_t layer, strata_status *st) {
            return static_cast<prefetch_ring *>(user)->layer_begin(layer, st);
        };
        a.user = ring;
    }
    strata_status st{};
    const int32_t rc = arch_.desc->forward(model_, &a, &st);
    if (ring != nullptr) ring->forward_done();
    if (rc != STRATA_OK) fail("forward pass failed: {}", status_text(st));
}

const float *engine::forward_for_testing(const int32_t *tokens, const int32_t *positions, int32_t n) {
    for (int32_t done = 0; done < n; done += opts_.prefill_chunk) {
        const int32_t chunk = std::min(opts_.prefill_chunk, n - done);
        forward(tokens + done, positions + done, chunk);
    }
    return logits_;
}

void engine::run_request(request_state &r) {
    using clock = std::chrono::steady_clock;
    r.result.struct_size = sizeof r.result;
    r.result.n_prompt_tokens = r.n_prompt;
    const strata_sampling_params &sp = r.sampling;
    sampling_config sc;
    sc.temperature = sp.temperature;
    sc.top_k = sp.top_k;
    sc.top_p = sp.top_p;
    sc.min_p = sp.min_p;
    sc.repetition_penalty = sp.repetition_penalty;
    sc.repetition_last_n = sp.repetition_last_n;
    sc.presence_penalty = r.presence_penalty;
    sc.frequency_penalty = r.frequency_penalty;
    sc.seed = sp.seed;
    sampler smp(hp_.n_vocab, sc);
    // Logprobs are of the raw model output (vLLM's default): the sampler changes the logits in place, so a copy is
    // taken first. All buffers are allocated here, once per request.
    token_logprobs lp(r.logprobs != 0 ? hp_.n_vocab : 0, std::max(r.logprobs, 0));

    // Prefill in chunks that fit the workspace.
    const auto t0 = clock::now();
    for (int32_t done = 0; done < r.n_prompt; done += opts_.prefill_chunk) {
        if (r.cancelled) break;
        const int32_t chunk = std::min(opts_.prefill_chunk, r.n_prompt - done);
        for (int32_t i = 0; i < chunk; ++i) positions_[static_cast<size_t>(i)] = done + i;
        forward(r.tokens.data() + done, positions_.data(), chunk);
    }
    r.result.prefill_seconds = seconds_since(t0);

    // Text emitted so far is empty while only control tokens (BOS) precede: SPM then drops the dummy-prefix space.
    bool text_started = false;
    for (int32_t i = 0; i < r.n_prompt && !text_started; ++i) {
        text_started = tokenizer_->type(r.tokens[static_cast<size_t>(i)]) != token_type::control;
    }
    const auto t1 = clock::now();
    const int32_t max_tokens = sp.max_tokens > 0 ? sp.max_tokens : n_ctx_;
    int32_t generated = 0;
    int32_t finish = STRATA_FINISH_NONE;
    while (finish == STRATA_FINISH_NONE) {
        if (r.cancelled) {
            finish = STRATA_FINISH_CANCELLED;
            break;
        }
        if (r.logprobs != 0) lp.capture(logits_);
        const int32_t tok = smp.sample(logits_, r.tokens);
        r.tokens.push_back(tok);
        ++generated;
        const bool eos = tokenizer_->is_eog(tok) && sp.ignore_eos == 0;
        if (r.on_token) {
            std::string_view piece = eos ? std::string_view() : tokenizer_->piece(tok);
            if (!text_started && !piece.empty()) {
                if (piece.front() == ' ') piece.remove_prefix(1);
                text_started = true;
            }
            strata_token_event ev{};
            ev.struct_size = sizeof ev;
            ev.id = r.id;
            ev.token = tok;
            ev.piece = piece.data() ? piece.data() : "";
            ev.piece_len = static_cast<int32_t>(piece.size());
            ev.finish = STRATA_FINISH_NONE;
            if (r.logprobs != 0) {
                ev.logprob = lp.of(tok);
                ev.n_top = lp.n_top();
                ev.top_tokens = lp.top_tokens();
                ev.top_logprobs = lp.top_logprobs();
            }
            r.on_token(r.user, &ev);
        }
        if (eos) finish = STRATA_FINISH_STOP;
        else if (generated >= max_tokens) finish = STRATA_FINISH_LENGTH;
        else if (static_cast<int32_t>(r.tokens.size()) >= n_ctx_) finish = STRATA_FINISH_LENGTH;
        else {
            positions_[0] = static_cast<int32_t>(r.tokens.size()) - 1;
            forward(&r.tokens.back(), positions_.data(), 1);
        }
    }
    r.result.decode_seconds = seconds_since(t1);
    r.result.n_completion_tokens = generated;
    r.result.finish = finish;
}

} // namespace strata::engine
