#include "app/engine_config.hpp"

#include "app/generation_config.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/hybrid_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <filesystem>
#include <random>

namespace fs = std::filesystem;

namespace strata::app {

namespace {

// [memory] plus each tier's own table; the views must outlive the engine (they are kept in `views`).
engine::offload_options offload_from(const config::document &doc, const config::schema &s,
                                     std::vector<std::unique_ptr<config::plugin_config_view>> &views) {
    engine::offload_options o;
    o.device_memory = doc.get_bytes("memory", "device_memory", s);
    o.cpu_offload_gb = doc.get_float("memory", "cpu_offload_gb", s);
    if (auto v = doc.get_int("memory", "cpu_offload_layers", s)) o.cpu_offload_layers = static_cast<int32_t>(*v);
    if (auto v = doc.get_int("memory", "n_gpu_layers", s)) o.n_gpu_layers = static_cast<int32_t>(*v);
    o.override_tensor = doc.get_string_list("memory", "override_tensor", s);
    o.n_cpu_moe = static_cast<int32_t>(doc.get_int("memory", "n_cpu_moe", s).value_or(0));
    o.cpu_moe = doc.get_bool("memory", "cpu_moe", s).value_or(false);
    o.enable_cpu_offload = doc.get_bool("memory", "enable_cpu_offload", s).value_or(false);
    o.gpu_memory_utilization = doc.get_float("memory", "gpu_memory_utilization", s);
    o.limit_gpu_memory = doc.get_bytes("memory", "limit_gpu_memory", s);
    o.kv_cache_memory = doc.get_bytes("memory", "kv_cache_memory", s);
    o.prefetch_depth = static_cast<int32_t>(doc.get_int("memory", "prefetch_depth", s).value_or(2));
    if (!doc.get_bool("memory", "enable_cpu_prefetch", s).value_or(true)) {
        if (doc.is_set("memory", "prefetch_depth") && o.prefetch_depth > 0)
            fail("enable_cpu_prefetch = false turns prefetch off, but prefetch_depth is set to {}: set only one",
                 o.prefetch_depth);
        o.prefetch_depth = 0;
    }
    o.tiers = doc.get_string_list("memory", "tiers", s);
    o.stream_weights = doc.get_bool("memory", "stream_weights", s).value_or(false);
    o.io_threads = static_cast<int32_t>(doc.get_int("memory", "io_threads", s).value_or(2));
    o.offload_compute = doc.get_string("memory", "offload_compute", s).value_or("auto");
    engine::parse_offload_compute(o.offload_compute); // a typo fails here, before the model loads
    o.offload_device = doc.get_string("memory", "offload_device", s).value_or("cpu");
    o.op_offload = doc.get_bool("memory", "op_offload", s).value_or(true);
    if (auto v = doc.get_int("memory", "op_offload_min_batch", s)) o.op_offload_min_batch = static_cast<int32_t>(*v);
    o.remeasure = doc.get_bool("memory", "remeasure", s).value_or(false);
    std::vector<std::string> tables = o.tiers;
    // The KV cache's tiers share the instances (and tables) of the weights' tiers.
    if (doc.get_float("memory", "swap_space", s).value_or(4) > 0)
        tables.push_back(doc.get_string("memory", "kv_host_tier", s).value_or("numa_ram"));
    if (doc.get_float("memory", "kv_nvme_space", s).value_or(0) > 0) tables.push_back("nvme");
    for (const std::string &t : tables) {
        if (o.tier_configs.count(t) != 0) continue;
        if (s.find_table(t) == nullptr) continue; // unknown tier: reported with the list of available ones later
        views.push_back(std::make_unique<config::plugin_config_view>(doc, s, t));
        o.tier_configs[t] = views.back()->view();
    }
    return o;
}

// Keys from vLLM and llama.cpp whose mechanism is fixed here: the values that describe what runs are accepted, the
// others are refused with the reason, and the no-ops are said once at start-up.
void check_foreign_keys(const config::document &doc, const config::schema &s) {
    const std::string dtype = doc.get_string("model", "dtype", s).value_or("auto");
    if (dtype != "auto" && dtype != "float" && dtype != "float32")
        fail("--dtype {}: every device computes activations in float32 (the weights keep their file's types); use "
             "--dtype auto or float32", dtype);
    // Data parallel runs its replicas in this process (replica_set.hpp); one prefix store folder takes one writer.
    if (doc.get_int("parallel", "data_parallel_size", s).value_or(1) > 1 &&
        !doc.get_string("memory", "prefix_store_dir", s).value_or("").empty())
        fail("[parallel] data_parallel_size > 1 with [memory] prefix_store_dir: the replicas would share one prefix store "
             "folder, which takes one writer; drop --prefix-store-dir or run one replica per process with a folder each");
    if (doc.get_bool("engine", "enforce_eager", s).value_or(false))
        log::info("runtime", "--enforce-eager: no device captures CUDA graphs yet, so every step runs eagerly anyway");
    if (auto level = doc.get_int("engine", "optimization_level", s))
        log::info("runtime", "-O{}: nothing is compiled or graph-captured yet; every level runs the same kernels", *level);
    const std::string fa = doc.get_string("engine", "flash_attn", s).value_or("auto");
    if (fa != "auto")
        log::info("runtime", "--flash-attn {}: each device runs its one attention kernel (cuda: online softmax, the "
                  "flash-attention form; cpu: exact two-pass softmax), whatever -fa says", fa);
}

// The KV cache's element type from [memory] kv_cache_dtype (vLLM's names) and cache_type_k / cache_type_v
// (llama.cpp's -ctk / -ctv): auto is float32; the 16-bit, FP8 (with scale 1, as vLLM without calibrated scales)
// and q8_0 types run; what the cache cannot store yet is refused.
uint32_t kv_type_from(const config::document &doc, const config::schema &s) {
    const std::string dtype = doc.get_string("memory", "kv_cache_dtype", s).value_or("auto");
    uint32_t type = STRATA_KV_F32;
    if (dtype == "float16" || dtype == "f16" || dtype == "half") type = STRATA_KV_F16;
    else if (dtype == "bfloat16" || dtype == "bf16") type = STRATA_KV_BF16;
    else if (dtype == "fp8" || dtype == "fp8_e4m3") type = STRATA_KV_FP8_E4M3;
    else if (dtype == "fp8_e5m2") type = STRATA_KV_FP8_E5M2;
    else if (dtype == "q8_0") type = STRATA_KV_Q8_0;
    else if (dtype != "auto" && dtype != "float32" && dtype != "f32")
        fail("--kv-cache-dtype {}: the KV cache stores float32, float16, bfloat16, fp8_e4m3, fp8_e5m2 or q8_0 (an {} "
             "cache is not built yet); use --kv-cache-dtype fp8 for a quarter of the bytes per token", dtype, dtype);
    const std::string k = doc.get_string("memory", "cache_type_k", s).value_or("");
    const std::string v = doc.get_string("memory", "cache_type_v", s).value_or("");
    if (k.empty() && v.empty()) return type;
    auto llama_type = [&](const std::string &flag, const std::string &t) -> uint32_t {
        if (t == "f32") return STRATA_KV_F32;
        if (t == "f16") return STRATA_KV_F16;
        if (t == "bf16") return STRATA_KV_BF16;
        if (t == "q8_0") return STRATA_KV_Q8_0;
        fail("--{} {}: the KV cache stores f32, f16, bf16 or q8_0 (a {} cache is not built yet); use q8_0", flag, t, t);
    };
    const uint32_t tk = k.empty() ? type : llama_type("cache-type-k", k);
    const uint32_t tv = v.empty() ? type : llama_type("cache-type-v", v);
    if (tk != tv)
        fail("--cache-type-k {} and --cache-type-v {}: one type holds both K and V in this cache; give both the same "
             "type (or set --kv-cache-dtype)", k.empty() ? dtype : k, v.empty() ? dtype : v);
    if (dtype != "auto" && tk != type)
        fail("--kv-cache-dtype {} and --cache-type-k/-v {}: they name different KV types; set one of them", dtype,
             k.empty() ? v : k);
    return tk;
}

// [parallel] pipeline_layer_partition ("12,20": layers per stage), else vLLM's environment variable
// VLLM_PP_LAYER_PARTITION, one positive number per stage; that they add up to the model's layers is checked against
// the model (pipeline_split.cpp).
std::vector<int32_t> layer_partition_from(const config::document &doc, const config::schema &s) {
    std::string text = doc.get_string("parallel", "pipeline_layer_partition", s).value_or("");
    std::string source = "[parallel] pipeline_layer_partition";
    if (const char *env = std::getenv("VLLM_PP_LAYER_PARTITION"); text.empty() && env != nullptr && *env != '\0') {
        text = env;
        source = "VLLM_PP_LAYER_PARTITION";
    }
    std::vector<int32_t> out;
    if (text.empty()) return out;
    for (size_t at = 0; at <= text.size();) {
        const size_t comma = std::min(text.find(',', at), text.size());
        std::string_view part = std::string_view(text).substr(at, comma - at);
        while (!part.empty() && part.front() == ' ') part.remove_prefix(1); // "12, 20" as vLLM's int() reads it
        while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
        int32_t n = 0;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
        if (part.empty() || ec != std::errc() || end != part.data() + part.size() || n < 1)
            fail("{} = \"{}\": '{}' is not a positive number of layers; write each stage's layers in order, "
                 "separated by commas (e.g. \"12,20\")",
                 source, text, part);
        out.push_back(n);
        at = comma + 1;
    }
    const int64_t stages = doc.get_int("parallel", "pipeline_parallel_size", s).value_or(1);
    if (static_cast<int64_t>(out.size()) != stages)
        fail("{} = \"{}\" gives {} stage{} but pipeline_parallel_size is {}; give one number per stage", source, text,
             out.size(), out.size() == 1 ? "" : "s", stages);
    return out;
}

// [parallel] rank_start_timeout_s, else vLLM's environment variable VLLM_ENGINE_READY_TIMEOUT_S (how long its
// frontend waits for the engine cores to start), else the schema's default.
double rank_start_timeout_from(const config::document &doc, const config::schema &s) {
    if (const char *env = std::getenv("VLLM_ENGINE_READY_TIMEOUT_S");
        !doc.is_set("parallel", "rank_start_timeout_s") && env != nullptr && *env != '\0') {
        double v = 0;
        const std::string_view text(env);
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || !(v > 0))
            fail("VLLM_ENGINE_READY_TIMEOUT_S = \"{}\" is not a positive number of seconds; unset it or set "
                 "[parallel] rank_start_timeout_s (--rank-start-timeout)",
                 text);
        return v;
    }
    return doc.get_float("parallel", "rank_start_timeout_s", s).value_or(600);
}

} // namespace

