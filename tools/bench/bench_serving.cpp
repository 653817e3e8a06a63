// bench-serving: continuous batching and the tiered prefix cache, measured through the engine's C++ API (submit,
// wait with on_token callbacks, stats) on the CPU device.
//
//   bench-serving --model F.gguf [--threads N] [--concurrency 1,4,16,64] [--prompt-tokens 64] [--decode-tokens 64]
//                 [--repeat 3] [--kv-cache-memory SIZE] [--max-num-batched-tokens 2048] [--preemption auto]
//                 [--temperature T] [--top-p P] [--data-parallel R]
//   bench-serving --model F.gguf --prefix-ttft [--prefix-tokens 2000] [--suffix-tokens 16] [--repeat 3]
//                 [--max-model-len N] [--swap-space GIB] [--store-dir DIR] [--warm-store]
//
// Serving (the default): for each N, N greedy requests with distinct prompts (so the prefix cache cannot help) are
// submitted at once (with --temperature, seeded draws instead: each step then samples N rows of the vocabulary). Aggregate decode tokens/s counts the tokens generated after the moment every request has its
// first token, up to the moment the last one finishes; end-to-end tokens/s is all generated tokens over submit to
// last finish. A decode step reads every weight byte once whatever the batch size, so with the read bandwidth
// measured here (same thread count) the bound is N x bandwidth / weight bytes; the tool also states the bound with
// each sequence's KV reads added, and the device's prefill rate (a 512-token prompt), which batched decode cannot
// beat once it is compute-bound. With --data-parallel R the requests go to R replicas (the engine API's replica_set,
// --threads divided among them, --kv-cache-memory each): every replica reads all the weights for its share of the
// batch, so the weight bound is R times lower (the table's bounds say so).
//
// Prefix TTFT: time to first token of a request whose long prefix (plus a short distinct suffix) is (a) recomputed
// (prefix caching off), (b) a hit in device KV, (c) a hit in the host tier (a filler request as large as the device
// KV evicts the prefix there first), (d) a hit in the persistent prefix store after a restart (the engine is
// destroyed, which writes its cached prefixes, the store's files are dropped from the page cache, and a new engine
// starts on the same folder). Each case checks through stats().prefix_hits that the hit came from the tier it
// claims, and the first greedy tokens of every case must be identical; the tool exits non-zero otherwise.
#include "bench_common.hpp"
#include "splitmix64.hpp"
#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/replica_set.hpp"
#include "gguf/gguf_file.hpp"
#include "plugin_host/registry.hpp"
#include "topology/topology.hpp"

#include <strata/kv_layout.hpp>

#include <boost/dll/runtime_symbol_info.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct options {
    std::string model;
    int threads = 0;
    std::vector<int> concurrency{1, 4, 16, 64};
    int prompt_tokens = 64;
    int decode_tokens = 64;
    int repeat = 3;
    std::optional<uint64_t> kv_cache_memory;
    int max_num_batched_tokens = 2048;
    std::string preemption = "auto";
    bool prefix_ttft = false;
    int prefix_tokens = 2000;
    int suffix_tokens = 16;
    int compare_tokens = 8;
    int max_model_len = 0;
    double swap_space_gib = 1.0;
    uint32_t kv_type = STRATA_KV_F32; // --kv-cache-dtype
    float temperature = 0.0f;         // serving requests: 0 = greedy
    float top_p = 1.0f;
    std::string store_dir = "/tmp";
    bool warm_store = false;
    int data_parallel = 1; // serving: replicas of the model (replica_set), the threads divided among them
};

[[noreturn]] void usage(const std::string &why) {
    std::fprintf(stderr,
                 "bench-serving: %s\n"
                 "usage: bench-serving --model F.gguf [--threads N] [--concurrency 1,4,16,64] [--prompt-tokens 64]\n"
                 "                     [--decode-tokens 64] [--repeat 3] [--kv-cache-memory SIZE]\n"
                 "                     [--max-num-batched-tokens 2048] [--preemption auto|swap|recompute]\n"
                 "                     [--kv-cache-dtype float32|float16|bfloat16|fp8|fp8_e5m2|q8_0]\n"
                 "                     [--temperature T] [--top-p P] [--data-parallel R]\n"
                 "       bench-serving --model F.gguf --prefix-ttft [--prefix-tokens 2000] [--suffix-tokens 16]\n"
                 "                     [--compare-tokens 8] [--repeat 3] [--max-model-len N] [--swap-space GIB]\n"
                 "                     [--store-dir DIR] [--warm-store]\n"
                 "SIZE is bytes with an optional K, M or G suffix (powers of 1024).\n",
                 why.c_str());
    std::exit(2);
}

