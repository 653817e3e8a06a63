// The engine's choice of NUMA node for pinned_ram when the device is a GPU (pinned_staging_node), and the config view
// that hands the choice to the tier (config_override_view). Both pure: no GPU needed.
#include "engine/config_override_view.hpp"
#include "engine/pinned_staging_node.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

using namespace strata;
using strata::engine::pinned_staging_node;

namespace {

// Two sockets, one node each: a GPU under socket 1, a NIC under socket 0, a BMC display adapter under the machine.
topology::machine two_sockets() {
    topology::machine m;
    m.numa = {{0, 1ULL << 30, {0, 1}}, {1, 1ULL << 30, {2, 3}}};
    m.pci_devices = {{0, 0x41, 0, 0, {1}}, {0, 0x17, 0, 0, {0}}, {0, 0x00, 2, 0, {0, 1}}};
    return m;
}

} // namespace

TEST(PinnedStagingNode, TheGpusNearestNodeIsChosen) {
    EXPECT_EQ(pinned_staging_node(two_sockets(), "0000:41:00.0", std::nullopt), 1);
    EXPECT_EQ(pinned_staging_node(two_sockets(), "0000:17:00.0", std::nullopt), 0);
    EXPECT_EQ(pinned_staging_node(two_sockets(), "00000000:41:00.0", std::nullopt), 1) << "nvidia-smi's form";
}

TEST(PinnedStagingNode, TheUsersNumaNodeWinsEvenMinusOne) {
    EXPECT_EQ(pinned_staging_node(two_sockets(), "0000:41:00.0", 0), std::nullopt);
    EXPECT_EQ(pinned_staging_node(two_sockets(), "0000:41:00.0", -1), std::nullopt);
    EXPECT_EQ(pinned_staging_node(two_sockets(), "0000:41:00.0", 1), std::nullopt);
}

TEST(PinnedStagingNode, NoChoiceWithoutLocality) {
    const topology::machine m = two_sockets();
    EXPECT_EQ(pinned_staging_node(m, "", std::nullopt), std::nullopt) << "no bus id";
    EXPECT_EQ(pinned_staging_node(m, "0000:99:00.0", std::nullopt), std::nullopt) << "not in the topology";
    EXPECT_EQ(pinned_staging_node(m, "not a bus id", std::nullopt), std::nullopt);
    EXPECT_EQ(pinned_staging_node(m, "0000:00:02.0", std::nullopt), std::nullopt) << "as near every node";
    EXPECT_EQ(pinned_staging_node(topology::machine{}, "0000:41:00.0", std::nullopt), std::nullopt) << "a VM without PCI";

    topology::machine one_node;
    one_node.numa = {{0, 1ULL << 30, {0, 1}}};
    one_node.pci_devices = {{0, 0x41, 0, 0, {0}}};
    EXPECT_EQ(pinned_staging_node(one_node, "0000:41:00.0", std::nullopt), std::nullopt) << "one node: nothing to gain";
}

TEST(PinnedStagingNode, SubNumaClustersGiveTheLowestNearNode) {
    topology::machine snc; // two sockets of two sub-NUMA clusters; the GPU hangs off socket 1
    snc.numa = {{0, 1ULL << 30, {0}}, {1, 1ULL << 30, {1}}, {2, 1ULL << 30, {2}}, {3, 1ULL << 30, {3}}};
    snc.pci_devices = {{0, 0x41, 0, 0, {2, 3}}};
    EXPECT_EQ(pinned_staging_node(snc, "0000:41:00.0", std::nullopt), 2);
}

// ---- config_override_view ---------------------------------------------------------------------------------------

namespace {

// The user's [pinned_ram] table: size set, numa_node not.
struct user_table {
    std::map<std::string, int64_t> ints{{"size", 4096}};
    std::string path = "/mnt/x";
    strata_config_view view{};
    user_table() {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            auto &t = *static_cast<user_table *>(ctx);
            auto it = t.ints.find(key);
            if (it == t.ints.end()) return 0;
            *out = it->second;
            return 1;
        };
        view.get_string = [](void *ctx, const char *key, const char **out) -> int32_t {
            if (std::strcmp(key, "path") != 0) return 0;
            *out = static_cast<user_table *>(ctx)->path.c_str();
            return 1;
        };
    }
};

} // namespace

TEST(ConfigOverrideView, AnswersItsKeyAndPassesTheRestOn) {
    user_table user;
    const engine::config_override_view o(&user.view, "numa_node", 1);
    const strata_config_view *v = o.view();
    ASSERT_EQ(v->struct_size, sizeof(strata_config_view));
    int64_t i = -5;
    ASSERT_EQ(v->get_int(v->ctx, "numa_node", &i), 1);
    EXPECT_EQ(i, 1);
    ASSERT_EQ(v->get_int(v->ctx, "size", &i), 1);
    EXPECT_EQ(i, 4096);
    EXPECT_EQ(v->get_int(v->ctx, "missing", &i), 0);
    const char *s = nullptr;
    ASSERT_EQ(v->get_string(v->ctx, "path", &s), 1);
    EXPECT_STREQ(s, "/mnt/x");
    EXPECT_EQ(v->get_string(v->ctx, "numa_node", &s), 0) << "an INT key read as a string is not set";
    double f = 0;
    ASSERT_EQ(v->get_float(v->ctx, "numa_node", &f), 1);
    EXPECT_EQ(f, 1.0);
    // Getters the user's view lacks read as not set rather than crashing.
    int32_t b = 0;
    EXPECT_EQ(v->get_bool(v->ctx, "pin", &b), 0);
    EXPECT_EQ(v->get_list_size(v->ctx, "devices"), 0);
    EXPECT_EQ(v->get_list_item(v->ctx, "devices", 0), nullptr);
}

TEST(ConfigOverrideView, WorksWithoutAUserTable) {
    const engine::config_override_view o(nullptr, "numa_node", 0);
    const strata_config_view *v = o.view();
    int64_t i = -5;
    ASSERT_EQ(v->get_int(v->ctx, "numa_node", &i), 1);
    EXPECT_EQ(i, 0);
    EXPECT_EQ(v->get_int(v->ctx, "size", &i), 0);
}
