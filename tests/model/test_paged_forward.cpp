// The decoder plugin's paged forward path (ABI 1.5) against its contiguous path, driven directly through the ABI
// (registry -> model_arch, device and quant plugins, as the engine does). Three sequences with prompts of different
// lengths run (a) each alone through the contiguous cache, token by token and in prefill chunks, and (b) together
// in one paged batch per step — one sequence prefilling in chunks while the others decode, blocks drawn in random
// order from two pools, block sizes 16, 1 and 5. Every logit the paged path writes must equal the contiguous one bit
// for bit (greedy output must not depend on batching), and the greedy tokens must agree for 30 steps.
#include "engine/model_source.hpp"
#include "engine_fixture.hpp"
#include "gguf/gguf_file.hpp"
#include "plugin_host/plugin_handle.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>

namespace {

using namespace strata::testing;
namespace fs = std::filesystem;
namespace plugins = strata::plugins;

constexpr int32_t generated_tokens = 30;

// A small Q8_0 Llama with GQA from tools/make-model, built once per build tree.
std::string made_q8_0_model() {
    return made_model("llama-paged-q8_0.gguf", "--dim 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --ctx 256 "
                                               "--type q8_0 --seed 11 --vocab-from " +
                                                   shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
}

// The [cpu] table of a device with a chosen thread count.
struct threads_config {
    int64_t threads;
    strata_config_view view() {
        strata_config_view v{};
        v.struct_size = sizeof v;
        v.ctx = this;
        v.get_bool = [](void *, const char *, int32_t *) -> int32_t { return 0; };
        v.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            if (std::strcmp(key, "threads") != 0) return 0;
            *out = static_cast<threads_config *>(ctx)->threads;
            return 1;
        };
        v.get_float = [](void *, const char *, double *) -> int32_t { return 0; };
        v.get_string = [](void *, const char *, const char **) -> int32_t { return 0; };
        v.get_list_size = [](void *, const char *) -> int32_t { return 0; };
        v.get_list_item = [](void *, const char *, int32_t) -> const char * { return nullptr; };
        return v;
    }
};

// A model and devices made from plugins the way core/engine/engine.cpp does, plus forward calls in both layouts.
class model_under_test {
  public:
    explicit model_under_test(const std::string &path)
        : file_(strata::gguf::file::open(path)), source_(file_, test_registry(), test_host()) {
        const std::string arch(file_.get_string("general.architecture").value_or(""));
        arch_ = test_registry().find_model_arch_for(arch);
        if (!arch_) throw std::runtime_error("no model_arch plugin for " + arch);
        device_desc_ = test_registry().find_device("cpu");
        if (!device_desc_) throw std::runtime_error("no cpu device plugin in " STRATA_PLUGIN_DIR);
        strata_status st{};
        model_ = plugins::adopt(arch_->create(source_.view(), &st), arch_, arch_->destroy);
        if (!model_) throw std::runtime_error(std::string("model create failed: ") + st.message);
        hp_.struct_size = sizeof hp_;
        arch_->get_hparams(model_.get(), &hp_);
    }

    const strata_model_hparams &hp() const { return hp_; }
    const strata_device_desc *ops() const { return device_desc_.desc; }
    int32_t kv_dim() const { return hp_.n_head_kv * hp_.head_dim; }

    plugins::plugin_ptr<strata_device> make_device(int64_t threads) {
        threads_config cfg{threads};
        const strata_config_view view = cfg.view();
        strata_device_create_args a{};
        a.struct_size = sizeof a;
        a.host = test_host();
        a.config = &view;
        strata_status st{};
        auto dev = plugins::adopt(device_desc_->create(&a, &st), device_desc_, device_desc_->destroy);
        EXPECT_NE(dev, nullptr) << st.message;
        return dev;
    }

    // Workspace for batches of up to n tokens (reused across calls; the model asks for its own size).
    void *workspace(int32_t n) {
        const uint64_t bytes = arch_->workspace_bytes(model_.get(), n);
        if (workspace_.size() < bytes) workspace_.resize(bytes);
        return workspace_.data();
    }