int parse_int(const std::string &flag, const std::string &v) {
    char *end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || x < -1000000000L || x > 1000000000L) usage(flag + " wants an integer, not '" + v + "'");
    return static_cast<int>(x);
}

float parse_float(const std::string &flag, const std::string &v, float lo, float hi) {
    char *end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(x >= lo && x <= hi))
        usage(flag + " wants a number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", not '" + v + "'");
    return static_cast<float>(x);
}

uint64_t parse_size(const std::string &flag, const std::string &v) {
    char *end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    double mult = 1;
    const std::string unit = end ? std::string(end) : std::string();
    if (unit == "K" || unit == "k" || unit == "KiB") mult = 1024.0;
    else if (unit == "M" || unit == "m" || unit == "MiB") mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "g" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
    else if (!unit.empty()) usage(flag + ": unknown size unit '" + unit + "' (use K, M or G)");
    if (v.empty() || end == v.c_str() || !(x > 0)) usage(flag + " wants a positive size, not '" + v + "'");
    return static_cast<uint64_t>(x * mult);
}

std::vector<int> parse_list(const std::string &flag, const std::string &v) {
    std::vector<int> out;
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) {
        const int n = parse_int(flag, item);
        if (n < 1) usage(flag + " values must be positive");
        out.push_back(n);
    }
    if (out.empty()) usage(flag + " wants a comma-separated list such as 1,4,16,64");
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using rng = strata::tools::splitmix64; // deterministic prompts, identical on every machine

// `n` token ids drawn from the vocabulary past the control tokens (unk, BOS, EOS); a different seed gives a different
// first block, so two prompts of different seeds never share a cached prefix.
std::vector<int32_t> random_tokens(int n, uint64_t seed, int32_t n_vocab) {
    rng r{seed * 0x2545F4914F6CDD1Dull + 1};
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (auto &t : out) t = static_cast<int32_t>(3 + r.next() % static_cast<uint64_t>(n_vocab - 3));
    return out;
}

std::vector<int32_t> prompt_with_bos(int32_t bos, const std::vector<int32_t> &body) {
    std::vector<int32_t> p;
    p.reserve(body.size() + 1);
    p.push_back(bos);
    p.insert(p.end(), body.begin(), body.end());
    return p;
}

// What one request produced and when; filled on the engine's worker thread, read after wait() returns.
struct token_log {
    std::vector<clock_type::time_point> at;
    std::vector<int32_t> tokens;
    int32_t finish = STRATA_FINISH_NONE;
    explicit token_log(int expected) {
        at.reserve(static_cast<size_t>(expected));
        tokens.reserve(static_cast<size_t>(expected));
    }
    static void on_token(void *user, const strata_token_event *ev) {
        auto *l = static_cast<token_log *>(user);
        if (ev->finish != STRATA_FINISH_NONE) {
            l->finish = ev->finish;
            return;
        }
        l->at.push_back(clock_type::now());
        l->tokens.push_back(ev->token);
    }
};

strata_request greedy_request(const std::vector<int32_t> &prompt, int max_tokens, token_log *log) {
    strata_request req = strata::bench::greedy_request(prompt, max_tokens);
    if (log != nullptr) {
        req.on_token = token_log::on_token;
        req.user = log;
    }
    return req;
}

// Runs one request to the end. Requests other than the measured ones ask for at least 2 tokens: the engine publishes
// its KV counters after each step, so a request that runs two steps or more has its prefix lookup (done in its first
// step) visible in stats() by the time wait() returns.
void run_request(strata::engine::engine &eng, const std::vector<int32_t> &prompt, int max_tokens) {
    eng.wait(eng.submit(greedy_request(prompt, std::max(2, max_tokens), nullptr)));
}

// KV geometry of the model, read from the file before an engine exists (the engine sizes its pools the same way).
struct kv_geometry {
    uint64_t bytes_per_token = 0;
    int32_t n_ctx_train = 0;
};

kv_geometry read_kv_geometry(const strata::gguf::file &f, uint32_t kv_type) {
    const auto arch = f.get_string("general.architecture");
    if (!arch) throw strata::error("the model has no general.architecture");
    const std::string p = std::string(*arch) + ".";
    auto need = [&](const std::string &key) -> uint64_t {
        const auto v = f.get_uint(p + key);
        if (!v || *v == 0) throw strata::error("the model has no usable " + p + key);
        return *v;
    };
    const uint64_t n_layer = need("block_count"), n_embd = need("embedding_length"), n_head = need("attention.head_count");
    const uint64_t n_head_kv = f.get_uint(p + "attention.head_count_kv").value_or(n_head);
    const uint64_t head_dim = f.get_uint(p + "attention.key_length").value_or(n_embd / n_head);
    kv_geometry g;
    g.bytes_per_token = strata::kv_layout::block_bytes(static_cast<int64_t>(n_layer), 1,
                                                       static_cast<int64_t>(n_head_kv * head_dim), kv_type);
    g.n_ctx_train = static_cast<int32_t>(f.get_uint(p + "context_length").value_or(2048));
    return g;
}

