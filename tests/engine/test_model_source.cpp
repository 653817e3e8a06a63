// The engine's model_source (core/engine/model_source.cpp) describing tensors of a hostile file: one with a zero
// dimension has no elements, so the GGUF reader accepts any size for its other dimensions, and a row count or row
// size past int64 must come out as 0 rows (which no model's shape check accepts), not as signed overflow (fuzz_model_load's
// first finding; the UBSan build of this test saw it). A row too wide for int64 bytes is not written here: the GGUF
// writer's own size arithmetic refuses it (fuzz_model_load covers that case from its corpus).
#include "engine/model_source.hpp"
#include "gguf/gguf_file.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

TEST(ModelSource, ATensorWhoseRowsOrRowSizeOverflowInt64HasNoRows) {
    strata::gguf::writer w;
    w.add_string("general.architecture", "llama");
    w.add_tensor("tall", 0, {0, (int64_t{1} << 62) + 1, 4}, {});     // 2^64 + 4 rows of none (4 if it wrapped)
    w.add_tensor("fine", 0, {4, 3, 2}, std::vector<uint8_t>(96, 0)); // a 3-D tensor: 6 rows of 4
    const std::vector<uint8_t> bytes = w.to_bytes();
    const auto file = strata::gguf::file::parse(bytes.data(), bytes.size(), "hostile.gguf");
    strata_host_services host{};
    host.struct_size = sizeof host;
    host.host_abi_major = STRATA_ABI_MAJOR;
    host.host_abi_minor = STRATA_ABI_MINOR;
    const strata::plugins::registry registry(&host); // no quant plugins: the GGUF type table sizes rows
    const strata::engine::model_source source(file, registry, &host);
    const strata_model_source *v = source.view();
    for (const char *name : {"tall"}) {
        strata_tensor_view t{};
        t.struct_size = sizeof t;
        ASSERT_EQ(v->get_tensor(v->ctx, name, &t), 1) << name;
        EXPECT_EQ(t.rows, 0) << name;
        EXPECT_EQ(t.row_bytes, 0) << name;
    }
    strata_tensor_view t{};
    t.struct_size = sizeof t;
    ASSERT_EQ(v->get_tensor(v->ctx, "fine", &t), 1);
    EXPECT_EQ(t.rows, 6);
    EXPECT_EQ(t.cols, 4);
    EXPECT_EQ(t.row_bytes, 16);
    // ABI 1.17: the file's dimensions, so a model can tell [4, 3, 2] from [4, 2, 3] (the same 6 rows).
    EXPECT_EQ(t.n_dims, 3);
    EXPECT_EQ(t.ne[0], 4);
    EXPECT_EQ(t.ne[1], 3);
    EXPECT_EQ(t.ne[2], 2);
    EXPECT_EQ(t.ne[3], 1);
    // A plugin built before 1.17 has a shorter view: nothing past its struct_size is written.
    struct old_view {
        strata_tensor_view v;
        unsigned char after[sizeof(strata_tensor_view)];
    } old{};
    std::fill(std::begin(old.after), std::end(old.after), 0xab);
    old.v.struct_size = offsetof(strata_tensor_view, n_dims);
    unsigned char *tail = reinterpret_cast<unsigned char *>(&old.v) + offsetof(strata_tensor_view, n_dims);
    std::fill(tail, tail + (sizeof(strata_tensor_view) - offsetof(strata_tensor_view, n_dims)), 0xab);
    ASSERT_EQ(v->get_tensor(v->ctx, "fine", &old.v), 1);
    EXPECT_EQ(old.v.rows, 6);
    EXPECT_EQ(old.v.struct_size, offsetof(strata_tensor_view, n_dims));
    EXPECT_TRUE(std::all_of(tail, tail + (sizeof(strata_tensor_view) - offsetof(strata_tensor_view, n_dims)),
                            [](unsigned char b) { return b == 0xab; }));
}

} // namespace
