// End-to-end tests of the `runtime` executable: the CLI frontend's text and JSON modes, subcommands, and the
// errors users see for bad configs and flags. Each test runs the real binary with the real plugins.
#include "app/core_schema.hpp"
#include "made_model.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <sys/wait.h>

namespace {

namespace fs = std::filesystem;

struct run_result {
    int exit_code;
    std::string out; // stdout only (stderr goes to a file)
    std::string err;
};

std::string read_file(const fs::path &p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `runtime ARGS` from the source dir with stdin from /dev/null (not a terminal: no interactive loop).
// Tests keep the measured-bandwidth cache inside the build tree, away from the user's ~/.cache. A generation whose
// flags size neither the KV cache nor the device gets a 16 MiB KV cache (13k tokens of stories260K): start-up touches
// the whole KV pool, and the CPU default of 1 GiB costs a second per run (several under the sanitizers).
run_result run(const std::string &args, const std::string &env = "XDG_CACHE_HOME=" STRATA_BINARY_DIR "/test-xdg-default") {
    const fs::path err = fs::temp_directory_path() / ("strata_cli_err_" + std::to_string(::getpid()));
    const bool sized = args.find("--kv-cache-memory") != std::string::npos || args.find("--device-memory") != std::string::npos;
    const bool generates = args.find("--prompt") != std::string::npos && args.rfind("plan ", 0) != 0;
    const std::string kv = generates && !sized ? " --kv-cache-memory 16MiB" : "";
    const std::string cmd = "cd " STRATA_SOURCE_DIR " && " + env + " " STRATA_BINARY_DIR "/bin/runtime " + args + kv +
                            " </dev/null 2>" + err.string();
    run_result r{};
    FILE *p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return {-1, "", "popen failed"};
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = read_file(err);
    fs::remove(err);
    return r;
}

fs::path write_config(const std::string &name, const std::string &text) {
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-configs";
    fs::create_directories(dir);
    const fs::path p = dir / name;
    std::ofstream(p) << text;
    return p;
}

const std::string k_model = std::string(STRATA_SHARED_DIR) + "/models/stories260K-f32.gguf";

TEST(RuntimeCli, DemoConfigPrintsTheReferenceStory) {
    run_result r = run("--config configs/cpu_offload.toml");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(", there was a little girl named Lily. She loved to play outside in the park.", 0), 0u)
        << r.out;
}

TEST(RuntimeCli, JsonOutputHasTokenIdsTextFinishReasonAndTimings) {
    run_result r = run("--model " + k_model + " --prompt \"Once upon a time\" --temperature 0 --max-tokens 12 --output json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_tokens"], nlohmann::json({1, 403, 407, 261, 378}));
    EXPECT_EQ(j["completion_tokens"].size(), 12u);
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_EQ(j["text"].get<std::string>().rfind(", there was a little girl", 0), 0u) << j["text"];
    EXPECT_GT(j["timings"]["decode_tokens_per_second"].get<double>(), 0.0);
    EXPECT_GT(j["timings"]["prefill_tokens_per_second"].get<double>(), 0.0);
}

TEST(RuntimeCli, SameSeedSameTextDifferentSeedDifferentText) {
    const std::string base = "--model " + k_model + " --prompt \"Lily\" --temperature 1.0 --max-tokens 40 --output json";
    run_result a = run(base + " --seed 1"), b = run(base + " --seed 1"), c = run(base + " --seed 2");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto ta = nlohmann::json::parse(a.out)["completion_tokens"];
    EXPECT_EQ(ta, nlohmann::json::parse(b.out)["completion_tokens"]);
    EXPECT_NE(ta, nlohmann::json::parse(c.out)["completion_tokens"]);
}

TEST(RuntimeCli, EmptyPromptWithoutTerminalGeneratesFromBos) {
    run_result r = run("--model " + k_model + " --temperature 0 --max-tokens 4 --output json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_tokens"], nlohmann::json({1}));
    EXPECT_EQ(j["text"], "Once upon a time");
}

TEST(RuntimeCli, UnknownKeyNamesFileLineAndClosestKey) {
    fs::path cfg = write_config("typo.toml", "[model]\npath = \"x.gguf\"\n\n[sampling]\ntemprature = 0.5\n");
    run_result r = run("--config " + cfg.string());
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("typo.toml:5"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("did you mean 'temperature'"), std::string::npos) << r.err;
}

TEST(RuntimeCli, PluginTableKeysAreValidatedToo) {
    fs::path cfg = write_config("cpu.toml", "[cpu]\nthreds = 2\n");
    run_result r = run("--config " + cfg.string() + " --model " + k_model);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("did you mean 'threads'"), std::string::npos) << r.err;
}

TEST(RuntimeCli, AnUnusableDeviceIsAnErrorByNameAndSkippedWithOneWarningUnderAuto) {
    if (!fs::exists(fs::path(STRATA_PLUGIN_DIR) / "libstrata_cuda.so")) GTEST_SKIP() << "the cuda plugin is not built here";
    run_result r = run("--model " + k_model + " --device cuda --prompt Lily --max-tokens 2");
    if (r.exit_code == 0) GTEST_SKIP() << "a usable GPU is present: nothing to fall back from";
    EXPECT_NE(r.err.find("device 'cuda' cannot run on this machine: cuda create:"), std::string::npos) << r.err;
    // `plan` for it is the same error, not a plan made up from host RAM.
    r = run("plan --model " + k_model + " --device cuda");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("device 'cuda' cannot run on this machine: cuda create:"), std::string::npos) << r.err;
    r = run("--model " + k_model + " --device auto --prompt Lily --temperature 0 --max-tokens 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("device = \"auto\": using 'cpu'; skipped 'cuda' (cuda create:"), std::string::npos) << r.err;
}

