// Creating and destroying devices: thread counts from config and host, pinning, no leaked threads, plugin info and
// the loadable module.
#include "cpu_test_support.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/types.h>

#include <thread>

namespace {

using namespace cpu_test;

std::vector<pid_t> process_threads() {
    std::vector<pid_t> tids;
    DIR *dir = opendir("/proc/self/task");
    if (dir == nullptr) return tids;
    while (dirent *e = readdir(dir))
        if (e->d_name[0] != '.') tids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    closedir(dir);
    return tids;
}

strata_device *create_with(fake_config *cfg, fake_host *host, strata_status *st) {
    const strata_config_view view = cfg != nullptr ? cfg->view() : strata_config_view{};
    const strata_host_services services = host != nullptr ? host->services() : strata_host_services{};
    strata_device_create_args args{};
    args.struct_size = sizeof args;
    args.config = cfg != nullptr ? &view : nullptr;
    args.host = host != nullptr ? &services : nullptr;
    return ops().create(&args, st);
}

// A joined thread's /proc/self/task entry can linger for a moment after join() returns (the kernel reaps it
// asynchronously), so counts are polled until they settle; the bound only limits how long a real leak takes to fail.
size_t settled_thread_count(size_t expected) {
    size_t n = process_threads().size();
    for (int i = 0; i < 200 && n != expected; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        n = process_threads().size();
    }
    return n;
}

// The thread count once it has stopped changing for 200 ms (bounded at 4 s).
size_t quiet_thread_count() {
    size_t n = process_threads().size();
    for (int stable = 0, i = 0; stable < 20 && i < 400; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const size_t m = process_threads().size();
        stable = m == n ? stable + 1 : 0;
        n = m;
    }
    return n;
}

TEST(CpuDeviceLifecycle, CreateDestroyManyTimesLeavesNoThreads) {
    // A runtime may start a thread of its own when the process first creates one (ThreadSanitizer's background
    // thread), so the baseline is taken after one device has come and gone.
    { device_ptr warm = make_device(2); }
    const size_t before = quiet_thread_count();
    ASSERT_GT(before, 0u);
    for (int i = 0; i < 40; ++i) {
        device_ptr dev = make_device(4);
        ASSERT_NE(dev, nullptr);
        ASSERT_EQ(settled_thread_count(before + 3), before + 3) << "the caller is worker 0, so 4 threads start 3";
        // Use the pool so every worker has woken at least once before it is joined.
        std::vector<float> a(100000, 1.0f), b(100000, 2.0f), out(100000);
        strata_status st{};
        ASSERT_EQ(ops().add(dev.get(), a.data(), b.data(), 100000, out.data(), &st), STRATA_OK);
        ASSERT_EQ(out[99999], 3.0f);
    }
    EXPECT_EQ(settled_thread_count(before), before);
}

TEST(CpuDeviceLifecycle, ThreadCountComesFromConfigThenHostCores) {
    strata_status st{};
    fake_config cfg;
    fake_host host;
    host.cores = 5;

    cfg.threads = 3;
    device_ptr configured(create_with(&cfg, &host, &st));
    ASSERT_NE(configured, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(configured.get()), 3);

    cfg.threads = 0; // one per physical core, from the host's topology
    device_ptr from_host(create_with(&cfg, &host, &st));
    ASSERT_NE(from_host, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(from_host.get()), 5);

    device_ptr defaults(create_with(nullptr, nullptr, &st)); // no config, no host: the machine's CPU count
    ASSERT_NE(defaults, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(defaults.get()),
              static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency())));

    device_ptr null_args(ops().create(nullptr, &st));
    ASSERT_NE(null_args, nullptr) << st.message;
    EXPECT_GE(ops().thread_count(null_args.get()), 1);
}

TEST(CpuDeviceLifecycle, OutOfRangeThreadCountIsAnError) {
    strata_status st{};
    fake_config cfg;
    cfg.threads = 5000;
    EXPECT_EQ(create_with(&cfg, nullptr, &st), nullptr);
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(st.message).find("threads"), std::string::npos) << st.message;
}

