// `runtime`: loads plugins, reads the config, then runs a subcommand (plugins, topology) or the configured frontend.
#include "app/core_schema.hpp"
#include "app/engine_config.hpp"
#include "app/host_services.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "config/command_line.hpp"
#include "config/config_view.hpp"
#include "config/document.hpp"
#include "distributed/launch_env.hpp"
#include "distributed/transport.hpp"
#include "engine/engine.hpp"
#include "engine/engine_api.hpp"
#include "app/perplexity_command.hpp"
#include "app/tokenize_command.hpp"
#include "engine/plan_model.hpp"
#include "engine/rank_server.hpp"
#include "planner/plan_report.hpp"
#include "plugin_host/registry.hpp"
#include "topology/topology.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sched.h>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <pthread.h>
#include <random>
#include <thread>

namespace fs = std::filesystem;

namespace strata::app {

namespace {

const char *k_usage = R"(usage: runtime [--config FILE] [options]          run the configured frontend (default: cli)
       runtime serve MODEL [options]                the OpenAI-compatible server on MODEL (vLLM's vllm serve)
       runtime plugins [--config FILE]              list loaded plugins (kind, name, version, ABI, license, path)
       runtime topology [--json]                    show CPUs, NUMA nodes, caches, GPUs and memory (hwloc)
       runtime plan [--config FILE] [--json]        print the memory plan without loading weights
       runtime tokenize -m MODEL -p TEXT [--ids]    the token ids of a text (llama.cpp's llama-tokenize; --help)
       runtime perplexity -m MODEL -f TEXT          perplexity, KL divergence (llama.cpp's llama-perplexity; --help)

FILE is TOML, or vLLM-style YAML (.yaml/.yml: option names as keys, e.g. max_model_len: 4096).
Every config key can be set with --set table.key=value; the familiar flags below map to keys, with the spellings
vLLM and llama.cpp users know listed under "also" (-m, -c, -ngl, -t, -np, -b, -ub, -fa, -ctk, -tp, -O3, ...).
)";

// Plugin folders: [plugins] paths (relative to the config file), $STRATA_PLUGIN_PATH, then the ones next to the
// executable (build tree: <build>/plugins; installed: <prefix>/lib/strata/plugins).
std::vector<fs::path> plugin_dirs(const config::document &doc, const config::schema &s) {
    std::vector<fs::path> dirs;
    for (const std::string &p : doc.get_string_list("plugins", "paths", s)) {
        fs::path path(p);
        dirs.push_back(path.is_absolute() ? path : doc.base_dir() / path);
    }
    if (const char *env = std::getenv("STRATA_PLUGIN_PATH")) {
        std::string all(env);
        size_t start = 0;
        while (start <= all.size()) {
            size_t end = all.find(':', start);
            if (end == std::string::npos) end = all.size();
            if (end > start) dirs.emplace_back(all.substr(start, end - start));
            start = end + 1;
        }
    }
    const fs::path exe_dir = boost::dll::program_location().parent_path().string();
    dirs.push_back(exe_dir.parent_path() / "plugins");
    dirs.push_back(exe_dir.parent_path() / "lib" / "strata" / "plugins");
    return dirs;
}

log::level parse_level(const std::string &s) {
    if (s == "debug") return log::level::debug;
    if (s == "warn") return log::level::warn;
    if (s == "error") return log::level::error;
    return log::level::info;
}

// Restricts the process to the CPUs of one NUMA node and the pinning list (one PU per core) to that node's cores.
void bind_to_numa_node(topology::machine &machine, int node) {
    const topology::numa_node *found = nullptr;
    std::string nodes;
    for (const auto &n : machine.numa) {
        if (n.os_index == node) found = &n;
        nodes += (nodes.empty() ? "" : ", ") + std::to_string(n.os_index);
    }
    if (found == nullptr) fail("[engine] numa_bind = {}: this machine has no NUMA node {} (nodes: {})", node, node, nodes);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : found->cpus) CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        fail("[engine] numa_bind = {}: cannot bind to the CPUs of node {}: {}", node, node, std::strerror(errno));
    }
    std::vector<int> pus;
    for (int pu : machine.one_pu_per_core) {
        if (std::find(found->cpus.begin(), found->cpus.end(), pu) != found->cpus.end()) pus.push_back(pu);
    }
    machine.one_pu_per_core = pus;
    machine.cores = static_cast<int>(pus.size());
    log::info("runtime", "bound to NUMA node {} ({} cores)", node, machine.cores);
}

// SIGINT/SIGTERM are blocked in every thread and received here, so stopping the frontend runs in normal context.
std::atomic<const strata_frontend_desc *> g_fe_desc{nullptr};
std::atomic<strata_frontend *> g_fe{nullptr};
// Held while a signal stops the frontend and while the frontend is taken away, so a stop never reaches a frontend
// being destroyed (a second Ctrl-C as a drain ends).
std::mutex g_fe_mu;
// A rank serving rank 0 (under mpirun) ignores them: mpirun hands them to every process, and rank 0, stopping
// its frontend and engine, stops the ranks in order.
std::atomic<bool> g_serving_rank{false};
// The link to the other processes when mpirun started this one (null otherwise); set by main.
distributed::transport *g_link = nullptr;

void start_signal_thread() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set]() {
        for (;;) {
            int sig = 0;
            if (sigwait(&set, &sig) != 0) return;
            std::lock_guard<std::mutex> lock(g_fe_mu);
            const strata_frontend_desc *d = g_fe_desc.load();
            strata_frontend *fe = g_fe.load();
            if (g_serving_rank.load()) {
                log::info("runtime", "signal {}: rank {} waits for rank 0 to stop it", sig,
                          g_link != nullptr ? g_link->rank() : 0);
            } else if (d != nullptr && fe != nullptr) {
                log::info("runtime", "signal {}: stopping", sig);
                d->request_stop(fe);
            } else {
                std::_Exit(130);
            }
        }
    }).detach();
}