TEST(RuntimeCli, SchedulerKeysAreCheckedAndReachTheEngine) {
    run_result r = run("--model " + k_model + " --preemption-mode sometimes");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("swap|recompute|auto"), std::string::npos) << r.err;
    fs::path cfg = write_config("kv.toml", "[scheduler]\nblock_size = 0\n");
    r = run("--config " + cfg.string() + " --model " + k_model);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("kv.toml:2"), std::string::npos) << r.err;
    // Accepted values show up in the KV table printed at start-up.
    r = run("--model " + k_model + " --max-waiting-requests 0");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("max_waiting_requests"), std::string::npos) << r.err;
    r = run("--model " + k_model + " --prompt Lily --temperature 0 --max-tokens 4 --block-size 8 --max-num-seqs 3 "
            "--max-num-batched-tokens 100 --preemption-mode swap --no-enable-prefix-caching --swap-space 0.01 "
            "--max-waiting-requests 7");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("max_waiting_requests 7"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("blocks of 8 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("prefix caching off"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("max_num_seqs 3, max_num_batched_tokens 100"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("preemption swap"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("prefill_chunk 512 exceeds max_num_batched_tokens 100: prompts are prefilled 100 tokens a step"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("tier 'numa_ram' (swap_space)"), std::string::npos) << r.err;
    // The KV placement flags reach the pools: device KV size, host tier, NVMe swap (with the nvme tier's path), and a
    // prefix store whose folder in a config file is relative to that file.
    const fs::path nvme = fs::path(STRATA_BINARY_DIR) / "test-cli-kv-nvme.bin";
    cfg = write_config("kv-store.toml", "[memory]\nprefix_store_dir = \"kv-store\"\n");
    fs::remove_all(cfg.parent_path() / "kv-store");
    r = run("--config " + cfg.string() + " --model " + k_model + " --prompt Lily --temperature 0 --max-tokens 4 "
            "--kv-cache-memory 8MiB --kv-host-tier numa_ram --swap-space 0.01 --kv-nvme-space 0.01 --set nvme.path=" +
            nvme.string() + " --prefix-store-space 0.01");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("device          409         6544      8.0 MiB  device 'cpu' (kv_cache_memory)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tier 'numa_ram' (swap_space)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tier 'nvme' (kv_nvme_space)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("prefix store " + (cfg.parent_path() / "kv-store").string()), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_directory(cfg.parent_path() / "kv-store")) << "the store folder is made next to the config";
}

TEST(RuntimeCli, StartupPrintsTheMemoryPlanAndOffloadLine) {
    run_result r = run("--model " + k_model + " --prompt Lily --temperature 0 --max-tokens 4 --cpu-offload-layers 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("Memory plan for the cpu device"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("layers 2-4"), std::string::npos) << r.err;
    // Three of stories260K's layers are a few hundred KiB: the line says so in KiB, not as "0.00 GiB".
    EXPECT_TRUE(std::regex_search(r.err, std::regex("Using CPU offload with [1-9][0-9]*\\.[0-9]{2} KiB\n"))) << r.err;
}

TEST(RuntimeCli, PlanSubcommandPrintsWithoutLoadingAndNamesWhatFits) {
    run_result r = run("plan --config configs/cpu_offload.toml");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Memory plan"), std::string::npos) << r.out;
    r = run("plan --config configs/cpu_offload.toml --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["fits"].get<bool>());
    EXPECT_EQ(j["offloaded_layers"].get<int>(), 3);
    EXPECT_EQ(j["kv"]["block_size"].get<int>(), 16);
    EXPECT_EQ(j["scheduler"]["max_num_seqs"].get<int>(), 64);
    // The KV and scheduler keys show in the plan without loading the model.
    r = run("plan --config configs/cpu_offload.toml --block-size 8 --swap-space 2 --max-num-seqs 3 "
            "--preemption-mode recompute --prefix-store-dir /tmp/strata-plan-store");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("KV blocks of 8 tokens"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("host tier 2 GiB in 'numa_ram'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("prefix store /tmp/strata-plan-store"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("max_num_seqs 3,"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("preemption recompute"), std::string::npos) << r.out;
    // A context that cannot fit: exit 1, and the plan names the largest max_model_len that fits and the knob.
    // (--swap-space 0: KV kept in the host tier would otherwise let one long context spill out of the device.)
    r = run("plan --model " + k_model + " --device-memory 16MiB --max-model-len 4000 --cpu-offload-layers 0 --swap-space 0");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("largest max_model_len"), std::string::npos) << r.out;
}

// The placement flags reach the planner: `plan --json` shows each one's effect without loading the model.
TEST(RuntimeCli, PlacementFlagsShapeThePlan) {
    auto plan = [&](const std::string &flags) {
        run_result r = run("plan --json --model " + k_model + " " + flags);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return nlohmann::json::parse(r.out.empty() ? "{}" : r.out);
    };
    // cpu_offload_gb rounds up to whole layers; stream_weights streams them through a ring of prefetch_depth + 1.
    nlohmann::json j = plan("--cpu-offload-gb 0.0005 --stream-weights --prefetch-depth 3 --prefill-chunk 64");
    EXPECT_EQ(j["offloaded_layers"].get<int>(), 3);
    EXPECT_EQ(j["prefetch_depth"].get<int>(), 3);
    EXPECT_GT(j["staging_ring_bytes"].get<uint64_t>(), 0u);
    for (const auto &p : j["placements"]) {
        if (p["home"] != "device") {
            EXPECT_EQ(p["mode"], "streamed") << p.dump();
        }
    }
    EXPECT_EQ(j["scheduler"]["prefill_chunk"].get<int>(), 64);
    // enable_cpu_offload offloads what the device budget cannot hold: more layers for a smaller budget.
    const std::string small = " --kv-cache-memory 256KiB --max-num-batched-tokens 64 --max-num-seqs 4";
    EXPECT_EQ(plan("--enable-cpu-offload --device-memory 5MiB" + small)["offloaded_layers"].get<int>(), 3);
    EXPECT_EQ(plan("--enable-cpu-offload --device-memory 4700KiB" + small)["offloaded_layers"].get<int>(), 5);
    // GPU knobs on the CPU device are noted, not silently dropped.
    j = plan("--gpu-memory-utilization 0.5 --limit-gpu-memory 1GiB");
    EXPECT_NE(j["notes"].dump().find("gpu_memory_utilization/limit_gpu_memory apply to GPUs"), std::string::npos)
        << j["notes"].dump();
}

// [memory] io_threads reaches the prefetch ring: the start-up line of a streamed run states the ring's thread count,
// from the flag or the config key; the text is the same with any count, and a count out of range is refused.
TEST(RuntimeCli, IoThreadsReachThePrefetchRing) {
    const std::string streamed = "--model " + k_model + " --prompt Lily --temperature 0 --max-tokens 8 "
                                 "--cpu-offload-layers 3 --stream-weights --tiers numa_ram";
    run_result base = run(streamed);
    ASSERT_EQ(base.exit_code, 0) << base.err;
    EXPECT_NE(base.err.find("(prefetch_depth 2) and 2 I/O threads"), std::string::npos) << "the default: " << base.err;
    run_result r = run(streamed + " --io-threads 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("streaming 3 layers through a 3-slot ring"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("and 3 I/O threads"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, base.out);
    const fs::path cfg = write_config("io_threads.toml", "[memory]\nio_threads = 5\n");
    r = run("--config " + cfg.string() + " " + streamed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("and 5 I/O threads"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, base.out);
    r = run(streamed + " --io-threads 0");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("io_threads"), std::string::npos) << r.err;
}

TEST(RuntimeCli, TierBandwidthsAreMeasuredCachedAndRemeasuredOnRequest) {
    const fs::path cache_home = fs::path(STRATA_BINARY_DIR) / "test-xdg-cache";
    fs::remove_all(cache_home);
    const fs::path cache = cache_home / "strata" / "bandwidth.json";
    // Offloading with a cold cache measures the tier and writes the cache.
    run_result r = run("--config configs/cpu_offload.toml --max-tokens 2", "XDG_CACHE_HOME=" + cache_home.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("measuring the read bandwidth of tier 'numa_ram'"), std::string::npos) << r.err;
    ASSERT_TRUE(fs::exists(cache));
    EXPECT_NE(read_file(cache).find("numa_ram"), std::string::npos);
    // A warm cache is used as is; --remeasure measures again.
    r = run("--config configs/cpu_offload.toml --max-tokens 2", "XDG_CACHE_HOME=" + cache_home.string());
    EXPECT_EQ(r.err.find("measuring the read bandwidth"), std::string::npos) << r.err;
    r = run("--config configs/cpu_offload.toml --max-tokens 2 --remeasure", "XDG_CACHE_HOME=" + cache_home.string());
    EXPECT_NE(r.err.find("measuring the read bandwidth of tier 'numa_ram'"), std::string::npos) << r.err;
}

// Hybrid placement from the command line, on the CPU device's separate_memory mode (a stand-in for a GPU): the
// flags reach the engine, the text equals the run without offload, a bad choice is one clear error, and `auto`
// measures the link once and caches it.
TEST(RuntimeCli, OffloadComputeFlagsChooseWhereOffloadedLayersRun) {
    const std::string gpu = "--model " + k_model + " --set cpu.separate_memory=true --prompt Lily --temperature 0 "
                            "--max-tokens 24";
    run_result want = run(gpu);
    ASSERT_EQ(want.exit_code, 0) << want.err;
    run_result r = run(gpu + " --cpu-offload-layers 3 --offload-compute cpu --op-offload-min-batch 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want.out);
    EXPECT_NE(r.err.find("layers 2-4 computed on the CPU where the weights live; batches of 3+ tokens stream them"),
              std::string::npos) << r.err;
    r = run(gpu + " --cpu-offload-layers 3 --offload-compute cpu --no-op-offload");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want.out);
    EXPECT_NE(r.err.find("for every batch (op_offload off)"), std::string::npos) << r.err;
    r = run(gpu + " --cpu-offload-layers 3 --offload-compute device");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want.out);
    EXPECT_EQ(r.err.find("computed on the CPU"), std::string::npos) << r.err;
    // `plan` is start-up up to the plan, hybrid decision included: it shows the layers computed on the CPU too.
    r = run("plan --model " + k_model + " --set cpu.separate_memory=true --cpu-offload-layers 3 --offload-compute cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("| numa_ram | cpu      |"), std::string::npos) << r.out;
    r = run("plan --model " + k_model + " --set cpu.separate_memory=true --cpu-offload-layers 3 --offload-compute device");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("layers 2-4   | numa_ram | streamed"), std::string::npos) << r.out;
    r = run(gpu + " --cpu-offload-layers 3 --offload-compute cpu --offload-device npu");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("offload_device = 'npu' is not a loaded device plugin (available: "), std::string::npos)
        << r.err;
    r = run(gpu + " --cpu-offload-layers 3 --offload-compute gpu");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("offload_compute = 'gpu' is not one of auto, device, cpu"), std::string::npos) << r.err;
    // auto: the link is measured once per machine and cached next to the tiers' bandwidths.
    const fs::path cache_home = fs::path(STRATA_BINARY_DIR) / "test-xdg-hybrid";
    fs::remove_all(cache_home);
    r = run(gpu + " --cpu-offload-layers 3", "XDG_CACHE_HOME=" + cache_home.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want.out);
    EXPECT_NE(r.err.find("measured the link to device 'cpu':"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("offload_compute = auto: one token over layer 2 ("), std::string::npos) << r.err;
    EXPECT_NE(read_file(cache_home / "strata" / "bandwidth.json").find("link:cpu"), std::string::npos);
    r = run(gpu + " --cpu-offload-layers 3", "XDG_CACHE_HOME=" + cache_home.string());
    EXPECT_EQ(r.err.find("measured the link to device 'cpu':"), std::string::npos) << "the cached figure is used: " << r.err;
    EXPECT_NE(r.err.find("note: link to device 'cpu': "), std::string::npos) << "the plan shows the link: " << r.err;
}

// The GPU example config runs anywhere: without a usable GPU, `auto` falls back to the CPU device and the story is
// the reference one.
TEST(RuntimeCli, GpuOffloadConfigRunsAndFallsBackWithoutAGpu) {
    run_result want = run("--config configs/cpu_offload.toml --max-tokens 40");
    ASSERT_EQ(want.exit_code, 0) << want.err;
    run_result r = run("--config configs/gpu_offload.toml --max-tokens 40");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want.out);
    EXPECT_NE(r.err.find("Memory plan for the"), std::string::npos) << r.err;
}

TEST(RuntimeCli, BadPlacementInputIsOneClearError) {
    run_result r = run("--model " + k_model + " --device-memory 100TiB");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("device_memory"), std::string::npos) << r.err;
    r = run("--model " + k_model + " --cpu-offload-layers 2 --tiers nvme --set nvme.path=/nonexistent/dir/w.bin");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("/nonexistent/dir"), std::string::npos) << r.err;
    r = run("--model " + k_model + " --cpu-offload-layers 2 --tiers numa_ram --set numa_ram.nodes=99");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("99"), std::string::npos) << r.err;
    r = run("--model " + k_model + " --cpu-offload-layers 2 --tiers ramdisk");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("ramdisk"), std::string::npos) << r.err;
}

