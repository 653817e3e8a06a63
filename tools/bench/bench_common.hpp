// Pieces the bench tools share: the machine's read bandwidth (the decode bound's numerator), the bytes one decode
// step reads from the weights (its denominator), and a plugin table built in code.
#pragma once

#include "gguf/gguf_file.hpp"

#include <strata/kv_layout.hpp>
#include <strata/plugin_abi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace strata::bench {

// Sums a slice with several independent accumulators; the compiler vectorises it. Returns the sum so the reads
// cannot be optimised away.
__attribute__((noinline)) inline uint64_t read_slice(const uint64_t *p, size_t n) {
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

// Best-of-5 read bandwidth in bytes/s over a buffer far larger than the caches, with `threads` readers.
inline double measure_read_bandwidth(int threads) {
    const size_t bytes = size_t{1} << 30;
    const size_t n = bytes / sizeof(uint64_t);
    std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
    for (size_t i = 0; i < n; ++i) buf[i] = i;
    double best = 0;
    std::atomic<uint64_t> sink{0};
    for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
            ts.emplace_back([&, t] {
                const size_t per = n / static_cast<size_t>(threads);
                sink += read_slice(buf.get() + per * static_cast<size_t>(t), per);
            });
        }
        for (auto &t : ts) t.join();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, static_cast<double>(bytes) / s);
    }
    if (sink.load() == 42) std::printf(" ");
    return best;
}

// Bytes one decode step reads from the weights: every tensor once, except an untied embedding table (one row per
// token). The same for any batch size: a step reads each weight once for all the sequences it decodes.
inline double decode_weight_bytes(const gguf::file &f) {
    const bool tied = f.find_tensor("output.weight") == nullptr;
    double bytes = 0;
    for (const auto &t : f.tensors()) {
        if (t.name == "token_embd.weight" && !tied) continue;
        bytes += static_cast<double>(t.n_bytes);
    }
    return bytes;
}

// A plugin table with a few keys, as the engine hands it to plugins ([cpu] threads, [nvme] path).
// A greedy request that ignores EOS, so every run generates exactly max_tokens.
inline strata_request greedy_request(const std::vector<int32_t> &prompt, int max_tokens) {
    strata_request req{};
    req.struct_size = sizeof req;
    req.prompt_tokens = prompt.data();
    req.n_prompt_tokens = static_cast<int32_t>(prompt.size());
    req.sampling.struct_size = sizeof req.sampling;
    req.sampling.temperature = 0;
    req.sampling.top_p = 1;
    req.sampling.repetition_penalty = 1;
    req.sampling.max_tokens = max_tokens;
    req.sampling.ignore_eos = 1;
    return req;
}

// --kv-cache-dtype's value as a strata_kv_type (the runtime's spellings that both bench tools take); false for
// another word.
inline bool kv_type_named(const std::string &t, uint32_t *type) {
    if (t == "float32" || t == "f32" || t == "auto") *type = STRATA_KV_F32;
    else if (t == "float16" || t == "f16") *type = STRATA_KV_F16;
    else if (t == "bfloat16" || t == "bf16") *type = STRATA_KV_BF16;
    else if (t == "fp8" || t == "fp8_e4m3") *type = STRATA_KV_FP8_E4M3;
    else if (t == "fp8_e5m2") *type = STRATA_KV_FP8_E5M2;
    else if (t == "q8_0") *type = STRATA_KV_Q8_0;
    else return false;
    return true;
}
inline constexpr const char *kv_type_words = "float32, float16, bfloat16, fp8 (fp8_e4m3), fp8_e5m2 or q8_0";

struct table_view {
    std::map<std::string, int64_t> ints;
    std::map<std::string, std::string> strings;
    strata_config_view view{};
    table_view() {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            auto &m = static_cast<table_view *>(ctx)->ints;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second;
            return 1;
        };
        view.get_bool = [](void *ctx, const char *key, int32_t *out) -> int32_t {
            auto &m = static_cast<table_view *>(ctx)->ints;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second != 0;
            return 1;
        };
        view.get_string = [](void *ctx, const char *key, const char **out) -> int32_t {
            auto &m = static_cast<table_view *>(ctx)->strings;
            auto it = m.find(key);
            if (it == m.end()) return 0;
            *out = it->second.c_str();
            return 1;
        };
    }
    table_view(const table_view &) = delete; // view.ctx points at this object
    table_view &operator=(const table_view &) = delete;
};

} // namespace strata::bench
