#include "app/core_schema.hpp"

namespace strata::app {

namespace {

config::key_spec key(std::string name, strata_config_type type, std::optional<std::string> def, std::string help,
                     std::string flag = "", double lo = 0, double hi = 0, std::string choices = "") {
    config::key_spec k;
    k.name = std::move(name);
    k.type = type;
    k.default_value = std::move(def);
    k.help = std::move(help);
    k.flag = std::move(flag);
    k.min_value = lo;
    k.max_value = hi;
    k.choices = std::move(choices);
    return k;
}

} // namespace

config::schema core_schema() {
    using namespace std::string_literals;
    config::schema s;
    s.add_table({"model", "the model to serve", {
        key("path", STRATA_CONFIG_STRING, std::nullopt,
            "a GGUF model file, or a Hugging Face checkpoint folder (config.json, safetensors shards, tokenizer.json); "
            "relative paths in a config file resolve against the file's folder", "--model|-m"),
        key("max_model_len", STRATA_CONFIG_INT, "0",
            "context length in tokens (prompt + output); 0 = the model's trained context",
            "--max-model-len|-c|--ctx-size", 0, 1 << 24),
        key("quantization", STRATA_CONFIG_STRING, "\"auto\"",
            "the weights' format as vLLM names it: auto = what the file holds; gguf checks the file is GGUF; gptq, "
            "awq, fp8 and the other HF quantization formats are refused with the reason (HF folders are read in "
            "BF16, F16 and F32 so far)",
            "--quantization|-q"),
        key("check_tensors", STRATA_CONFIG_BOOL, "false",
            "before running, check every weight block for a NaN or infinite scale or value and refuse a damaged file "
            "naming the tensor (llama.cpp --check-tensors; reads the whole file once)",
            "--check-tensors"),
        key("dtype", STRATA_CONFIG_STRING, "\"auto\"",
            "activation dtype (vLLM --dtype): every device computes activations in float32, so auto, float and "
            "float32 run and half/float16/bfloat16 are refused; weights keep their file's types", "--dtype", 0, 0,
            "auto|half|float16|bfloat16|float|float32"),
        key("chat_template", STRATA_CONFIG_STRING, "\"\"",
            "chat template for chat requests (vLLM --chat-template): empty = the model's own (GGUF "
            "tokenizer.chat_template; the plain built-in when it has none); a built-in name (chatml, llama3, llama2, "
            "mistral, phi3, gemma, plain); a Jinja file; or the template text itself", "--chat-template"),
        key("chat_template_content_format", STRATA_CONFIG_STRING, "\"auto\"",
            "how message content reaches the template (vLLM's flag): string = text parts joined, openai = a list of "
            "parts, auto = openai when the template walks content parts", "--chat-template-content-format", 0, 0,
            "auto|string|openai"),
    }});
    s.add_table({"engine", "what runs the model and how users reach it", {
        key("device", STRATA_CONFIG_STRING, "\"auto\"", "compute device plugin, or auto for the best available",
            "--device"),
        key("frontend", STRATA_CONFIG_STRING, "\"cli\"", "frontend plugin: cli (or any loaded frontend)",
            "--frontend"),
        key("prefill_chunk", STRATA_CONFIG_INT, "512",
            "most prompt tokens of one sequence per step (chunked prefill; llama.cpp's physical batch -ub)",
            "--prefill-chunk|-ub|--ubatch-size", 1, 65536),
        key("enforce_eager", STRATA_CONFIG_BOOL, "false",
            "vLLM --enforce-eager: no device captures CUDA graphs yet, so every step already runs eagerly and this "
            "changes nothing (said at start-up)", "--enforce-eager"),
        key("optimization_level", STRATA_CONFIG_INT, std::nullopt,
            "vLLM -O0..-O3 (compilation level): nothing is compiled or graph-captured yet, so every level runs the "
            "same kernels (said at start-up)", "--optimization-level|-O", 0, 3),
        key("flash_attn", STRATA_CONFIG_STRING, "\"auto\"",
            "llama.cpp -fa: each device has one attention kernel (cuda: online softmax, the flash-attention form; "
            "cpu: exact two-pass softmax) and uses it whatever this says (said at start-up when not auto)",
            "--flash-attn|-fa", 0, 0, "on|off|auto"),
        key("log_level", STRATA_CONFIG_STRING, "\"info\"", "stderr log level", "--log-level", 0, 0,
            "debug|info|warn|error"),
        key("numa_bind", STRATA_CONFIG_INT, "-1",
            "bind the process's compute threads to this NUMA node (numa_ram's nodes = \"auto\" follows); -1 = none",
            "--numa-bind", -1, 4095),
    }});
    s.add_table({"plugins", "where plugins are found", {
        key("paths", STRATA_CONFIG_STRING_LIST, "[]",
            "extra plugin folders (searched before the built-in ones); relative to the config file"),
    }});
    s.add_table({"sampling", "default sampling for every request", {
        key("temperature", STRATA_CONFIG_FLOAT, "0.8", "0 = greedy", "--temperature|--temp", 0, 100),
        key("top_k", STRATA_CONFIG_INT, "40", "keep the k most likely tokens (0 = off)", "--top-k", 0, 1 << 24),
        key("top_p", STRATA_CONFIG_FLOAT, "0.95", "nucleus sampling mass (1 = off)", "--top-p", 0, 1),
        key("min_p", STRATA_CONFIG_FLOAT, "0.05", "drop tokens below min_p x the top probability (0 = off)",
            "--min-p", 0, 1),
        key("repetition_penalty", STRATA_CONFIG_FLOAT, "1.0", "penalise recently seen tokens (1 = off)",
            "--repetition-penalty|--repeat-penalty", 0, 10),
        key("repetition_last_n", STRATA_CONFIG_INT, "64", "how many recent tokens the penalty looks at",
            "--repeat-last-n", 0, 1 << 24),
        key("seed", STRATA_CONFIG_INT, "-1", "random seed (-1 = a random seed per run)", "--seed|-s", -1,
            9.2e18),
        key("max_tokens", STRATA_CONFIG_INT, "256", "tokens to generate per request",
            "--max-tokens|-n|--n-predict", 1, 1 << 24),
        key("generation_config", STRATA_CONFIG_STRING, "\"auto\"",
            "vLLM --generation-config: a folder (or file) with generation_config.json whose temperature, top_k, "
            "top_p, min_p, repetition_penalty and max_new_tokens become the defaults of keys not set here; auto = "
            "the model's (a GGUF has none); vllm = Strata's own defaults", "--generation-config"),
        key("ignore_eos", STRATA_CONFIG_BOOL, "false", "keep generating past the end-of-sequence token",
            "--ignore-eos"),
    }});
    s.add_table({"memory", "placement of weights across the device and memory tiers (one planner for every byte)", {
        key("device_memory", STRATA_CONFIG_BYTES, std::nullopt,
            "RAM the CPU device keeps resident (default: all available RAM)", "--device-memory"),
        key("plan_gpu_memory", STRATA_CONFIG_BYTES, std::nullopt,
            "runtime plan only: plan for a GPU of this much memory (e.g. 24GiB) instead of the device here, to see "
            "what a model needs on a card you do not have (budget: --gpu-memory-utilization of it)",
            "--plan-gpu-memory"),
        key("cpu_offload_gb", STRATA_CONFIG_FLOAT, std::nullopt,
            "GiB of weights kept in host tiers (whole layers, from the last)", "--cpu-offload-gb", 0, 1e6),
        key("cpu_offload_layers", STRATA_CONFIG_INT, std::nullopt,
            "layers kept off the device, from the last (llama.cpp: n_layer - ngl)", "--cpu-offload-layers", 0, 1e6),
        key("n_gpu_layers", STRATA_CONFIG_INT, std::nullopt,
            "llama.cpp -ngl: layers kept on the device, from the first (-1 or n_layer or more = all); the rest are "
            "offloaded as cpu_offload_layers = n_layer - n_gpu_layers", "--n-gpu-layers|-ngl|--gpu-layers", -1, 1e6),
        key("enable_cpu_offload", STRATA_CONFIG_BOOL, "false", "offload whatever does not fit the device budget",
            "--enable-cpu-offload|--cpu-offload"),
        key("kv_cache_dtype", STRATA_CONFIG_STRING, "\"auto\"",
            "KV cache element type (vLLM --kv-cache-dtype) on the device and every KV tier: auto = float32 (exact); "
            "float16/f16/half and bfloat16/bf16 halve the bytes per token; fp8 (= fp8_e4m3, largest value 448) and "
            "fp8_e5m2 (57344) quarter them, scale 1, values beyond saturate; q8_0 (llama.cpp's, groups of 32 "
            "values with a half scale: 34 bytes per 32, head_dim a multiple of 32) nearly quarters them", "--kv-cache-dtype", 0, 0,
            "auto|float32|f32|float16|f16|half|bfloat16|bf16|fp8|fp8_e4m3|fp8_e5m2|q8_0"),
        key("cache_type_k", STRATA_CONFIG_STRING, "\"\"",
            "KV cache type for K (llama.cpp -ctk): empty = kv_cache_dtype; f32, f16, bf16 and q8_0 run (the same "
            "type as cache_type_v: one type holds K and V); q4_0, q4_1, iq4_nl, q5_0 and q5_1 are refused",
            "--cache-type-k|-ctk", 0, 0, "|f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1"),
        key("cache_type_v", STRATA_CONFIG_STRING, "\"\"",
            "KV cache type for V (llama.cpp -ctv): as cache_type_k", "--cache-type-v|-ctv", 0, 0,
            "|f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1"),
        key("cpu_kv_cache", STRATA_CONFIG_BOOL, "false",
            "keep the KV cache in host RAM: what the cpu device always does; a GPU device refuses it (its KV lives in "
            "device memory, host RAM holds swap_space)", "--cpu-kv-cache"),
        key("gpu_memory_utilization", STRATA_CONFIG_FLOAT, std::nullopt,
            "fraction of GPU memory to use (GPU devices; noted and unused on the CPU device)",
            "--gpu-memory-utilization", 0, 1),
        key("limit_gpu_memory", STRATA_CONFIG_BYTES, std::nullopt, "absolute GPU memory budget (GPU devices)",
            "--limit-gpu-memory"),
        key("kv_cache_memory", STRATA_CONFIG_BYTES, std::nullopt, "bytes of device memory for the KV cache",
            "--kv-cache-memory"),
        key("prefetch_depth", STRATA_CONFIG_INT, "2", "streamed layers read ahead of compute (0 = none)",
            "--prefetch-depth", 0, 64),
        key("enable_cpu_prefetch", STRATA_CONFIG_BOOL, "true",
            "read streamed layers ahead of compute (prefetch_depth of them); false = prefetch_depth 0",
            "--enable-cpu-prefetch"),
        key("mmap", STRATA_CONFIG_BOOL, "true",
            "map the model file (llama.cpp --no-mmap reads it into memory instead, with progress)", "--mmap"),
        key("mlock", STRATA_CONFIG_BOOL, "false",
            "lock the model's pages in RAM so the OS cannot page them out (llama.cpp --mlock; needs ulimit -l)",
            "--mlock"),
        key("override_tensor", STRATA_CONFIG_STRING_LIST, "[]",
            "llama.cpp -ot PATTERN=TARGET: tensors whose name matches the regex live there whatever their layer "
            "(TARGET: device, a tier in tiers, or llama.cpp's CPU = host RAM / CUDA0 = the GPU); the first match "
            "wins; repeat -ot or separate items with commas", "--override-tensor|-ot"),
        key("n_cpu_moe", STRATA_CONFIG_INT, "0",
            "llama.cpp --n-cpu-moe N: the routed experts of the first N layers stay in host RAM (-ot ...=CPU after "
            "your own -ot items), where the CPU computes them while the rest of each layer runs on the GPU",
            "--n-cpu-moe|-ncmoe", 0, 1e6),
        key("cpu_moe", STRATA_CONFIG_BOOL, "false",
            "llama.cpp --cpu-moe: every layer's routed experts stay in host RAM (as --n-cpu-moe with all layers)",
            "--cpu-moe|-cmoe"),
        key("tiers", STRATA_CONFIG_STRING_LIST, "[\"numa_ram\"]",
            "tier plugins offloaded weights may use; the fastest measured is filled first", "--tiers"),
        key("stream_weights", STRATA_CONFIG_BOOL, "false",
            "copy offloaded layers into a staging ring ahead of use even from RAM tiers the CPU could read in place",
            "--stream-weights"),
        key("offload_compute", STRATA_CONFIG_STRING, "\"auto\"",
            "on a GPU, where offloaded layers compute: \"device\" streams them over the link, \"cpu\" computes them "
            "on the CPU where they live (llama.cpp -ngl), \"auto\" measures which is faster", "--offload-compute"),
        key("offload_device", STRATA_CONFIG_STRING, "\"cpu\"",
            "device plugin that computes offloaded layers where they live (offload_compute)", "--offload-device"),
        key("op_offload", STRATA_CONFIG_BOOL, "true",
            "with layers computed on the CPU, stream them to the GPU for batches of op_offload_min_batch+ tokens "
            "(llama.cpp's --no-op-offload turns it off)", "--op-offload"),
        key("op_offload_min_batch", STRATA_CONFIG_INT, std::nullopt,
            "tokens per step from which CPU-computed layers stream to the GPU (default: from the measured link and "
            "CPU speed)", "--op-offload-min-batch", 1, 65536),
        key("io_threads", STRATA_CONFIG_INT, "2", "threads reading streamed layers from their tiers", "--io-threads",
            1, 64),
        key("remeasure", STRATA_CONFIG_BOOL, "false", "measure tier bandwidths again instead of using the cache",
            "--remeasure"),
        key("swap_space", STRATA_CONFIG_FLOAT, "4",
            "GiB of host RAM (in kv_host_tier) for KV blocks of preempted sequences, of contexts larger than the device "
            "KV, and of demoted prefixes (0 = none)", "--swap-space", 0, 1e6),
        key("kv_host_tier", STRATA_CONFIG_STRING, "\"numa_ram\"", "tier plugin holding the swap_space KV blocks",
            "--kv-host-tier"),
        key("kv_nvme_space", STRATA_CONFIG_FLOAT, "0",
            "GiB of the nvme tier ([nvme] path) for swapped KV blocks once swap_space is full (0 = none)",
            "--kv-nvme-space", 0, 1e6),
        key("prefix_store_dir", STRATA_CONFIG_STRING, "\"\"",
            "folder of the persistent prefix-cache store on fast disk; prefixes demoted past the host tier, and all "
            "cached ones at exit, are kept there across restarts (\"\" = none)", "--prefix-store-dir"),
        key("prefix_store_space", STRATA_CONFIG_FLOAT, "16", "GiB the prefix store may use", "--prefix-store-space", 0,
            1e6),
    }});
    s.add_table({"scheduler", "continuous batching and the paged KV cache", {
        key("block_size", STRATA_CONFIG_INT, "16", "tokens per KV block", "--block-size", 1, 4096),
        key("max_num_seqs", STRATA_CONFIG_INT, "256", "most sequences in one step (llama.cpp -np: parallel slots)",
            "--max-num-seqs|-np|--parallel", 1, 65536),
        key("max_waiting_requests", STRATA_CONFIG_INT, "1024",
            "most requests queued but not running; more are refused as busy (HTTP 503 with Retry-After)",
            "--max-waiting-requests", 1, 1 << 20),
        key("max_num_batched_tokens", STRATA_CONFIG_INT, "2048",
            "most tokens in one step (decode tokens plus prefill chunks; llama.cpp's logical batch -b)",
            "--max-num-batched-tokens|-b|--batch-size", 1, 1 << 20),
        key("preemption_mode", STRATA_CONFIG_STRING, "\"auto\"",
            "when KV runs out: swap the newest sequence's blocks to the host tier, recompute them later, or auto "
            "(cheaper of the two by measured swap bandwidth and prefill speed)", "--preemption-mode", 0, 0,
            "swap|recompute|auto"),
        key("enable_prefix_caching", STRATA_CONFIG_BOOL, "true",
            "reuse the KV of shared prompt prefixes (full blocks), across tiers", "--enable-prefix-caching"),
    }});
    s.add_table({"parallel", "splitting one model over several devices or processes (vLLM's parallel sizes)", {
        key("tensor_parallel_size", STRATA_CONFIG_INT, "1",
            "ranks each layer is split over (Megatron's split: each holds its share of the attention heads, KV heads "
            "and feed-forward columns and computes every step at the same time, the partial sums added after the "
            "attention output and the feed-forward); on the CPU device, its threads divided among the ranks, in this "
            "process or under mpirun a process each (mpirun -np N)",
            "--tensor-parallel-size|-tp", 1, 4096),
        key("pipeline_parallel_size", STRATA_CONFIG_INT, "1",
            "stages the layers are split into, one after another each step: each with its own weights, KV and "
            "memory plan, on a device of its own where the device has memory of its own (CUDA: a GPU each), else on "
            "shares of one (the CPU: its RAM divided); under mpirun each stage is a process (mpirun -np N)",
            "--pipeline-parallel-size|-pp", 1, 4096),
        key("pipeline_layer_partition", STRATA_CONFIG_STRING, "\"\"",
            "layers per pipeline stage, comma-separated, in order (e.g. \"12,20\"); empty: vLLM's environment "
            "variable VLLM_PP_LAYER_PARTITION when set, else balanced by bytes", "--pipeline-layer-partition"),
        key("data_parallel_size", STRATA_CONFIG_INT, "1",
            "replicas of the whole model in this process, each on its share of the device (CPU: threads and cores "
            "divided; CUDA: a GPU each), requests to the least loaded", "--data-parallel-size|-dp", 1, 4096),
        key("rank_timeout_s", STRATA_CONFIG_FLOAT, "300",
            "ranks that are processes (mpirun): the longest each rank's part of a step, a message to a rank, its "
            "answer or its partial sums may take before it counts as hung or dead; the requests in flight then fail with the "
            "reason and every rank exits (vLLM's VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS)", "--rank-timeout", 0.001, 86400),
        key("rank_start_timeout_s", STRATA_CONFIG_FLOAT, "600",
            "ranks that are processes (mpirun): the longest rank 0 waits, once its own share is loaded, for each other "
            "rank to load and place its share; past it start-up fails naming the rank and every rank exits (unset: "
            "vLLM's VLLM_ENGINE_READY_TIMEOUT_S when set); start-up says every 30 s which rank it waits for",
            "--rank-start-timeout", 0.001, 86400),
    }});
    return s;
}

} // namespace strata::app