TEST(RuntimeCli, NumaBindPinsToAnExistingNodeAndRefusesAMissingOne) {
    run_result r = run("--model " + k_model + " --prompt Lily --temperature 0 --max-tokens 4 --numa-bind 0 "
                       "--cpu-offload-layers 2 --tiers numa_ram");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("bound to NUMA node 0"), std::string::npos) << r.err;
    r = run("--model " + k_model + " --numa-bind 4095");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("no NUMA node 4095 (nodes: "), std::string::npos) << r.err;
}

TEST(RuntimeCli, UnknownFlagSuggestsTheClosest) {
    run_result r = run("--model " + k_model + " --temprature 0");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--temperature"), std::string::npos) << r.err;
}

TEST(RuntimeCli, SetOverridesTheConfigFile) {
    run_result r = run("--config configs/cpu_offload.toml --set sampling.max_tokens=3 --output json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["completion_tokens"].size(), 3u);
}

TEST(RuntimeCli, MissingOrBrokenModelFileIsAClearError) {
    run_result r = run("--model /nonexistent/model.gguf --prompt x");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
    fs::path bad = write_config("not_a_model.gguf", "this is not a gguf file at all, just text");
    r = run("--model " + bad.string() + " --prompt x");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("not_a_model.gguf"), std::string::npos) << r.err;
}

// vLLM's `--model ./folder`: an HF checkpoint folder runs from the command line as its GGUF does (same text), and
// --quantization names that do not match it are refused with the reason.
TEST(RuntimeCli, HfCheckpointFolderRunsAsItsGgufDoes) {
    const std::string hf = strata::testing::exported_hf("stories-hf", k_model);
    ASSERT_FALSE(hf.empty());
    const std::string args = " --prompt 'Once upon a time' --max-tokens 40 --temperature 0 --kv-cache-memory 16MiB";
    const run_result g = run("--model " + k_model + args);
    const run_result h = run("--model " + hf + args);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    ASSERT_EQ(h.exit_code, 0) << h.err;
    EXPECT_EQ(h.out, g.out);
    EXPECT_NE(h.err.find("model 'stories-hf' (llama)"), std::string::npos) << h.err;
    run_result q = run("--model " + hf + " --quantization awq" + args);
    EXPECT_EQ(q.exit_code, 2);
    EXPECT_NE(q.err.find("--quantization awq"), std::string::npos) << q.err;
    q = run("--model " + hf + " --quantization gguf" + args);
    EXPECT_EQ(q.exit_code, 2);
    EXPECT_NE(q.err.find("not a GGUF file"), std::string::npos) << q.err;
}

// `runtime plan` on a folder holding only config.json and the shard index (a checkpoint not yet downloaded): the
// weights' rows are those of the whole checkpoint, byte for byte.
TEST(RuntimeCli, PlanReadsAnHfFolderHoldingOnlyConfigJsonAndTheIndex) {
    const std::string full =
        strata::testing::exported_hf("stories-hf-bf16-3-shards", k_model, "--shards 3 --dtype bf16");
    ASSERT_FALSE(full.empty());
    const fs::path bare = fs::path(STRATA_BINARY_DIR) / "test-configs" / "hf-config-only";
    fs::remove_all(bare);
    fs::create_directories(bare);
    for (const char *f : {"config.json", "model.safetensors.index.json"}) fs::copy_file(fs::path(full) / f, bare / f);
    auto weight_rows = [](const std::string &out) {
        std::string rows;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);)
            if (line.find('|') != std::string::npos && line.find("total") == std::string::npos &&
                line.find("budget") == std::string::npos)
                rows += line + "\n";
        return rows;
    };
    const run_result a = run("plan --model " + full);
    const run_result b = run("plan --model " + bare.string());
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_NE(weight_rows(a.out).find("layers 0-4"), std::string::npos) << a.out;
    EXPECT_EQ(weight_rows(b.out), weight_rows(a.out));
    EXPECT_NE(b.err.find("planning with the shapes and dtype config.json implies"), std::string::npos) << b.err;
    // Running it needs the weights: one clear error.
    const run_result r = run("--model " + bare.string() + " --prompt x");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is missing"), std::string::npos) << r.err;
}