int print_plan(const plugins::registry &registry, const strata_host_services *host, const config::document &doc,
               const config::schema &s, const std::string &model_argument, bool json) {
    std::vector<std::unique_ptr<config::plugin_config_view>> views;
    engine::engine_options opts = engine_options_from(registry, doc, s, model_argument, views);
    const std::vector<engine::rank_plan> ranks = engine::plan_model(registry, host, opts);
    const engine::rank_plan &mp = ranks.front(); // the whole model's, or pipeline rank 0's
    const bool fits = std::all_of(ranks.begin(), ranks.end(), [](const auto &r) { return r.plan.fits; });
    // Where KV goes besides the device, and the scheduler's limits: the engine sizes its pools from these.
    const auto &kv = opts.kv;
    const auto &sc = opts.scheduler;
    const std::string mode = sc.mode == engine::preemption_mode::swap        ? "swap"
                             : sc.mode == engine::preemption_mode::recompute ? "recompute"
                                                                             : "auto";
    if (json) {
        nlohmann::json j = planner::to_json(mp.plan, mp.inputs);
        j["kv"] = {{"block_size", kv.block_size},          {"prefix_caching", kv.enable_prefix_caching},
                   {"swap_space_gib", kv.swap_space_gib},  {"host_tier", kv.host_tier},
                   {"nvme_space_gib", kv.nvme_space_gib},  {"prefix_store_dir", kv.prefix_store_dir},
                   {"prefix_store_gib", kv.prefix_store_gib}};
        j["scheduler"] = {{"max_num_seqs", sc.max_num_seqs},
                          {"max_num_batched_tokens", sc.max_num_batched_tokens},
                          {"prefill_chunk", opts.prefill_chunk},
                          {"preemption_mode", mode},
                          {"max_waiting_requests", sc.max_waiting_requests}};
        // Every key the user set, with its effective value and where it came from: the effect of each line of a
        // config file, and of each flag, whatever the plan shows of it.
        nlohmann::json settings = nlohmann::json::array();
        for (const config::document::setting &x : doc.settings(s))
            settings.push_back({{"key", x.key}, {"value", x.value}, {"from", x.origin}});
        j["settings"] = settings;
        j["data_parallel_size"] = opts.data_parallel_size; // the plan above is each replica's
        // Pipeline parallel: the plan above is rank 0's; every rank's, with its layers, follows. Tensor parallel:
        // the same, each rank's plan its share of the weights and KV (inside pipeline stages: of its stage's layers,
        // with the stage's rank and layers).
        const bool tensor_parallel = mp.tensor_parallel_size > 1;
        j["tensor_parallel_size"] = mp.tensor_parallel_size;
        j["pipeline_parallel_size"] = mp.stage.n_ranks;
        if (tensor_parallel) {
            nlohmann::json per_rank = nlohmann::json::array();
            for (const engine::rank_plan &r : ranks) {
                nlohmann::json one = {{"rank", r.tensor_parallel_rank}, {"plan", planner::to_json(r.plan, r.inputs)}};
                if (r.stage.n_ranks > 1) {
                    one["pipeline_rank"] = r.stage.rank;
                    one["layer_first"] = r.stage.layer_first;
                    one["layer_end"] = r.stage.layer_end;
                }
                per_rank.push_back(std::move(one));
            }
            j["tensor_parallel_ranks"] = per_rank;
        } else if (ranks.size() > 1) {
            nlohmann::json per_rank = nlohmann::json::array();
            for (const engine::rank_plan &r : ranks)
                per_rank.push_back({{"rank", r.stage.rank},
                                    {"layer_first", r.stage.layer_first},
                                    {"layer_end", r.stage.layer_end},
                                    {"plan", planner::to_json(r.plan, r.inputs)}});
            j["pipeline_ranks"] = per_rank;
        }
        std::cout << j.dump(2) << "\n";
    } else {
        for (const engine::rank_plan &r : ranks) {
            if (r.tensor_parallel_size > 1 && r.stage.n_ranks > 1)
                std::cout << fmt::format("tensor-parallel rank {} of {} in pipeline rank {} of {}: its heads and "
                                         "feed-forward columns of layers [{}, {})\n",
                                         r.tensor_parallel_rank, r.tensor_parallel_size, r.stage.rank, r.stage.n_ranks,
                                         r.stage.layer_first, r.stage.layer_end);
            else if (r.tensor_parallel_size > 1)
                std::cout << fmt::format("tensor-parallel rank {} of {}: its heads and feed-forward columns of every "
                                         "layer\n", r.tensor_parallel_rank, r.tensor_parallel_size);
            else if (ranks.size() > 1)
                std::cout << fmt::format("pipeline rank {} of {}: layers [{}, {})\n", r.stage.rank, ranks.size(),
                                         r.stage.layer_first, r.stage.layer_end);
            std::cout << planner::to_table(r.plan, r.inputs);
        }
        std::cout << fmt::format("KV blocks of {} tokens, prefix caching {}; host tier {} GiB in '{}' (swap_space); "
                                 "NVMe {} GiB (kv_nvme_space); prefix store {}\n",
                                 kv.block_size, kv.enable_prefix_caching ? "on" : "off", kv.swap_space_gib,
                                 kv.host_tier, kv.nvme_space_gib,
                                 kv.prefix_store_dir.empty() ? std::string("none")
                                                             : fmt::format("{} ({} GiB)", kv.prefix_store_dir,
                                                                           kv.prefix_store_gib));
        std::cout << fmt::format("scheduler: max_num_seqs {}, max_num_batched_tokens {}, prefill chunk {}, preemption "
                                 "{}, max_waiting_requests {}\n",
                                 sc.max_num_seqs, sc.max_num_batched_tokens, opts.prefill_chunk, mode,
                                 sc.max_waiting_requests);
        if (opts.data_parallel_size > 1)
            std::cout << fmt::format("data parallel: {} replicas in this process, each planned as above (its share of "
                                     "the device)\n",
                                     opts.data_parallel_size);
    }
    return fits ? 0 : 1;
}

