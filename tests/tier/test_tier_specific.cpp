// Behaviour particular to one tier: pinned_ram's memlock limit, numa_ram's node choice, nvme's file handling and
// checksums.
#include "config/config_view.hpp"
#include "config/document.hpp"
#include "config/schema.hpp"
#include "sanitizer_build.hpp"
#include "tier_harness.hpp"

#include <gtest/gtest.h>
#include <hwloc.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace {

using namespace strata::tier_test;
namespace fs = std::filesystem;

std::string tier_file_path(const std::string &name) {
    const std::string dir = std::string(STRATA_BINARY_DIR) + "/tier_test_files";
    fs::create_directories(dir);
    const std::string p = dir + "/" + name + "_" + std::to_string(getpid()) + ".tier";
    fs::remove(p);
    return p;
}

bool contains(const char *haystack, const std::string &needle) { return std::string(haystack).find(needle) != std::string::npos; }

// ---- pinned_ram ------------------------------------------------------------------------------------------------

// Removes CAP_IPC_LOCK from this process, so mlock obeys RLIMIT_MEMLOCK even for root.
bool drop_ipc_lock_capability() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &header, data) != 0) return false;
    const unsigned word = CAP_IPC_LOCK / 32, bit = 1u << (CAP_IPC_LOCK % 32);
    data[word].effective &= ~bit;
    data[word].permitted &= ~bit;
    data[word].inheritable &= ~bit;
    return syscall(SYS_capset, &header, data) == 0;
}

TEST(PinnedRam, LowMemlockLimitIsReportedWithTheFix) {
    if (strata::testing::mlock_is_a_no_op)
        GTEST_SKIP() << "the sanitizer runtime replaces mlock with a no-op, so no memlock limit can be hit";
    const strata_tier_desc &d = tier_plugin("pinned_ram"); // load before fork: the child only calls create
    (void)d;
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fds[0]);
        const rlimit small{64 * 1024, 64 * 1024};
        int code = 0;
        if (setrlimit(RLIMIT_MEMLOCK, &small) != 0 || !drop_ipc_lock_capability()) code = 2;
        config_table cfg;
        strata_status st{};
        if (code == 0) {
            tier_ptr t = create_tier("pinned_ram", cfg, 16ull << 20, &st);
            code = t ? 3 : 0;
        }
        const ssize_t w = write(fds[1], st.message, std::strlen(st.message));
        (void)w;
        close(fds[1]);
        _exit(code);
    }
    close(fds[1]);
    std::string message;
    char buf[256];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 2) << "could not lower RLIMIT_MEMLOCK / drop CAP_IPC_LOCK in the child";
    ASSERT_EQ(WEXITSTATUS(status), 0) << "create succeeded despite a 64 KiB memlock limit";
    std::cout << "pinned_ram refusal: " << message << "\n";
    EXPECT_NE(message.find("cannot lock"), std::string::npos) << message;
    EXPECT_NE(message.find("RLIMIT_MEMLOCK is 65536 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("ulimit -l"), std::string::npos) << message;
}

TEST(PinnedRam, SizeKeyIsTheBudgetWhenThePlannerGivesNone) {
    config_table cfg{{"size", int64_t{1 << 20}}};
    strata_status st{};
    tier_ptr t = create_tier("pinned_ram", cfg, 0, &st);
    ASSERT_TRUE(t) << st.message;
    EXPECT_EQ(tier_plugin("pinned_ram").capacity(t.get()), 1u << 20);
    config_table none;
    EXPECT_FALSE(create_tier("pinned_ram", none, 0, &st));
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(st.message, "size")) << st.message;
}