TEST(RuntimeCli, VocabOnlyGgufIsRefusedWithAReason) {
    run_result r = run("--model " + std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-llama-spm.gguf --prompt x");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
}

TEST(RuntimeCli, PluginsSubcommandListsEveryKind) {
    run_result r = run("plugins");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char *s : {"model_arch", "quant", "device", "frontend", "llama", "q8_0", "cpu", "cli", "MIT"}) {
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
    }
}

TEST(RuntimeCli, TopologySubcommandPrintsTextAndJson) {
    run_result t = run("topology");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("NUMA"), std::string::npos) << t.out;
    run_result j = run("topology --json");
    ASSERT_EQ(j.exit_code, 0) << j.err;
    nlohmann::json parsed = nlohmann::json::parse(j.out);
    EXPECT_GE(parsed["cores"].get<int>(), 1);
}

TEST(RuntimeCli, HelpListsFlagsWithDefaults) {
    run_result r = run("--help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char *s : {"--model", "--max-model-len", "--seed", "--frontend", "--threads", "--prompt", "--temperature"}) {
        EXPECT_NE(r.out.find(s), std::string::npos) << s;
    }
    // Every core key with a flag is listed on one line with its flag and, when it has one, its default.
    const strata::config::schema schema = strata::app::core_schema();
    for (const auto &table : schema.tables()) {
        for (const auto &key : table.keys) {
            if (key.flag.empty()) continue;
            // Flags with a value print "--flag VALUE"; booleans "--flag, --no-flag".
            size_t at = r.out.find(" " + key.flag + " ");
            if (at == std::string::npos) at = r.out.find(" " + key.flag + ",");
            ASSERT_NE(at, std::string::npos) << key.flag << " is not in --help";
            const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
            if (key.default_value) {
                EXPECT_NE(line.find("default " + *key.default_value), std::string::npos) << key.flag << ": " << line;
            }
        }
    }
}

} // namespace

// --- the seeds' commands: vLLM's and llama.cpp's flags, vLLM's YAML --------------------------------------------------

