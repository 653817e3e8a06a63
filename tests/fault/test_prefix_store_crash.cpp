// Issue #18 item 4: the persistent KV prefix store survives kill -9 and a full disk. Each case runs the real `runtime`
// (CLI, JSON output) on stories260K with --prefix-store-dir; a run writes the blocks it computed to the store at exit
// (the persist of a clean shutdown), and a run whose prompt shares blocks with earlier ones reads them back.
//
//  - kill -9 at 50 random instants: half at a random time in the run's life, half right after the runtime creates
//    the k-th entry of its persist (random k), which lands inside an entry's write. After each kill no .kvb file in
//    the store is of the wrong size (an entry is renamed into place only once whole), and a restart on the same
//    folder gives exactly the undisturbed run's greedy tokens, and says it discarded the unfinished writes it found.
//  - a store folder damaged by hand (entries cut short, emptied, bit-flipped, unrenamed): the restart discards or
//    refuses each, recomputes, and gives the undisturbed tokens.
//  - a store on a filesystem that fills up (a 64 KiB tmpfs in a private mount namespace; skipped where one cannot be
//    made): writes fail with ENOSPC, logged once, and every answer is still the undisturbed one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

const std::string k_runtime = STRATA_BINARY_DIR "/bin/runtime";
const std::string k_model = std::string(STRATA_SHARED_DIR) + "/models/stories260K-f32.gguf";