// numa_node = 0 exists everywhere: the arena is bound to it before mlock faults it in (or, where the OS cannot bind,
// the tier says so and works unbound), and its pages then sit on node 0.
TEST(PinnedRam, NumaNodeZeroBindsTheArenaAndItWorks) {
    test_host().clear();
    config_table cfg{{"numa_node", int64_t{0}}};
    strata_status st{};
    tier_ptr t = create_tier("pinned_ram", cfg, 1 << 20, &st);
    ASSERT_TRUE(t) << st.message;
    const bool bound = test_host().logged("(1.0 MiB) of RAM on NUMA node 0");
    const bool refused = test_host().logged("cannot bind memory to NUMA node 0 here");
    ASSERT_TRUE(bound || refused) << "the tier said neither that it bound nor why it could not";
    std::cout << "pinned_ram numa_node = 0: " << (bound ? "bound" : "the OS cannot bind here") << "\n";

    const strata_tier_desc &d = tier_plugin("pinned_ram");
    uint64_t r = 0;
    ASSERT_EQ(d.region_alloc(t.get(), 5000, &r, &st), STRATA_OK) << st.message;
    const std::vector<unsigned char> data = random_bytes(17, 5000);
    std::vector<unsigned char> back(5000);
    ASSERT_EQ(d.write(t.get(), r, 0, data.data(), 5000, &st), STRATA_OK) << st.message;
    ASSERT_EQ(d.read(t.get(), r, 0, back.data(), 5000, &st), STRATA_OK) << st.message;
    EXPECT_EQ(back, data);
    void *addr = d.map(t.get(), r);
    ASSERT_NE(addr, nullptr);
    if (!bound) return;
    hwloc_topology_t topo = nullptr;
    ASSERT_EQ(hwloc_topology_init(&topo), 0);
    ASSERT_EQ(hwloc_topology_load(topo), 0);
    hwloc_bitmap_t where = hwloc_bitmap_alloc();
    const int rc = hwloc_get_area_memlocation(topo, addr, 5000, where, HWLOC_MEMBIND_BYNODESET);
    const bool on_node0_only = rc == 0 && hwloc_bitmap_isset(where, 0) && hwloc_bitmap_weight(where) == 1;
    hwloc_bitmap_free(where);
    hwloc_topology_destroy(topo);
    EXPECT_TRUE(on_node0_only) << "the region's pages are not (only) on node 0";
}

TEST(PinnedRam, ANumaNodeThisMachineLacksIsRefusedNamingTheExistingOnes) {
    config_table cfg{{"numa_node", int64_t{99}}};
    strata_status st{};
    EXPECT_FALSE(create_tier("pinned_ram", cfg, 1 << 20, &st));
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(st.message, "NUMA node 99 does not exist")) << st.message;
    EXPECT_TRUE(contains(st.message, "this machine has nodes 0")) << st.message;
    EXPECT_TRUE(contains(st.message, "-1 for no binding")) << st.message;

    cfg.set("numa_node", int64_t{-2}); // a view that was not validated against the schema
    EXPECT_FALSE(create_tier("pinned_ram", cfg, 1 << 20, &st));
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(st.message, "numa_node = -2 is not a NUMA node")) << st.message;
}

TEST(PinnedRam, NumaNodeMinusOneIsNoBinding) {
    test_host().clear();
    config_table cfg{{"numa_node", int64_t{-1}}};
    strata_status st{};
    tier_ptr t = create_tier("pinned_ram", cfg, 1 << 20, &st);
    ASSERT_TRUE(t) << st.message;
    EXPECT_TRUE(test_host().logged("(1.0 MiB) of RAM"));
    EXPECT_FALSE(test_host().logged("NUMA node"));
}