namespace {

std::vector<int> greedy_tokens(const std::string &flags) {
    run_result r = run("--model " + k_model + " --prompt \"Once upon a time\" --temperature 0 --max-tokens 16 --output json " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.err;
    if (r.exit_code != 0) return {};
    return nlohmann::json::parse(r.out)["completion_tokens"].get<std::vector<int>>();
}

nlohmann::json plan_json(const std::string &flags) {
    run_result r = run("plan --json " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

std::string setting(const nlohmann::json &plan, const std::string &key, const char *field = "value") {
    for (const auto &s : plan["settings"])
        if (s["key"] == key) return s[field].get<std::string>();
    return "<not set>";
}

} // namespace

TEST(SeedCommands, LlamaCppFlagsLandOnTheirKeys) {
    const nlohmann::json p = plan_json("-m " + k_model + " -ngl 2 -c 256 -np 4 -b 512 -ub 128 -t 1");
    EXPECT_EQ(p["offloaded_layers"], 3); // n_layer 5 - ngl 2
    EXPECT_EQ(p["max_model_len"], 256);
    EXPECT_EQ(p["scheduler"]["max_num_seqs"], 4);
    EXPECT_EQ(p["scheduler"]["max_num_batched_tokens"], 512);
    EXPECT_EQ(p["scheduler"]["prefill_chunk"], 128);
    EXPECT_EQ(setting(p, "cpu.threads"), "1");
    EXPECT_EQ(setting(p, "cpu.threads", "from"), "-t");
    EXPECT_EQ(setting(p, "memory.n_gpu_layers", "from"), "-ngl");
    EXPECT_EQ(plan_json("-m " + k_model + " -ngl 99")["offloaded_layers"], 0);  // more than n_layer: all on the device
    EXPECT_EQ(plan_json("-m " + k_model + " -ngl -1")["offloaded_layers"], 0);  // -1: all
    EXPECT_EQ(plan_json("-m " + k_model + " -ngl 0")["offloaded_layers"], 5);
    run_result both = run("plan -m " + k_model + " -ngl 2 --cpu-offload-layers 1");
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("both say how many layers leave the device"), std::string::npos) << both.err;
}

// vLLM's --pipeline-parallel-size in one process (#16): the layers split into stages run one after another, each with
// its own weights, KV and plan; the tokens are one stage's. `plan` prints every stage's plan: on the CPU the stages
// share its RAM, on GPUs (--plan-gpu-memory) each stage has a GPU of its own and plans the whole of it.
TEST(SeedCommands, PipelineParallelSizeSplitsTheLayersIntoStagesWithOneStagesTokensAndAPlanEach) {
    const std::vector<int> reference = greedy_tokens("");
    ASSERT_EQ(reference.size(), 16u);
    EXPECT_EQ(greedy_tokens("-pp 2"), reference);
    EXPECT_EQ(greedy_tokens("--pipeline-parallel-size 3 --pipeline-layer-partition 1,1,3"), reference);
    EXPECT_EQ(greedy_tokens("-pp 2 -dp 2 -t 2"), reference);
    // The GPU stand-in: each rank's device emulates a GPU of its own (uploads, copies of the stream between ranks).
    EXPECT_EQ(greedy_tokens("-pp 2 --set cpu.separate_memory=true"), reference);
    EXPECT_EQ(greedy_tokens("--pipeline-parallel-size 2 --pipeline-layer-partition \"4, 1\""), reference);
    // vLLM's VLLM_PP_LAYER_PARTITION is read when the key is not set (and named when it is wrong).
    const std::string xdg = "XDG_CACHE_HOME=" STRATA_BINARY_DIR "/test-xdg-default";
    const nlohmann::json from_env =
        nlohmann::json::parse(run("plan --json --model " + k_model + " -pp 2", xdg + " VLLM_PP_LAYER_PARTITION=4,1").out);
    EXPECT_EQ(from_env["pipeline_ranks"][1]["layer_first"], 4);
    EXPECT_EQ(nlohmann::json::parse(run("plan --json --model " + k_model + " -pp 2 --pipeline-layer-partition 1,4",
                                        xdg + " VLLM_PP_LAYER_PARTITION=4,1")
                                        .out)["pipeline_ranks"][1]["layer_first"],
              1) << "the key wins over the environment";
    const run_result bad_env = run("plan --model " + k_model + " -pp 2", xdg + " VLLM_PP_LAYER_PARTITION=4");
    EXPECT_EQ(bad_env.exit_code, 2);
    EXPECT_NE(bad_env.err.find("VLLM_PP_LAYER_PARTITION = \"4\" gives 1 stage but pipeline_parallel_size is 2"),
              std::string::npos) << bad_env.err;
    // vLLM's VLLM_ENGINE_READY_TIMEOUT_S stands for [parallel] rank_start_timeout_s; a value that is not seconds is
    // refused by name.
    const run_result bad_ready = run("plan --model " + k_model, xdg + " VLLM_ENGINE_READY_TIMEOUT_S=soon");
    EXPECT_EQ(bad_ready.exit_code, 2);
    EXPECT_NE(bad_ready.err.find("VLLM_ENGINE_READY_TIMEOUT_S = \"soon\" is not a positive number of seconds"),
              std::string::npos) << bad_ready.err;
    const nlohmann::json p = plan_json("--model " + k_model + " -pp 3 --pipeline-layer-partition 1,1,3");
    EXPECT_EQ(p["pipeline_parallel_size"], 3);
    ASSERT_EQ(p["pipeline_ranks"].size(), 3u);
    const int firsts[] = {0, 1, 2}, ends[] = {1, 2, 5};
    for (int r = 0; r < 3; ++r) {
        const nlohmann::json &rank = p["pipeline_ranks"][static_cast<size_t>(r)];
        EXPECT_EQ(rank["rank"], r);
        EXPECT_EQ(rank["layer_first"], firsts[r]);
        EXPECT_EQ(rank["layer_end"], ends[r]);
        std::set<std::string> tensors;
        for (const auto &pl : rank["plan"]["placements"]) tensors.insert(pl["tensor"].get<std::string>());
        for (int layer = 0; layer < 5; ++layer)
            EXPECT_EQ(tensors.count("blk." + std::to_string(layer) + ".attn_q.weight"),
                      layer >= firsts[r] && layer < ends[r] ? 1u : 0u) << "rank " << r << ", layer " << layer;
        EXPECT_EQ(tensors.count("token_embd.weight") == 1, r == 0 || r == 2) << "rank " << r << " (tied classifier)";
    }
    EXPECT_EQ(p["placements"], p["pipeline_ranks"][0]["plan"]["placements"]) << "the top level is rank 0's plan";
    EXPECT_FALSE(plan_json("--model " + k_model).contains("pipeline_ranks"));
    // On GPUs each stage plans a GPU of its own: the budget of one GPU, not a share.
    const nlohmann::json gpus = plan_json("--model " + k_model + " -pp 2 --plan-gpu-memory 8GiB");
    ASSERT_EQ(gpus["pipeline_ranks"].size(), 2u);
    const auto one_gpu = plan_json("--model " + k_model + " --plan-gpu-memory 8GiB")["device_budget"].get<uint64_t>();
    for (const auto &rank : gpus["pipeline_ranks"]) EXPECT_EQ(rank["plan"]["device_budget"], one_gpu);
    const run_result table = run("plan --model " + k_model + " -pp 2");
    EXPECT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("pipeline rank 0 of 2: layers [0, "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("pipeline rank 1 of 2: layers ["), std::string::npos) << table.out;
    // Serving says the CPU's stages split memory, not time (a replica's ranks share its half with -dp 2).
    const run_result served = run("--model " + k_model + " --prompt x --max-tokens 2 -pp 2");
    EXPECT_EQ(served.exit_code, 0) << served.err;
    EXPECT_NE(served.err.find("the 2 pipeline ranks share device 'cpu' (each plans 1/2 of its memory) and run one after "
                              "another each step"),
              std::string::npos) << served.err;
    const run_result replicas = run("--model " + k_model + " --prompt x --max-tokens 2 -pp 2 -dp 2 -t 2");
    EXPECT_EQ(replicas.exit_code, 0) << replicas.err;
    EXPECT_NE(replicas.err.find("the 2 pipeline ranks share device 'cpu' (each plans 1/4 of its memory)"),
              std::string::npos) << replicas.err;
}

TEST(SeedCommands, GreedyTokensDoNotChangeWithHowLayersAreOffloadedOrRead) {
    const std::vector<int> reference = greedy_tokens("");
    ASSERT_EQ(reference.size(), 16u);
    EXPECT_EQ(greedy_tokens("-ngl 2"), reference);
    EXPECT_EQ(greedy_tokens("--cpu-offload-layers 3"), reference);
    EXPECT_EQ(greedy_tokens("--cpu-offload-gb 16"), reference);
    EXPECT_EQ(greedy_tokens("-ngl 0 --enable-cpu-prefetch false"), reference);
    EXPECT_EQ(greedy_tokens("--no-mmap"), reference);
    // --mlock needs the locked-memory limit; where it is too low the error says so instead.
    run_result locked = run("--model " + k_model + " --prompt x --max-tokens 2 --mlock");
    if (locked.exit_code != 0) EXPECT_NE(locked.err.find("ulimit -l"), std::string::npos) << locked.err;
    else EXPECT_EQ(greedy_tokens("--mlock"), reference);
}

TEST(SeedCommands, TheSeedsYamlConfigRunsAndShowsEveryKeysEffect) {
    run_result r = run("--config configs/cpu_offload_config.yaml --prompt \"Once upon a time\" --temperature 0 --max-tokens 10");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(", there was a little girl named Lily", 0), 0u) << r.out;
    const nlohmann::json p = plan_json("--config configs/cpu_offload_config.yaml");
    EXPECT_EQ(p["offloaded_layers"], 3);
    EXPECT_EQ(p["max_model_len"], 512);
    EXPECT_EQ(p["kv"]["block_size"], 16);
    EXPECT_EQ(p["kv"]["swap_space_gib"], 4.0);
    EXPECT_EQ(p["prefetch_depth"], 2);
    EXPECT_EQ(setting(p, "memory.enable_cpu_offload"), "true");
    EXPECT_EQ(setting(p, "memory.enable_cpu_offload", "from"), "configs/cpu_offload_config.yaml:6 (cpu_offload)");
    EXPECT_EQ(setting(p, "cpu.threads"), "2");
    EXPECT_EQ(setting(p, "sampling.seed"), "42");
    EXPECT_EQ(setting(p, "model.quantization"), "gguf");
    EXPECT_EQ(setting(p, "memory.gpu_memory_utilization"), "0.9");
    // A flag beats the file.
    EXPECT_EQ(plan_json("--config configs/cpu_offload_config.yaml --cpu-offload-layers 1")["offloaded_layers"], 1);
    // enable_cpu_prefetch: false turns prefetch off.
    const fs::path off = write_config("no_prefetch.yaml", "model: " + k_model + "\ncpu_offload_layers: 2\nenable_cpu_prefetch: false\n");
    EXPECT_EQ(plan_json("--config " + off.string())["prefetch_depth"], 0);
}

TEST(SeedCommands, FlagsForMissingMechanismsAreRefusedWithTheReason) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"-tp 3 -t 3", "head_count 8 is not a multiple of tensor_parallel_size 3"},
        {"-tp 2 --set cpu.separate_memory=true", "needs NCCL's all-reduce, which is not built yet"},
        {"-tp 2 --plan-gpu-memory 24GiB", "tensor-parallel ranks run on the CPU device only so far"},
        {"-pp 6", "pipeline_parallel_size 6 must be between 1 and the model's 5 layers"},
        {"-pp 2 --pipeline-layer-partition 2,x", "pipeline_layer_partition = \"2,x\": 'x' is not a positive number of "
                                                 "layers"},
        {"-pp 2 --pipeline-layer-partition 2,0", "'0' is not a positive number of layers"},
        {"-pp 2 --pipeline-layer-partition 5", "pipeline_layer_partition = \"5\" gives 1 stage but "
                                               "pipeline_parallel_size is 2"},
        {"-pp 2 --pipeline-layer-partition 2,2", "pipeline layer partition of 2 numbers summing to 4: it must give each "
                                                 "of the 2 ranks at least one layer, 5 layers in all"},
        {"-dp 2 -t 2 --prefix-store-dir /tmp/strata-dp-store", "data_parallel_size > 1 with [memory] prefix_store_dir: "
                                                              "the replicas would share one prefix store folder"},
        {"-dp 3 -t 2", "data-parallel replica 0 of 3 could not start"},
        {"--dtype float16", "--dtype float16: every device computes activations in float32"},
        {"--kv-cache-dtype q8_0", "--kv-cache-dtype q8_0: device 'cpu' cannot keep this KV cache: cpu: a q8_0 KV cache "
                                  "keeps heads in groups of 32 values; heads of 8 values are not whole groups"},
        {"--kv-cache-dtype q4_0", "kv_cache_dtype = \"q4_0\" must be one of auto|float32|f32|float16|f16|half|bfloat16|"
                                  "bf16|fp8|fp8_e4m3|fp8_e5m2|q8_0"},
        {"--kv-cache-dtype fp8_inc", "fp8_inc"},
        {"-ctk q8_0", "--cache-type-k q8_0 and --cache-type-v auto: one type holds both K and V in this cache"},
        {"-ctk q4_0 -ctv q4_0", "--cache-type-k q4_0: the KV cache stores f32, f16, bf16 or q8_0"},
        {"-ctk f16 -ctv bf16", "one type holds both K and V in this cache"},
        {"--kv-cache-dtype bf16 -ctk f16 -ctv f16", "they name different KV types"},
        {"-q gptq", "is a GGUF file holding F32 (47 tensors); 'gptq' names a format of Hugging Face checkpoints"},
        {"-ot blk.0=ssd", "override_tensor 'blk.0=ssd': 'ssd' is not device or a configured tier (device, numa_ram)"},
        {"-ot blk.0", "override_tensor 'blk.0': write PATTERN=TARGET"},
        {"-ot blk.0=CUDA0", "CUDA0 names a GPU, but the model runs on the cpu device"},
        {"--generation-config /nonexistent", "--generation-config /nonexistent: cannot read"},
    };
    for (const auto &[flags, message] : cases) {
        run_result r = run("--model " + k_model + " --prompt x --max-tokens 2 " + flags);
        EXPECT_EQ(r.exit_code, 2) << flags;
        EXPECT_NE(r.err.find(message), std::string::npos) << flags << "\n" << r.err;
    }
    // The accepted spellings of what runs here.
    // (The seeds' spellings: --tensor-parallel-size 1, --n-gpu-layers 20, --ctx-size 4096, --cpu-kv-cache.)
    for (const std::string flags : {"--dtype float32", "--kv-cache-dtype auto", "--kv-cache-dtype float16",
                                    "--kv-cache-dtype bf16", "--kv-cache-dtype fp8", "--kv-cache-dtype fp8_e5m2", "-ctk f16 -ctv f16", "-q gguf", "-ctk f32 -ctv f32", "-tp 1",
                                    "--tensor-parallel-size 1", "--n-gpu-layers 20 --ctx-size 4096", "--cpu-kv-cache",
                                    "-dp 2 -t 2", "--data-parallel-size 1", "-tp 2 -t 2", "-tp 4 -t 4"})
        EXPECT_EQ(greedy_tokens(flags).size(), 16u) << flags;
    // Tensor parallel on stories260K (float32): one process's tokens; `plan` shows each rank's share.
    EXPECT_EQ(greedy_tokens("-tp 2 -t 2"), greedy_tokens(""));
    // Two data-parallel replicas of two tensor-parallel ranks each: four device instances of one thread.
    EXPECT_EQ(greedy_tokens("-tp 2 -dp 2 -t 4"), greedy_tokens(""));
    // Tensor-parallel ranks inside pipeline stages (vLLM's -tp 2 -pp 2): the same tokens; `plan` shows each
    // worker's stage and layers.
    EXPECT_EQ(greedy_tokens("-tp 2 -pp 2 -t 2"), greedy_tokens(""));
    EXPECT_EQ(greedy_tokens("-tp 2 -pp 2 -dp 2 -t 4"), greedy_tokens("")) << "two replicas of that grid";
    {
        const nlohmann::json grid = plan_json("--model " + k_model + " -tp 2 -pp 2 -t 2 --pipeline-layer-partition 2,3");
        EXPECT_EQ(grid["tensor_parallel_size"], 2);
        EXPECT_EQ(grid["pipeline_parallel_size"], 2);
        ASSERT_EQ(grid["tensor_parallel_ranks"].size(), 4u);
        for (size_t i = 0; i < 4; ++i) {
            const nlohmann::json &r = grid["tensor_parallel_ranks"][i];
            EXPECT_EQ(r["rank"], static_cast<int>(i / 2)) << i;
            EXPECT_EQ(r["pipeline_rank"], static_cast<int>(i % 2)) << i;
            EXPECT_EQ(r["layer_end"].get<int>() - r["layer_first"].get<int>(), i % 2 == 0 ? 2 : 3) << i;
        }
    }
    {
        const nlohmann::json tp = plan_json("--model " + k_model + " -tp 2 -t 2");
        const nlohmann::json one = plan_json("--model " + k_model);
        EXPECT_EQ(tp["tensor_parallel_size"], 2);
        ASSERT_EQ(tp["tensor_parallel_ranks"].size(), 2u);
        EXPECT_EQ(tp["kv_bytes_per_token"].get<int64_t>() * 2, one["kv_bytes_per_token"].get<int64_t>())
            << "each rank keeps its KV heads";
        // Each rank's plan counts its share of what the ranks exchange through: in one process, half the group's
        // reduced sum and joined logits rows (a row of n_vocab per sequence) each, on top of the whole logits rows
        // every plan counts; so a sequence more adds 1.5 times the activation bytes to a rank's plan that it adds to
        // one process's.
        const auto activations = [](const nlohmann::json &plan) { return plan["device_activation"].get<int64_t>(); };
        const nlohmann::json tp8 = plan_json("--model " + k_model + " -tp 2 -t 2 -np 8");
        const nlohmann::json tp4 = plan_json("--model " + k_model + " -tp 2 -t 2 -np 4");
        const int64_t one_more = activations(plan_json("--model " + k_model + " -np 8")) -
                                 activations(plan_json("--model " + k_model + " -np 4"));
        EXPECT_EQ(one_more, 4 * 4 * 512) << "four sequences more: four float rows of stories260K's 512 tokens";
        for (size_t r = 0; r < 2; ++r)
            EXPECT_EQ(2 * (activations(tp8["tensor_parallel_ranks"][r]["plan"]) -
                           activations(tp4["tensor_parallel_ranks"][r]["plan"])),
                      3 * one_more) << "rank " << r;
    }
    // Data parallel: `plan` shows one replica's plan and says how many there are (that a replica plans half the RAM
    // is DataParallel.*'s, with the RAM pinned: the free RAM two processes read moves under parallel tests).
    EXPECT_EQ(plan_json("--model " + k_model + " -dp 2 -t 2")["data_parallel_size"], 2);
    // A 16-bit KV cache: half the bytes per token in the plan.
    EXPECT_EQ(plan_json("--model " + k_model + " --kv-cache-dtype f16")["kv_bytes_per_token"].get<int64_t>() * 2,
              plan_json("--model " + k_model)["kv_bytes_per_token"].get<int64_t>());
    // An FP8 one: a quarter.
    EXPECT_EQ(plan_json("--model " + k_model + " --kv-cache-dtype fp8_e4m3")["kv_bytes_per_token"].get<int64_t>() * 4,
              plan_json("--model " + k_model)["kv_bytes_per_token"].get<int64_t>());
    // A q8_0 one (llama.cpp's -ctk q8_0 -ctv q8_0), on a model whose heads are whole 32-value groups: 34 bytes per 32
    // values, 17/64 of float32; it runs.
    const std::string hd32 = strata::testing::made_model(
        "cli-llama-hd32.gguf", std::string("--dim 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --ctx 256 --type f32 "
                                           "--vocab-from ") + STRATA_SHARED_DIR + "/models/stories260K-f32.gguf");
    ASSERT_FALSE(hd32.empty()) << "make-model failed";
    EXPECT_EQ(plan_json("--model " + hd32 + " -ctk q8_0 -ctv q8_0")["kv_bytes_per_token"].get<int64_t>() * 64,
              plan_json("--model " + hd32)["kv_bytes_per_token"].get<int64_t>() * 17);
    const run_result q8 = run("--model " + hd32 + " --prompt x --max-tokens 4 --kv-cache-dtype q8_0");
    EXPECT_EQ(q8.exit_code, 0) << q8.err;
    const run_result q8_plan = run("plan --model " + k_model + " --kv-cache-dtype q8_0");
    EXPECT_EQ(q8_plan.exit_code, 2);
    EXPECT_NE(q8_plan.err.find("a q8_0 KV cache keeps heads in groups of 32 values; heads of 8 values are not whole "
                               "groups"),
              std::string::npos) << q8_plan.err;
    // --cpu-kv-cache on a device with its own memory (the CPU emulating a GPU's) is refused with what to use.
    run_result gpu_kv = run("--model " + k_model + " --prompt x --max-tokens 2 --cpu-kv-cache --set cpu.separate_memory=true");
    EXPECT_EQ(gpu_kv.exit_code, 2);
    EXPECT_NE(gpu_kv.err.find("--cpu-kv-cache: the cpu device keeps its KV cache in its own memory"), std::string::npos)
        << gpu_kv.err;
    EXPECT_EQ(run("plan --model " + k_model + " --cpu-kv-cache --set cpu.separate_memory=true").exit_code, 2);
    // No-ops are said, not silent.
    run_result eager = run("--model " + k_model + " --prompt x --max-tokens 2 --enforce-eager -O3 --n-cpu-moe 2");
    ASSERT_EQ(eager.exit_code, 0) << eager.err;
    EXPECT_NE(eager.err.find("--enforce-eager: no device captures CUDA graphs yet"), std::string::npos) << eager.err;
    EXPECT_NE(eager.err.find("-O3: nothing is compiled"), std::string::npos) << eager.err;
    EXPECT_NE(eager.err.find("--n-cpu-moe 2: the model has no MoE experts (a dense model), so it changes nothing"),
              std::string::npos) << eager.err;
}

