// bench: prefill and decode tokens/s of a model on the CPU device, next to the memory-bandwidth bound measured on the
// same machine with the same thread count.
//
//   bench --model F.gguf [--threads N] [--prompt-tokens 128] [--decode-tokens 64] [--repeat 3]
//
// Decode bound: every weight byte is read once per token (plus the KV rows attended), so the fastest possible decode
// is bandwidth / bytes_per_token. The ratio achieved / bound says how close the kernels get to the hardware.
#include "engine/engine.hpp"
#include "gguf/gguf_file.hpp"
#include "plugin_host/registry.hpp"
#include "topology/topology.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    std::string model;
    int threads = 0;
    int prompt_tokens = 128;
    int decode_tokens = 64;
    int repeat = 3;
};

[[noreturn]] void usage(const std::string &why) {
    std::fprintf(stderr, "bench: %s\nusage: bench --model F.gguf [--threads N] [--prompt-tokens N] [--decode-tokens N] [--repeat N]\n",
                 why.c_str());
    std::exit(2);
}

// Sums a slice with several independent accumulators; the compiler vectorises it. Returns the sum so the reads
// cannot be optimised away.
__attribute__((noinline)) uint64_t read_slice(const uint64_t *p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; ++i) a += p[i];
    return a + b + c + d;
}

// Best-of-5 read bandwidth over a buffer far larger than the caches, with `threads` readers.
double measure_read_bandwidth(int threads) {
    const size_t bytes = size_t{1} << 30;
    const size_t n = bytes / sizeof(uint64_t);
    std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
    for (size_t i = 0; i < n; ++i) buf[i] = i;
    double best = 0;
    std::atomic<uint64_t> sink{0};
    for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = clock_type::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
            ts.emplace_back([&, t] {
                const size_t per = n / static_cast<size_t>(threads);
                sink += read_slice(buf.get() + per * static_cast<size_t>(t), per);
            });
        }
        for (auto &t : ts) t.join();
        const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
        best = std::max(best, static_cast<double>(bytes) / s);
    }
    if (sink.load() == 42) std::printf(" ");
    return best;
}

// The device's [cpu] table as the engine expects it: only `threads` is set.
struct threads_view {
    int64_t threads;
    strata_config_view view{};
    explicit threads_view(int64_t t) : threads(t) {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            if (std::strcmp(key, "threads") != 0) return 0;
            *out = static_cast<threads_view *>(ctx)->threads;
            return 1;
        };
    }
};

} // namespace

int main(int argc, char **argv) try {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value for " + a);
            return argv[++i];
        };
        if (a == "--model") o.model = val();
        else if (a == "--threads") o.threads = std::atoi(val().c_str());
        else if (a == "--prompt-tokens") o.prompt_tokens = std::atoi(val().c_str());
        else if (a == "--decode-tokens") o.decode_tokens = std::atoi(val().c_str());
        else if (a == "--repeat") o.repeat = std::atoi(val().c_str());
        else usage("unknown option " + a);
    }
    if (o.model.empty()) usage("--model is required");
    if (o.prompt_tokens < 1 || o.decode_tokens < 1 || o.repeat < 1) usage("token counts and --repeat must be positive");

    const strata::topology::machine machine = strata::topology::discover();
    if (o.threads <= 0) o.threads = machine.cores;
    strata_host_services host{};
    host.struct_size = sizeof host;
    host.host_abi_major = STRATA_ABI_MAJOR;
    host.host_abi_minor = STRATA_ABI_MINOR;
    strata::plugins::registry registry(&host);
    const std::filesystem::path exe_dir = boost::dll::program_location().parent_path().string();
    registry.load_directory(exe_dir.parent_path() / "plugins");

    threads_view tv(o.threads);
    strata::engine::engine_options eo;
    eo.model_path = o.model;
    eo.max_model_len = o.prompt_tokens + o.decode_tokens + 1;
    eo.prefill_chunk = std::min(o.prompt_tokens, 512);
    eo.device = "cpu";
    eo.device_config = &tv.view;
    strata::engine::engine eng(registry, &host, eo);
    const auto &hp = eng.hparams();

    // Bytes one decode step reads: every weight matrix once, except the embedding table (one row per token).
    double weight_bytes = 0;
    {
        auto f = strata::gguf::file::open(o.model);
        const bool tied = f.find_tensor("output.weight") == nullptr;
        for (const auto &t : f.tensors()) {
            if (t.name == "token_embd.weight" && !tied) continue; // only one row is read per token
            weight_bytes += static_cast<double>(t.n_bytes);
        }
    }
    const double kv_bytes_per_token_avg = 2.0 * hp.n_layer * hp.n_head_kv * hp.head_dim * sizeof(float) *
                                          (o.prompt_tokens + o.decode_tokens / 2.0);
    const double decode_bytes = weight_bytes + kv_bytes_per_token_avg;

    std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_tokens));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + (i * 7919) % 20000 % hp.n_vocab);
    prompt[0] = eng.tokenizer().bos();

    double best_prefill = 0, best_decode = 0;
    for (int rep = 0; rep < o.repeat; ++rep) {
        strata_request req{};
        req.struct_size = sizeof req;
        req.prompt_tokens = prompt.data();
        req.n_prompt_tokens = o.prompt_tokens;
        req.sampling.struct_size = sizeof req.sampling;
        req.sampling.temperature = 0;
        req.sampling.top_p = 1;
        req.sampling.repetition_penalty = 1;
        req.sampling.max_tokens = o.decode_tokens;
        req.sampling.ignore_eos = 1;
        strata_request_result r = eng.wait(eng.submit(req));
        best_prefill = std::max(best_prefill, r.n_prompt_tokens / r.prefill_seconds);
        // The first generated token comes from the prefill logits; decode_seconds covers n-1 forward passes.
        if (r.n_completion_tokens > 1) best_decode = std::max(best_decode, (r.n_completion_tokens - 1) / r.decode_seconds);
    }

    const double bw = measure_read_bandwidth(o.threads);
    const double bound = bw / decode_bytes;
    std::printf("model            %s\n", o.model.c_str());
    std::printf("shape            %d layers, dim %d, ff %d, vocab %d\n", hp.n_layer, hp.n_embd, hp.n_ff, hp.n_vocab);
    std::printf("threads          %d (device reports %d)\n", o.threads, eng.device_threads());
    std::printf("prefill          %.1f tokens/s (%d-token prompt)\n", best_prefill, o.prompt_tokens);
    std::printf("decode           %.2f tokens/s (%d tokens)\n", best_decode, o.decode_tokens);
    std::printf("bytes/token      %.1f MiB (weights %.1f MiB + KV %.1f MiB)\n", decode_bytes / 1048576.0,
                weight_bytes / 1048576.0, kv_bytes_per_token_avg / 1048576.0);
    std::printf("read bandwidth   %.2f GB/s (%d threads, best of 5 over 1 GiB)\n", bw / 1e9, o.threads);
    std::printf("decode bound     %.2f tokens/s\n", bound);
    std::printf("ratio            %.0f%% of the memory-bandwidth bound\n", 100.0 * best_decode / bound);
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return 1;
}