TEST(CpuDeviceLifecycle, WorkersArePinnedToTheHostsCpus) {
    cpu_set_t allowed;
    ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
    ASSERT_LT(cpu, CPU_SETSIZE);

    const std::vector<pid_t> before = process_threads();
    fake_config cfg;
    cfg.threads = 3;
    cfg.pin_threads = true;
    fake_host host;
    host.pin_cpus = {cpu, cpu, cpu};
    strata_status st{};
    device_ptr dev(create_with(&cfg, &host, &st));
    ASSERT_NE(dev, nullptr) << st.message;

    int pinned_workers = 0;
    for (pid_t tid : process_threads()) {
        if (std::find(before.begin(), before.end(), tid) != before.end()) continue;
        cpu_set_t set;
        ASSERT_EQ(sched_getaffinity(tid, sizeof set, &set), 0);
        if (CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set)) ++pinned_workers;
    }
    EXPECT_EQ(pinned_workers, 2);

    // pin_threads = false leaves the workers' affinity alone even when the host offers CPUs.
    if (CPU_COUNT(&allowed) > 1) {
        cfg.pin_threads = false;
        device_ptr unpinned(create_with(&cfg, &host, &st));
        ASSERT_NE(unpinned, nullptr);
        const std::vector<pid_t> now = process_threads();
        int single_cpu_threads = 0;
        for (pid_t tid : now) {
            cpu_set_t set;
            if (sched_getaffinity(tid, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1) ++single_cpu_threads;
        }
        EXPECT_EQ(single_cpu_threads, 2) << "only the first device's workers should be pinned";
    }
}

// Data-parallel replicas (ABI 1.27): instance i of n takes the i-th of n shares of the threads and of the cores the
// host offers for pinning; an instance out of range, or more instances than threads, is refused. Pipeline stages
// (ABI 1.28) share their instance's threads; a stage out of range is refused.
TEST(CpuDeviceLifecycle, DataParallelInstancesTakeTheirShareOfThreadsAndCores) {
    cpu_set_t allowed;
    ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    const int a = cpus.front(), b = cpus.back(); // the same CPU on a one-CPU machine
    fake_config cfg;
    cfg.threads = 4;
    cfg.pin_threads = true;
    fake_host host;
    host.pin_cpus = {a, a, b, b};
    const strata_config_view view = cfg.view();
    const strata_host_services services = host.services();
    auto create = [&](int32_t instance, int32_t n, strata_status *st, int32_t stage = 0, int32_t n_stages = 1) {
        strata_device_create_args args{};
        args.struct_size = sizeof args;
        args.config = &view;
        args.host = &services;
        args.instance = instance;
        args.n_instances = n;
        args.pipeline_rank = stage;
        args.n_pipeline_ranks = n_stages;
        return ops().create(&args, st);
    };
    strata_status st{};
    const std::vector<pid_t> before = process_threads();
    device_ptr second(create(1, 2, &st));
    ASSERT_NE(second, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(second.get()), 2) << "half of the 4 threads";
    // New threads pinned to one core (a sanitizer's own helper thread, if one starts, is not pinned).
    int on_a = 0, on_b = 0;
    for (pid_t tid : process_threads()) {
        if (std::find(before.begin(), before.end(), tid) != before.end()) continue;
        cpu_set_t set;
        ASSERT_EQ(sched_getaffinity(tid, sizeof set, &set), 0);
        if (CPU_COUNT(&set) == 1 && CPU_ISSET(b, &set)) ++on_b;
        else if (CPU_COUNT(&set) == 1 && CPU_ISSET(a, &set)) ++on_a;
    }
    EXPECT_EQ(on_b, 1) << "instance 1's worker is pinned to the second share's core";
    EXPECT_EQ(on_a, 0) << "nothing of instance 1 runs on the first share's core";
    device_ptr quarter(create(3, 4, &st));
    ASSERT_NE(quarter, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(quarter.get()), 1);

    // Pipeline stages (ABI 1.28) run one after another: each computes on its replica's whole share.
    device_ptr stage(create(0, 4, &st, 2, 3));
    ASSERT_NE(stage, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(stage.get()), 1) << "a quarter of the threads, whatever the stage";
    device_ptr stage_alone(create(0, 1, &st, 1, 2));
    ASSERT_NE(stage_alone, nullptr) << st.message;
    EXPECT_EQ(ops().thread_count(stage_alone.get()), 4);

    EXPECT_EQ(create(2, 2, &st), nullptr);
    EXPECT_NE(std::string(st.message).find("instance 2 of 2 is out of range"), std::string::npos) << st.message;
    EXPECT_EQ(create(0, 1, &st, 2, 2), nullptr);
    EXPECT_NE(std::string(st.message).find("cpu create: pipeline rank 2 of 2 is out of range"), std::string::npos)
        << st.message;
    EXPECT_EQ(create(0, 1, &st, -1, 2), nullptr);
    EXPECT_NE(std::string(st.message).find("pipeline rank -1 of 2 is out of range"), std::string::npos) << st.message;
    EXPECT_EQ(create(0, 5, &st), nullptr);
    EXPECT_NE(std::string(st.message).find("5 data-parallel replicas need a thread each (tensor-parallel ranks count as "
                                           "replicas here: each computes at the same time), but the cpu device has 4"),
              std::string::npos)
        << st.message;
}