TEST(SeedCommands, GenerationConfigSetsTheDefaultsOfKeysNotGiven) {
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-configs" / "gen-config";
    fs::create_directories(dir);
    std::ofstream(dir / "generation_config.json")
        << R"({"temperature": 0.0, "max_new_tokens": 5, "top_p": 0.9, "eos_token_id": 2, "transformers_version": "4.40"})";
    run_result r = run("--model " + k_model + " --prompt \"Once upon a time\" --output json --generation-config " + dir.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<int> tokens = nlohmann::json::parse(r.out)["completion_tokens"].get<std::vector<int>>();
    EXPECT_EQ(tokens.size(), 5u); // max_new_tokens
    const std::vector<int> greedy = greedy_tokens("");
    EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), greedy.begin())) << "temperature 0 from the file";
    EXPECT_NE(r.err.find("not sampling defaults (vLLM reads only the six above): eos_token_id, transformers_version"),
              std::string::npos) << r.err;
    // A key given here beats the file.
    run_result mine = run("--model " + k_model + " --prompt x --output json --max-tokens 3 --generation-config " + dir.string());
    ASSERT_EQ(mine.exit_code, 0) << mine.err;
    EXPECT_EQ(nlohmann::json::parse(mine.out)["completion_tokens"].size(), 3u);
    std::ofstream(dir / "generation_config.json") << R"({"num_beams": 4})";
    run_result beams = run("--model " + k_model + " --prompt x --generation-config " + dir.string());
    EXPECT_EQ(beams.exit_code, 2);
    EXPECT_NE(beams.err.find("beam search (num_beams 4)"), std::string::npos) << beams.err;
}