    strata_forward_args base_args(const strata_device_desc *ops, strata_device *dev, const int32_t *tokens,
                                  const int32_t *positions, int32_t n, float *logits) {
        strata_forward_args a{};
        a.struct_size = sizeof a;
        a.device_ops = ops;
        a.device = dev;
        a.tokens = tokens;
        a.positions = positions;
        a.n_tokens = n;
        a.workspace = workspace(n);
        a.workspace_size = arch_->workspace_bytes(model_.get(), n);
        a.logits = logits;
        return a;
    }

    int32_t forward(const strata_forward_args &a, strata_status *st) { return arch_->forward(model_.get(), &a, st); }
    int32_t pipeline_stages() const {
        return STRATA_HAS_SLOT(arch_.desc, pipeline_stages) ? arch_->pipeline_stages(model_.get()) : -1;
    }

  private:
    strata::gguf::file file_;
    strata::engine::model_source source_;
    plugins::handle<strata_model_arch_desc> arch_;
    plugins::handle<strata_device_desc> device_desc_;
    plugins::plugin_ptr<strata_model> model_;
    strata_model_hparams hp_{};
    std::vector<unsigned char> workspace_;
};

// One sequence's contiguous KV cache (per layer n_ctx rows), as the engine keeps it today.
struct contiguous_cache {
    std::vector<std::vector<float>> k, v;
    std::vector<float *> k_ptr, v_ptr;
    int32_t n_ctx;

    contiguous_cache(const model_under_test &m, int32_t ctx) : n_ctx(ctx) {
        for (int32_t l = 0; l < m.hp().n_layer; ++l) {
            k.emplace_back(static_cast<size_t>(ctx) * m.kv_dim(), std::numeric_limits<float>::quiet_NaN());
            v.emplace_back(static_cast<size_t>(ctx) * m.kv_dim(), std::numeric_limits<float>::quiet_NaN());
            k_ptr.push_back(k.back().data());
            v_ptr.push_back(v.back().data());
        }
    }
};

int32_t argmax(const float *logits, int32_t n) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

// What each sequence should produce: its prompt and greedy continuation, and the logits at every position.
struct reference_run {
    std::vector<int32_t> tokens;              // prompt, then the generated tokens
    std::vector<std::vector<float>> logits;   // logits[p]: after feeding tokens[0..p]
};

// (a) One sequence alone, token by token through the contiguous path; then its prompt again in chunks of `chunk`,
// whose last-token logits must equal the token-by-token ones.
reference_run run_contiguous(model_under_test &m, strata_device *dev, const std::vector<int32_t> &prompt,
                             int32_t chunk) {
    const int32_t n_vocab = m.hp().n_vocab;
    const int32_t n_ctx = static_cast<int32_t>(prompt.size()) + generated_tokens;
    reference_run r;
    r.tokens = prompt;
    contiguous_cache cache(m, n_ctx);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    for (int32_t p = 0; p < n_ctx; ++p) {
        if (p >= static_cast<int32_t>(prompt.size())) r.tokens.push_back(argmax(r.logits.back().data(), n_vocab));
        strata_forward_args a = m.base_args(m.ops(), dev, &r.tokens[static_cast<size_t>(p)], &p, 1, logits.data());
        a.k_cache = cache.k_ptr.data();
        a.v_cache = cache.v_ptr.data();
        a.n_ctx = n_ctx;
        strata_status st{};
        EXPECT_EQ(m.forward(a, &st), STRATA_OK) << st.message;
        r.logits.push_back(logits);
    }

    contiguous_cache chunked(m, n_ctx);
    std::vector<int32_t> positions;
    for (int32_t p0 = 0; p0 < static_cast<int32_t>(prompt.size()); p0 += chunk) {
        const int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(prompt.size()) - p0);
        positions.resize(static_cast<size_t>(n));
        for (int32_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = p0 + i;
        strata_forward_args a = m.base_args(m.ops(), dev, &prompt[static_cast<size_t>(p0)], positions.data(), n,
                                            logits.data());
        a.k_cache = chunked.k_ptr.data();
        a.v_cache = chunked.v_ptr.data();
        a.n_ctx = n_ctx;
        strata_status st{};
        EXPECT_EQ(m.forward(a, &st), STRATA_OK) << st.message;
        EXPECT_EQ(std::memcmp(logits.data(), r.logits[static_cast<size_t>(p0 + n - 1)].data(),
                              sizeof(float) * static_cast<size_t>(n_vocab)), 0)
            << "contiguous chunk ending at position " << p0 + n - 1 << " differs from token by token";
    }
    return r;
}

// The paged KV cache of several sequences: blocks handed out on demand, in random order, from two device pools that
// start as NaN (a read of an unwritten slot would poison the logits).
class block_pool {
  public:
    // Blocks of n_layers layers (0: the model's every layer; fewer: a pipeline rank's share).
    block_pool(model_under_test &m, strata_device *dev, int32_t block_size, int32_t n_seqs, int32_t blocks_needed,
               uint32_t seed, int32_t n_layers = 0)
        : m_(m), dev_(dev), block_size_(block_size), blocks_(static_cast<size_t>(n_seqs)) {
        const uint64_t layers = static_cast<uint64_t>(n_layers > 0 ? n_layers : m.hp().n_layer);
        const uint64_t block_bytes = layers * 2 * static_cast<uint64_t>(block_size) *
                                     static_cast<uint64_t>(m.kv_dim()) * sizeof(float);
        const int32_t per_pool = blocks_needed / 2 + 2;
        for (int i = 0; i < 2; ++i) {
            strata_status st{};
            void *p = m.ops()->mem_alloc(dev, block_bytes * static_cast<uint64_t>(per_pool), &st);
            if (p == nullptr) throw std::runtime_error(std::string("mem_alloc: ") + st.message);
            pools_.push_back(p);
            float *f = static_cast<float *>(p);
            std::fill(f, f + block_bytes / sizeof(float) * static_cast<uint64_t>(per_pool),
                      std::numeric_limits<float>::quiet_NaN());
            for (int32_t b = 0; b < per_pool; ++b) free_.push_back(static_cast<char *>(p) + block_bytes * uint64_t(b));
        }
        std::mt19937 rng(seed);
        std::shuffle(free_.begin(), free_.end(), rng);
    }
    ~block_pool() {
        for (void *p : pools_) m_.ops()->mem_free(dev_, p);
    }
    block_pool(const block_pool &) = delete;
    block_pool &operator=(const block_pool &) = delete;