// The key as the config file sees it: an INT from -1 with no default, so "unset" (the engine may choose the GPU's
// node) differs from an explicit -1 (no binding).
TEST(PinnedRam, NumaNodeKeyIsValidatedAndUnsetReadsAsUnset) {
    strata::plugins::registry reg(test_host().services());
    reg.load_file(std::string(STRATA_PLUGIN_DIR) + "/libstrata_tier_pinned_ram.so");
    strata::config::schema s;
    bool declared = false;
    for (const auto &[table, keys] : reg.config_tables()) {
        if (table != "pinned_ram") continue;
        s.add_plugin_table(table, keys.first, keys.second);
        for (uint32_t i = 0; i < keys.second; ++i)
            if (std::strcmp(keys.first[i].name, "numa_node") == 0) {
                declared = true;
                EXPECT_EQ(keys.first[i].type, static_cast<uint32_t>(STRATA_CONFIG_INT));
                EXPECT_EQ(keys.first[i].default_value, nullptr);
            }
    }
    ASSERT_TRUE(declared) << "[pinned_ram] has no numa_node key";

    auto refusal = [&](const std::string &toml) -> std::string {
        strata::config::document doc = strata::config::document::from_string(toml, "test.toml");
        try {
            doc.validate(s);
        } catch (const std::exception &e) {
            return e.what();
        }
        return "";
    };
    EXPECT_EQ(refusal("[pinned_ram]\nnuma_node = 1\n"), "");
    EXPECT_EQ(refusal("[pinned_ram]\nnuma_node = -1\n"), "");
    const std::string low = refusal("[pinned_ram]\nnuma_node = -2\n");
    EXPECT_TRUE(contains(low.c_str(), "numa_node")) << low;
    EXPECT_TRUE(contains(low.c_str(), "out of range")) << low;
    const std::string text = refusal("[pinned_ram]\nnuma_node = \"near\"\n");
    EXPECT_TRUE(contains(text.c_str(), "numa_node")) << text;

    strata::config::document unset = strata::config::document::from_string("[pinned_ram]\nsize = 4096\n", "test.toml");
    unset.validate(s);
    const strata::config::plugin_config_view view(unset, s, "pinned_ram");
    int64_t node = 7;
    EXPECT_EQ(view.view()->get_int(view.view()->ctx, "numa_node", &node), 0);
    EXPECT_EQ(node, 7);
}

// ---- numa_ram --------------------------------------------------------------------------------------------------

TEST(NumaRam, UnknownNodeIsRefusedNamingTheExistingOnes) {
    config_table cfg{{"nodes", std::string("99")}};
    strata_status st{};
    EXPECT_FALSE(create_tier("numa_ram", cfg, 1 << 20, &st));
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(st.message, "NUMA node 99 does not exist")) << st.message;
    EXPECT_TRUE(contains(st.message, "this machine has nodes 0")) << st.message;

    cfg.set("nodes", std::string("0,x"));
    EXPECT_FALSE(create_tier("numa_ram", cfg, 1 << 20, &st));
    EXPECT_TRUE(contains(st.message, "comma-separated")) << st.message;
}

TEST(NumaRam, AutoAndAnExplicitNodeBothWork) {
    for (const char *nodes : {"auto", "0"}) {
        config_table cfg{{"nodes", std::string(nodes)}};
        strata_status st{};
        tier_ptr t = create_tier("numa_ram", cfg, 1 << 20, &st);
        ASSERT_TRUE(t) << nodes << ": " << st.message;
        const strata_tier_desc &d = tier_plugin("numa_ram");
        uint64_t r = 0;
        ASSERT_EQ(d.region_alloc(t.get(), 5000, &r, &st), STRATA_OK) << st.message;
        const std::vector<unsigned char> data = random_bytes(11, 5000);
        std::vector<unsigned char> back(5000);
        ASSERT_EQ(d.write(t.get(), r, 0, data.data(), 5000, &st), STRATA_OK);
        ASSERT_EQ(d.read(t.get(), r, 0, back.data(), 5000, &st), STRATA_OK);
        EXPECT_EQ(back, data) << nodes;
    }
}

// ---- nvme ------------------------------------------------------------------------------------------------------