TEST(SeedCommands, HelpListsEveryAliasNextToItsKey) {
    run_result r = run("--help");
    ASSERT_EQ(r.exit_code, 0);
    for (const char *line : {"also: -c, --ctx-size", "also: -ngl, --gpu-layers", "also: -t, --cpu-parallelism",
                             "also: -np, --parallel", "also: -b, --batch-size", "also: -ub, --ubatch-size",
                             "also: -tp", "also: -O", "also: -fa", "also: -ctk", "also: -m",
                             "--disable-log-requests (= --enable-log-requests=false)", "runtime serve MODEL"})
        EXPECT_NE(r.out.find(line), std::string::npos) << line;
}

TEST(SeedCommands, PlanPrintsThePlanStartUpMakesWithTheSameFlags) {
    // `runtime plan` runs the engine's own start-up (plan_only), so its table is the one start-up prints. Budgets are
    // fixed here so that free memory, which moves between two processes, does not move them.
    const std::string fixed = "--model " + k_model + " --device-memory 128MiB --set numa_ram.size=512MiB ";
    const std::vector<std::string> matrix = {
        "",
        "--cpu-offload-layers 3",
        "-ngl 1",
        "--cpu-offload-gb 0.0004",
        "--cpu-offload-layers 2 --tiers pinned_ram --set pinned_ram.size=64MiB",
        // With separate memory, offload_compute = auto decides from CPU timings measured at each start, which differ
        // between two processes: the choices are fixed here (the decision code is the same; its inputs are not).
        "--cpu-offload-layers 3 --set cpu.separate_memory=true --offload-compute cpu --op-offload-min-batch 4",
        "--cpu-offload-layers 3 --set cpu.separate_memory=true --offload-compute device",
        "--set cpu.separate_memory=true --kv-cache-memory 8MiB",
        "--kv-cache-memory 16MiB --max-model-len 256 --swap-space 0",
        "--cpu-offload-layers 4 --stream-weights --prefetch-depth 1",
    };
    for (const std::string &flags : matrix) {
        run_result plan = run("plan " + fixed + flags);
        ASSERT_EQ(plan.exit_code, 0) << flags << "\n" << plan.err;
        // The table, KV capacity and fit (the notes after it quote timings measured anew by each process).
        const size_t fits = plan.out.find("fits: ");
        ASSERT_NE(fits, std::string::npos) << plan.out;
        const std::string table = plan.out.substr(0, plan.out.find('\n', fits) + 1);
        ASSERT_NE(table.find("Memory plan for the cpu device"), std::string::npos) << plan.out;
        run_result start = run(fixed + flags + " --prompt x --max-tokens 1");
        ASSERT_EQ(start.exit_code, 0) << flags << "\n" << start.err;
        EXPECT_NE(start.err.find(table), std::string::npos) << flags << "\nplan:\n" << table << "\nstart-up:\n" << start.err;
    }
}