engine::engine_options engine_options_from(const plugins::registry &registry, const config::document &doc,
                                           const config::schema &s, const std::string &model_argument,
                                           std::vector<std::unique_ptr<config::plugin_config_view>> &views) {
    check_foreign_keys(doc, s);
    engine::engine_options opts;
    // Each plugin reads only its own table; a device's table is named after the plugin that provides it. Every
    // device gets its view, since `auto` may fall back from one device to another.
    for (const std::string &dev : registry.names(STRATA_KIND_DEVICE)) {
        if (s.find_table(dev) == nullptr) continue;
        views.push_back(std::make_unique<config::plugin_config_view>(doc, s, dev));
        opts.device_configs[dev] = views.back()->view();
    }

    if (auto p = doc.get_string("model", "path", s)) {
        fs::path path(*p);
        opts.model_path = (path.is_absolute() ? path : doc.base_dir() / path).lexically_normal().string();
        opts.model_argument = model_argument.empty() ? *p : model_argument;
    }
    opts.quantization = doc.get_string("model", "quantization", s).value_or("auto");
    opts.check_tensors = doc.get_bool("model", "check_tensors", s).value_or(false);
    opts.chat_template = doc.get_string("model", "chat_template", s).value_or("");
    opts.chat_template_base_dir = doc.base_dir().string();
    opts.chat_content_format = doc.get_string("model", "chat_template_content_format", s).value_or("auto");
    opts.file_open.mmap = doc.get_bool("memory", "mmap", s).value_or(true);
    opts.file_open.mlock = doc.get_bool("memory", "mlock", s).value_or(false);
    opts.cpu_kv_cache = doc.get_bool("memory", "cpu_kv_cache", s).value_or(false);
    opts.plan_gpu_memory = doc.get_bytes("memory", "plan_gpu_memory", s);
    opts.max_model_len = static_cast<int32_t>(doc.get_int("model", "max_model_len", s).value_or(0));
    opts.prefill_chunk = static_cast<int32_t>(doc.get_int("engine", "prefill_chunk", s).value_or(512));
    opts.scheduler.max_num_seqs = static_cast<int32_t>(doc.get_int("scheduler", "max_num_seqs", s).value_or(256));
    opts.scheduler.max_waiting_requests = doc.get_int("scheduler", "max_waiting_requests", s).value_or(1024);
    opts.scheduler.max_num_batched_tokens =
        static_cast<int32_t>(doc.get_int("scheduler", "max_num_batched_tokens", s).value_or(2048));
    opts.scheduler.mode = engine::parse_preemption_mode(doc.get_string("scheduler", "preemption_mode", s).value_or("auto"));
    opts.kv.kv_type = kv_type_from(doc, s);
    opts.kv.block_size = static_cast<int32_t>(doc.get_int("scheduler", "block_size", s).value_or(16));
    opts.kv.enable_prefix_caching = doc.get_bool("scheduler", "enable_prefix_caching", s).value_or(true);
    opts.kv.swap_space_gib = doc.get_float("memory", "swap_space", s).value_or(4);
    opts.kv.host_tier = doc.get_string("memory", "kv_host_tier", s).value_or("numa_ram");
    opts.kv.nvme_space_gib = doc.get_float("memory", "kv_nvme_space", s).value_or(0);
    if (auto d = doc.get_string("memory", "prefix_store_dir", s); d && !d->empty()) {
        fs::path path(*d);
        opts.kv.prefix_store_dir = (path.is_absolute() ? path : doc.base_dir() / path).lexically_normal().string();
    }
    opts.kv.prefix_store_gib = doc.get_float("memory", "prefix_store_space", s).value_or(16);
    opts.pipeline_parallel_size =
        static_cast<int32_t>(doc.get_int("parallel", "pipeline_parallel_size", s).value_or(1));
    opts.pipeline_layer_partition = layer_partition_from(doc, s);
    opts.data_parallel_size = static_cast<int32_t>(doc.get_int("parallel", "data_parallel_size", s).value_or(1));
    opts.tensor_parallel_size = static_cast<int32_t>(doc.get_int("parallel", "tensor_parallel_size", s).value_or(1));
    opts.rank_timeout_s = doc.get_float("parallel", "rank_timeout_s", s).value_or(300);
    opts.rank_start_timeout_s = rank_start_timeout_from(doc, s);
    opts.device = doc.get_string("engine", "device", s).value_or("auto");
    opts.offload = offload_from(doc, s, views);
    return opts;
}