// Which I/O path this build directory's filesystem gets: printed, and the tier's own log must agree with a probe.
TEST(Nvme, ReportsWhichIoPathTheBuildDirectoryGets) {
    const std::string path = tier_file_path("probe");
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
    bool direct_ok = false;
    if (fd >= 0) {
        void *buf = nullptr;
        if (posix_memalign(&buf, 4096, 4096) == 0) {
            std::memset(buf, 0, 4096);
            direct_ok = pwrite(fd, buf, 4096, 0) == 4096;
            std::free(buf);
        }
        close(fd);
    }
    fs::remove(path);
    test_host().clear();
    config_table cfg{{"path", path}, {"block_size", int64_t{65536}}};
    strata_status st{};
    tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
    ASSERT_TRUE(t) << st.message;
    std::cout << "O_DIRECT in " << STRATA_BINARY_DIR << ": " << (direct_ok ? "supported" : "NOT supported") << "\n";
    for (const auto &l : test_host().lines()) std::cout << "nvme tier: " << l << "\n";
    if (direct_ok) {
        EXPECT_TRUE(test_host().logged("O_DIRECT I/O"));
    } else {
        EXPECT_TRUE(test_host().logged("does not support O_DIRECT"));
        EXPECT_TRUE(test_host().logged("buffered I/O"));
    }
}

TEST(Nvme, MissingDirectoryAndUnsetPathAreClearErrors) {
    const std::string dir = std::string(STRATA_BINARY_DIR) + "/tier_test_files/no_such_dir_" + std::to_string(getpid());
    config_table cfg{{"path", dir + "/weights.tier"}};
    strata_status st{};
    EXPECT_FALSE(create_tier("nvme", cfg, 1 << 20, &st));
    EXPECT_EQ(st.code, STRATA_ERR_NOT_FOUND);
    EXPECT_TRUE(contains(st.message, dir + " (for [nvme] path")) << st.message;
    EXPECT_TRUE(contains(st.message, "does not exist")) << st.message;
    EXPECT_FALSE(fs::exists(dir));

    config_table unset;
    EXPECT_FALSE(create_tier("nvme", unset, 1 << 20, &st));
    EXPECT_TRUE(contains(st.message, "path is not set")) << st.message;

    config_table bad_block{{"path", tier_file_path("bad_block")}, {"block_size", int64_t{5000}}};
    EXPECT_FALSE(create_tier("nvme", bad_block, 1 << 20, &st));
    EXPECT_TRUE(contains(st.message, "multiple of 4096")) << st.message;
}

// Pipeline ranks in one process (ABI 1.26) create their instances from one table: rank r keeps PATH.rank<r>, so the
// ranks' bytes never meet; a block device cannot be split that way and is refused past rank 0.
TEST(Nvme, PipelineRanksKeepAFileEachAndABlockDeviceIsRefusedPastRankZero) {
    const strata_tier_desc &d = tier_plugin("nvme");
    const std::string path = tier_file_path("ranks");
    fs::remove(path);
    fs::remove(path + ".rank1");
    config_table cfg{{"path", path}};
    strata_status st{};
    tier_ptr r0 = create_tier("nvme", cfg, 1 << 20, &st, 0);
    ASSERT_TRUE(r0) << st.message;
    tier_ptr r1 = create_tier("nvme", cfg, 1 << 20, &st, 1);
    ASSERT_TRUE(r1) << st.message;
    EXPECT_TRUE(fs::exists(path));
    EXPECT_TRUE(fs::exists(path + ".rank1"));
    // The same region offsets in both instances hold each rank's own bytes.
    const std::vector<unsigned char> a = random_bytes(1, 4096), b = random_bytes(2, 4096);
    uint64_t ra = 0, rb = 0;
    ASSERT_EQ(d.region_alloc(r0.get(), 4096, &ra, &st), STRATA_OK) << st.message;
    ASSERT_EQ(d.region_alloc(r1.get(), 4096, &rb, &st), STRATA_OK) << st.message;
    ASSERT_EQ(d.write(r0.get(), ra, 0, a.data(), a.size(), &st), STRATA_OK) << st.message;
    ASSERT_EQ(d.write(r1.get(), rb, 0, b.data(), b.size(), &st), STRATA_OK) << st.message;
    std::vector<unsigned char> back(4096);
    ASSERT_EQ(d.read(r0.get(), ra, 0, back.data(), back.size(), &st), STRATA_OK) << st.message;
    EXPECT_EQ(back, a);
    ASSERT_EQ(d.read(r1.get(), rb, 0, back.data(), back.size(), &st), STRATA_OK) << st.message;
    EXPECT_EQ(back, b);
    r0.reset();
    r1.reset();

    config_table device{{"path", std::string("/dev/nvme9n9")}};
    EXPECT_FALSE(create_tier("nvme", device, 1 << 20, &st, 1));
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(st.message, "is a block device, which pipeline rank 1 cannot share with rank 0")) << st.message;
    EXPECT_FALSE(create_tier("nvme", cfg, 1 << 20, &st, -1));
    EXPECT_TRUE(contains(st.message, "rank -1 is negative")) << st.message;
}

