// What the tests of ranks as processes (#16) share: launching `mpirun` with the environment OpenMPI needs here, running
// the runtime as one process or as ranks and reading its greedy tokens, finding a rank's process, and serving a
// prompt load against one process or a launch of ranks.
#pragma once

#include "http_test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>
#include <thread>

namespace strata_mpi_test {

using namespace strata_http_test;
using json = nlohmann::json;

inline const std::string k_mpiexec = STRATA_MPIEXEC;
inline const std::string k_runtime = STRATA_BINARY_DIR "/bin/runtime";

// The environment every launch gets: OpenMPI refuses to run as root (CI containers) unless told, and runs more
// processes than cores only when oversubscription is allowed (three ranks on this 2-core machine); the shared-memory
// transport's single-copy mechanism (CMA) needs ptrace rights containers often lack, so it copies through a buffer.
inline void set_launch_environment() {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    ::setenv("XDG_CACHE_HOME", STRATA_BINARY_DIR "/test-xdg-default", 1);
    // In the ASan build: OpenMPI's own allocations that outlive MPI_Finalize are suppressed by library (full stacks,
    // so that the library's frames show; openmpi_leaks.supp says why), Strata's are still reported.
    const char *asan = std::getenv("ASAN_OPTIONS");
    const std::string options = (asan != nullptr && *asan != '\0' ? std::string(asan) + ":" : std::string()) +
                                "fast_unwind_on_malloc=0";
    ::setenv("ASAN_OPTIONS", options.c_str(), 1);
    ::setenv("LSAN_OPTIONS", "suppressions=" STRATA_SOURCE_DIR "/tests/distributed/openmpi_leaks.supp", 1);
}

#define SKIP_WITHOUT_MPI()                                                                                             \
    do {                                                                                                               \
        if (k_mpiexec.empty()) GTEST_SKIP() << "built without MPI (STRATA_WITH_MPI, Debian's libopenmpi-dev)";        \
        set_launch_environment();                                                                                      \
    } while (0)

struct run_result {
    int exit_code = -1;
    std::string out, err;
};

inline run_result run_shell(const std::string &command) {
    static int n = 0;
    const fs::path base = fs::temp_directory_path() / ("strata_mpi_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    const std::string out = base.string() + ".out", err = base.string() + ".err";
    const int rc = std::system((command + " >" + out + " 2>" + err + " </dev/null").c_str());
    run_result r;
    r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    fs::remove(out);
    fs::remove(err);
    return r;
}

// Waits for `pid` to exit, at most a minute (a hang detector, not a speed check); its wait status, or -1 after
// killing it.
inline int wait_exit(pid_t pid) {
    int status = 0;
    for (int i = 0; i < 600; ++i) {
        if (::waitpid(pid, &status, WNOHANG) == pid) return status;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
}

inline std::string mpirun(int n) { return k_mpiexec + " -np " + std::to_string(n) + " "; }

// The process of rank `rank` among mpirun's children (its environment says OMPI_COMM_WORLD_RANK=rank); 0 if none.
inline pid_t rank_process(pid_t mpirun_pid, int rank) {
    for (const auto &e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::istringstream stat(read_text(e.path() / "stat"));
        std::string pid, comm, state;
        long ppid = 0;
        stat >> pid >> comm >> state >> ppid;
        if (ppid != mpirun_pid) continue;
        std::string env = read_text(e.path() / "environ");
        for (char &c : env)
            if (c == '\0') c = '\n';
        if (("\n" + env).find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") != std::string::npos)
            return std::stoi(name);
    }
    return 0;
}

inline const std::string k_prompt =
    " --prompt \"Once upon a time\" --temperature 0 --max-tokens 24 --output json --device cpu ";

inline std::vector<int> tokens_of(const run_result &r, const std::string &what) {
    EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
    if (r.exit_code != 0) return {};
    return json::parse(r.out)["completion_tokens"].get<std::vector<int>>();
}

inline std::vector<int> one_process(const std::string &model, const std::string &flags) {
    return tokens_of(run_shell(k_runtime + " --model " + model + k_prompt + flags), flags);
}

// `mpirun -np n` of ranks split by `split` ("-pp": pipeline stages, "-tp": tensor-parallel ranks).
inline std::vector<int> processes(int n, const std::string &model, const std::string &flags,
                                  const std::string &split = "-pp") {
    return tokens_of(run_shell(mpirun(n) + k_runtime + " --model " + model + k_prompt + split + " " +
                               std::to_string(n) + " " + flags),
                     "mpirun -np " + std::to_string(n) + " " + split + " " + flags);
}

// A model make-model writes once per test binary at STRATA_BINARY_DIR/`name` with `shape` (its flags after --out).
inline std::string made_model(const std::string &name, const std::string &shape) {
    const std::string p = STRATA_BINARY_DIR "/" + name;
    const run_result r = run_shell(STRATA_BINARY_DIR "/bin/make-model --out " + p + " " + shape);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
}

// A GQA model in Q8_0 beside stories260K (make-model: random weights, 8 heads of 32 over 2 KV heads, 6 layers).
inline const std::string &q8_model() {
    static const std::string path = made_model(
        "test-mpi-gqa-q8_0.gguf",
        "--dim 256 --layers 6 --heads 8 --kv-heads 2 --ff 512 --ctx 256 --type q8_0 --seed 7");
    return path;
}

// Serves `flags` (after `runtime`) with `launcher` in front (empty: one process), sends `first` alone when set, then
// every prompt at once, and returns the texts (with `logprobs` > 0, each followed by its tokens' logprobs as the server
// wrote them: equal texts then mean equal bits); checks that the engine ends idle with no KV block held and that the
// server stops cleanly. `preemptions`: the server's count at the end.
struct served {
    std::vector<std::string> texts;
    double preemptions = 0;
};

// The server's /metrics once no request is running and no device KV block is held (the engine publishes its stats
// after it has answered a step's requests: a client can ask before it did), or the last read after 10 s.
inline std::string settled_metrics() {
    std::string text;
    for (int i = 0; i < 200; ++i) {
        text = request("GET", "/metrics").body;
        if (metric_value(text, "vllm:num_requests_running") == 0 && metric_value(text, "vllm:gpu_cache_usage_perc") == 0)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return text;
}

inline served serve_and_ask(const std::vector<std::string> &launcher, const std::vector<std::string> &flags,
                            const std::vector<std::string> &prompts, int max_tokens, const std::string &first = {},
                            int logprobs = 0) {
    auto completion = [&](const std::string &prompt) {
        json body{{"model", k_model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
        if (logprobs > 0) body["logprobs"] = logprobs;
        const http_reply r = request("POST", "/v1/completions", body.dump());
        if (r.status != 200) return "HTTP " + std::to_string(r.status) + " " + r.body;
        const json choice = json::parse(r.body)["choices"][0];
        return choice["text"].get<std::string>() + (logprobs > 0 ? "\n" + choice["logprobs"].dump() : std::string());
    };
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() /
                         ("strata_mpi_serve_" + std::to_string(::getpid()) + "_" + std::to_string(launcher.size()) + ".log");
    std::vector<std::string> args = launcher;
    args.push_back(k_runtime);
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--port", std::to_string(g_port), "--api-key", k_key});
    const pid_t pid = await_ready(spawn_argv(log, args), g_port, log);
    served out;
    out.texts.resize(prompts.size());
    if (pid == 0) {
        ADD_FAILURE() << "the server did not start:\n" << read_text(log);
        return out;
    }
    if (!first.empty()) {
        EXPECT_EQ(completion(first).rfind("HTTP ", 0), std::string::npos);
    }
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i)
        clients.emplace_back([&, i] { out.texts[i] = completion(prompts[i]); });
    for (auto &t : clients) t.join();
    const std::string metrics = settled_metrics();
    out.preemptions = metric_value(metrics, "vllm:num_preemptions_total");
    EXPECT_EQ(metric_value(metrics, "vllm:num_requests_running"), 0.0) << metrics;
    EXPECT_EQ(metric_value(metrics, "vllm:gpu_cache_usage_perc"), 0.0) << metrics;
    EXPECT_EQ(metric_value(metrics, "vllm:cpu_cache_usage_perc"), 0.0) << metrics;
    // A clean stop: SIGINT to rank 0's process (mpirun's own Ctrl-C ends every process with SIGTERM, then SIGKILL a
    // second later); rank 0 stops its frontend and engine and then the other ranks, and mpirun exits 0.
    if (launcher.empty()) {
        stop_runtime(pid, log);
    } else {
        const pid_t rank0 = rank_process(pid, 0);
        EXPECT_NE(rank0, 0);
        ::kill(rank0 != 0 ? rank0 : pid, SIGINT);
        const int status = wait_exit(pid);
        EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
        EXPECT_NE(read_text(log).find("signal 2: stopping"), std::string::npos) << read_text(log);
    }
    fs::remove(log);
    return out;
}

// A server of two ranks as processes (`split`: "-tp 2", or "-pp 2" and its options) streaming every layer's weights
// from an nvme tier file of each rank's own (rank 1's is `path`.rank1) through a ring of one layer ahead; rank
// `rank`'s file is truncated under it after one good request. The next two requests fail with that rank's I/O reason
// ("<kind> rank 1: ..." for rank 1, rank 0's own otherwise; never "another rank failed"), the server still answers
// `/health`, no request or KV block is left, and SIGINT to rank 0 stops it with exit status 0.
inline void expect_truncated_tier_fails_steps_alone(const std::vector<std::string> &split, int rank,
                                                    const std::string &kind) {
    SCOPED_TRACE(kind + " rank " + std::to_string(rank) + "'s tier file");
    const std::string tier = STRATA_BINARY_DIR "/test-mpi-weights-" + kind + "-" + std::to_string(rank) + ".bin";
    const std::string file = rank == 0 ? tier : tier + ".rank" + std::to_string(rank);
    fs::remove(tier);
    fs::remove(tier + ".rank1");
    g_port = free_port();
    const fs::path log = fs::temp_directory_path() /
                         ("strata_mpi_fault_" + std::to_string(::getpid()) + "_" + kind + std::to_string(rank) + ".log");
    std::vector<std::string> args = {k_mpiexec, "-np", "2", k_runtime, "serve", k_model, "--device", "cpu"};
    args.insert(args.end(), split.begin(), split.end());
    args.insert(args.end(), {"--tiers", "nvme", "--stream-weights", "--cpu-offload-layers", "5", "--prefetch-depth",
                             "1", "--set", "nvme.path=" + tier, "--kv-cache-memory", "8MiB", "--rank-timeout", "30",
                             "--port", std::to_string(g_port), "--api-key", k_key});
    const pid_t pid = await_ready(spawn_argv(log, args), g_port, log);
    ASSERT_NE(pid, 0) << read_text(log);
    const std::string body =
        json{{"model", k_model}, {"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}.dump();
    EXPECT_EQ(request("POST", "/v1/completions", body).status, 200);
    EXPECT_TRUE(fs::exists(file)) << "rank " << rank << "'s own tier file";
    EXPECT_EQ(::truncate(file.c_str(), 0), 0);
    for (int i = 0; i < 2; ++i) {
        const http_reply failed = request("POST", "/v1/completions", body);
        EXPECT_EQ(failed.status, 500) << failed.body;
        EXPECT_NE(failed.body.find("tier 'nvme'"), std::string::npos) << failed.body;
        EXPECT_NE(failed.body.find("truncated"), std::string::npos) << failed.body;
        EXPECT_EQ(failed.body.find("another rank failed"), std::string::npos) << "the reason is the rank's own";
        EXPECT_EQ(failed.body.find(kind + " rank 1: ") != std::string::npos, rank == 1) << failed.body;
    }
    EXPECT_EQ(request("GET", "/health").status, 200);
    const std::string metrics = settled_metrics();
    EXPECT_EQ(metric_value(metrics, "vllm:num_requests_running"), 0.0) << metrics;
    EXPECT_EQ(metric_value(metrics, "vllm:gpu_cache_usage_perc"), 0.0) << metrics;
    const pid_t rank0 = rank_process(pid, 0);
    EXPECT_NE(rank0, 0);
    ::kill(rank0 != 0 ? rank0 : pid, SIGINT);
    const int status = wait_exit(pid);
    EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
    fs::remove(log);
    fs::remove(tier);
    fs::remove(tier + ".rank1");
}

// A server of `n` ranks as processes (`split`: "-pp", or "-tp" with a thread per rank) with a rank timeout of
// `rank_timeout` seconds, started and past one good request (`body`); pid 0 when it did not start. `what` names its log.
struct rank_job {
    pid_t pid = 0;
    fs::path log;
    std::string body; // a short completion request
};
inline rank_job start_rank_job(const std::string &what, const std::string &split, int n, int rank_timeout) {
    rank_job job;
    g_port = free_port();
    job.log = fs::temp_directory_path() / ("strata_mpi_" + what + "_" + std::to_string(::getpid()) + ".log");
    std::vector<std::string> args = {k_mpiexec, "-np", std::to_string(n), k_runtime, "serve", k_model, "--device",
                                     "cpu", split, std::to_string(n)};
    if (split == "-tp") args.insert(args.end(), {"-t", std::to_string(n)});
    args.insert(args.end(), {"--rank-timeout", std::to_string(rank_timeout), "--kv-cache-memory", "8MiB", "--port",
                             std::to_string(g_port), "--api-key", k_key});
    job.pid = await_ready(spawn_argv(job.log, args), g_port, job.log);
    job.body = json{{"model", k_model}, {"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}.dump();
    if (job.pid != 0) {
        EXPECT_EQ(request("POST", "/v1/completions", job.body).status, 200);
    }
    return job;
}

// A server of `n` ranks as processes (`split`: "-pp", or "-tp" with a thread per rank) with a rank timeout of 2 s;
// after one good request rank 1 is stopped (SIGSTOP, as a hung process). The request then in flight fails with
// HTTP 500 holding each of `says` instead of waiting, and every rank ends (not with status 0), the log saying so.
inline void expect_hung_rank_fails_request_and_ends_job(const std::string &split, int n,
                                                        const std::vector<std::string> &says) {
    SCOPED_TRACE(split + " " + std::to_string(n));
    const rank_job job = start_rank_job("hang", split, n, 2);
    ASSERT_NE(job.pid, 0) << read_text(job.log);
    const pid_t pid = job.pid;
    const fs::path &log = job.log;
    const std::string &body = job.body;
    const pid_t rank1 = rank_process(pid, 1);
    if (rank1 == 0) ::kill(pid, SIGKILL), wait_exit(pid);
    ASSERT_NE(rank1, 0);
    ::kill(rank1, SIGSTOP);
    const http_reply failed = request("POST", "/v1/completions", body);
    EXPECT_EQ(failed.status, 500) << failed.body;
    for (const std::string &text : says) EXPECT_NE(failed.body.find(text), std::string::npos) << failed.body;
    const int status = wait_exit(pid); // mpirun ends the job, the stopped rank too
    EXPECT_NE(status, -1) << "the job did not end after the rank timed out:\n" << read_text(log);
    if (status == -1) ::kill(rank1, SIGKILL); // mpirun was killed: its stopped rank may be left
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
    EXPECT_NE(read_text(log).find("every rank ends in 2 s"), std::string::npos) << read_text(log);
    fs::remove(log);
}

// A server of `n` ranks as processes (`split`: "-pp", or "-tp" with a thread per rank) whose rank 1 dies (SIGKILL) while
// a request waits on it: rank 1 is first stopped (SIGSTOP) so that the request sent next is surely in flight on it
// (the rank timeout, 600 s, is far past the minute wait_exit allows: only mpirun's own end can end the job), then
// killed. mpirun ends the job at once, naming the rank; the client gets no
// answer of a finished request (its connection closes, or an error), never a wait; no process of the job is left.
inline void expect_killed_rank_ends_job(const std::string &split, int n) {
    SCOPED_TRACE(split + " " + std::to_string(n));
    const rank_job job = start_rank_job("kill", split, n, 600);
    ASSERT_NE(job.pid, 0) << read_text(job.log);
    const pid_t pid = job.pid;
    const fs::path &log = job.log;
    const std::string &body = job.body;
    // Each rank's process and its start time (field 22 of /proc/PID/stat), so that a number reused after it ended is
    // never taken for it.
    const auto start_time = [](pid_t p) {
        const std::string stat = read_text(fs::path("/proc") / std::to_string(p) / "stat");
        const size_t paren = stat.rfind(')');
        if (paren == std::string::npos) return std::string();
        std::istringstream fields(stat.substr(paren + 2));
        std::string field;
        for (int i = 3; i <= 22 && fields >> field; ++i) {
        }
        return field;
    };
    std::vector<pid_t> ranks;
    std::vector<std::string> started;
    for (int r = 0; r < n; ++r) {
        ranks.push_back(rank_process(pid, r));
        EXPECT_NE(ranks.back(), 0) << "rank " << r << "'s process";
        started.push_back(ranks.back() != 0 ? start_time(ranks.back()) : std::string());
    }
    if (ranks[1] == 0) ::kill(pid, SIGKILL), wait_exit(pid);
    ASSERT_NE(ranks[1], 0);
    ::kill(ranks[1], SIGSTOP);
    http_reply reply;
    std::thread client([&] {
        try {
            reply = request("POST", "/v1/completions", body);
        } catch (const std::exception &e) { // the job ended before the connection was made
            reply.status = -1;
            reply.body = e.what();
        }
    });
    // The request reaches rank 1's queue (a stopped process takes nothing): it is in flight on it.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(ranks[1], SIGKILL);
    const int status = wait_exit(pid);
    client.join(); // the job's end closes the connection: a hang would hold it here (CTest's timeout then fails it)
    EXPECT_NE(status, -1) << "the job did not end after rank 1 died:\n" << read_text(log);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
    EXPECT_NE(reply.status, 200) << "a request whose rank died cannot have finished:\n" << reply.body;
    const std::string text = read_text(log);
    EXPECT_NE(text.find("process rank 1"), std::string::npos) << text;
    EXPECT_NE(text.find("signal 9"), std::string::npos) << text;
    // No process of the job is left: the others end with it (rank 0 after its own stop, once mpirun has gone).
    for (int r = 0; r < n; ++r) {
        if (ranks[r] == 0) continue;
        // Gone: no /proc entry, another process under its number, or a zombie (whoever adopted it reaps it; a
        // container's init may not).
        const auto running = [&](pid_t p) {
            const std::string stat = read_text(fs::path("/proc") / std::to_string(p) / "stat");
            const size_t paren = stat.rfind(')');
            return paren != std::string::npos && stat.compare(paren + 2, 1, "Z") != 0 && start_time(p) == started[r];
        };
        bool gone = false;
        for (int i = 0; i < 300 && !gone; ++i) {
            gone = !running(ranks[r]);
            if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        EXPECT_TRUE(gone) << "rank " << r << " (pid " << ranks[r] << ") outlived the job";
        if (!gone && start_time(ranks[r]) == started[r]) ::kill(ranks[r], SIGKILL);
    }
    fs::remove(log);
}

} // namespace strata_mpi_test