int run_frontend(const plugins::registry &registry, const strata_host_services *host, const config::document &doc,
                 const config::schema &s, const std::string &model_argument, const topology::machine &machine) {
    std::vector<std::unique_ptr<config::plugin_config_view>> tier_views;
    engine::engine_options opts = engine_options_from(registry, doc, s, model_argument, tier_views);
    strata_sampling_params sampling = sampling_from(doc, s, opts.model_path);
    opts.machine = &machine; // the GPU's nearest NUMA node comes from this discovery, not another one
    opts.pipeline_transport = g_link;
    const std::string frontend_name = doc.get_string("engine", "frontend", s).value_or("cli");
    auto fe_handle = registry.find_frontend(frontend_name);
    if (fe_handle.desc == nullptr) {
        fail("frontend '{}' is not provided by any loaded plugin (available: {}); set [engine] frontend or --frontend",
             frontend_name, fmt::join(registry.names(STRATA_KIND_FRONTEND), ", "));
    }

    engine::replica_set replicas(registry, host, opts);
    strata_engine_api api = engine::make_engine_api(replicas);
    std::unique_ptr<config::plugin_config_view> fe_view;
    if (s.find_table(frontend_name) != nullptr) fe_view = std::make_unique<config::plugin_config_view>(doc, s, frontend_name);
    strata_frontend_create_args args{};
    args.struct_size = sizeof args;
    args.host = host;
    args.config = fe_view ? fe_view->view() : nullptr;
    args.engine = &api;
    args.default_sampling = &sampling;
    strata_status st{};
    strata_frontend *fe = fe_handle.desc->create(&args, &st);
    if (fe == nullptr) fail("frontend '{}' failed to start: {}", frontend_name, st.message);
    g_fe_desc = fe_handle.desc;
    g_fe = fe;
    const int32_t rc = fe_handle.desc->run(fe, &st);
    {
        std::lock_guard<std::mutex> lock(g_fe_mu);
        g_fe = nullptr;
    }
    fe_handle.desc->destroy(fe);
    if (rc != 0 && st.code != STRATA_OK) log::error(frontend_name, "{}", st.message);
    return rc;
}