std::string read_text(const fs::path &p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A folder of this test process's own under the build tree (CTest runs cases in parallel processes).
fs::path work_dir(const std::string &name) {
    const fs::path d = fs::path(STRATA_BINARY_DIR) / "test-fault-files" / (name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

// Three 16-token blocks shared by every prompt, then a tail of its own: each run computes (and persists) blocks no
// run before it had, and reads the shared ones back from the store.
std::string prompt(int i) {
    static const char *names[] = {"Tom", "Sue", "Ben", "Mia", "Max", "Ann", "Sam", "Zoe", "Tim", "Amy"};
    static const char *things[] = {"a red ball", "a little cat", "a big tree", "a blue car", "a funny hat"};
    return std::string("Once upon a time there was a little girl named Lily. She loved to play outside in the park "
                       "with her friends and her dog. One day her friend ") +
           names[i % 10] + " found " + things[(i / 10) % 5] + " under the bench";
}

std::vector<std::string> runtime_args(const std::string &text, const fs::path &store) {
    std::vector<std::string> a = {k_runtime, "--model", k_model, "--prompt", text, "--temperature", "0",
                                  "--max-tokens", "120", "--ignore-eos", "--output", "json", "--threads", "1",
                                  // small: start-up stays fast (the CPU device touches its whole KV pool)
                                  "--kv-cache-memory", "1MiB", "--max-model-len", "256", "--swap-space", "0"};
    if (!store.empty()) {
        a.push_back("--prefix-store-dir");
        a.push_back(store.string());
    }
    return a;
}

// Starts `args` with stdin from /dev/null, stdout and stderr to files, the bandwidth cache inside the build tree.
pid_t spawn(const std::vector<std::string> &args, const fs::path &out, const fs::path &err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> env_strings = {"XDG_CACHE_HOME=" STRATA_BINARY_DIR "/test-xdg-fault"};
    for (char **e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "XDG_CACHE_HOME=", 15) != 0) env_strings.emplace_back(*e);
    }
    std::vector<char *> argv, envp;
    for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (auto &e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

struct finished_run {
    int exit_code = -1;
    std::vector<int32_t> tokens;
    std::string finish;
    std::string log;
    double seconds = 0;
};

finished_run run_to_end(const std::vector<std::string> &args, const fs::path &dir) {
    const fs::path out = dir / "out.json", err = dir / "err.log";
    const auto t0 = clock_type::now();
    const pid_t pid = spawn(args, out, err);
    finished_run r;
    if (pid < 0) return r;
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.log = read_text(err);
    const auto j = nlohmann::json::parse(read_text(out), nullptr, false);
    if (!j.is_discarded() && j.contains("completion_tokens")) {
        r.tokens = j["completion_tokens"].get<std::vector<int32_t>>();
        r.finish = j["finish_reason"].get<std::string>();
    }
    return r;
}

// The store's folder for this model (<store>/<fingerprint>), once a run has made it.
fs::path fingerprint_folder(const fs::path &store) {
    for (const auto &e : fs::directory_iterator(store))
        if (e.is_directory()) return e.path();
    return {};
}

// An entry's unfinished write: "<hash>.kvb.<n>.tmp" (the store's start-up write probe, ".write_probe.tmp", is not one).
bool is_entry_temp(const std::string &name) {
    return name.size() > 4 && name.substr(name.size() - 4) == ".tmp" && name.find(".kvb.") != std::string::npos;
}

struct folder_state {
    int temps = 0;       // unfinished writes of entries
    int entries = 0;     // *.kvb
    int wrong_size = 0;  // *.kvb whose size is not an entry's
};

folder_state inspect(const fs::path &folder, uint64_t entry_bytes) {
    folder_state s;
    for (const auto &e : fs::directory_iterator(folder)) {
        const std::string name = e.path().filename().string();
        if (is_entry_temp(name)) ++s.temps;
        if (e.path().extension() == ".kvb") {
            ++s.entries;
            if (fs::file_size(e.path()) != entry_bytes) ++s.wrong_size;
        }
    }
    return s;
}

// Each entry's mtime. The store sets an entry's mtime on every hit and never rewrites an entry it has, so an entry
// whose mtime moved during a run was read back (served) in it.
std::map<fs::path, fs::file_time_type> mtimes(const fs::path &folder) {
    std::map<fs::path, fs::file_time_type> m;
    for (const auto &e : fs::directory_iterator(folder))
        if (e.path().extension() == ".kvb") m[e.path()] = fs::last_write_time(e.path());
    return m;
}

int served_since(const std::map<fs::path, fs::file_time_type> &before) {
    int n = 0;
    for (const auto &[p, t] : before) {
        std::error_code ec;
        const auto now = fs::last_write_time(p, ec);
        n += !ec && now != t ? 1 : 0;
    }
    return n;
}

// "... (<N> bytes each)" from the store's start-up line.
uint64_t entry_bytes_from(const std::string &log) {
    const size_t at = log.find(" bytes each)");
    if (at == std::string::npos) return 0;
    const size_t open = log.rfind('(', at);
    return std::stoull(log.substr(open + 1, at - open - 1));
}

TEST(PrefixStoreCrash, KillNineAtFiftyRandomInstantsNeverServesATornEntry) {
    const fs::path dir = work_dir("kill9");
    const fs::path store = dir / "store";
    std::mt19937_64 rng(20240518);

    // A first run makes the folder and persists the shared blocks; its output is the undisturbed one for prompt 0.
    const finished_run first = run_to_end(runtime_args(prompt(0), store), dir);
    ASSERT_EQ(first.exit_code, 0) << first.log;
    ASSERT_EQ(first.tokens.size(), 120u) << first.log;
    const uint64_t entry_bytes = entry_bytes_from(first.log);
    ASSERT_GT(entry_bytes, 0u) << first.log;
    const fs::path folder = fingerprint_folder(store);
    ASSERT_FALSE(folder.empty());
    ASSERT_GT(inspect(folder, entry_bytes).entries, 0);

    const int inotify = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    ASSERT_GE(inotify, 0);
    ASSERT_GE(::inotify_add_watch(inotify, folder.c_str(), IN_CREATE), 0);

    constexpr int kills = 50;
    int mid_entry = 0, before_any_write = 0, after_exit = 0, discarded_logged = 0, served = 0;
    const auto t_start = clock_type::now();
    for (int i = 1; i <= kills; ++i) {
        SCOPED_TRACE("kill " + std::to_string(i));
        const std::string text = prompt(i);
        const finished_run want = run_to_end(runtime_args(text, {}), dir); // undisturbed: no store at all
        ASSERT_EQ(want.exit_code, 0) << want.log;
        ASSERT_EQ(want.tokens.size(), 120u);

        // Drain old events, start, and kill at this round's instant.
        char events[4096];
        while (::read(inotify, events, sizeof events) > 0) {
        }
        const bool at_an_entry = i % 2 == 0;
        const int kth_entry = 1 + static_cast<int>(rng() % 6);
        const auto delay = std::chrono::microseconds(rng() % static_cast<uint64_t>(want.seconds * 1.2e6 + 1));
        const pid_t pid = spawn(runtime_args(text, store), dir / "killed.json", dir / "killed.log");
        ASSERT_GT(pid, 0);
        const auto t0 = clock_type::now();
        bool exited = false;
        int status = 0;
        if (at_an_entry) {
            int created = 0;
            while (created < kth_entry && !exited) {
                pollfd p{inotify, POLLIN, 0};
                if (::poll(&p, 1, 2) > 0) {
                    const ssize_t n = ::read(inotify, events, sizeof events);
                    for (ssize_t at = 0; at < n;) {
                        const auto *ev = reinterpret_cast<const inotify_event *>(events + at);
                        const std::string name = ev->len > 0 ? ev->name : "";
                        if (is_entry_temp(name)) ++created;
                        at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
                    }
                }
                if (created < kth_entry) exited = ::waitpid(pid, &status, WNOHANG) == pid;
                ASSERT_LT(clock_type::now() - t0, std::chrono::seconds(20)) << "the run neither wrote nor ended";
            }
        } else {
            while (!exited && clock_type::now() - t0 < delay) {
                exited = ::waitpid(pid, &status, WNOHANG) == pid;
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        }
        if (!exited) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            exited = !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); // it ended on its own just before
        }
        after_exit += exited ? 1 : 0;

        // No entry of the wrong size is ever in place: an entry is renamed into place only once written whole.
        const folder_state left = inspect(folder, entry_bytes);
        EXPECT_EQ(left.wrong_size, 0);
        mid_entry += left.temps > 0 ? 1 : 0;
        before_any_write += !exited && left.temps == 0 ? 1 : 0;

        // Restart on the same folder: the undisturbed tokens, and the unfinished writes said to be discarded.
        const auto before = mtimes(folder);
        const finished_run again = run_to_end(runtime_args(text, store), dir);
        served += served_since(before);
        ASSERT_EQ(again.exit_code, 0) << again.log;
        EXPECT_EQ(again.tokens, want.tokens) << "a restart after kill -9 changed the greedy output";
        EXPECT_EQ(again.finish, "length");
        if (left.temps > 0) {
            const std::string said = "discarded " + std::to_string(left.temps) + " partial entr";
            EXPECT_NE(again.log.find(said), std::string::npos) << again.log;
            ++discarded_logged;
        } else {
            EXPECT_EQ(again.log.find("discarded"), std::string::npos) << "nothing was left to discard: " << again.log;
        }
        EXPECT_EQ(inspect(folder, entry_bytes).temps, 0) << "the restart cleaned up";
    }
    ::close(inotify);
    const double seconds = std::chrono::duration<double>(clock_type::now() - t_start).count();
    std::cout << kills << " kills in " << seconds << " s: " << served << " blocks served from the store on restarts, "
              << mid_entry << " mid-entry kills (an unfinished write left), "
              << after_exit << " after the run had ended, " << before_any_write
              << " before the persist reached an entry or between two entries\n";
    RecordProperty("mid_entry_kills", mid_entry);
    EXPECT_GE(served, 2 * kills) << "the restarts hardly read the store: the test would prove nothing";
    EXPECT_GE(mid_entry, 3) << "too few kills landed inside an entry's write to say anything about torn entries";
    EXPECT_EQ(discarded_logged, mid_entry);
    fs::remove_all(dir);
}

TEST(PrefixStoreCrash, ADamagedStoreFolderIsDiscardedAndRecomputedNeverServed) {
    const fs::path dir = work_dir("damaged");
    const fs::path store = dir / "store";
    const std::string text = prompt(3);
    const finished_run want = run_to_end(runtime_args(text, {}), dir);
    ASSERT_EQ(want.exit_code, 0) << want.log;
    const finished_run first = run_to_end(runtime_args(text, store), dir);
    ASSERT_EQ(first.exit_code, 0) << first.log;
    ASSERT_EQ(first.tokens, want.tokens);
    const uint64_t entry_bytes = entry_bytes_from(first.log);
    const fs::path folder = fingerprint_folder(store);
    std::vector<fs::path> entries;
    for (const auto &e : fs::directory_iterator(folder))
        if (e.path().extension() == ".kvb") entries.push_back(e.path());
    ASSERT_GE(entries.size(), 8u);
    std::sort(entries.begin(), entries.end());
    // Each kind of damage on a different entry; every fifth is left alone.
    int torn = 0, unfinished = 0;
    for (size_t k = 0; k < entries.size(); ++k) {
        const fs::path &e = entries[k];
        switch (k % 5) {
        case 0: fs::resize_file(e, entry_bytes / 2); ++torn; break;  // cut inside the payload
        case 1: fs::resize_file(e, 48); ++torn; break;               // the header only
        case 2: {                                                    // a flipped payload byte
            std::fstream io(e, std::ios::in | std::ios::out | std::ios::binary);
            io.seekp(static_cast<std::streamoff>(entry_bytes) - 100);
            io.put('\x5a');
            break;
        }
        case 3: fs::rename(e, e.string() + ".7.tmp"); ++unfinished; break; // never renamed into place
        default: break;
        }
    }
    const finished_run again = run_to_end(runtime_args(text, store), dir);
    ASSERT_EQ(again.exit_code, 0) << again.log;
    EXPECT_EQ(again.tokens, want.tokens) << "a damaged entry was served";
    EXPECT_NE(again.log.find("discarded " + std::to_string(torn + unfinished) + " partial entr"), std::string::npos)
        << again.log;
    EXPECT_EQ(inspect(folder, entry_bytes).wrong_size, 0);
    // The recomputed blocks were written again: a third run is served from the store and still gives the same tokens.
    const finished_run third = run_to_end(runtime_args(text, store), dir);
    EXPECT_EQ(third.tokens, want.tokens);
    fs::remove_all(dir);
}

// ENOSPC for real: the store on a 64 KiB tmpfs mounted in a private mount namespace (unshare: user+mount namespaces
// for anyone, or a mount namespace for root). Only a couple of entries fit; the rest fail to write, which is logged
// once and changes no answer.
TEST(PrefixStoreCrash, AStoreOnAFullFilesystemLogsTheWriteErrorAndStillGivesTheUndisturbedTokens) {
    const fs::path dir = work_dir("enospc");
    const fs::path mnt = dir / "tiny";
    fs::create_directories(mnt);
    std::string unshare;
    for (const char *flags : {"--user --map-root-user --mount", "--mount"}) {
        const std::string probe = std::string("unshare ") + flags + " sh -c 'mount -t tmpfs -o size=64k tmpfs " +
                                  mnt.string() + "' >/dev/null 2>&1";
        if (std::system(probe.c_str()) == 0) {
            unshare = std::string("unshare ") + flags;
            break;
        }
    }
    if (unshare.empty()) GTEST_SKIP() << "cannot mount a small tmpfs here (no user namespaces and not root): "
                                         "the full-filesystem case needs one";
    const std::string text = prompt(5);
    const finished_run want = run_to_end(runtime_args(text, {}), dir);
    ASSERT_EQ(want.exit_code, 0) << want.log;
    // Two runs on the same tiny store inside one namespace, then what is left in the folder.
    std::string script = "set -e; mount -t tmpfs -o size=64k tmpfs '" + mnt.string() + "'; ";
    for (int run = 0; run < 2; ++run) {
        script += "XDG_CACHE_HOME=" STRATA_BINARY_DIR "/test-xdg-fault";
        for (const std::string &a : runtime_args(text, mnt)) script += " '" + a + "'";
        script += " </dev/null >'" + (dir / ("out" + std::to_string(run) + ".json")).string() + "' 2>'" +
                  (dir / ("err" + std::to_string(run) + ".log")).string() + "'; ";
    }
    script += "ls -la '" + mnt.string() + "'/* > '" + (dir / "left.txt").string() + "'";
    const std::string cmd = unshare + " sh -c \"" + script + "\"";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_text(dir / "err0.log") << read_text(dir / "err1.log");
    for (int run = 0; run < 2; ++run) {
        const auto j = nlohmann::json::parse(read_text(dir / ("out" + std::to_string(run) + ".json")));
        EXPECT_EQ(j["completion_tokens"].get<std::vector<int32_t>>(), want.tokens) << "run " << run;
    }
    const std::string log0 = read_text(dir / "err0.log");
    EXPECT_NE(log0.find("No space left on device"), std::string::npos) << log0;
    EXPECT_NE(log0.find("KV blocks are not persisted while this lasts"), std::string::npos) << log0;
    const std::string left = read_text(dir / "left.txt");
    EXPECT_EQ(left.find(".tmp"), std::string::npos) << "a failed write left its temporary file: " << left;
    EXPECT_NE(left.find(".kvb"), std::string::npos) << "some entries fit: " << left;
    fs::remove_all(dir);
}

} // namespace
