// Loading and refusing plugins: each broken fixture is refused with a reason naming the file and the broken rule.
#include "plugin_host/registry.hpp"
#include "test_host.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <unistd.h>

namespace {

using strata::plugins::registry;
using strata::test::captured_host;
using strata::test::file_name;

TEST(PluginRegistry, GoodDeviceLoadsAndIsFound) {
    captured_host host;
    registry reg(host.get());
    reg.load_file(FIXTURE_GOOD_DEVICE);

    auto dev = reg.find_device("good");
    ASSERT_NE(dev.desc, nullptr);
    EXPECT_STREQ(dev.desc->header.name, "good");
    EXPECT_EQ(dev.desc->score(), 5);
    EXPECT_EQ(dev.lib->file_name(), file_name(FIXTURE_GOOD_DEVICE));
    EXPECT_EQ(reg.best_device().desc, dev.desc);
    EXPECT_EQ(reg.names(STRATA_KIND_DEVICE), std::vector<std::string>{"good"});
    EXPECT_TRUE(reg.names(STRATA_KIND_TIER).empty());
    EXPECT_EQ(reg.find_device("absent").desc, nullptr);
    EXPECT_EQ(reg.find_tier("good").desc, nullptr);
    EXPECT_TRUE(reg.rejections().empty());

    // The entry point received our host services and logged through them.
    ASSERT_EQ(host.messages.size(), 1u);
    EXPECT_EQ(host.messages[0], "fixture_good: entry called");

    const auto tables = reg.config_tables();
    ASSERT_EQ(tables.size(), 1u);
    EXPECT_EQ(tables[0].first, "fixture_good");
    ASSERT_EQ(tables[0].second.second, 1u);
    EXPECT_STREQ(tables[0].second.first[0].name, "threads");
}

struct refusal_case {
    const char *label;
    const char *path;
    std::string reason; // substring the refusal must contain
};

void PrintTo(const refusal_case &c, std::ostream *os) { *os << c.label; }

class PluginRefusal : public ::testing::TestWithParam<refusal_case> {};

TEST_P(PluginRefusal, IsRefusedWithReasonAndFileName) {
    const refusal_case &c = GetParam();
    captured_host host;
    registry reg(host.get());
    try {
        reg.load_file(c.path);
        FAIL() << c.label << " was accepted";
    } catch (const strata::error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(file_name(c.path)), std::string::npos) << what;
        EXPECT_NE(what.find(c.reason), std::string::npos) << "expected '" << c.reason << "' in: " << what;
    }
    ASSERT_EQ(reg.rejections().size(), 1u);
    EXPECT_NE(reg.rejections()[0].path.find(file_name(c.path)), std::string::npos);
    EXPECT_NE(reg.rejections()[0].reason.find(c.reason), std::string::npos);
    // Nothing of a refused library stays registered.
    EXPECT_TRUE(reg.list().empty());
    EXPECT_TRUE(reg.config_tables().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, PluginRefusal,
    ::testing::Values(
        refusal_case{"wrong_major", FIXTURE_WRONG_MAJOR,
                     fmt::format("built for Strata ABI {}.x, this runtime is {}.x: rebuild the plugin against this SDK",
                                 STRATA_ABI_MAJOR + 1, STRATA_ABI_MAJOR)},
        refusal_case{"newer_minor", FIXTURE_NEWER_MINOR,
                     fmt::format("needs ABI {}.{}, this runtime provides {}.{}: upgrade Strata", STRATA_ABI_MAJOR,
                                 STRATA_ABI_MINOR + 5, STRATA_ABI_MAJOR, STRATA_ABI_MINOR)},
        refusal_case{"missing_slot", FIXTURE_MISSING_SLOT,
                     "device descriptor 'missing_slot' lacks required slot 'matmul'"},
        refusal_case{"no_entry", FIXTURE_NO_ENTRY, "no 'strata_plugin_entry' symbol"},
        refusal_case{"not_a_plugin", FIXTURE_NOT_A_PLUGIN, "not a loadable shared object"},
        refusal_case{"entry_returns_null", FIXTURE_ENTRY_RETURNS_NULL,
                     "returned NULL (the plugin declined to load): simulated: this CPU lacks avx1024"},
        refusal_case{"entry_throws", FIXTURE_ENTRY_THROWS, "threw an exception"},
        refusal_case{"unknown_kind", FIXTURE_MALFORMED_UNKNOWN_KIND, "descriptor 'malformed' has unknown kind 99"},
        refusal_case{"short_required_size", FIXTURE_MALFORMED_SHORT_REQUIRED_SIZE,
                     "device descriptor 'malformed' required_size"},
        refusal_case{"struct_smaller_than_required", FIXTURE_MALFORMED_STRUCT_SMALLER_THAN_REQUIRED,
                     "is smaller than its own required_size"},
        refusal_case{"no_descriptors", FIXTURE_MALFORMED_NO_DESCRIPTORS, "provides no descriptors"},
        refusal_case{"empty_descriptor_name", FIXTURE_MALFORMED_EMPTY_DESCRIPTOR_NAME, "descriptor #0 has no name"},
        refusal_case{"duplicate_config_key", FIXTURE_MALFORMED_DUPLICATE_CONFIG_KEY,
                     "config key 'threads' is declared twice"},
        refusal_case{"bad_config_type", FIXTURE_MALFORMED_BAD_CONFIG_TYPE, "config key 'mode' has invalid type 42"},
        refusal_case{"info_too_small", FIXTURE_MALFORMED_INFO_TOO_SMALL, "plugin info struct_size"},
        refusal_case{"missing_file", FIXTURE_DIR "/libstrata_does_not_exist.so", "not a regular file"}),
    [](const ::testing::TestParamInfo<refusal_case> &info) { return std::string(info.param.label); });

TEST(PluginRegistry, EntryExceptionTextIsReported) {
    registry reg(nullptr); // a NULL host is allowed (tools)
    try {
        reg.load_file(FIXTURE_ENTRY_THROWS);
        FAIL() << "accepted";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("simulated entry failure"), std::string::npos) << e.what();
    }
}