// Everything an engine needs that outlives it.
struct bench_env {
    strata_host_services host{};
    std::unique_ptr<strata::plugins::registry> registry;
    strata::bench::table_view device_table;
    options opts;

    strata::engine::engine_options base_options() const {
        strata::engine::engine_options eo;
        eo.model_path = opts.model;
        eo.device = "cpu";
        eo.device_config = &device_table.view;
        eo.print_plan = false;
        eo.offload.measure_bandwidth = false;
        eo.kv.swap_space_gib = opts.swap_space_gib;
        eo.kv.kv_type = opts.kv_type;
        eo.scheduler.max_num_batched_tokens = opts.max_num_batched_tokens;
        eo.scheduler.mode = strata::engine::parse_preemption_mode(opts.preemption);
        return eo;
    }
};

// ------------------------------------------------------------------------------------------------------------------
// Serving: aggregate decode tokens/s against the bandwidth bound.

struct serving_row {
    int n = 0;
    std::vector<double> decode_tps, e2e_tps;
    int64_t preemptions = 0, prefix_hit_tokens = 0, window_tokens = 0;
};

int run_serving(bench_env &env) {
    const options &o = env.opts;
    const auto file = strata::gguf::file::open(o.model);
    const double weight_bytes = strata::bench::decode_weight_bytes(file);
    const kv_geometry geo = read_kv_geometry(file, o.kv_type);
    const int n_max = *std::max_element(o.concurrency.begin(), o.concurrency.end());
    const int block_size = 16;
    const uint64_t block_bytes = geo.bytes_per_token * block_size;
    const int roof_tokens = 512;
    const int seq_tokens = o.prompt_tokens + o.decode_tokens;
    const uint64_t seq_blocks = (static_cast<uint64_t>(seq_tokens) + block_size - 1) / block_size;
    const int max_model_len = std::max(seq_tokens + 1, roof_tokens + 2);

    // The bound's bandwidth first, while nothing else of this process runs.
    std::printf("measuring read bandwidth (%d threads, best of 5 over 1 GiB)...\n", o.threads);
    std::fflush(stdout);
    const double bw = strata::bench::measure_read_bandwidth(o.threads);

    strata::engine::engine_options eo = env.base_options();
    eo.max_model_len = max_model_len;
    eo.scheduler.max_num_seqs = n_max;
    // Every sequence's blocks at once plus one spare each, so the largest N runs without preemption unless
    // --kv-cache-memory asks for less.
    const uint64_t default_kv =
        std::max<uint64_t>(static_cast<uint64_t>(n_max) * (seq_blocks + 1),
                           (static_cast<uint64_t>(max_model_len) + block_size - 1) / block_size + 1) *
        block_bytes;
    eo.offload.kv_cache_memory = o.kv_cache_memory.value_or(default_kv);
    eo.data_parallel_size = o.data_parallel;
    auto eng = std::make_unique<strata::engine::replica_set>(*env.registry, &env.host, eo);
    const int32_t n_vocab = eng->front().hparams().n_vocab;
    const int32_t bos = eng->front().tokenizer().bos();
    const strata_engine_stats s0 = eng->stats();

    // Warm-up: the largest batch once (first touch of KV pages, workspace and the thread pool), then the prefill
    // rate of one long prompt, best of 2.
    {
        std::vector<std::vector<int32_t>> prompts;
        for (int i = 0; i < n_max; ++i) prompts.push_back(prompt_with_bos(bos, random_tokens(o.prompt_tokens - 1, 900000 + i, n_vocab)));
        std::vector<strata_request_id> ids;
        for (const auto &p : prompts) ids.push_back(eng->submit(greedy_request(p, 2, nullptr)));
        for (auto id : ids) eng->wait(id);
    }
    double prefill_rate = 0;
    for (int rep = 0; rep < 2; ++rep) {
        const auto p = prompt_with_bos(bos, random_tokens(roof_tokens - 1, 800000 + rep, n_vocab));
        const strata_request_result r = eng->wait(eng->submit(greedy_request(p, 1, nullptr)));
        prefill_rate = std::max(prefill_rate, roof_tokens / r.prefill_seconds);
    }
    prefill_rate *= o.data_parallel; // one prompt runs on one replica's share; together they prefill R at a time

    std::vector<serving_row> rows;
    uint64_t seed = 1;
    for (int n : o.concurrency) {
        serving_row row;
        row.n = n;
        for (int rep = 0; rep < o.repeat; ++rep) {
            std::vector<std::vector<int32_t>> prompts;
            std::vector<std::unique_ptr<token_log>> logs;
            for (int i = 0; i < n; ++i) {
                prompts.push_back(prompt_with_bos(bos, random_tokens(o.prompt_tokens - 1, seed++, n_vocab)));
                logs.push_back(std::make_unique<token_log>(o.decode_tokens));
            }
            const strata_engine_stats before = eng->stats();
            std::vector<strata_request_id> ids;
            ids.reserve(static_cast<size_t>(n));
            const auto t0 = clock_type::now();
            for (int i = 0; i < n; ++i) {
                strata_request req = greedy_request(prompts[static_cast<size_t>(i)], o.decode_tokens,
                                                    logs[static_cast<size_t>(i)].get());
                req.sampling.temperature = o.temperature;
                req.sampling.top_p = o.top_p;
                req.sampling.seed = static_cast<uint64_t>(i) + 1;
                ids.push_back(eng->submit(req));
            }
            for (auto id : ids) eng->wait(id);
            const strata_engine_stats after = eng->stats();

            clock_type::time_point all_first = t0, last = t0;
            int64_t total = 0;
            for (const auto &l : logs) {
                if (l->finish != STRATA_FINISH_LENGTH || static_cast<int>(l->tokens.size()) != o.decode_tokens) {
                    throw strata::error("a request ended with finish reason " + std::to_string(l->finish) + " after " +
                                        std::to_string(l->tokens.size()) + " of " +
                                        std::to_string(o.decode_tokens) + " tokens");
                }
                all_first = std::max(all_first, l->at.front());
                last = std::max(last, l->at.back());
                total += static_cast<int64_t>(l->tokens.size());
            }
            // Tokens produced after every request had its first one: the steady decode of all N together.
            int64_t window = 0;
            for (const auto &l : logs) {
                window += std::count_if(l->at.begin(), l->at.end(), [&](auto t) { return t > all_first; });
            }
            const double window_s = std::chrono::duration<double>(last - all_first).count();
            if (window > 0 && window_s > 0) row.decode_tps.push_back(static_cast<double>(window) / window_s);
            row.e2e_tps.push_back(static_cast<double>(total) / std::chrono::duration<double>(last - t0).count());
            row.window_tokens += window;
            row.preemptions += (after.preemptions_swap - before.preemptions_swap) +
                               (after.preemptions_recompute - before.preemptions_recompute);
            for (int t = 0; t < 3; ++t) row.prefix_hit_tokens += after.prefix_hits[t] - before.prefix_hits[t];
        }
        if (row.decode_tps.empty()) throw strata::error("N=" + std::to_string(n) + ": no decode window (use --decode-tokens >= 2)");
        rows.push_back(row);
        std::printf("N=%d done\n", n);
        std::fflush(stdout);
    }
    const strata_engine_stats s1 = eng->stats();

    const auto &hp = eng->front().hparams();
    const double kv_read_per_seq = static_cast<double>(geo.bytes_per_token) * (o.prompt_tokens + o.decode_tokens / 2.0);
    std::printf("\nmodel            %s\n", o.model.c_str());
    std::printf("shape            %d layers, dim %d, %d heads (%d KV), ff %d, vocab %d\n", hp.n_layer, hp.n_embd,
                hp.n_head, hp.n_head_kv, hp.n_ff, hp.n_vocab);
    std::printf("threads          %d (device reports %d%s)\n", o.threads, eng->front().device_threads(),
                o.data_parallel > 1 ? (" in each of " + std::to_string(o.data_parallel) + " replicas").c_str() : "");
    const std::string draw = o.temperature > 0 ? "sampled (temperature " + std::to_string(o.temperature) +
                                                     ", top-p " + std::to_string(o.top_p) + ", seeded)"
                                               : std::string("greedy");
    std::printf("requests         %d-token prompts (distinct), %d %s tokens each (ignore_eos), %d runs per N, "
                "median\n",
                o.prompt_tokens, o.decode_tokens, draw.c_str(), o.repeat);
    std::printf("KV cache         %s, %lld device blocks of %d tokens (%.1f MiB), max_num_seqs %d, "
                "max_num_batched_tokens %d, preemption %s\n",
                strata::kv_layout::type_name(o.kv_type), static_cast<long long>(s1.kv_blocks_total[0]), block_size,
                static_cast<double>(*eo.offload.kv_cache_memory) / 1048576.0, n_max, o.max_num_batched_tokens,
                o.preemption.c_str());
    std::printf("read bandwidth   %.2f GB/s (%d threads, best of 5 over 1 GiB)\n", bw / 1e9, o.threads);
    std::printf("weights/step     %.1f MiB (every weight once per step, whatever N)\n", weight_bytes / 1048576.0);
    std::printf("KV/step/seq      %.2f MiB (context %d + %d/2 on average)\n", kv_read_per_seq / 1048576.0,
                o.prompt_tokens, o.decode_tokens);
    std::printf("prefill rate     %.0f tokens/s (a %d-token prompt, best of 2%s): the kernels' rate with weights "
                "amortised over many tokens\n",
                prefill_rate, roof_tokens,
                o.data_parallel > 1 ? (", on one replica, times the " + std::to_string(o.data_parallel) + " replicas").c_str()
                                    : "");
    std::printf("\n%5s %12s %10s %12s %13s %7s %13s %7s %9s %8s\n", "N", "decode tok/s", "per seq", "end-to-end",
                "bound(W)", "ratio", "bound(W+KV)", "ratio", "/prefill", "preempt");
    for (const auto &r : rows) {
        const double agg = median(r.decode_tps);
        const double bound_w = r.n * bw / (o.data_parallel * weight_bytes);
        const double bound_wkv = r.n * bw / (o.data_parallel * weight_bytes + r.n * kv_read_per_seq);
        std::printf("%5d %12.1f %10.2f %12.1f %13.0f %6.1f%% %13.0f %6.1f%% %8.0f%% %8lld\n", r.n, agg, agg / r.n,
                    median(r.e2e_tps), bound_w, 100.0 * agg / bound_w, bound_wkv, 100.0 * agg / bound_wkv,
                    100.0 * agg / prefill_rate, static_cast<long long>(r.preemptions));
    }
    std::printf("\ndecode tok/s: tokens generated after all N requests had their first token, over the time from "
                "then to the last finish (median of %d runs); end-to-end: all generated tokens over submit to last "
                "finish.\nbound(W) = N x bandwidth / (replicas x weight bytes); bound(W+KV) adds each sequence's KV reads; "
                "/prefill = decode tok/s over the prefill rate; preempt: preemptions summed over the %d runs.\n",
                o.repeat, o.repeat);
    int64_t hits = 0;
    for (const auto &r : rows) hits += r.prefix_hit_tokens;
    std::printf("prefix cache     %lld tokens hit during the measured runs (distinct prompts: expected 0); "
                "preemptions over the whole run: %lld\n",
                static_cast<long long>(hits),
                static_cast<long long>(s1.preemptions_swap + s1.preemptions_recompute - s0.preemptions_swap -
                                       s0.preemptions_recompute));
    if (hits != 0) {
        std::fprintf(stderr, "bench-serving: error: distinct prompts hit the prefix cache; the measurement is not "
                             "what it claims\n");
        return 1;
    }
    return 0;
}