strata_sampling_params sampling_from(const config::document &doc, const config::schema &s,
                                     const std::string &model_path) {
    generation_defaults g;
    const std::string gen = doc.get_string("sampling", "generation_config", s).value_or("auto");
    if (gen != "auto" && gen != "vllm") {
        fs::path where(gen);
        g = read_generation_config((where.is_absolute() ? where : doc.base_dir() / where).string());
    } else if (gen == "auto" && !model_path.empty() && fs::is_directory(model_path) &&
               fs::exists(fs::path(model_path) / "generation_config.json")) {
        g = read_generation_config(model_path); // an HF folder's own file, when it has one (GGUF files carry none)
    }
    // A key set in the config or on the command line beats the generation config; that beats the built-in default.
    const auto number = [&](const char *key, std::optional<double> from_file, double fallback) {
        if (doc.is_set("sampling", key) || !from_file) return doc.get_float("sampling", key, s).value_or(fallback);
        return *from_file;
    };
    const auto integer = [&](const char *key, std::optional<int64_t> from_file, int64_t fallback) {
        if (doc.is_set("sampling", key) || !from_file) return doc.get_int("sampling", key, s).value_or(fallback);
        return *from_file;
    };
    strata_sampling_params p{};
    p.struct_size = sizeof p;
    p.temperature = static_cast<float>(number("temperature", g.temperature, 0.8));
    p.top_k = static_cast<int32_t>(std::max<int64_t>(0, integer("top_k", g.top_k, 40))); // HF's -1 = off = 0 here
    p.top_p = static_cast<float>(number("top_p", g.top_p, 0.95));
    p.min_p = static_cast<float>(number("min_p", g.min_p, 0.05));
    p.repetition_penalty = static_cast<float>(number("repetition_penalty", g.repetition_penalty, 1.0));
    p.repetition_last_n = static_cast<int32_t>(doc.get_int("sampling", "repetition_last_n", s).value_or(64));
    const int64_t seed = doc.get_int("sampling", "seed", s).value_or(-1);
    p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
    p.max_tokens = static_cast<int32_t>(integer("max_tokens", g.max_new_tokens, 256));
    p.ignore_eos = doc.get_bool("sampling", "ignore_eos", s).value_or(false) ? 1 : 0;
    return p;
}

} // namespace strata::app
