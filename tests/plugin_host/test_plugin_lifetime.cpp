// Objects created by plugins: guarded create (failing and throwing plugins), and libraries staying loaded while
// anything refers to them.
#include "error_of.hpp"
#include "plugin_host/registry.hpp"
#include "test_host.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

using strata::plugins::registry;
using strata::test::captured_host;
using strata::test::file_name;

strata::plugins::plugin_ptr<strata_device> create_device(const strata::plugins::handle<strata_device_desc> &dev,
                                                         const strata_host_services *host) {
    strata_device_create_args args{sizeof(strata_device_create_args), host, nullptr};
    return strata::plugins::create_guarded(
        dev, [&](strata_status *st) { return dev.desc->create(&args, st); }, dev.desc->destroy);
}

using strata::testing::error_of;

TEST(PluginCreate, FailingCreateReportsPluginStatus) {
    captured_host host;
    registry reg(host.get());
    reg.load_file(FIXTURE_CREATE_FAILS);
    auto dev = reg.find_device("create_fails");
    ASSERT_TRUE(dev);
    const std::string what = error_of([&] { create_device(dev, host.get()); });
    EXPECT_NE(what.find(file_name(FIXTURE_CREATE_FAILS)), std::string::npos) << what;
    EXPECT_NE(what.find("device 'create_fails' create failed: simulated: no accelerator present"), std::string::npos)
        << what;
}

TEST(PluginCreate, ThrowingCreateBecomesStrataError) {
    captured_host host;
    registry reg(host.get());
    reg.load_file(FIXTURE_CREATE_THROWS);
    auto dev = reg.find_device("create_throws");
    ASSERT_TRUE(dev);
    const std::string what = error_of([&] { create_device(dev, host.get()); });
    const std::string expected =
        "plugin " + file_name(FIXTURE_CREATE_THROWS) + " threw from create: simulated allocator explosion";
    EXPECT_NE(what.find(expected), std::string::npos) << what;
}

TEST(PluginCreate, GoodCreateGivesOwningPointer) {
    registry reg(nullptr);
    reg.load_file(FIXTURE_GOOD_DEVICE);
    auto dev = reg.find_device("good");
    auto obj = create_device(dev, nullptr);
    EXPECT_NE(obj.get(), nullptr);
}

TEST(CallGuarded, PassesResultsAndHostErrorsThrough) {
    registry reg(nullptr);
    reg.load_file(FIXTURE_GOOD_DEVICE);
    const auto &lib = *reg.find_device("good").lib;
    EXPECT_EQ(strata::plugins::call_guarded(lib, "score", [] { return 7; }), 7);
    // Host code inside the guarded call may throw strata::error; it must not be re-labelled as the plugin's fault.
    const std::string host_error = error_of([&] {
        strata::plugins::call_guarded(lib, "x", []() -> int { throw strata::error("host says no"); });
    });
    EXPECT_EQ(host_error, "host says no");
    const std::string odd = error_of([&] { strata::plugins::call_guarded(lib, "run", [] { throw 42; }); });
    EXPECT_NE(odd.find("threw from run: a non-standard exception"), std::string::npos) << odd;
}

// dlopen(RTLD_NOLOAD) answers "is this library mapped right now?" without loading it.
bool is_loaded(const std::string &path) {
    void *h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) return false;
    ::dlclose(h); // drop the reference NOLOAD just took
    return true;
}

TEST(PluginLifetime, HandlesAndObjectsKeepTheLibraryLoadedAfterTheRegistryDies) {
    std::optional<registry> reg;
    reg.emplace(nullptr);
    reg->load_file(FIXTURE_GOOD_DEVICE);
    auto dev = reg->find_device("good");
    ASSERT_TRUE(dev);
    const std::string path = dev.lib->path.string();
    auto obj = create_device(dev, nullptr);
    ASSERT_TRUE(is_loaded(path));

    reg.reset(); // the registry is gone...
    ASSERT_TRUE(is_loaded(path));
    EXPECT_EQ(dev.desc->score(), 5); // ...but the descriptor's code is still callable

    dev = {}; // only the plugin object holds the library now
    EXPECT_TRUE(is_loaded(path));
    obj.reset(); // calls the plugin's destroy, then releases the library
    EXPECT_FALSE(is_loaded(path));
}

TEST(PluginLifetime, RefusedLibraryIsUnloaded) {
    registry reg(nullptr);
    EXPECT_THROW(reg.load_file(FIXTURE_MISSING_SLOT), strata::error);
    EXPECT_FALSE(is_loaded(reg.rejections().at(0).path));
}

} // namespace