// ------------------------------------------------------------------------------------------------------------------
// Prefix TTFT: recompute against device, host-tier and store hits.

struct ttft_sample {
    double seconds = 0;
    std::vector<int32_t> first;
    strata_engine_stats delta{};
};

// Submits one measured request: time from just before submit to its first token callback.
ttft_sample measure_ttft(strata::engine::engine &eng, const std::vector<int32_t> &prompt, int out_tokens) {
    token_log log(out_tokens);
    const strata_engine_stats before = eng.stats();
    const auto t0 = clock_type::now();
    const strata_request_id id = eng.submit(greedy_request(prompt, out_tokens, &log));
    eng.wait(id);
    const strata_engine_stats after = eng.stats();
    if (log.at.empty()) throw strata::error("the measured request produced no token");
    ttft_sample s;
    s.seconds = std::chrono::duration<double>(log.at.front() - t0).count();
    s.first = log.tokens;
    s.delta.prefix_queries = after.prefix_queries - before.prefix_queries;
    for (int t = 0; t < 3; ++t) s.delta.prefix_hits[t] = after.prefix_hits[t] - before.prefix_hits[t];
    s.delta.kv_bytes_swapped_in = after.kv_bytes_swapped_in - before.kv_bytes_swapped_in;
    return s;
}

