// The executor/worker seam (#16 item 1): a worker driven without an engine — its start-up phases in order, a KV cache
// of its own over the pools it allocates, steps written as step_input — gives the engine's logits bit for bit. That
// is what a rank of its own will do: it holds no scheduler, only the steps it is handed. Checked on stories260K on
// the CPU device, and on the CPU device with memory of its own (separate_memory: weights uploaded, logits copied
// back), for a prompt in one step, the next token as a decode step over the stored KV, and two sequences in one step.
#include "engine_fixture.hpp"

#include "engine/engine_options.hpp"
#include "engine/step_builder.hpp"
#include "engine/worker.hpp"
#include "model_file/open_model_file.hpp"

#include <strata/kv_layout.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using namespace strata;
using namespace strata::testing;

namespace {

engine::engine_options worker_options(const std::string &model, const strata_config_view *cpu) {
    engine::engine_options o;
    o.model_path = model;
    o.max_model_len = 256;
    o.prefill_chunk = 256;
    o.scheduler.max_num_batched_tokens = 256;
    o.scheduler.max_num_seqs = 4;
    o.device = "cpu";
    o.device_config = cpu;
    o.print_plan = false;
    o.offload.measure_bandwidth = false;
    o.offload.bandwidth_cache_path = std::string(STRATA_BINARY_DIR) + "/test-bandwidth.json";
    o.offload.kv_cache_memory = uint64_t{16} << 20;
    o.kv.swap_space_gib = 0;
    return o;
}

// One sequence's part of a step: its new tokens from position `first`, its blocks, whether it wants logits.
struct seq_part {
    std::vector<int32_t> tokens;
    int32_t first = 0;
    const kv::seq_blocks *blocks = nullptr;
};

// A step over several sequences, each asking the logits of its last token, laid out as the engine lays its steps.
engine::step_input step_of(engine::step_builder &step, const std::vector<seq_part> &parts) {
    step.clear();
    for (const seq_part &p : parts) {
        step.add_sequence(p.tokens.data(), p.first, static_cast<int32_t>(p.tokens.size()), *p.blocks);
        step.want_logits(step.n_tokens() - 1);
    }
    return step.input();
}

// The first row that differs, or "".
std::string differs(const float *a, const float *b, int32_t n) {
    for (int32_t i = 0; i < n; ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return "logit " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
    return "";
}

class WorkerStep : public ::testing::TestWithParam<bool> {};

} // namespace

TEST_P(WorkerStep, AWorkerWithoutAnEngineGivesTheEnginesLogits) {
    const std::string model = shared_path("models/stories260K-f32.gguf");
    cpu_table separate;
    const strata_config_view *cpu = GetParam() ? &separate.view : nullptr;
    const engine::engine_options o = worker_options(model, cpu);
    engine::engine eng(test_registry(), test_host(), o);
    const int32_t n_vocab = eng.hparams().n_vocab;
    const std::vector<int32_t> a = eng.tokenizer().encode("Once upon a time, there was a little girl named Lily.", true);
    const std::vector<int32_t> b = eng.tokenizer().encode("The dog ran to the park and", true);
    ASSERT_GT(a.size(), 8u);
    ASSERT_GT(b.size(), 4u);
    // The engine's logits of a prefix run alone (forward_for_testing copies them out).
    auto engine_logits = [&](const std::vector<int32_t> &t, size_t n) {
        std::vector<int32_t> pos(n);
        std::iota(pos.begin(), pos.end(), 0);
        const float *l = eng.forward_for_testing(t.data(), pos.data(), static_cast<int32_t>(n));
        return std::vector<float>(l, l + n_vocab);
    };
    const std::vector<float> want_a = engine_logits(a, a.size() - 1), want_a_next = engine_logits(a, a.size()),
                             want_b = engine_logits(b, b.size());

    // The worker's phases, as the engine calls them, then a KV cache of its own over the pools it allocates.
    const auto file = open_model_file(model);
    const auto arch = test_registry().find_model_arch_for("llama");
    ASSERT_NE(arch.desc, nullptr);
    engine::worker w(test_registry(), test_host(), o, *file, arch);
    w.init_device();
    EXPECT_EQ(w.device_reads_host(), !GetParam());
    w.load_model();
    EXPECT_EQ(w.hparams().n_vocab, n_vocab);
    w.place_weights(o.offload, o.max_model_len);
    w.allocate_step_memory();
    const strata_model_hparams &hp = w.hparams();
    const uint64_t block_bytes =
        kv_layout::block_bytes(hp.n_layer, o.kv.block_size, int64_t{hp.n_head_kv} * hp.head_dim, o.kv.kv_type);
    kv::kv_cache_config kc;
    kc.block_size = o.kv.block_size;
    kc.block_bytes = block_bytes;
    kc.prefix_caching = false;
    kc.device_reads_host = w.device_reads_host();
    kv::kv_cache kv(kc);
    kv.add_pool(kv::tier::device, 64, w.allocate_device_kv(64, block_bytes));
    w.bind_kv(engine::step_block_reserve(kv, o.scheduler.max_num_seqs));

    kv::seq_blocks sa, sb;
    ASSERT_TRUE(kv.ensure_slots(sa, static_cast<int32_t>(a.size())));
    ASSERT_TRUE(kv.ensure_slots(sb, static_cast<int32_t>(b.size())));
    engine::step_builder buf;
    // The prompt of a but its last token, in one step.
    std::vector<int32_t> a_head(a.begin(), a.end() - 1);
    engine::step_output out = w.execute_model(step_of(buf, {{a_head, 0, &sa}}));
    ASSERT_EQ(out.n_rows, 1);
    ASSERT_EQ(out.n_vocab, n_vocab);
    EXPECT_EQ(differs(out.row(0), want_a.data(), n_vocab), "") << "prompt step";
    // Its last token as a decode step over the KV the first step stored, beside b's whole prompt.
    out = w.execute_model(step_of(buf, {{{a.back()}, static_cast<int32_t>(a.size()) - 1, &sa}, {b, 0, &sb}}));
    ASSERT_EQ(out.n_rows, 2);
    EXPECT_EQ(differs(out.row(0), want_a_next.data(), n_vocab), "") << "decode step of a, batched with b";
    EXPECT_EQ(differs(out.row(1), want_b.data(), n_vocab), "") << "b's prompt, batched with a's decode";
    kv.release(sa);
    kv.release(sb);
}

INSTANTIATE_TEST_SUITE_P(Devices, WorkerStep, ::testing::Values(false, true),
                         [](const auto &info) { return info.param ? "SeparateMemory" : "HostMemory"; });
