// bench: prefill and decode tokens/s of a model on the CPU device, next to the memory-bandwidth bound measured on the
// same machine with the same thread count.
//
//   bench --model F.gguf [--threads N] [--prompt-tokens 128] [--decode-tokens 64] [--repeat 3] [--warmup 0]
//         [--offload-layers N|all --tier numa_ram|pinned_ram|nvme [--nvme-path F] [--stream] [--prefetch-depth D]]
//         [--device cpu|cuda]   (cuda: weights uploaded, offloaded layers streamed H2D; the bound lines stay CPU's)
//         [--offload-compute device|cpu|auto [--op-offload-min-batch N]]   (cuda: where offloaded layers compute;
//                               default device = streamed. cpu = hybrid placement: the CPU computes them in the tier)
//         [--kv-cache-dtype float32|float16|bfloat16|fp8|fp8_e5m2|q8_0]   (the KV bytes of the bound follow it)
//         [--tensor-parallel-size N]   (N ranks splitting every layer, --threads divided among them)
//
// Hybrid (--offload-compute cpu, or auto choosing it): the layers run one after another, so the bound per token is
// the all-resident compute time plus the CPU-computed layers' bytes at the measured memory bandwidth.
//
// With --offload-layers, the same decode runs twice: all weights resident (the compute time per token) and with the
// last N layers in the tier (streamed or in place). The tier's read bandwidth is measured by this tool on a fresh
// instance of the same tier and configuration, reading in the same chunks with the same number of I/O threads. Then
//   I/O time per token   = streamed bytes per token / tier bandwidth
//   bound per token      = max(compute, I/O)          achieved / bound = how close streaming gets to the hardware
//   overlap efficiency   = (compute + I/O - achieved) / min(compute, I/O)   1 = perfect overlap, 0 = none
//
// Decode bound: every weight byte is read once per token (plus the KV rows attended), so the fastest possible decode
// is bandwidth / bytes_per_token. The ratio achieved / bound says how close the kernels get to the hardware.
#include "bench_common.hpp"
#include "engine/engine.hpp"
#include "engine/tiered_weights.hpp"
#include "gguf/gguf_file.hpp"
#include "plugin_host/registry.hpp"
#include "topology/topology.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <liburing.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

using strata::bench::measure_read_bandwidth;
using strata::bench::table_view;
using clock_type = std::chrono::steady_clock;

struct options {
    std::string model;
    int threads = 0;
    int prompt_tokens = 128;
    int decode_tokens = 64;
    int repeat = 3;
    int warmup = 0; // unmeasured runs of the same request first (llama-bench runs one; tools/peer passes --warmup 1)
    int offload_layers = -2; // -2 = no offload run; -1 = all layers
    std::string tier = "numa_ram";
    std::string nvme_path;
    bool stream = false;
    int prefetch_depth = 2;
    int io_threads = 2;
    std::string device = "cpu"; // or "cuda": the engine uploads and streams to a device that cannot read host memory
    std::string offload_compute = "device";
    int op_offload_min_batch = 0; // 0 = the engine's measured choice
    uint32_t kv_type = STRATA_KV_F32; // --kv-cache-dtype
    int tensor_parallel = 1;          // --tensor-parallel-size: ranks splitting each layer, the threads divided among them
};

[[noreturn]] void usage(const std::string &why) {
    std::fprintf(stderr, "bench: %s\nusage: bench --model F.gguf [--threads N] [--prompt-tokens N] [--decode-tokens N] [--repeat N] [--warmup N] [--device cpu|cuda] [--kv-cache-dtype T] [--tensor-parallel-size N]\n",
                 why.c_str());
    std::exit(2);
}