// A folder the process may not write to. Root could write anywhere, so the child drops to an unprivileged user first.
TEST(Nvme, UnwritablePathIsAClearErrorAndLeavesNoFile) {
    const strata_tier_desc &d = tier_plugin("nvme"); // load before fork: the child only calls create
    (void)d;
    const std::string dir = std::string(STRATA_BINARY_DIR) + "/tier_test_files/read_only_" + std::to_string(getpid());
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
    const std::string path = dir + "/weights.tier";
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fds[0]);
        int code = 0;
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) code = 2;
        strata_status st{};
        if (code == 0) {
            config_table cfg{{"path", path}};
            tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
            code = t ? 3 : 0;
        }
        const ssize_t w = write(fds[1], st.message, std::strlen(st.message));
        (void)w;
        close(fds[1]);
        _exit(code);
    }
    close(fds[1]);
    std::string message;
    char buf[256];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    fs::permissions(dir, fs::perms::owner_all);
    ASSERT_NE(WEXITSTATUS(status), 2) << "could not drop to an unprivileged user in the child";
    ASSERT_EQ(WEXITSTATUS(status), 0) << "create succeeded in a read-only folder";
    EXPECT_NE(message.find("choose a writable [nvme] path"), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_FALSE(fs::exists(path));
    fs::remove_all(dir);
}

TEST(Nvme, AbsurdSizeNeedsMoreThanTheFilesystemHasAndLeavesNoFile) {
    const std::string path = tier_file_path("absurd");
    config_table cfg{{"path", path}, {"size", int64_t{1000} << 40}}; // 1000 TiB
    strata_status st{};
    EXPECT_FALSE(create_tier("nvme", cfg, 0, &st));
    EXPECT_EQ(st.code, STRATA_ERR_OUT_OF_MEMORY);
    std::cout << "nvme refusal: " << st.message << "\n";
    EXPECT_TRUE(contains(st.message, "needs 1099511627776000 bytes")) << st.message;
    EXPECT_TRUE(contains(st.message, "filesystem has")) << st.message;
    EXPECT_FALSE(fs::exists(path)) << "a failed create must not leave a file";
}