TEST(PluginRegistry, SecondLibraryWithSameDeviceNameIsRefused) {
    captured_host host;
    registry reg(host.get());
    reg.load_file(FIXTURE_GOOD_DEVICE);
    try {
        reg.load_file(FIXTURE_DUPLICATE_NAME);
        FAIL() << "duplicate accepted";
    } catch (const strata::error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(file_name(FIXTURE_DUPLICATE_NAME)), std::string::npos) << what;
        EXPECT_NE(what.find("device 'good' is already provided by"), std::string::npos) << what;
        EXPECT_NE(what.find(file_name(FIXTURE_GOOD_DEVICE)), std::string::npos) << what;
    }
    // The first one keeps the name.
    EXPECT_EQ(reg.find_device("good").lib->file_name(), file_name(FIXTURE_GOOD_DEVICE));
    EXPECT_EQ(reg.names(STRATA_KIND_DEVICE).size(), 1u);
}

TEST(PluginRegistry, SameFileTwiceIsRefused) {
    registry reg(nullptr);
    reg.load_file(FIXTURE_GOOD_DEVICE);
    EXPECT_THROW(
        {
            try {
                reg.load_file(FIXTURE_GOOD_DEVICE);
            } catch (const strata::error &e) {
                EXPECT_NE(std::string(e.what()).find("already loaded"), std::string::npos) << e.what();
                throw;
            }
        },
        strata::error);
    EXPECT_EQ(reg.list().size(), 1u);
}

TEST(PluginRegistry, FormatListingHasHeaderAndRow) {
    registry reg(nullptr);
    reg.load_file(FIXTURE_GOOD_DEVICE);
    const std::string table = reg.format_listing();
    const auto first_newline = table.find('\n');
    ASSERT_NE(first_newline, std::string::npos);
    const std::string header = table.substr(0, first_newline);
    EXPECT_EQ(header.find("KIND"), 0u) << table;
    for (const char *col : {"NAME", "VERSION", "ABI", "LICENSE", "PATH"}) {
        EXPECT_NE(header.find(col), std::string::npos) << col;
    }
    const std::string row = table.substr(first_newline + 1);
    const std::string abi = fmt::format("{}.{}", STRATA_ABI_MAJOR, STRATA_ABI_MINOR);
    size_t pos = 0;
    for (const std::string &cell :
         {std::string("device"), std::string("good"), std::string("0.0.1"), abi, std::string("MIT"),
          reg.list()[0].path}) {
        pos = row.find(cell, pos);
        ASSERT_NE(pos, std::string::npos) << "missing '" << cell << "' in order in:\n" << table;
    }
    // Columns are aligned: NAME starts at the same offset in the header and the row.
    EXPECT_EQ(header.find("NAME"), row.find("good"));
}

// A scratch directory removed at the end of the test.
struct temp_dir {
    std::filesystem::path path;
    explicit temp_dir(const std::string &tag) {
        path = std::filesystem::temp_directory_path() / fmt::format("strata_{}_{}", tag, ::getpid());
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

TEST(PluginRegistry, LoadDirectorySkipsOtherFilesAndRecordsRejections) {
    temp_dir dir("plugin_dir");
    namespace fs = std::filesystem;
    fs::copy_file(FIXTURE_GOOD_DEVICE, dir.path / "libstrata_good.so");
    fs::copy_file(FIXTURE_WRONG_MAJOR, dir.path / "libstrata_wrong_major.so");
    fs::copy_file(FIXTURE_NOT_A_PLUGIN, dir.path / "libstrata_text.so");
    // Not named libstrata_*.so: skipped without a rejection, even though these would be refused if loaded.
    fs::copy_file(FIXTURE_MISSING_SLOT, dir.path / "libother.so");
    fs::copy_file(FIXTURE_MISSING_SLOT, dir.path / "libstrata_missing_slot.so.bak");
    std::ofstream(dir.path / "README.txt") << "not a plugin\n";
    fs::create_directory(dir.path / "libstrata_dir.so");

    registry reg(nullptr);
    size_t loaded = 0;
    ASSERT_NO_THROW(loaded = reg.load_directory(dir.path));
    EXPECT_EQ(loaded, 1u);
    EXPECT_NE(reg.find_device("good").desc, nullptr);
    ASSERT_EQ(reg.rejections().size(), 2u);
    // Sorted load order: libstrata_text.so before libstrata_wrong_major.so.
    EXPECT_NE(reg.rejections()[0].path.find("libstrata_text.so"), std::string::npos);
    EXPECT_NE(reg.rejections()[0].reason.find("not a loadable shared object"), std::string::npos);
    EXPECT_NE(reg.rejections()[1].path.find("libstrata_wrong_major.so"), std::string::npos);
    EXPECT_NE(reg.rejections()[1].reason.find("rebuild the plugin"), std::string::npos);
}

TEST(PluginRegistry, MissingDirectoryIsNotAnError) {
    registry reg(nullptr);
    size_t loaded = 99;
    ASSERT_NO_THROW(loaded = reg.load_directory(FIXTURE_DIR "/no/such/dir"));
    EXPECT_EQ(loaded, 0u);
    EXPECT_TRUE(reg.rejections().empty());
}

} // namespace