    // Gives sequence s enough blocks for slot `position`.
    void reserve(int32_t s, int32_t position) {
        auto &mine = blocks_[static_cast<size_t>(s)];
        while (static_cast<int32_t>(mine.size()) * block_size_ <= position) {
            if (free_.empty()) throw std::runtime_error("block pool exhausted");
            mine.push_back(free_.back());
            free_.pop_back();
        }
    }

    // The block table of all sequences as it stands (valid until the next reserve).
    const strata_paged_kv &table() {
        seq_block_start_.assign(1, 0);
        block_base_.clear();
        for (const auto &mine : blocks_) {
            block_base_.insert(block_base_.end(), mine.begin(), mine.end());
            seq_block_start_.push_back(static_cast<int32_t>(block_base_.size()));
        }
        kv_ = strata_paged_kv{};
        kv_.struct_size = sizeof kv_;
        kv_.block_size = block_size_;
        kv_.kv_dim = m_.kv_dim();
        kv_.n_seqs = static_cast<int32_t>(blocks_.size());
        kv_.seq_block_start = seq_block_start_.data();
        kv_.block_base = block_base_.data();
        kv_.layer_offset_bytes = 12345 * sizeof(float); // the model must set its own per layer
        return kv_;
    }

  private:
    model_under_test &m_;
    strata_device *dev_;
    int32_t block_size_;
    std::vector<void *> pools_, free_;
    std::vector<std::vector<void *>> blocks_;
    std::vector<int32_t> seq_block_start_;
    std::vector<void *> block_base_;
    strata_paged_kv kv_{};
};

struct sequence_plan {
    std::vector<int32_t> prompt;
    int32_t chunk;      // prefill tokens per step
    int32_t start_step; // first step it joins the batch
};

std::vector<sequence_plan> three_sequences(int32_t n_vocab) {
    std::mt19937 rng(2024);
    std::uniform_int_distribution<int32_t> id(3, n_vocab - 1);
    auto prompt = [&](int32_t n) {
        std::vector<int32_t> p{1}; // BOS
        while (static_cast<int32_t>(p.size()) < n) p.push_back(id(rng));
        return p;
    };
    // Seq 0 decodes from step 2 while seq 1 prefills (from step 1) and seq 2 prefills in 8 chunks from step 3.
    return {{prompt(5), 4, 0}, {prompt(12), 7, 1}, {prompt(23), 3, 3}};
}

struct paged_case {
    const char *model;
    int32_t block_size;
};

void PrintTo(const paged_case &c, std::ostream *os) { *os << c.model << ", block size " << c.block_size; }

std::string model_path(const std::string &name) {
    return name == "made-q8_0" ? made_q8_0_model() : shared_path("models/" + name + ".gguf");
}

class PagedForward : public ::testing::TestWithParam<paged_case> {};

TEST_P(PagedForward, BatchedPagedLogitsEqualEachSequenceAloneBitForBit) {
    const std::string path = model_path(GetParam().model);
    ASSERT_FALSE(path.empty()) << "make-model failed";
    model_under_test m(path);
    const int32_t n_vocab = m.hp().n_vocab;
    // Different thread counts for the two runs: neither threading nor batching may change a bit.
    auto ref_dev = m.make_device(1);
    auto batch_dev = m.make_device(3);
    ASSERT_NE(ref_dev, nullptr);
    ASSERT_NE(batch_dev, nullptr);

    const std::vector<sequence_plan> plans = three_sequences(n_vocab);
    const int32_t n_seqs = static_cast<int32_t>(plans.size());
    std::vector<reference_run> want;
    for (const auto &p : plans) want.push_back(run_contiguous(m, ref_dev.get(), p.prompt, p.chunk));
    if (HasFailure()) return;

    int32_t blocks_needed = 0, max_batch = 0;
    for (const auto &p : plans) {
        const int32_t len = static_cast<int32_t>(p.prompt.size()) + generated_tokens;
        blocks_needed += (len + GetParam().block_size - 1) / GetParam().block_size;
        max_batch += p.chunk;
    }
    block_pool pool(m, batch_dev.get(), GetParam().block_size, n_seqs, blocks_needed,
                    static_cast<uint32_t>(GetParam().block_size) + 17);

    std::vector<std::vector<int32_t>> got_tokens(static_cast<size_t>(n_seqs));
    std::vector<int32_t> fed(static_cast<size_t>(n_seqs), 0);
    std::vector<int32_t> tokens, positions, token_seq, logits_tokens;
    std::vector<float> logits(static_cast<size_t>(max_batch) * static_cast<size_t>(n_vocab));
    int64_t compared = 0;
    bool mixed_step = false; // a step with one sequence prefilling while another decodes
    for (int32_t step = 0;; ++step) {
        tokens.clear();
        positions.clear();
        token_seq.clear();
        logits_tokens.clear();
        bool prefilling = false, decoding = false;
        // Sequences join the batch in a rotating order, so a sequence's tokens sit at different batch indexes.
        for (int32_t i = 0; i < n_seqs; ++i) {
            const int32_t s = (step + i) % n_seqs;
            const sequence_plan &p = plans[static_cast<size_t>(s)];
            const int32_t prompt_len = static_cast<int32_t>(p.prompt.size());
            int32_t &done = fed[static_cast<size_t>(s)];
            if (step < p.start_step || done >= prompt_len + generated_tokens) continue;
            const int32_t n = done < prompt_len ? std::min(p.chunk, prompt_len - done) : 1;
            (done < prompt_len ? prefilling : decoding) = true;
            for (int32_t j = 0; j < n; ++j, ++done) {
                const int32_t token = done < prompt_len ? p.prompt[static_cast<size_t>(done)]
                                                        : got_tokens[static_cast<size_t>(s)].back();
                pool.reserve(s, done);
                // Even steps ask for every token's logits, odd steps only for each sequence's last token.
                if (step % 2 == 0 || j == n - 1) logits_tokens.push_back(static_cast<int32_t>(tokens.size()));
                tokens.push_back(token);
                positions.push_back(done);
                token_seq.push_back(s);
            }
        }
        if (tokens.empty()) break;
        mixed_step = mixed_step || (prefilling && decoding);

        const strata_paged_kv &kv = pool.table();
        strata_forward_args a = m.base_args(m.ops(), batch_dev.get(), tokens.data(), positions.data(),
                                            static_cast<int32_t>(tokens.size()), logits.data());
        a.paged_kv = &kv;
        a.token_seq = token_seq.data();
        a.logits_tokens = logits_tokens.data();
        a.n_logits = static_cast<int32_t>(logits_tokens.size());
        strata_status st{};
        ASSERT_EQ(m.forward(a, &st), STRATA_OK) << "step " << step << ": " << st.message;

        for (size_t i = 0; i < logits_tokens.size(); ++i) {
            const size_t t = static_cast<size_t>(logits_tokens[i]);
            const int32_t s = token_seq[t], pos = positions[t];
            const float *row = logits.data() + i * static_cast<size_t>(n_vocab);
            const reference_run &r = want[static_cast<size_t>(s)];
            ASSERT_EQ(std::memcmp(row, r.logits[static_cast<size_t>(pos)].data(),
                                  sizeof(float) * static_cast<size_t>(n_vocab)), 0)
                << "step " << step << ": logits of sequence " << s << " at position " << pos
                << " differ from the sequence run alone";
            ++compared;
            // The last fed token of a sequence past its prompt gives its next greedy token.
            const bool last_of_seq = t + 1 == tokens.size() || token_seq[t + 1] != s;
            const int32_t prompt_len = static_cast<int32_t>(plans[static_cast<size_t>(s)].prompt.size());
            if (last_of_seq && pos >= prompt_len - 1 && pos < prompt_len + generated_tokens - 1)
                got_tokens[static_cast<size_t>(s)].push_back(argmax(row, n_vocab));
        }
    }

    EXPECT_TRUE(mixed_step) << "the schedule never mixed a prefill chunk with decodes";
    for (int32_t s = 0; s < n_seqs; ++s) {
        const auto &r = want[static_cast<size_t>(s)];
        const std::vector<int32_t> want_tokens(r.tokens.begin() + static_cast<long>(plans[size_t(s)].prompt.size()),
                                               r.tokens.end());
        ASSERT_EQ(want_tokens.size(), static_cast<size_t>(generated_tokens));
        EXPECT_EQ(got_tokens[static_cast<size_t>(s)], want_tokens) << "greedy tokens of sequence " << s;
        // Not a vacuous comparison: the logits vary across positions and are finite.
        EXPECT_NE(std::memcmp(r.logits.front().data(), r.logits.back().data(), sizeof(float) * size_t(n_vocab)), 0);
        EXPECT_TRUE(std::all_of(r.logits.back().begin(), r.logits.back().end(),
                                [](float x) { return std::isfinite(x); }));
    }
    std::printf("%s, block size %d: %lld logit rows compared bit for bit\n", GetParam().model, GetParam().block_size,
                static_cast<long long>(compared));
}

INSTANTIATE_TEST_SUITE_P(ModelsAndBlockSizes, PagedForward,
                         ::testing::Values(paged_case{"stories260K-f32", 16}, paged_case{"stories260K-f32", 1},
                                           paged_case{"stories260K-f32", 5}, paged_case{"stories260K-q8_0", 16},
                                           paged_case{"stories260K-q8_0", 5}, paged_case{"made-q8_0", 16},
                                           paged_case{"made-q8_0", 1}, paged_case{"made-q8_0", 5}),
                         [](const auto &info) {
                             std::string name = std::string(info.param.model) + "_block" +
                                                std::to_string(info.param.block_size);
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

// Bad paged batches are refused with a message before anything is written; a device without the paged slots is
// UNSUPPORTED; and a caller built before ABI 1.5 (struct_size short of the tail) still gets the contiguous path.
TEST(PagedForwardArguments, RefusedClearly) {
    model_under_test m(shared_path("models/stories260K-f32.gguf"));
    auto dev = m.make_device(2);
    ASSERT_NE(dev, nullptr);
    const int32_t n_vocab = m.hp().n_vocab;
    block_pool pool(m, dev.get(), 4, 2, 4, 1);
    pool.reserve(0, 3);
    pool.reserve(1, 0);
    const strata_paged_kv &kv = pool.table();
    std::vector<int32_t> tokens{1, 50, 60}, positions{0, 1, 0}, token_seq{0, 0, 1}, logits_tokens{1, 2};
    std::vector<float> logits(3 * static_cast<size_t>(n_vocab), -7.0f);
    strata_forward_args good = m.base_args(m.ops(), dev.get(), tokens.data(), positions.data(), 3, logits.data());
    good.paged_kv = &kv;
    good.token_seq = token_seq.data();
    good.logits_tokens = logits_tokens.data();
    good.n_logits = 2;

    auto expect_refused = [&](strata_forward_args a, int32_t code, const char *needle, const char *what) {
        strata_status st{};
        EXPECT_EQ(m.forward(a, &st), code) << what;
        EXPECT_NE(std::strstr(st.message, needle), nullptr)
            << what << ": message '" << st.message << "' does not mention '" << needle << "'";
        EXPECT_EQ(logits, std::vector<float>(logits.size(), -7.0f)) << what << " wrote logits";
    };
    auto a = good;
    a.n_logits = -1;
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "n_logits = -1", "negative logits count");
    a = good;
    a.n_logits = 4;
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "n_logits = 4", "more logits than tokens");
    const std::vector<int32_t> descending{2, 1};
    a = good;
    a.logits_tokens = descending.data();
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "ascend", "descending logits_tokens");
    const std::vector<int32_t> outside{1, 3};
    a = good;
    a.logits_tokens = outside.data();
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "logits_tokens[1] = 3", "logits token outside the batch");
    a = good;
    a.token_seq = nullptr;
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "token_seq", "no token_seq");
    strata_paged_kv wrong_dim = kv;
    wrong_dim.kv_dim = kv.kv_dim + 1;
    a = good;
    a.paged_kv = &wrong_dim;
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "kv_dim", "kv_dim not the model's");
    const std::vector<int32_t> past{0, 4, 0};
    a = good;
    a.positions = past.data();
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "past the 4 slots", "position past the sequence's blocks");
    const std::vector<int32_t> bad_seq{0, 0, 2};
    a = good;
    a.token_seq = bad_seq.data();
    expect_refused(a, STRATA_ERR_INVALID_ARGUMENT, "token_seq[2] = 2", "sequence outside the table");

    // The same device without the ABI 1.5 slots, as an older device plugin would be.
    strata_device_desc old_device = *m.ops();
    old_device.header.struct_size = static_cast<uint32_t>(offsetof(strata_device_desc, kv_store));
    a = good;
    a.device_ops = &old_device;
    expect_refused(a, STRATA_ERR_UNSUPPORTED, "paged", "device without paged ops");

    // A pre-1.5 caller: the tail is outside its struct_size, so whatever lies there is ignored.
    contiguous_cache cache(m, 8);
    a = good;
    a.struct_size = static_cast<uint32_t>(offsetof(strata_forward_args, paged_kv));
    a.k_cache = cache.k_ptr.data();
    a.v_cache = cache.v_ptr.data();
    a.n_ctx = 8;
    const std::vector<int32_t> one_seq_positions{0, 1, 2};
    a.positions = one_seq_positions.data();
    strata_status st{};
    ASSERT_EQ(m.forward(a, &st), STRATA_OK) << st.message;
    EXPECT_NE(logits, std::vector<float>(logits.size(), -7.0f));
    EXPECT_EQ(logits[size_t(n_vocab)], -7.0f) << "the contiguous path writes only the last token's logits";

    a = good; // and the good paged batch runs
    ASSERT_EQ(m.forward(a, &st), STRATA_OK) << st.message;
    EXPECT_NE(logits[size_t(n_vocab)], -7.0f);
}

} // namespace