TEST(Nvme, CorruptedFileIsReportedAsChecksumMismatch) {
    const std::string path = tier_file_path("corrupt");
    config_table cfg{{"path", path}, {"block_size", int64_t{65536}}, {"keep_file", true}};
    strata_status st{};
    {
        tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
        ASSERT_TRUE(t) << st.message;
        const strata_tier_desc &d = tier_plugin("nvme");
        uint64_t r = 0;
        ASSERT_EQ(d.region_alloc(t.get(), 3 * 65536, &r, &st), STRATA_OK);
        const std::vector<unsigned char> data = random_bytes(21, 3 * 65536);
        ASSERT_EQ(d.write(t.get(), r, 0, data.data(), data.size(), &st), STRATA_OK) << st.message;

        // Behind the plugin's back: garbage into the middle chunk (the first region starts at file offset 0).
        const int fd = open(path.c_str(), O_RDWR);
        ASSERT_GE(fd, 0);
        const char garbage[] = "not the weights you wrote";
        ASSERT_EQ(pwrite(fd, garbage, sizeof garbage, 65536 + 1000), static_cast<ssize_t>(sizeof garbage));
        fsync(fd);
        close(fd);

        std::vector<unsigned char> back(data.size());
        EXPECT_EQ(d.read(t.get(), r, 65536 + 10, back.data(), 100, &st), STRATA_ERR_IO);
        std::cout << "nvme corruption: " << st.message << "\n";
        EXPECT_TRUE(contains(st.message, "checksum mismatch in region " + std::to_string(r) + " at offset 65536"))
            << st.message;
        EXPECT_TRUE(contains(st.message, "the NVMe file was modified")) << st.message;
        EXPECT_EQ(d.read(t.get(), r, 0, back.data(), back.size(), &st), STRATA_ERR_IO);
        // The untouched chunks still read fine, and a partial write into the bad chunk refuses to bless it.
        ASSERT_EQ(d.read(t.get(), r, 0, back.data(), 65536, &st), STRATA_OK) << st.message;
        EXPECT_EQ(std::memcmp(back.data(), data.data(), 65536), 0);
        EXPECT_EQ(d.write(t.get(), r, 65536 + 5, data.data(), 10, &st), STRATA_ERR_IO);
        // Rewriting the whole chunk repairs it.
        ASSERT_EQ(d.write(t.get(), r, 65536, data.data() + 65536, 65536, &st), STRATA_OK) << st.message;
        ASSERT_EQ(d.read(t.get(), r, 0, back.data(), back.size(), &st), STRATA_OK) << st.message;
        EXPECT_EQ(back, data);
    }
    EXPECT_TRUE(fs::exists(path)) << "keep_file = true keeps the file";
    // A kept, non-empty file is reused only with keep_file; without it the tier refuses to overwrite it.
    config_table reuse{{"path", path}, {"block_size", int64_t{65536}}};
    EXPECT_FALSE(create_tier("nvme", reuse, 1 << 20, &st));
    EXPECT_TRUE(contains(st.message, "already exists")) << st.message;
    EXPECT_TRUE(fs::exists(path));
    {
        tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
        ASSERT_TRUE(t) << st.message;
    }
    fs::remove(path);
}

// Makes io_uring_setup fail with ENOSYS in this process, as a seccomp profile or an old kernel would.
bool block_io_uring() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Makes openat with O_DIRECT fail with EINVAL in this process, as on a filesystem without O_DIRECT (the flags are
// the syscall's third argument; O_DIRECT lies in its low 32 bits).
bool refuse_o_direct() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args) + 2 * sizeof(uint64_t)),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_DIRECT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

TEST(Nvme, FilesystemWithoutODirectFallsBackToBufferedIoWithAWarning) {
    const std::string path = tier_file_path("no_direct");
    (void)tier_plugin("nvme");
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (!refuse_o_direct()) _exit(2);
        test_host().clear();
        config_table cfg{{"path", path}, {"block_size", int64_t{65536}}};
        strata_status st{};
        tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
        if (!t) _exit(3);
        if (!test_host().logged("WARNING: the filesystem of " + path + " does not support O_DIRECT") ||
            !test_host().logged("buffered I/O through io_uring"))
            _exit(4);
        const strata_tier_desc &d = tier_plugin("nvme");
        uint64_t r = 0;
        const std::vector<unsigned char> data = random_bytes(32, 200000);
        std::vector<unsigned char> back(data.size());
        if (d.region_alloc(t.get(), data.size(), &r, &st) != STRATA_OK ||
            d.write(t.get(), r, 3, data.data(), data.size() - 3, &st) != STRATA_OK ||
            d.read(t.get(), r, 3, back.data(), back.size() - 3, &st) != STRATA_OK ||
            std::memcmp(back.data(), data.data(), data.size() - 3) != 0)
            _exit(5);
        t.reset();
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 2) << "could not install the seccomp filter";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: create failed, 4: no warning, 5: round trip failed";
    EXPECT_FALSE(fs::exists(path));
}