// The disk's own O_DIRECT read bandwidth, independent of the tier plugin: the first `total` bytes of `file` (the
// nvme tier's own file, kept after the decode run) read by `threads` readers (as many as the ring's I/O threads),
// each with its own io_uring at `queue_depth` requests of `block` bytes in flight over its share; best of 3.
double measure_disk_read(const std::string &file, uint64_t total, uint64_t block, unsigned queue_depth, int threads) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) throw std::runtime_error("cannot open " + file + " with O_DIRECT: " + std::strerror(errno));
    struct stat sb {};
    ::fstat(fd, &sb);
    const uint64_t per = std::min<uint64_t>(total, static_cast<uint64_t>(sb.st_size)) / static_cast<uint64_t>(threads) / block * block;
    if (per == 0) {
        ::close(fd);
        throw std::runtime_error("file too small to measure: " + file);
    }
    auto reader = [&](uint64_t begin) -> uint64_t {
        std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t *>(std::aligned_alloc(4096, block * queue_depth)), &std::free);
        io_uring ring{};
        if (io_uring_queue_init(queue_depth, &ring, 0) != 0) return 0;
        uint64_t next = 0, done = 0;
        unsigned in_flight = 0;
        while (done < per) {
            while (in_flight < queue_depth && next < per) {
                io_uring_sqe *sqe = io_uring_get_sqe(&ring);
                io_uring_prep_read(sqe, fd, buf.get() + (next / block % queue_depth) * block, static_cast<unsigned>(block), begin + next);
                next += block;
                ++in_flight;
            }
            io_uring_submit(&ring);
            io_uring_cqe *cqe = nullptr;
            if (io_uring_wait_cqe(&ring, &cqe) != 0 || cqe->res <= 0) break;
            done += static_cast<uint64_t>(cqe->res);
            io_uring_cqe_seen(&ring, cqe);
            --in_flight;
        }
        io_uring_queue_exit(&ring);
        return done;
    };
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        std::atomic<uint64_t> bytes{0};
        const auto t0 = clock_type::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { bytes += reader(per * static_cast<uint64_t>(t)); });
        for (auto &t : ts) t.join();
        best = std::max(best, static_cast<double>(bytes.load()) / std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    ::close(fd);
    return best;
}

struct decode_result {
    double prefill_tps = 0, decode_tps = 0;
    strata::engine::ring_stats ring;
    strata::engine::engine::hybrid_report hybrid;
};

// Best of `repeat` runs of one prompt + greedy decode.
decode_result run_decode(strata::engine::engine &eng, const std::vector<int32_t> &prompt, int decode_tokens, int repeat) {
    decode_result out;
    for (int rep = 0; rep < repeat; ++rep) {
        const strata_request req = strata::bench::greedy_request(prompt, decode_tokens);
        strata_request_result r = eng.wait(eng.submit(req));
        out.prefill_tps = std::max(out.prefill_tps, r.n_prompt_tokens / r.prefill_seconds);
        // The first generated token comes from the prefill logits; decode_seconds covers n-1 forward passes.
        if (r.n_completion_tokens > 1) out.decode_tps = std::max(out.decode_tps, (r.n_completion_tokens - 1) / r.decode_seconds);
    }
    out.ring = eng.offload_stats();
    out.hybrid = eng.hybrid();
    return out;
}

