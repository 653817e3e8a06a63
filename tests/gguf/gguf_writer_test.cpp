// Writer round trips, and reading every value type (including nested arrays) from hand-built files.
#include "gguf/gguf_file.hpp"
#include "gguf_test_bytes.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace strata::gguf {
namespace {

using test::gguf_bytes;

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

TEST(GgufWriter, RoundTripsEveryWriterType) {
    writer w;
    w.add_u32("a.u32", 4000000000u);
    w.add_i32("a.i32", -123456);
    w.add_u64("a.u64", 0xfedcba9876543210ull);
    w.add_f32("a.f32", 0.125f);
    w.add_bool("a.true", true);
    w.add_bool("a.false", false);
    w.add_string("a.string", "hello \xe2\x96\x81 world");
    w.add_string("a.empty", "");
    w.add_string_array("a.strings", {"x", "", "yz", std::string("nul\0in", 6)});
    w.add_f32_array("a.floats", {1.5f, -2.0f, std::numeric_limits<float>::infinity()});
    w.add_i32_array("a.ints", {-1, 0, 2147483647});
    w.add_string_array("a.no_strings", {});
    const std::vector<uint8_t> bytes = w.to_bytes();
    const file f = file::parse(bytes.data(), bytes.size(), "rt.gguf");

    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    ASSERT_EQ(f.kv_count(), 12u);
    EXPECT_EQ(f.kv_key(0), "a.u32"); // order is kept
    EXPECT_EQ(f.get_uint("a.u32"), 4000000000u);
    EXPECT_EQ(f.get_int("a.u32"), 4000000000);
    EXPECT_EQ(f.get_int("a.i32"), -123456);
    EXPECT_EQ(f.get_float("a.i32"), -123456.0);
    EXPECT_THROW((void)f.get_uint("a.i32"), strata::error); // negative
    EXPECT_EQ(f.get_uint("a.u64"), 0xfedcba9876543210ull);
    EXPECT_THROW((void)f.get_int("a.u64"), strata::error); // does not fit
    EXPECT_EQ(f.get_float("a.f32"), 0.125);
    EXPECT_THROW((void)f.get_uint("a.f32"), strata::error);
    EXPECT_EQ(f.get_bool("a.true"), true);
    EXPECT_EQ(f.get_bool("a.false"), false);
    EXPECT_EQ(f.get_uint("a.true"), 1u);
    EXPECT_THROW((void)f.get_bool("a.u32"), strata::error);
    EXPECT_EQ(f.get_string("a.string"), "hello \xe2\x96\x81 world");
    EXPECT_EQ(f.get_string("a.empty"), "");
    EXPECT_EQ(f.get_string("a.empty")->data()[0], '\0');

    const auto strings = f.get_string_array("a.strings");
    ASSERT_TRUE(strings.has_value());
    ASSERT_EQ(strings->size(), 4u);
    EXPECT_EQ((*strings)[0], "x");
    EXPECT_EQ((*strings)[1], "");
    EXPECT_EQ((*strings)[2], "yz");
    EXPECT_EQ((*strings)[3], std::string_view("nul\0in", 6));
    EXPECT_EQ((*strings)[2].data()[2], '\0');
    EXPECT_EQ(f.get_float_array("a.floats"), (std::vector<float>{1.5f, -2.0f, std::numeric_limits<float>::infinity()}));
    EXPECT_EQ(f.get_int_array("a.ints"), (std::vector<int64_t>{-1, 0, 2147483647}));
    EXPECT_THROW((void)f.get_int_array("a.floats"), strata::error);
    EXPECT_THROW((void)f.get_float_array("a.u32"), strata::error);
    EXPECT_TRUE(f.get_string_array("a.no_strings")->empty());
    EXPECT_EQ(f.type_of("a.strings"), value_type::array);
    EXPECT_FALSE(f.type_of("a.missing").has_value());
}

TEST(GgufWriter, RoundTripsTensorsWithAlignment) {
    for (uint32_t alignment : {1u, 32u, 64u, 4096u}) {
        SCOPED_TRACE(alignment);
        writer w;
        w.set_alignment(alignment);
        w.add_string("general.architecture", "test");
        w.add_tensor("a", 0, {3, 2}, f32_bytes({1, 2, 3, 4, 5, 6}));
        std::vector<uint8_t> q8(2 * 34 * 3, 0x5a); // Q8_0: 64 elements per row, 3 rows
        w.add_tensor("b.q8", 8, {64, 3}, q8);
        w.add_tensor("c.empty", 0, {0}, {});
        w.add_tensor("d", 1, {5, 1, 1, 2}, std::vector<uint8_t>(20, 7));
        const std::vector<uint8_t> bytes = w.to_bytes();
        const file f = file::parse(bytes.data(), bytes.size());
        EXPECT_EQ(f.alignment(), alignment);
        EXPECT_EQ(f.has("general.alignment"), alignment != 32);
        EXPECT_EQ(f.data_offset() % alignment, 0u);
        ASSERT_EQ(f.tensors().size(), 4u);
        const tensor_info &a = f.tensors()[0];
        EXPECT_EQ(a.n_dims, 2u);
        EXPECT_EQ(a.ne, (std::array<int64_t, 4>{3, 2, 1, 1}));
        EXPECT_EQ(a.n_elements(), 6);
        ASSERT_EQ(a.n_bytes, 24u);
        float v[6];
        std::memcpy(v, a.data, 24);
        EXPECT_EQ(v[5], 6.0f);
        const tensor_info *b = f.find_tensor("b.q8");
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(b->type, 8u);
        EXPECT_EQ(b->n_bytes, q8.size());
        EXPECT_EQ(b->offset % alignment, 0u);
        EXPECT_EQ(std::memcmp(b->data, q8.data(), q8.size()), 0);
        EXPECT_EQ(f.find_tensor("c.empty")->n_bytes, 0u);
        const tensor_info *d = f.find_tensor("d");
        EXPECT_EQ(d->n_dims, 4u);
        EXPECT_EQ(d->ne[3], 2);
        EXPECT_EQ(d->data[19], 7);
    }
}

TEST(GgufWriter, WriteCreatesFileAtomically) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "strata_gguf_writer_test";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "tiny.gguf").string();
    writer w;
    w.add_u32("n", 7);
    w.add_tensor("t", 0, {4}, f32_bytes({1, 2, 3, 4}));
    w.write(path);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(std::filesystem::file_size(path), w.to_bytes().size());
    const file f = file::open(path);
    EXPECT_EQ(f.get_uint("n"), 7u);
    EXPECT_EQ(f.find_tensor("t")->n_bytes, 16u);
    // An unwritable destination fails with the path in the message and leaves nothing behind.
    try {
        w.write((dir / "missing-dir" / "x.gguf").string());
        FAIL() << "no error";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("x.gguf.tmp: cannot create"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

// make-model --shape-only: a tensor written as a hole has its full size in the file, reads as zeros, and takes no
// disk blocks; the file equals to_bytes() and a hole at the end still sets the file's size.
TEST(GgufWriter, HolesHaveTheirSizeAndReadAsZeros) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "strata_gguf_writer_holes";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "holes.gguf").string();
    writer w;
    w.add_tensor("a", 0, {4}, f32_bytes({1, 2, 3, 4}));
    w.add_tensor_hole("big", 8, {1024, 4096}); // Q8_0: 4096 rows of 32 blocks of 34 bytes
    w.add_tensor("b", 0, {2}, f32_bytes({5, 6}));
    w.add_tensor_hole("tail", 0, {1 << 20}); // the last tensor: the file must still end after it
    EXPECT_THROW(w.add_tensor_hole("big", 0, {1}), strata::error);     // duplicate name
    EXPECT_THROW(w.add_tensor_hole("odd", 8, {33}), strata::error);    // row not a block multiple
    w.write(path);
    const std::vector<uint8_t> bytes = w.to_bytes();
    ASSERT_EQ(std::filesystem::file_size(path), bytes.size());
    const file f = file::open(path);
    const tensor_info *big = f.find_tensor("big");
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(big->n_bytes, 4096u * 32 * 34);
    EXPECT_TRUE(std::all_of(big->data, big->data + big->n_bytes, [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(f.find_tensor("tail")->n_bytes, 4u << 20);
    float v[2];
    std::memcpy(v, f.find_tensor("b")->data, 8);
    EXPECT_EQ(v[1], 6.0f);
    const file g = file::parse(bytes.data(), bytes.size());
    EXPECT_EQ(g.find_tensor("tail")->offset, f.find_tensor("tail")->offset);
    std::filesystem::remove_all(dir);
}

TEST(GgufWriter, RejectsBadInput) {
    writer w;
    w.add_u32("k", 1);
    EXPECT_THROW(w.add_i32("k", 2), strata::error);                                   // duplicate key
    EXPECT_THROW(w.add_string("", "x"), strata::error);                               // empty key
    EXPECT_THROW(w.set_alignment(0), strata::error);                                  // not a power of two
    EXPECT_THROW(w.set_alignment(48), strata::error);
    EXPECT_THROW(w.add_string("general.alignment", "64"), strata::error);             // must be u32
    EXPECT_THROW(w.add_tensor("t", 0, {4}, std::vector<uint8_t>(15)), strata::error); // wrong byte count
    EXPECT_THROW(w.add_tensor("t", 8, {33}, std::vector<uint8_t>(34)), strata::error); // row not a block multiple
    EXPECT_THROW(w.add_tensor("t", 4, {32}, std::vector<uint8_t>(18)), strata::error); // retired type
    EXPECT_THROW(w.add_tensor("t", 0, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), strata::error);
    EXPECT_THROW(w.add_tensor("t", 0, {-1}, {}), strata::error);
    EXPECT_THROW(w.add_tensor("", 0, {1}, std::vector<uint8_t>(4)), strata::error);
    w.add_tensor("t", 0, {1}, std::vector<uint8_t>(4));
    EXPECT_THROW(w.add_tensor("t", 0, {1}, std::vector<uint8_t>(4)), strata::error); // duplicate name
    w.add_u32("general.alignment", 64); // same as set_alignment
    const std::vector<uint8_t> bytes = w.to_bytes();
    EXPECT_EQ(file::parse(bytes.data(), bytes.size()).alignment(), 64u);
}

// The writer covers the types make-model needs; the rest (and nested arrays) come from raw bytes.
TEST(GgufReader, ReadsEveryValueTypeAndNestedArrays) {
    gguf_bytes b;
    b.header(0, 16);
    b.key("t.u8", 0).u8(200);
    b.key("t.i8", 1).put<int8_t>(-100);
    b.key("t.u16", 2).put<uint16_t>(60000);
    b.key("t.i16", 3).put<int16_t>(-30000);
    b.key("t.u32", 4).u32(7);
    b.key("t.i32", 5).put<int32_t>(-7);
    b.key("t.f32", 6).put<float>(2.5f);
    b.key("t.bool", 7).u8(1);
    b.key("t.string", 8).str("s\n\"q\"");
    b.key("t.u64", 10).u64(1ull << 40);
    b.key("t.i64", 11).put<int64_t>(-(1ll << 40));
    b.key("t.f64", 12).put<double>(-0.5);
    b.key("t.nested", 9).array_of(9, 3); // [[1, 2], [], [[u8 9]]] with inner element types differing
    b.array_of(4, 2).u32(1).u32(2);
    b.array_of(8, 0);
    b.array_of(9, 1).array_of(0, 1).u8(9);
    b.key("t.u8s", 9).array_of(0, 3).u8(1).u8(2).u8(255);
    b.key("t.u64s", 9).array_of(10, 2).u64(5).u64(~0ull);
    b.key("t.f64s", 9).array_of(12, 2).put<double>(0.25).put<double>(-1);
    const file f = file::parse(b.data.data(), b.data.size(), "types.gguf");
    ASSERT_EQ(f.kv_count(), 16u);
    EXPECT_EQ(f.get_uint("t.u8"), 200u);
    EXPECT_EQ(f.get_int("t.i8"), -100);
    EXPECT_EQ(f.get_uint("t.u16"), 60000u);
    EXPECT_EQ(f.get_int("t.i16"), -30000);
    EXPECT_EQ(f.get_uint("t.u32"), 7u);
    EXPECT_EQ(f.get_int("t.i32"), -7);
    EXPECT_EQ(f.get_float("t.f32"), 2.5);
    EXPECT_EQ(f.get_bool("t.bool"), true);
    EXPECT_EQ(f.get_string("t.string"), "s\n\"q\"");
    EXPECT_EQ(f.get_uint("t.u64"), 1ull << 40);
    EXPECT_EQ(f.get_int("t.i64"), -(1ll << 40));
    EXPECT_EQ(f.get_float("t.f64"), -0.5);
    for (size_t i = 0; i < f.kv_count(); ++i) EXPECT_EQ(f.kv_type(i), *f.type_of(f.kv_key(i)));
    EXPECT_EQ(f.kv_type(12), value_type::array);
    EXPECT_THROW((void)f.get_int_array("t.nested"), strata::error);
    EXPECT_THROW((void)f.get_string_array("t.nested"), strata::error);
    EXPECT_EQ(f.get_int_array("t.u8s"), (std::vector<int64_t>{1, 2, 255}));
    EXPECT_THROW((void)f.get_int_array("t.u64s"), strata::error); // ~0 does not fit in int64
    EXPECT_EQ(f.get_float_array("t.f64s"), (std::vector<float>{0.25f, -1.0f}));

    EXPECT_EQ(f.kv_summary(0), "200");
    EXPECT_EQ(f.kv_summary(1), "-100");
    EXPECT_EQ(f.kv_summary(6), "2.5");
    EXPECT_EQ(f.kv_summary(7), "true");
    EXPECT_EQ(f.kv_summary(8), "\"s\\n\\\"q\\\"\"");
    EXPECT_EQ(f.kv_summary(11), "-0.5");
    EXPECT_EQ(f.kv_summary(12), "[[1, 2], [], [[9]]]");
    EXPECT_EQ(f.kv_summary(13), "[1, 2, 255]");
    EXPECT_EQ(f.kv_summary(14), "[5, 18446744073709551615]");
}

TEST(GgufReader, SummaryShortensLongValues) {
    writer w;
    w.add_string("long", std::string(500, 'x'));
    w.add_string("utf8", "\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81");
    std::vector<float> many(1000, 1.0f);
    w.add_f32_array("many", many);
    const std::vector<uint8_t> bytes = w.to_bytes();
    const file f = file::parse(bytes.data(), bytes.size());
    const std::string s = f.kv_summary(0, 20);
    EXPECT_EQ(s, "\"" + std::string(19, 'x') + "...\"");
    // Cut at a character boundary: 3-byte characters, never a partial one.
    const std::string u = f.kv_summary(1, 8);
    EXPECT_EQ(u, "\"\xe2\x96\x81\xe2\x96\x81...\"");
    const std::string m = f.kv_summary(2, 30);
    EXPECT_EQ(m.rfind("[1, 1, 1", 0), 0u) << m;
    EXPECT_NE(m.find(", ...] (1000 x f32)"), std::string::npos) << m;
    EXPECT_LT(m.size(), 60u);
}

} // namespace
} // namespace strata::gguf