// Pipeline stages (ABI 1.24, #16 item 2's model side): the layers run as consecutive stages, each handing its residual
// stream to the next (hidden_out -> hidden_in), give the whole model's logits bit for bit — for every cut of the
// layers into two stages and for one stage per layer — over a prompt and decode steps of two sequences in one batch,
// each stage on a device of its own (as a rank would have), writing its layers' KV into the same blocks or (ABI 1.25,
// kv_first_layer) into blocks of its own that hold only its layers, as a rank keeps them. Bad ranges are refused
// before anything runs.
TEST(PipelineStages, ConsecutiveStagesGiveTheWholeModelsLogitsBitForBit) {
    for (const char *name : {"stories260K-f32", "made-q8_0"}) {
        SCOPED_TRACE(name);
        const std::string path = model_path(name);
        ASSERT_FALSE(path.empty()) << "make-model failed";
        model_under_test m(path);
        const int32_t n_vocab = m.hp().n_vocab, n_layer = m.hp().n_layer, d = m.hp().n_embd;
        ASSERT_GE(n_layer, 2);
        auto whole_dev = m.make_device(2);
        ASSERT_NE(whole_dev, nullptr);
        EXPECT_EQ(m.pipeline_stages(), 1);

        // The cuts: every two-stage split, and one stage per layer.
        std::vector<std::vector<int32_t>> cuts;
        for (int32_t k = 1; k < n_layer; ++k) cuts.push_back({0, k, n_layer});
        std::vector<int32_t> each(static_cast<size_t>(n_layer) + 1);
        std::iota(each.begin(), each.end(), 0);
        cuts.push_back(each);

        const std::vector<sequence_plan> plans = three_sequences(n_vocab);
        const std::vector<int32_t> &pa = plans[1].prompt, &pb = plans[2].prompt;
        for (const auto &cut : cuts)
        for (const bool own_kv : {false, true}) {
            SCOPED_TRACE(::testing::PrintToString(cut) + (own_kv ? " (each stage's KV its own)" : " (shared KV)"));
            const int32_t n_stages = static_cast<int32_t>(cut.size()) - 1;
            std::vector<strata::plugins::plugin_ptr<strata_device>> stage_devs;
            for (int32_t s = 0; s < n_stages; ++s) stage_devs.push_back(m.make_device(1 + s % 2));
            // The same block assignment for both runs (same seed), so each run's blocks are its own.
            block_pool whole_pool(m, whole_dev.get(), 4, 2, 32, 7);
            std::vector<std::unique_ptr<block_pool>> stage_pools; // one pool for every stage, or one per stage
            for (int32_t s = 0; s < (own_kv ? n_stages : 1); ++s) {
                const int32_t layers = own_kv ? cut[static_cast<size_t>(s) + 1] - cut[static_cast<size_t>(s)] : 0;
                stage_pools.push_back(std::make_unique<block_pool>(m, whole_dev.get(), 4, 2, 32, 7, layers));
            }
            std::vector<int32_t> fed_tokens[2] = {pa, pb};
            int32_t fed[2] = {0, 0};
            for (int32_t step = 0; step < 4; ++step) {
                // Step 0: both prompts; then one decode token each (the whole run's greedy choice).
                std::vector<int32_t> tokens, positions, token_seq, logits_tokens;
                for (int32_t s = 0; s < 2; ++s) {
                    const auto &src = fed_tokens[s];
                    for (; fed[s] < static_cast<int32_t>(src.size()); ++fed[s]) {
                        whole_pool.reserve(s, fed[s]);
                        for (auto &pool : stage_pools) pool->reserve(s, fed[s]);
                        tokens.push_back(src[static_cast<size_t>(fed[s])]);
                        positions.push_back(fed[s]);
                        token_seq.push_back(s);
                    }
                    logits_tokens.push_back(static_cast<int32_t>(tokens.size()) - 1);
                }
                const int32_t n = static_cast<int32_t>(tokens.size());
                std::vector<float> want(static_cast<size_t>(2 * n_vocab)), got(want.size(), -1.f);
                {
                    const strata_paged_kv &kv = whole_pool.table();
                    strata_forward_args a = m.base_args(m.ops(), whole_dev.get(), tokens.data(), positions.data(), n,
                                                        want.data());
                    a.paged_kv = &kv;
                    a.token_seq = token_seq.data();
                    a.logits_tokens = logits_tokens.data();
                    a.n_logits = 2;
                    strata_status st{};
                    ASSERT_EQ(m.forward(a, &st), STRATA_OK) << st.message;
                }
                std::vector<float> hidden[2] = {std::vector<float>(static_cast<size_t>(n) * d, -7.f),
                                                std::vector<float>(static_cast<size_t>(n) * d, -7.f)};
                for (int32_t s = 0; s < n_stages; ++s) {
                    const strata_paged_kv &kv = stage_pools[own_kv ? static_cast<size_t>(s) : 0]->table();
                    const bool last = s + 1 == n_stages;
                    strata_forward_args a = m.base_args(m.ops(), stage_devs[static_cast<size_t>(s)].get(),
                                                        tokens.data(), positions.data(), n,
                                                        last ? got.data() : nullptr);
                    a.paged_kv = &kv;
                    a.token_seq = token_seq.data();
                    a.logits_tokens = logits_tokens.data();
                    a.n_logits = 2;
                    a.layer_first = cut[static_cast<size_t>(s)];
                    a.layer_end = cut[static_cast<size_t>(s) + 1];
                    a.hidden_in = s > 0 ? hidden[(s + 1) % 2].data() : nullptr;
                    a.hidden_out = last ? nullptr : hidden[s % 2].data();
                    a.kv_first_layer = own_kv ? a.layer_first : 0;
                    strata_status st{};
                    ASSERT_EQ(m.forward(a, &st), STRATA_OK) << "stage " << s << ": " << st.message;
                }
                ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
                    << "step " << step << ": the stages' logits differ from the whole model's";
                for (int32_t s = 0; s < 2; ++s)
                    fed_tokens[s].push_back(argmax(want.data() + static_cast<size_t>(s) * n_vocab, n_vocab));
            }
        }
    }
}