// Read bandwidth of a fresh instance of the tier, reading `chunk`-sized pieces with `threads` threads in parallel
// (as the prefetch ring does), best of 3 over `total` bytes: the bytes one decode step streams, so the file the
// tier reads has the same size as in the decode run.
double measure_tier_read(const strata::plugins::registry &registry, const strata_host_services *host,
                         const std::string &name, const strata_config_view *cfg, uint64_t chunk, uint64_t total,
                         int threads) {
    auto h = registry.find_tier(name);
    auto tier = strata::engine::create_tier(registry, host, name, cfg, total + (8ull << 20));
    const uint64_t n_chunks = std::max<uint64_t>(1, total / chunk);
    std::vector<uint64_t> regions(n_chunks);
    std::vector<uint8_t> buf(chunk, 0x3c);
    strata_status st{};
    for (auto &r : regions) {
        if (h.desc->region_alloc(tier.get(), chunk, &r, &st) != STRATA_OK ||
            h.desc->write(tier.get(), r, 0, buf.data(), chunk, &st) != STRATA_OK) {
            throw std::runtime_error(std::string("measuring tier: ") + st.message);
        }
    }
    // 4 KiB-aligned destinations, like the ring's slots, so O_DIRECT tiers read straight into them.
    struct aligned_free {
        void operator()(uint8_t *p) const { std::free(p); }
    };
    std::vector<std::unique_ptr<uint8_t, aligned_free>> dst;
    for (int t = 0; t < threads; ++t) {
        dst.emplace_back(static_cast<uint8_t *>(std::aligned_alloc(4096, (chunk + 4095) / 4096 * 4096)));
    }
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        std::atomic<uint64_t> next{0};
        const auto t0 = clock_type::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
            ts.emplace_back([&, t] {
                strata_status s{};
                for (uint64_t i = next++; i < n_chunks; i = next++) {
                    h.desc->read(tier.get(), regions[i], 0, dst[static_cast<size_t>(t)].get(), chunk, &s);
                }
            });
        }
        for (auto &t : ts) t.join();
        const double bw = static_cast<double>(n_chunks * chunk) / std::chrono::duration<double>(clock_type::now() - t0).count();
        best = std::max(best, bw);
    }
    for (auto r : regions) h.desc->region_free(tier.get(), r);
    return best;
}

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
        else if (a == "--warmup") o.warmup = std::atoi(val().c_str());
        else if (a == "--offload-layers") {
            const std::string v = val();
            o.offload_layers = v == "all" ? -1 : std::atoi(v.c_str());
        } else if (a == "--tier") o.tier = val();
        else if (a == "--nvme-path") o.nvme_path = val();
        else if (a == "--stream") o.stream = true;
        else if (a == "--prefetch-depth") o.prefetch_depth = std::atoi(val().c_str());
        else if (a == "--io-threads") o.io_threads = std::atoi(val().c_str());
        else if (a == "--device") o.device = val();
        else if (a == "--offload-compute") o.offload_compute = val();
        else if (a == "--op-offload-min-batch") o.op_offload_min_batch = std::atoi(val().c_str());
        else if (a == "--tensor-parallel-size") o.tensor_parallel = std::atoi(val().c_str());
        else if (a == "--kv-cache-dtype") {
            if (!strata::bench::kv_type_named(val(), &o.kv_type))
                usage(std::string("--kv-cache-dtype is ") + strata::bench::kv_type_words);
        } else usage("unknown option " + a);
    }
    if (o.model.empty()) usage("--model is required");
    if (o.prompt_tokens < 1 || o.decode_tokens < 1 || o.repeat < 1) usage("token counts and --repeat must be positive");
    if (o.warmup < 0) usage("--warmup must be >= 0");

    const strata::topology::machine machine = strata::topology::discover();
    if (o.threads <= 0) o.threads = machine.cores;
    strata_host_services host{};
    host.struct_size = sizeof host;
    host.host_abi_major = STRATA_ABI_MAJOR;
    host.host_abi_minor = STRATA_ABI_MINOR;
    strata::plugins::registry registry(&host);
    const std::filesystem::path exe_dir = boost::dll::program_location().parent_path().string();
    registry.load_directory(exe_dir.parent_path() / "plugins");

    table_view tv;
    tv.ints["threads"] = o.threads;
    strata::engine::engine_options eo;
    eo.model_path = o.model;
    eo.max_model_len = o.prompt_tokens + o.decode_tokens + 1;
    eo.prefill_chunk = std::min(o.prompt_tokens, 512);
    eo.device = o.device;
    eo.device_config = o.device == "cpu" ? &tv.view : nullptr;
    eo.print_plan = false;
    eo.offload.measure_bandwidth = false;
    // Every repeat sends the same prompt: with the prefix cache on, repeats after the first would skip the prefill.
    eo.kv.enable_prefix_caching = false;
    eo.kv.kv_type = o.kv_type;
    eo.tensor_parallel_size = o.tensor_parallel;
    auto eng_ptr = std::make_unique<strata::engine::engine>(registry, &host, eo);
    strata::engine::engine &eng = *eng_ptr;
    const strata_model_hparams hp = eng.hparams(); // a copy: used after the engine is released below

    // Bytes one decode step reads: every weight matrix once, except the embedding table (one row per token).
    const double weight_bytes = strata::bench::decode_weight_bytes(strata::gguf::file::open(o.model));
    const double kv_bytes_per_token_avg =
        2.0 * hp.n_layer * double(strata::kv_layout::row_bytes(int64_t{hp.n_head_kv} * hp.head_dim, o.kv_type)) *
        (o.prompt_tokens + o.decode_tokens / 2.0);
    const double decode_bytes = weight_bytes + kv_bytes_per_token_avg;

    std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_tokens));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((100 + (i * 7919) % 20000) % hp.n_vocab);
    prompt[0] = eng.tokenizer().bos();

    // Warm-up runs of the resident request (first touch of the KV pages, the workspace and the weights' pages, as
    // llama-bench's warm-up prompt does), not measured; the offload run below (--offload-layers) has none.
    if (o.warmup > 0) run_decode(eng, prompt, o.decode_tokens, o.warmup);
    const decode_result resident = run_decode(eng, prompt, o.decode_tokens, o.repeat);
    const double best_prefill = resident.prefill_tps, best_decode = resident.decode_tps;

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
    if (o.offload_layers == -2) return 0;

    // The same decode with the last layers in a tier.
    eng_ptr.reset();
    table_view tier_cfg;
    if (!o.nvme_path.empty()) {
        tier_cfg.strings["path"] = o.nvme_path;
        tier_cfg.ints["keep_file"] = 1; // kept so the disk's raw bandwidth is measured on the very same file
        std::filesystem::remove(o.nvme_path);
    }
    eo.offload.cpu_offload_layers = o.offload_layers == -1 ? hp.n_layer : o.offload_layers;
    eo.offload.tiers = {o.tier};
    eo.offload.tier_configs[o.tier] = &tier_cfg.view;
    eo.offload.stream_weights = o.stream;
    eo.offload.prefetch_depth = o.prefetch_depth;
    eo.offload.io_threads = o.io_threads;
    eo.offload.offload_compute = o.offload_compute;
    eo.offload.measure_bandwidth = o.offload_compute == "auto"; // auto decides from the measured link (cached)
    if (o.op_offload_min_batch > 0) eo.offload.op_offload_min_batch = o.op_offload_min_batch;
    auto off = std::make_unique<strata::engine::engine>(registry, &host, eo);
    const decode_result streamed = run_decode(*off, prompt, o.decode_tokens, o.repeat);
    off.reset(); // frees the tier (and its file) before the bandwidth measurement makes a fresh one
    std::printf("\noffload          last %d layers -> %s (%s, prefetch_depth %d, %d I/O threads)\n",
                *eo.offload.cpu_offload_layers, o.tier.c_str(), o.stream ? "streamed" : "planner's choice",
                o.prefetch_depth, o.io_threads);
    std::printf("decode           %.2f tokens/s\n", streamed.decode_tps);
    if (!streamed.hybrid.host_layers.empty()) {
        // Hybrid: the CPU reads its layers' bytes once per token; the rest runs on the device as when resident.
        const auto &h = streamed.hybrid;
        const double cpu_bytes = weight_bytes * static_cast<double>(h.host_layers.size()) / hp.n_layer;
        const double t_bound = 1.0 / best_decode + cpu_bytes / bw;
        const std::string streamed_when =
            h.min_batch > 0 ? "batches of " + std::to_string(h.min_batch) + "+ tokens" : std::string("never");
        std::printf("hybrid           layers %d-%d computed on the CPU (%llu steps; %llu streamed: %s)\n",
                    h.host_layers.front(), h.host_layers.back(), static_cast<unsigned long long>(h.cpu_steps),
                    static_cast<unsigned long long>(h.streamed_steps), streamed_when.c_str());
        std::printf("hybrid bound     %.2f tokens/s (all-resident compute + %.1f MiB at %.2f GB/s)\n", 1.0 / t_bound,
                    cpu_bytes / 1048576.0, bw / 1e9);
        std::printf("hybrid ratio     %.0f%% of the hybrid bound\n", 100.0 * streamed.decode_tps * t_bound);
        return 0;
    }
    uint64_t streamed_bytes = 0;
    for (const auto &[name, c] : streamed.ring.tiers) streamed_bytes += c.bytes_read;
    const double per_token = streamed.ring.forwards ? static_cast<double>(streamed_bytes) / streamed.ring.forwards : 0.0;
    std::printf("streamed         %.1f MiB/token from %s\n", per_token / 1048576.0, o.tier.c_str());
    if (per_token <= 0) {
        std::printf("(nothing streamed: the tier is read in place; compare decode rates directly)\n");
        return 0;
    }
    // Largest streamed layer ~ the chunk the ring reads: measure the tier the same way.
    uint64_t chunk = static_cast<uint64_t>(per_token / std::max(1, *eo.offload.cpu_offload_layers));
    const double tier_bw = measure_tier_read(registry, &host, o.tier, &tier_cfg.view, (chunk + 4095) / 4096 * 4096,
                                             std::max<uint64_t>(static_cast<uint64_t>(per_token), 4 * chunk), o.io_threads);
    double disk_bw = 0;
    if (o.tier == "nvme" && !o.nvme_path.empty()) {
        disk_bw = measure_disk_read(o.nvme_path, 1ull << 30, 1ull << 20, 32, o.io_threads);
        std::filesystem::remove(o.nvme_path);
    }
    const double t_compute = 1.0 / best_decode;
    const double t_achieved = 1.0 / streamed.decode_tps;
    // I/O time per token as the ring itself saw it in this run: I/O-thread busy time spread over the threads.
    double io_seconds = 0;
    for (const auto &[name, c] : streamed.ring.tiers) io_seconds += c.read_seconds;
    const double t_io_ring = io_seconds / std::max(1, o.io_threads) / static_cast<double>(streamed.ring.forwards);
    const double t_io_tier = per_token / tier_bw;
    const double t_bound = std::max(t_compute, t_io_ring);
    const double overlap = std::clamp((t_compute + t_io_ring - t_achieved) / std::min(t_compute, t_io_ring), 0.0, 1.0);
    std::printf("per token        compute %.2f ms (all resident), achieved %.2f ms\n", t_compute * 1e3, t_achieved * 1e3);
    std::printf("I/O per token    %.2f ms as the ring read it (%.2f GB/s), %.2f ms at the tier bandwidth the tool "
                "measured (%.2f GB/s, %llu KiB reads, %d threads)\n",
                t_io_ring * 1e3, per_token / t_io_ring / 1e9, t_io_tier * 1e3, tier_bw / 1e9,
                static_cast<unsigned long long>(chunk / 1024), o.io_threads);
    std::printf("achieved/bound   %.0f%% (bound = max(compute, I/O) = %.2f ms per token)\n", 100.0 * t_bound / t_achieved,
                t_bound * 1e3);
    std::printf("overlap          %.0f%% efficiency ((compute + I/O - achieved) / min(compute, I/O))\n", 100.0 * overlap);
    if (disk_bw > 0) {
        std::printf("disk O_DIRECT    %.2f GB/s (the tier's file, %d io_uring readers, queue depth 32, 1 MiB reads, best of 3)\n",
                    disk_bw / 1e9, o.io_threads);
        std::printf("streamed/disk    %.0f%% of the disk's O_DIRECT read bandwidth (%.2f GB/s streamed)\n",
                    100.0 * (per_token / t_achieved) / disk_bw, per_token / t_achieved / 1e9);
    }
    std::printf("prefetch stall   %.3f s over %llu forward passes, %llu layer loads\n", streamed.ring.stall_seconds,
                static_cast<unsigned long long>(streamed.ring.forwards),
                static_cast<unsigned long long>(streamed.ring.layer_loads));
    for (const auto &[name, c] : streamed.ring.tiers) {
        std::printf("ring reads       %s: %.1f MiB in %.2f s of I/O-thread time (%.2f GB/s per thread)\n", name.c_str(),
                    static_cast<double>(c.bytes_read) / 1048576.0, c.read_seconds,
                    c.read_seconds > 0 ? static_cast<double>(c.bytes_read) / c.read_seconds / 1e9 : 0.0);
    }
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return 1;
}
