// The plan's table (start-up) and JSON (`runtime plan --json`).
#include "planner/plan_report.hpp"
#include "planner_test_model.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace strata::planner;
using namespace strata::planner::test;

namespace {

std::vector<std::string> lines_of(const std::string &text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The cells of the table row whose first cell is `what` (trimmed), or nothing.
std::vector<std::vector<std::string>> rows_named(const std::string &table, const std::string &what) {
    std::vector<std::vector<std::string>> rows;
    for (const auto &line : lines_of(table)) {
        std::vector<std::string> cells;
        std::istringstream in(line);
        for (std::string cell; std::getline(in, cell, '|');) {
            const auto b = cell.find_first_not_of(' ');
            const auto e = cell.find_last_not_of(' ');
            cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        }
        if (!cells.empty() && cells[0] == what) rows.push_back(cells);
    }
    return rows;
}

} // namespace

TEST(PlanTable, GroupsLayersByHomeAndMode) {
    auto in = small_model();
    in.cpu_offload_layers = 4;
    const auto p = make_plan(in);
    const auto table = to_table(p, in);
    const auto device = rows_named(table, "layers 0-3");
    ASSERT_EQ(device.size(), 1u) << table;
    EXPECT_EQ(device[0][1], "device");
    EXPECT_EQ(device[0][2], "resident");
    EXPECT_EQ(device[0][3], "400.00 MiB");
    const auto offloaded = rows_named(table, "layers 4-7");
    ASSERT_EQ(offloaded.size(), 1u) << table;
    EXPECT_EQ(offloaded[0][1], "nvme");
    EXPECT_EQ(offloaded[0][2], "streamed");
    ASSERT_EQ(rows_named(table, "embedding").size(), 1u);
    ASSERT_EQ(rows_named(table, "output").size(), 1u);
    EXPECT_EQ(rows_named(table, "KV cache").size(), 1u);
    EXPECT_EQ(rows_named(table, "activations").size(), 1u);
    EXPECT_EQ(rows_named(table, "overhead").size(), 1u);
    const auto ring = rows_named(table, "staging ring");
    ASSERT_EQ(ring.size(), 1u);
    EXPECT_EQ(ring[0][3], "300.00 MiB");
    EXPECT_EQ(rows_named(table, "total").size(), 2u); // device and nvme
}

TEST(PlanTable, RowsAreAligned) {
    auto in = small_model();
    in.cpu_offload_layers = 2;
    const auto table = to_table(make_plan(in), in);
    size_t first_bar = std::string::npos;
    for (const auto &line : lines_of(table)) {
        if (line.rfind("  ", 0) != 0) continue; // table rows are indented; summary lines are not
        const auto bar = line.find_first_of("|+");
        if (first_bar == std::string::npos) first_bar = bar;
        EXPECT_EQ(bar, first_bar) << line;
    }
    EXPECT_NE(first_bar, std::string::npos);
}

TEST(PlanTable, SplitLayerGetsOneRowPerTier) {
    auto in = small_model();
    in.tiers = {{"pinned_ram", 250 * MiB, 0, true}, {"nvme", GiB, 0, false}};
    in.cpu_offload_layers = 4;
    const auto p = make_plan(in);
    const auto groups = group_layers(p, in);
    const auto table = to_table(p, in);
    EXPECT_EQ(rows_named(table, "layers 4-5").size(), 1u) << table;
    const auto split = rows_named(table, "layer 6");
    ASSERT_EQ(split.size(), 2u) << table;
    EXPECT_EQ(split[0][1], "nvme");
    EXPECT_EQ(split[0][3], "60.00 MiB");
    EXPECT_EQ(split[1][1], "pinned_ram");
    EXPECT_EQ(split[1][3], "40.00 MiB");
    EXPECT_EQ(rows_named(table, "layer 7").size(), 1u) << table;
    uint64_t total = 0;
    for (const auto &g : groups) total += g.bytes;
    EXPECT_EQ(total, 900 * MiB); // 8 layers of 100 MiB + 50 MiB embedding + 50 MiB output
}

TEST(PlanTable, CpuOffloadLineExactlyWhenOffloading) {
    auto in = small_model();
    auto table = to_table(make_plan(in), in);
    EXPECT_EQ(table.find("Using CPU offload with"), std::string::npos) << table;

    in.cpu_offload_layers = 4; // 400 MiB: said in MiB, not as 0.39 GiB
    table = to_table(make_plan(in), in);
    EXPECT_NE(table.find("Using CPU offload with 400.00 MiB\n"), std::string::npos) << table;
}

TEST(PlanTable, ShowsProblemsAndNotes) {
    auto in = small_model();
    in.tiers.clear();
    in.cpu_offload_layers = 1;
    in.max_model_len = 0;
    const auto table = to_table(make_plan(in), in);
    EXPECT_NE(table.find("fits: NO"), std::string::npos);
    EXPECT_NE(table.find("problem: weights need"), std::string::npos);
    EXPECT_NE(table.find("note: max_model_len 0"), std::string::npos);
    EXPECT_NE(table.find("(no room)"), std::string::npos);
}

TEST(PlanJson, HasEveryField) {
    auto in = small_model();
    in.cpu_offload_layers = 2;
    const auto p = make_plan(in);
    const auto j = to_json(p, in);
    for (const char *key : {"device_kind",
                            "device_budget",
                            "device_weights",
                            "device_kv",
                            "device_activation",
                            "device_overhead",
                            "staging_ring_bytes",
                            "prefetch_depth",
                            "tier_used",
                            "kv_bytes_per_token",
                            "kv_capacity_tokens",
                            "max_model_len",
                            "max_num_seqs",
                            "max_fitting_model_len",
                            "max_fitting_concurrency",
                            "offloaded_bytes",
                            "offloaded_layers",
                            "embedding_output_offloaded",
                            "fits",
                            "problems",
                            "notes",
                            "placements",
                            "groups",
                            "tiers"})
        EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["device_budget"].get<uint64_t>(), p.device_budget);
    EXPECT_EQ(j["device_kv"].get<uint64_t>(), p.device_kv);
    EXPECT_EQ(j["offloaded_bytes"].get<uint64_t>(), 200 * MiB);
    EXPECT_EQ(j["offloaded_layers"].get<int>(), 2);
    EXPECT_EQ(j["staging_ring_bytes"].get<uint64_t>(), 300 * MiB);
    EXPECT_EQ(j["tier_used"]["nvme"].get<uint64_t>(), 200 * MiB);
    EXPECT_EQ(j["kv_capacity_tokens"].get<int64_t>(), p.kv_capacity_tokens);
    EXPECT_TRUE(j["fits"].get<bool>());
    ASSERT_EQ(j["placements"].size(), in.tensors.size());
    const auto &last_layer = j["placements"][in.tensors.size() - 2]; // blk.7.ffn
    EXPECT_EQ(last_layer["tensor"], "blk.7.ffn");
    EXPECT_EQ(last_layer["home"], "nvme");
    EXPECT_EQ(last_layer["mode"], "streamed");
    EXPECT_EQ(last_layer["layer"], 7);
    EXPECT_EQ(j["tiers"][0]["name"], "nvme");
    EXPECT_EQ(j["tiers"][0]["used"].get<uint64_t>(), 200 * MiB);
    EXPECT_EQ(j["groups"].size(), group_layers(p, in).size());
}

TEST(PlanJson, UnplacedTensorsHaveNullHome) {
    auto in = small_model();
    in.tiers.clear();
    in.cpu_offload_layers = 1;
    const auto j = to_json(make_plan(in), in);
    EXPECT_FALSE(j["fits"].get<bool>());
    EXPECT_TRUE(j["placements"][in.tensors.size() - 2]["home"].is_null());
    EXPECT_EQ(j["problems"].size(), 1u);
}