TEST(PipelineStages, BadRangesAreRefusedBeforeAnythingRuns) {
    model_under_test m(shared_path("models/stories260K-f32.gguf"));
    auto dev = m.make_device(1);
    ASSERT_NE(dev, nullptr);
    const int32_t n_layer = m.hp().n_layer, d = m.hp().n_embd;
    block_pool pool(m, dev.get(), 4, 1, 2, 1);
    pool.reserve(0, 1);
    const int32_t tokens[2] = {1, 5}, positions[2] = {0, 1}, token_seq[2] = {0, 0}, logits_tokens[1] = {1};
    std::vector<float> logits(static_cast<size_t>(m.hp().n_vocab)), hidden(static_cast<size_t>(2 * d));
    auto run = [&](int32_t first, int32_t end, const float *in, float *out, float *lg, bool paged = true,
                   int32_t kv_first = 0) {
        const strata_paged_kv &kv = pool.table();
        strata_forward_args a = m.base_args(m.ops(), dev.get(), tokens, positions, 2, lg);
        if (paged) {
            a.paged_kv = &kv;
            a.token_seq = token_seq;
            a.logits_tokens = logits_tokens;
            a.n_logits = 1;
        }
        a.layer_first = first;
        a.layer_end = end;
        a.hidden_in = in;
        a.hidden_out = out;
        a.kv_first_layer = kv_first;
        strata_status st{};
        const int32_t rc = m.forward(a, &st);
        return std::make_pair(rc, std::string(st.message));
    };
    auto expect_refused = [&](std::pair<int32_t, std::string> r, int32_t code, const std::string &says) {
        EXPECT_EQ(r.first, code) << r.second;
        EXPECT_NE(r.second.find(says), std::string::npos) << r.second;
    };
    expect_refused(run(2, 2, hidden.data(), hidden.data(), nullptr), STRATA_ERR_INVALID_ARGUMENT, "is not a range");
    expect_refused(run(-1, 1, nullptr, hidden.data(), nullptr), STRATA_ERR_INVALID_ARGUMENT, "is not a range");
    expect_refused(run(0, n_layer + 1, nullptr, nullptr, logits.data()), STRATA_ERR_INVALID_ARGUMENT, "is not a range");
    expect_refused(run(1, n_layer, nullptr, nullptr, logits.data()), STRATA_ERR_INVALID_ARGUMENT, "hidden_in is NULL");
    expect_refused(run(0, 1, nullptr, nullptr, nullptr), STRATA_ERR_INVALID_ARGUMENT, "hidden_out is NULL");
    expect_refused(run(1, n_layer, hidden.data(), nullptr, nullptr), STRATA_ERR_INVALID_ARGUMENT, "logits is NULL");
    expect_refused(run(0, 1, nullptr, hidden.data(), nullptr, false), STRATA_ERR_UNSUPPORTED, "paged KV");
    // KV blocks that do not hold the stage's first layer (ABI 1.25), or a whole-model call told its blocks start later.
    expect_refused(run(1, n_layer, hidden.data(), nullptr, logits.data(), true, 2), STRATA_ERR_INVALID_ARGUMENT,
                   "kv_first_layer 2 is outside [0, layer_first 1]");
    expect_refused(run(0, 1, nullptr, hidden.data(), nullptr, true, -1), STRATA_ERR_INVALID_ARGUMENT,
                   "kv_first_layer -1");
    expect_refused(run(0, 0, nullptr, nullptr, logits.data(), true, 1), STRATA_ERR_INVALID_ARGUMENT,
                   "kv_first_layer 1");
    // layer_end = 0 is the whole model, as before 1.24.
    EXPECT_EQ(run(0, 0, nullptr, nullptr, logits.data()).first, STRATA_OK);
}