int main_impl(int argc, char **argv) {
    // `runtime tokenize` reads only a vocabulary and has llama-tokenize's own options.
    if (argc >= 2 && std::string_view(argv[1]) == "tokenize") return run_tokenize_command(argc, argv);
    // `runtime perplexity` takes its own options out; the rest configure the engine as they would for serving.
    std::optional<perplexity_args> perplexity;
    std::vector<char *> engine_argv;
    if (argc >= 2 && std::string_view(argv[1]) == "perplexity") {
        perplexity = parse_perplexity_args(argc, argv, engine_argv);
        if (perplexity->help) {
            std::cout << k_perplexity_usage;
            return 0;
        }
        argc = static_cast<int>(engine_argv.size());
        argv = engine_argv.data();
    }
    config::command_line cl = config::parse_command_line(argc, argv);
    if (perplexity && !cl.subcommand.empty())
        fail("runtime perplexity: '{}' is a subcommand of its own; run it separately", cl.subcommand);
    if (cl.version) {
        std::printf("strata runtime %s (plugin ABI %d.%d)\n", STRATA_VERSION, STRATA_ABI_MAJOR, STRATA_ABI_MINOR);
        return 0;
    }
    topology::machine machine = topology::discover();
    if (cl.subcommand == "topology") {
        if (cl.json) std::cout << topology::to_json(machine).dump(2) << "\n";
        else std::cout << topology::to_text(machine);
        return 0;
    }
    start_signal_thread();
    strata_host_services host = make_host_services(&machine);

    config::schema schema = core_schema();
    config::document doc = cl.config_path ? config::document::from_file(*cl.config_path) : config::document::empty();
    doc.resolve_yaml(schema, false); // a YAML file's core keys (log level, plugin paths) count before plugins load
    for (const std::string &a : cl.set_assignments) doc.set_override(a, "--set");
    // Core flags are known before plugins load: apply them now so log level and plugin paths take effect.
    log::set_level(parse_level(doc.get_string("engine", "log_level", schema).value_or("info")));

    plugins::registry registry(&host);
    for (const fs::path &dir : plugin_dirs(doc, schema)) registry.load_directory(dir);
    for (const auto &[name, keys] : registry.config_tables()) schema.add_plugin_table(name, keys.first, keys.second);
    doc.resolve_yaml(schema, true);

    if (cl.help || cl.subcommand == "help") {
        std::cout << k_usage << "\n" << schema.help_text();
        return 0;
    }
    // `runtime serve MODEL`: vLLM's `vllm serve`, the OpenAI server on the positional model (flags may still say
    // otherwise: they come after).
    std::string model_argument;
    if (cl.subcommand == "serve") {
        if (!cl.model_argument)
            fail("runtime serve needs the model: runtime serve MODEL.gguf|HF_FOLDER [options] (vLLM's vllm serve MODEL)");
        doc.set_override("engine.frontend=openai_http", "serve");
        model_argument = *cl.model_argument;
        doc.set_override("model.path=" + fs::absolute(model_argument).lexically_normal().string(), "serve MODEL");
    }
    for (const config::flag_assignment &a : config::resolve_flag_assignments(cl, schema)) {
        // A model path given on the command line is relative to the working directory, not the config file.
        if (a.assignment.rfind("model.path=", 0) == 0) {
            model_argument = a.assignment.substr(11);
            fs::path p(model_argument);
            doc.set_override("model.path=" + (p.is_absolute() ? p : fs::absolute(p)).lexically_normal().string(),
                             a.origin);
            continue;
        }
        doc.set_override(a.assignment, a.origin);
    }
    doc.validate(schema);
    log::set_level(parse_level(doc.get_string("engine", "log_level", schema).value_or("info")));

    // NUMA binding applies to the whole process before any plugin starts a thread, so compute threads, first-touch
    // allocations and numa_ram's "auto" node all follow it.
    if (const int64_t node = doc.get_int("engine", "numa_bind", schema).value_or(-1); node >= 0) {
        bind_to_numa_node(machine, static_cast<int>(node));
    }

    if (cl.subcommand == "plugins") {
        std::cout << registry.format_listing();
        for (const auto &r : registry.rejections()) std::cout << "refused: " << r.path << ": " << r.reason << "\n";
        return 0;
    }
    if (g_link != nullptr) {
        // Under mpirun every process is a pipeline or tensor-parallel rank (#16): rank 0 runs what was asked, the
        // others serve it.
        if (cl.subcommand == "plan" || perplexity)
            fail("runtime {} under mpirun: run it as one process (-pp N and -tp N plan and run the ranks in it)",
                 perplexity ? "perplexity" : "plan");
        std::vector<std::unique_ptr<config::plugin_config_view>> views;
        engine::engine_options opts = engine_options_from(registry, doc, schema, model_argument, views);
        if (opts.pipeline_parallel_size > 1 && opts.tensor_parallel_size > 1)
            fail("pipeline_parallel_size {} with tensor_parallel_size {} under mpirun: tensor-parallel ranks inside "
                 "pipeline stages run in one process only so far (run without mpirun, or use one of the two)",
                 opts.pipeline_parallel_size, opts.tensor_parallel_size);
        const int64_t ranks = int64_t{opts.pipeline_parallel_size} * opts.tensor_parallel_size;
        if (ranks != g_link->size())
            fail("mpirun started {} processes but pipeline_parallel_size is {} and tensor_parallel_size {}; each "
                 "process is one pipeline or tensor-parallel rank: pass --pipeline-parallel-size {} or "
                 "--tensor-parallel-size {} (or start {} processes)",
                 g_link->size(), opts.pipeline_parallel_size, opts.tensor_parallel_size, g_link->size(), g_link->size(),
                 ranks);
        if (opts.data_parallel_size > 1)
            fail("data_parallel_size {} under mpirun: data-parallel replicas run in one process only (drop "
                 "--data-parallel-size, or run without mpirun)",
                 opts.data_parallel_size);
        // Each rank's machine in the launch log (`runtime topology` there), since each plans its own memory.
        log::info("runtime", "{} rank {} of {} on host {} ({} of {} processes there):\n{}",
                  opts.tensor_parallel_size > 1 ? "tensor-parallel" : "pipeline", g_link->rank(),
                  g_link->size(), g_link->host_name(), g_link->local_rank() + 1, g_link->local_size(),
                  topology::to_text(machine));
        if (g_link->rank() > 0) {
            opts.machine = &machine;
            opts.pipeline_transport = g_link;
            g_serving_rank = true;
            return engine::serve_pipeline_rank(registry, &host, opts);
        }
    }
    if (cl.subcommand == "plan") return print_plan(registry, &host, doc, schema, model_argument, cl.json);
    if (perplexity) return run_perplexity(*perplexity, registry, &host, doc, schema, model_argument, machine);
    return run_frontend(registry, &host, doc, schema, model_argument, machine);
}

} // namespace

} // namespace strata::app

int main(int argc, char **argv) {
    int rc = 0;
    try {
        if (strata::distributed::launched_world_size() > 1) {
            // MPI starts threads of its own: SIGINT/SIGTERM are blocked before, so that they reach the signal thread
            // (start_signal_thread) and not one of MPI's, where they would end the process without a clean stop.
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGINT);
            sigaddset(&set, SIGTERM);
            pthread_sigmask(SIG_BLOCK, &set, nullptr);
        }
        strata::app::g_link = strata::distributed::launched_transport(&argc, &argv);
        rc = strata::app::main_impl(argc, argv);
    } catch (const std::exception &e) {
        if (strata::app::g_link != nullptr && strata::app::g_link->size() > 1) {
            std::fprintf(stderr, "error: rank %d of %d (mpirun): %s\n", strata::app::g_link->rank(),
                         strata::app::g_link->size(), e.what());
            // The other ranks may be waiting for this one: end the whole job.
            std::fflush(stderr);
            strata::app::g_link->abort(2);
        }
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    strata::distributed::finalize_transport();
    return rc;
}