TEST(Nvme, WithoutIoUringFallsBackToPreadWithAWarning) {
    const std::string path = tier_file_path("no_uring");
    (void)tier_plugin("nvme");
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (!block_io_uring()) _exit(2);
        test_host().clear();
        config_table cfg{{"path", path}, {"block_size", int64_t{65536}}};
        strata_status st{};
        tier_ptr t = create_tier("nvme", cfg, 1 << 20, &st);
        if (!t) _exit(3);
        if (!test_host().logged("io_uring is unavailable") || !test_host().logged("through pread/pwrite")) _exit(4);
        const strata_tier_desc &d = tier_plugin("nvme");
        uint64_t r = 0;
        const std::vector<unsigned char> data = random_bytes(31, 200000);
        std::vector<unsigned char> back(data.size());
        if (d.region_alloc(t.get(), data.size(), &r, &st) != STRATA_OK ||
            d.write(t.get(), r, 0, data.data(), data.size(), &st) != STRATA_OK ||
            d.read(t.get(), r, 0, back.data(), back.size(), &st) != STRATA_OK || back != data)
            _exit(5);
        config_table strict{{"path", path + "2"}, {"io_engine", std::string("io_uring")}};
        if (create_tier("nvme", strict, 1 << 20, &st) || !contains(st.message, "io_uring is unavailable")) _exit(6);
        t.reset();
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 2) << "could not install the seccomp filter";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: create failed, 4: no warning, 5: round trip failed, 6: strict io_uring "
                                         "accepted";
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(fs::exists(path + "2")) << "a create refused after opening the file must remove it";
}

TEST(Nvme, QueueDepthOneAndSixtyFourRoundTripLargeAlignedStreams) {
    for (int64_t depth : {1, 64}) {
        const std::string path = tier_file_path("depth" + std::to_string(depth));
        config_table cfg{{"path", path}, {"block_size", int64_t{65536}}, {"queue_depth", depth}};
        strata_status st{};
        tier_ptr t = create_tier("nvme", cfg, 8 << 20, &st);
        ASSERT_TRUE(t) << st.message;
        const strata_tier_desc &d = tier_plugin("nvme");
        const uint64_t size = (6 << 20) + 4096 * 3 + 17;
        uint64_t r = 0;
        ASSERT_EQ(d.region_alloc(t.get(), size, &r, &st), STRATA_OK);
        const std::vector<unsigned char> data = random_bytes(static_cast<uint64_t>(depth), static_cast<size_t>(size));
        aligned_buffer src(static_cast<size_t>(size));
        std::memcpy(src.data, data.data(), data.size());
        ASSERT_EQ(d.write(t.get(), r, 0, src.data, size, &st), STRATA_OK) << st.message;
        aligned_buffer dst(static_cast<size_t>(size));
        ASSERT_EQ(d.read(t.get(), r, 0, dst.data, size, &st), STRATA_OK) << st.message;
        EXPECT_EQ(std::memcmp(dst.data, data.data(), data.size()), 0) << "queue_depth " << depth;
        // Page-aligned offset that is not chunk-aligned: direct middle, staged edges.
        ASSERT_EQ(d.read(t.get(), r, 4096 * 5, dst.data, 1 << 20, &st), STRATA_OK) << st.message;
        EXPECT_EQ(std::memcmp(dst.data, data.data() + 4096 * 5, 1 << 20), 0) << "queue_depth " << depth;
        t.reset();
        EXPECT_FALSE(fs::exists(path));
    }
}

} // namespace