TEST(SeedCommands, OverrideTensorPlacesTensorsByNameAndChangesNoToken) {
    const auto home_of = [](const nlohmann::json &plan, const std::string &tensor) {
        for (const auto &p : plan["placements"])
            if (p["tensor"] == tensor) return p["home"].get<std::string>() + "/" + p["mode"].get<std::string>();
        return std::string("<none>");
    };
    // llama.cpp's usual -ot: the FFN weights of some layers in host RAM, everything else on the device.
    const std::string ffn = "-ot \"blk\\.[34]\\.ffn_.*=numa_ram\" ";
    nlohmann::json p = plan_json("--model " + k_model + " " + ffn);
    EXPECT_EQ(home_of(p, "blk.3.ffn_up.weight"), "numa_ram/in_place");
    EXPECT_EQ(home_of(p, "blk.4.ffn_down.weight"), "numa_ram/in_place");
    EXPECT_EQ(home_of(p, "blk.4.attn_q.weight"), "device/resident");
    EXPECT_EQ(home_of(p, "blk.2.ffn_up.weight"), "device/resident");
    EXPECT_EQ(p["offloaded_layers"], 2);
    // Repeated -ot flags add up; the first match wins; CPU is the device itself on the cpu device.
    p = plan_json("--model " + k_model + " -ot \"blk\\.4\\.attn_q=CPU\" -ot \"attn=numa_ram\" --cpu-offload-layers 1");
    EXPECT_EQ(home_of(p, "blk.4.attn_q.weight"), "device/resident");
    EXPECT_EQ(home_of(p, "blk.0.attn_k.weight"), "numa_ram/in_place");
    EXPECT_EQ(home_of(p, "blk.4.ffn_up.weight"), "numa_ram/in_place"); // layer 4 still offloaded by the layer choice

    const std::vector<int> reference = greedy_tokens("");
    ASSERT_EQ(reference.size(), 16u);
    EXPECT_EQ(greedy_tokens(ffn), reference);
    EXPECT_EQ(greedy_tokens("-ot \"token_embd=numa_ram\" -ot \"output=numa_ram\""), reference);
    // A discrete device: the RAM tensors stream through the ring, mixed with resident ones in the same layer.
    EXPECT_EQ(greedy_tokens(ffn + "--set cpu.separate_memory=true --offload-compute device"), reference);
    EXPECT_EQ(greedy_tokens(ffn + "--set cpu.separate_memory=true --offload-compute cpu"), reference);
    EXPECT_EQ(greedy_tokens("-ot \"blk\\.[1-3]\\.attn=nvme\" --tiers numa_ram,nvme --set nvme.path=" STRATA_BINARY_DIR
                            "/test-ot-nvme.bin --set nvme.size=64MiB"),
              reference);
}

// llama.cpp's --n-cpu-moe N / --cpu-moe on a mixture of experts: the routed experts of the first N layers (or all)
// in host RAM, computed there by the CPU while the rest runs on the device (a GPU: here the CPU device's
// separate_memory mode), with rows of their own in the plan; the same greedy tokens as the device holding them.
TEST(SeedCommands, NCpuMoeKeepsTheFirstLayersExpertsInHostRamForTheCpu) {
    const std::string moe = strata::testing::made_model(
        "family-4l-mixtral.gguf", std::string("--dim 64 --layers 4 --heads 4 --kv-heads 2 --ff 128 --ctx 256 --type f32 "
                                              "--experts 4 --experts-used 2 --vocab-from ") +
                                      STRATA_SHARED_DIR + "/models/stories260K-f32.gguf");
    ASSERT_FALSE(moe.empty()) << "make-model failed";
    const std::string gpu = "--model " + moe + " --set cpu.separate_memory=true ";
    run_result r = run("plan " + gpu + "--n-cpu-moe 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(std::regex_search(r.err + r.out, std::regex("experts 0-1 +\\| numa_ram +\\| cpu ")))
        << r.err << r.out;
    EXPECT_TRUE(std::regex_search(r.err + r.out, std::regex("experts 2-3 +\\| device +\\| resident ")))
        << r.err << r.out;
    EXPECT_NE((r.err + r.out).find("computes the routed experts of 2 layers where they live"), std::string::npos)
        << r.err << r.out;
    nlohmann::json p = plan_json(gpu + "--cpu-moe");
    int cpu = 0;
    for (const auto &pl : p["placements"])
        if (pl["routed_expert"] == true) cpu += pl["home"] == "numa_ram" && pl["mode"] == "cpu";
    EXPECT_EQ(cpu, 12); // gate, up and down of 4 layers
    const auto tokens = [&](const std::string &flags) {
        run_result g = run(gpu + flags + " --prompt 'Once upon a time' --temperature 0 --max-tokens 16 --output json");
        EXPECT_EQ(g.exit_code, 0) << flags << "\n" << g.err;
        return nlohmann::json::parse(g.out.empty() ? "{}" : g.out).value("completion_tokens", nlohmann::json::array()).dump();
    };
    const std::string reference = tokens("");
    EXPECT_NE(reference, "[]");
    EXPECT_EQ(tokens("--n-cpu-moe 2"), reference);
    EXPECT_EQ(tokens("-cmoe"), reference);
    EXPECT_EQ(tokens("-ot \"exps=CPU\""), reference); // llama.cpp's spelling of the same
    // On the CPU device host RAM is the device: said, not silently ignored.
    r = run("plan --model " + moe + " --cpu-moe");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("--cpu-moe: device 'cpu' computes in host RAM itself, so the experts already live there and "
                         "it changes nothing"),
              std::string::npos)
        << r.err;
    r = run("plan " + gpu + "--cpu-moe --tiers nvme");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--cpu-moe: the experts stay in host RAM, but no configured tier is RAM the CPU reads (add "
                         "numa_ram or pinned_ram to --tiers)"),
              std::string::npos)
        << r.err;
    // `runtime plan --plan-gpu-memory`: the plan a GPU of that size would get, made here on the CPU device.
    p = plan_json("--model " + moe + " --plan-gpu-memory 1GiB --gpu-memory-utilization 0.5 --n-cpu-moe 3");
    EXPECT_EQ(p["device_kind"], "cuda");
    EXPECT_EQ(p["device_budget"], 512u << 20);
    cpu = 0;
    for (const auto &pl : p["placements"])
        if (pl["routed_expert"] == true) cpu += pl["home"] == "numa_ram" && pl["mode"] == "cpu";
    EXPECT_EQ(cpu, 9);
    r = run("--model " + moe + " --plan-gpu-memory 1GiB --prompt x --max-tokens 1");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--plan-gpu-memory 1.00 GiB plans for a GPU this machine does not have: use it with `runtime "
                         "plan` only"),
              std::string::npos)
        << r.err;
}

namespace strata {
namespace {

// `runtime tokenize` is llama.cpp's llama-tokenize on the tokenizer every prompt goes through.
TEST(RuntimeTokenize, IdsOfAVocabOnlyFileAsLlamaTokenizePrintsThem) {
    const std::string vocab = std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-llama-bpe.gguf";
    // Llama 3 adds BOS; the escape \n is a newline; <|eot_id|> is parsed as its token by default.
    auto r = run("tokenize -m " + vocab + " -p 'Hello world<|eot_id|>\\n' --ids --show-count");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[128000, 9906, 1917, 128009, 198]\nTotal number of tokens: 5\n");
    r = run("tokenize -m " + vocab + " -p 'Hello world<|eot_id|>' --ids --no-bos --no-parse-special");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("128000"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("128009"), std::string::npos) << r.out;
    r = run("tokenize -m " + vocab + " -p 'Hello' --no-bos");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "  9906 -> 'Hello'\n");
    r = run("tokenize -m " + vocab + " --detokenize -p '[9906, 1917]'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello world");
}

TEST(RuntimeTokenize, JsonLinesInAndOut) {
    const std::string vocab = std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-qwen2.gguf";
    const fs::path in = fs::temp_directory_path() / ("strata_tok_" + std::to_string(::getpid()) + ".jsonl");
    {
        std::ofstream f(in);
        f << "\"Hello world\"\n\"\\u00e9t\\u00e9 123\"\n";
    }
    const auto r = run("tokenize -m " + vocab + " --jsonl -f " + in.string());
    fs::remove(in);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[9707,1879]\n[38783,220,16,17,18]\n"); // Qwen2 adds no BOS and splits digits one by one
}

TEST(RuntimeTokenize, BadInputIsAClearError) {
    auto r = run("tokenize -p hi");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("give the model"), std::string::npos) << r.err;
    r = run("tokenize -m " + std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-gpt-2.gguf --frobnicate");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("unknown option '--frobnicate'"), std::string::npos) << r.err;
    r = run("tokenize -m /nonexistent.gguf -p hi");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
}

} // namespace
} // namespace strata