// Writes back and drops the page cache of every file under `dir` (the store's entries), so a "restart" reads them
// from the disk rather than from this kernel's cache. Returns the fraction of their pages still resident after.
double drop_page_cache(const fs::path &dir) {
    uint64_t pages = 0, resident = 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    for (const auto &e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file() || e.file_size() == 0) continue;
        const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ::fdatasync(fd); // dirty pages cannot be dropped
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        const size_t len = e.file_size();
        void *m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            const size_t n = (len + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
            std::vector<unsigned char> vec(n);
            if (::mincore(m, len, vec.data()) == 0) {
                pages += n;
                for (unsigned char v : vec) resident += v & 1u;
            }
            ::munmap(m, len);
        }
        ::close(fd);
    }
    return pages ? static_cast<double>(resident) / static_cast<double>(pages) : 0.0;
}

struct ttft_case {
    const char *name;
    const char *source;
    int expect_tier; // -1: no hits at all
    std::vector<ttft_sample> samples;
};

int run_prefix_ttft(bench_env &env) {
    const options &o = env.opts;
    const int block_size = 16;
    const auto file = strata::gguf::file::open(o.model);
    const kv_geometry geo = read_kv_geometry(file, o.kv_type);
    const uint64_t block_bytes = geo.bytes_per_token * block_size;
    const int n_ctx = o.max_model_len > 0 ? o.max_model_len : geo.n_ctx_train;
    const int prompt_len = o.prefix_tokens + o.suffix_tokens;
    if (prompt_len + o.compare_tokens + 1 > n_ctx) {
        throw strata::error("prefix " + std::to_string(o.prefix_tokens) + " + suffix " + std::to_string(o.suffix_tokens) +
                            " + " + std::to_string(o.compare_tokens) + " generated tokens do not fit max_model_len " +
                            std::to_string(n_ctx) + "; raise --max-model-len (the model was trained for " +
                            std::to_string(geo.n_ctx_train) + ")");
    }
    // Every full block of the prefix hits; the block the suffix starts in differs per request.
    const int64_t expect_hits = static_cast<int64_t>(o.prefix_tokens / block_size) * block_size;
    const uint64_t ctx_blocks = (static_cast<uint64_t>(n_ctx) + block_size - 1) / block_size;

    strata::engine::engine_options base = env.base_options();
    base.max_model_len = n_ctx;
    base.kv.block_size = block_size;
    base.scheduler.max_num_seqs = 4;
    base.offload.kv_cache_memory = 2 * ctx_blocks * block_bytes; // a prefix and a full-length request, with room
    auto make = [&](const strata::engine::engine_options &eo) {
        return std::make_unique<strata::engine::engine>(*env.registry, &env.host, eo);
    };

    std::vector<ttft_case> cases = {{"(a) recompute", "computed (prefix caching off)", -1, {}},
                                    {"(b) device hit", "device KV", 0, {}},
                                    {"(c) host-tier hit", "host tier (swap_space)", 1, {}},
                                    {"(d) store hit after restart", "prefix store (disk)", 2, {}}};
    int32_t n_vocab = 0, bos = 0;
    std::vector<int32_t> prefix;
    auto prompt_for = [&](uint64_t suffix_seed) {
        std::vector<int32_t> p = prefix;
        const auto s = random_tokens(o.suffix_tokens, suffix_seed, n_vocab);
        p.insert(p.end(), s.begin(), s.end());
        return p;
    };
    auto other_prompt = [&](int len, uint64_t seed) { return prompt_with_bos(bos, random_tokens(len - 1, seed, n_vocab)); };
    auto progress = [](const char *what) {
        std::printf("%s\n", what);
        std::fflush(stdout);
    };

    // (a) recompute: prefix caching off.
    {
        progress("(a) recompute...");
        auto eo = base;
        eo.kv.enable_prefix_caching = false;
        auto eng = make(eo);
        n_vocab = eng->hparams().n_vocab;
        bos = eng->tokenizer().bos();
        prefix = prompt_with_bos(bos, random_tokens(o.prefix_tokens - 1, 1, n_vocab));
        run_request(*eng, other_prompt(64, 100), 2); // warm-up
        for (int r = 0; r < o.repeat; ++r) cases[0].samples.push_back(measure_ttft(*eng, prompt_for(1000 + r), o.compare_tokens));
    }
    // (b) device hit: the prefix computed once, then found in device KV.
    {
        progress("(b) device hit...");
        auto eng = make(base);
        run_request(*eng, other_prompt(64, 100), 2);
        run_request(*eng, prompt_for(999), 2);
        for (int r = 0; r < o.repeat; ++r) cases[1].samples.push_back(measure_ttft(*eng, prompt_for(1000 + r), o.compare_tokens));
    }
    // (c) host-tier hit: device KV of one full-length context; before each measurement a filler request that needs
    // every device block forces the prefix's cached blocks out, and they are demoted to the host tier. The filler is
    // itself found in the host tier from its second run on, so the loop stays cheap.
    {
        progress("(c) host-tier hit...");
        if (o.swap_space_gib <= 0) throw strata::error("the host-tier case needs --swap-space > 0");
        auto eo = base;
        const int filler_len = n_ctx - 2; // with 2 generated tokens: KV for n_ctx - 1 tokens
        const uint64_t filler_blocks = (static_cast<uint64_t>(filler_len + 1) + block_size - 1) / block_size;
        eo.offload.kv_cache_memory = filler_blocks * block_bytes;
        auto eng = make(eo);
        const strata_engine_stats st = eng->stats();
        if (st.kv_blocks_total[0] != static_cast<int64_t>(filler_blocks) || st.kv_blocks_total[1] == 0) {
            throw strata::error("the host-tier case wants " + std::to_string(filler_blocks) + " device blocks and a host "
                                "tier; the engine has " + std::to_string(st.kv_blocks_total[0]) + " and " +
                                std::to_string(st.kv_blocks_total[1]));
        }
        const auto filler = other_prompt(filler_len, 200);
        run_request(*eng, other_prompt(64, 100), 2);
        run_request(*eng, prompt_for(999), 2);
        for (int r = 0; r < o.repeat; ++r) {
            run_request(*eng, filler, 2);
            cases[2].samples.push_back(measure_ttft(*eng, prompt_for(1000 + r), o.compare_tokens));
        }
    }
    // (d) store hit after a restart: compute the prefix, destroy the engine (it writes its cached prefixes to the
    // store), drop the files from the page cache, start a new engine on the same folder.
    std::vector<double> resident_after_drop;
    {
        progress("(d) prefix store across restarts...");
        const fs::path dir = fs::path(o.store_dir) / ("bench-serving-store-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        auto eo = base;
        eo.kv.prefix_store_dir = dir.string();
        eo.kv.prefix_store_gib = 1.0;
        {
            auto eng = make(eo);
            run_request(*eng, other_prompt(64, 100), 2);
            run_request(*eng, prompt_for(999), 2);
        }
        for (int r = 0; r < o.repeat; ++r) {
            if (!o.warm_store) resident_after_drop.push_back(drop_page_cache(dir));
            auto eng = make(eo);
            run_request(*eng, other_prompt(64, 300 + static_cast<uint64_t>(r)), 2); // warm-up, not in the store
            cases[3].samples.push_back(measure_ttft(*eng, prompt_for(1000 + r), o.compare_tokens));
        }
        fs::remove_all(dir);
    }

    // Checks: every hit came from the tier the case claims, and greedy outputs agree across cases.
    bool ok = true;
    for (const auto &c : cases) {
        for (size_t r = 0; r < c.samples.size(); ++r) {
            const auto &d = c.samples[r].delta;
            for (int t = 0; t < 3; ++t) {
                const int64_t want = t == c.expect_tier ? expect_hits : 0;
                if (d.prefix_hits[t] != want) {
                    std::fprintf(stderr, "bench-serving: %s, run %zu: prefix_hits[%d] = %lld, expected %lld\n", c.name, r,
                                 t, static_cast<long long>(d.prefix_hits[t]), static_cast<long long>(want));
                    ok = false;
                }
            }
            if (c.samples[r].first != cases[0].samples[r].first) {
                std::fprintf(stderr, "bench-serving: %s, run %zu: the first %d greedy tokens differ from recompute's\n",
                             c.name, r, o.compare_tokens);
                ok = false;
            }
        }
    }

    std::printf("\nmodel            %s\n", o.model.c_str());
    std::printf("threads          %d\n", o.threads);
    std::printf("request          %zu-token prefix + %d-token distinct suffix, %d greedy tokens; max_model_len %d, "
                "blocks of %d tokens (%.2f MiB each)\n",
                prefix.size(), o.suffix_tokens, o.compare_tokens, n_ctx, block_size,
                static_cast<double>(block_bytes) / 1048576.0);
    std::printf("KV               device %.0f MiB ((c): %.0f MiB, one full-length context), host tier %.2f GiB\n",
                static_cast<double>(*base.offload.kv_cache_memory) / 1048576.0,
                static_cast<double>((static_cast<uint64_t>(n_ctx - 1) + block_size - 1) / block_size * block_bytes) /
                    1048576.0,
                o.swap_space_gib);
    if (!resident_after_drop.empty()) {
        std::printf("store            page cache dropped before each restart (posix_fadvise DONTNEED): %.0f%% of the "
                    "entries' pages still resident at worst\n",
                    100.0 * *std::max_element(resident_after_drop.begin(), resident_after_drop.end()));
    } else {
        std::printf("store            --warm-store: entries read from this kernel's page cache\n");
    }
    const double base_ttft = median([&] {
        std::vector<double> v;
        for (const auto &s : cases[0].samples) v.push_back(s.seconds);
        return v;
    }());
    std::printf("\n%-30s %-30s %14s %22s %9s %18s\n", "case", "prefix from", "TTFT median", "runs (ms)", "speed-up",
                "prefix hits/run");
    for (const auto &c : cases) {
        std::vector<double> v;
        std::string runs;
        for (const auto &s : c.samples) {
            v.push_back(s.seconds);
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%.1f", runs.empty() ? "" : " ", s.seconds * 1e3);
            runs += buf;
        }
        const double m = median(v);
        std::string hits = c.expect_tier < 0 ? "0" : std::to_string(c.samples.front().delta.prefix_hits[c.expect_tier]);
        if (c.expect_tier >= 0) hits += std::string(" in ") + (c.expect_tier == 0 ? "device" : c.expect_tier == 1 ? "host" : "store");
        std::printf("%-30s %-30s %11.1f ms %22s %8.1fx %18s\n", c.name, c.source, m * 1e3, runs.c_str(), base_ttft / m,
                    hits.c_str());
    }
    std::string toks;
    for (int32_t t : cases[0].samples.front().first) toks += " " + std::to_string(t);
    std::printf("\nfirst %d greedy tokens (run 0):%s -- %s in every case and run\n", o.compare_tokens, toks.c_str(),
                ok ? "identical" : "NOT identical");
    if (!ok) {
        std::fprintf(stderr, "bench-serving: error: a check failed (see above)\n");
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) try {
    bench_env env;
    options &o = env.opts;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value for " + a);
            return argv[++i];
        };
        if (a == "--model") o.model = val();
        else if (a == "--threads") o.threads = parse_int(a, val());
        else if (a == "--concurrency") o.concurrency = parse_list(a, val());
        else if (a == "--prompt-tokens") o.prompt_tokens = parse_int(a, val());
        else if (a == "--decode-tokens") o.decode_tokens = parse_int(a, val());
        else if (a == "--repeat") o.repeat = parse_int(a, val());
        else if (a == "--kv-cache-memory") o.kv_cache_memory = parse_size(a, val());
        else if (a == "--max-num-batched-tokens") o.max_num_batched_tokens = parse_int(a, val());
        else if (a == "--preemption") o.preemption = val();
        else if (a == "--prefix-ttft") o.prefix_ttft = true;
        else if (a == "--prefix-tokens") o.prefix_tokens = parse_int(a, val());
        else if (a == "--suffix-tokens") o.suffix_tokens = parse_int(a, val());
        else if (a == "--compare-tokens") o.compare_tokens = parse_int(a, val());
        else if (a == "--max-model-len") o.max_model_len = parse_int(a, val());
        else if (a == "--swap-space") o.swap_space_gib = std::strtod(val().c_str(), nullptr);
        else if (a == "--store-dir") o.store_dir = val();
        else if (a == "--temperature") o.temperature = parse_float(a, val(), 0.0f, 100.0f);
        else if (a == "--top-p") o.top_p = parse_float(a, val(), 0.0f, 1.0f);
        else if (a == "--kv-cache-dtype") {
            if (!strata::bench::kv_type_named(val(), &o.kv_type))
                usage(std::string("--kv-cache-dtype is ") + strata::bench::kv_type_words);
        }
        else if (a == "--warm-store") o.warm_store = true;
        else if (a == "--data-parallel") o.data_parallel = parse_int(a, val());
        else if (a == "--help" || a == "-h") usage("help");
        else usage("unknown option " + a);
    }
    if (o.model.empty()) usage("--model is required");
    if (o.prompt_tokens < 1 || o.decode_tokens < 2 || o.repeat < 1 || o.max_num_batched_tokens < 1)
        usage("--prompt-tokens, --repeat and --max-num-batched-tokens must be positive, --decode-tokens at least 2");
    if (o.prefix_tokens < 16 || o.suffix_tokens < 1 || o.compare_tokens < 2)
        usage("--prefix-tokens must be at least one block (16), --suffix-tokens positive, --compare-tokens at least 2");
    if (o.preemption != "auto" && o.preemption != "swap" && o.preemption != "recompute")
        usage("--preemption is auto, swap or recompute");
    if (o.swap_space_gib < 0) usage("--swap-space must not be negative");
    if (o.prefix_ttft && o.kv_cache_memory) usage("--kv-cache-memory is for the serving runs; --prefix-ttft sizes the KV per case");
    if (o.data_parallel < 1 || (o.prefix_ttft && o.data_parallel != 1))
        usage("--data-parallel is a positive replica count, for the serving runs only");

    const strata::topology::machine machine = strata::topology::discover();
    if (o.threads <= 0) o.threads = machine.cores;
    env.device_table.ints["threads"] = o.threads;
    env.host.struct_size = sizeof env.host;
    env.host.host_abi_major = STRATA_ABI_MAJOR;
    env.host.host_abi_minor = STRATA_ABI_MINOR;
    env.registry = std::make_unique<strata::plugins::registry>(&env.host);
    const fs::path exe_dir = boost::dll::program_location().parent_path().string();
    env.registry->load_directory(exe_dir.parent_path() / "plugins");

    return o.prefix_ttft ? run_prefix_ttft(env) : run_serving(env);
} catch (const std::exception &e) {
    std::fprintf(stderr, "bench-serving: error: %s\n", e.what());
    return 1;
}