TEST(CpuDeviceLifecycle, MemoryIsAlignedAndZeroBytesIsAnError) {
    device_ptr dev = make_device(1);
    strata_status st{};
    for (uint64_t bytes : {uint64_t{1}, uint64_t{1000}, uint64_t{5} << 20}) {
        void *p = ops().mem_alloc(dev.get(), bytes, &st);
        ASSERT_NE(p, nullptr) << st.message;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
        std::memset(p, 0xab, bytes); // the whole range is writable
        ops().mem_free(dev.get(), p);
    }
    EXPECT_EQ(ops().mem_alloc(dev.get(), 0, &st), nullptr);
    EXPECT_EQ(st.code, STRATA_ERR_INVALID_ARGUMENT);
    ops().mem_free(dev.get(), nullptr); // no-op
}

TEST(CpuDevicePluginInfo, DescribesOneCpuDeviceAndItsConfigKeys) {
    const strata_plugin_info *info = strata_cpu_plugin_info();
    ASSERT_NE(info, nullptr);
    EXPECT_STREQ(info->name, "cpu");
    EXPECT_STREQ(info->version, "0.1.0");
    EXPECT_STREQ(info->license, "MIT");
    EXPECT_EQ(info->abi_major, static_cast<uint32_t>(STRATA_ABI_MAJOR));
    ASSERT_EQ(info->n_descriptors, 1u);
    const strata_descriptor_header *h = info->descriptors[0];
    EXPECT_EQ(h->kind, static_cast<uint32_t>(STRATA_KIND_DEVICE));
    EXPECT_STREQ(h->name, "cpu");
    EXPECT_EQ(h->struct_size, sizeof(strata_device_desc));
    EXPECT_EQ(h->required_size, offsetof(strata_device_desc, thread_count));
    const auto *desc = reinterpret_cast<const strata_device_desc *>(h);
    EXPECT_EQ(desc, strata_cpu_device_descriptor());
    EXPECT_TRUE(STRATA_HAS_SLOT(desc, thread_count));
    EXPECT_EQ(desc->score(), 1);

    ASSERT_EQ(info->n_config_keys, 3u);
    EXPECT_STREQ(info->config_keys[0].name, "threads");
    EXPECT_EQ(info->config_keys[0].type, static_cast<uint32_t>(STRATA_CONFIG_INT));
    EXPECT_STREQ(info->config_keys[0].default_value, "0");
    EXPECT_EQ(info->config_keys[0].max_value, 1024.0);
    EXPECT_STREQ(info->config_keys[0].flag, "--threads|-t|--cpu-parallelism"); // llama.cpp -t, the seeds' cpu_parallelism
    EXPECT_STREQ(info->config_keys[1].name, "pin_threads");
    EXPECT_EQ(info->config_keys[1].type, static_cast<uint32_t>(STRATA_CONFIG_BOOL));
    EXPECT_STREQ(info->config_keys[1].default_value, "true");
    EXPECT_STREQ(info->config_keys[1].flag, "--pin-threads");
    EXPECT_STREQ(info->config_keys[2].name, "separate_memory");
    EXPECT_STREQ(info->config_keys[2].default_value, "false");
}

TEST(CpuDevicePluginInfo, ModuleExportsTheEntryPointAndRunsOps) {
    void *lib = dlopen(STRATA_CPU_MODULE_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto entry = reinterpret_cast<strata_plugin_entry_fn>(dlsym(lib, STRATA_PLUGIN_ENTRY_SYMBOL));
    ASSERT_NE(entry, nullptr) << dlerror();
    strata_status st{};
    const strata_plugin_info *info = entry(nullptr, &st);
    ASSERT_NE(info, nullptr);
    EXPECT_STREQ(info->name, "cpu");
    ASSERT_EQ(info->n_descriptors, 1u);
    const auto *desc = reinterpret_cast<const strata_device_desc *>(info->descriptors[0]);
    strata_device *dev = desc->create(nullptr, &st);
    ASSERT_NE(dev, nullptr) << st.message;
    const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    float out[3] = {};
    EXPECT_EQ(desc->add(dev, a, b, 3, out, &st), STRATA_OK);
    EXPECT_EQ(out[2], 33.0f);
    desc->destroy(dev);
    EXPECT_EQ(dlclose(lib), 0);
}

} // namespace
