// Malformed and hostile GGUF input: each defect gives its own one-line strata::error, never a crash.
#include "gguf/gguf_file.hpp"
#include "gguf_test_bytes.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace strata::gguf {
namespace {

using test::gguf_bytes;

// The parse error for bytes, or "parsed" when there is none.
std::string error_of(const std::vector<uint8_t> &bytes) {
    try {
        const file f = file::parse(bytes.data(), bytes.size(), "bad.gguf");
        return "parsed";
    } catch (const strata::error &e) {
        return e.what();
    }
}

#define EXPECT_ERROR(bytes, expected_substring)                                                                       \
    do {                                                                                                              \
        const std::string message_ = error_of(bytes);                                                                 \
        EXPECT_NE(message_.find(expected_substring), std::string::npos) << message_;                                  \
        EXPECT_EQ(message_.rfind("bad.gguf: ", 0), 0u) << message_;                                                   \
        EXPECT_EQ(message_.find('\n'), std::string::npos) << message_;                                                \
    } while (0)

// A valid file with one F32 tensor of n floats at offset 0 and the data section right after the header.
gguf_bytes one_tensor_file(uint64_t n_floats_declared, size_t n_floats_present) {
    gguf_bytes b;
    b.header(1, 0).tensor_info("w", {n_floats_declared}, 0, 0).pad_to(32).zeros(n_floats_present * 4);
    return b;
}

TEST(GgufMalformed, EveryTruncationIsAnError) {
    writer w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 2);
    w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
    w.add_f32_array("tokenizer.ggml.scores", {0, -1, -2});
    w.add_bool("b", true);
    w.add_tensor("t0", 0, {3}, std::vector<uint8_t>(12, 1));
    w.add_tensor("t1", 8, {32}, std::vector<uint8_t>(34, 2));
    w.add_tensor("t2", 0, {8}, std::vector<uint8_t>(32, 3)); // ends on an alignment boundary: no trailing padding
    const std::vector<uint8_t> full = w.to_bytes();
    ASSERT_EQ(error_of(full), "parsed");
    for (size_t cut = 0; cut < full.size(); ++cut) {
        const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
        const std::string message = error_of(prefix);
        ASSERT_NE(message, "parsed") << "cut at " << cut;
        EXPECT_EQ(message.rfind("bad.gguf: ", 0), 0u) << message;
        if (cut >= 4) {
            EXPECT_NE(message.find("truncated or corrupt"), std::string::npos) << "cut " << cut << ": " << message;
        }
    }
}

TEST(GgufMalformed, EveryTruncationOfAVocabFileIsAnError) {
    writer w;
    w.add_string_array("tokenizer.ggml.tokens", {"x", "yy", "zzz"});
    w.add_i32_array("tokenizer.ggml.token_type", {1, 2, 3});
    const std::vector<uint8_t> full = w.to_bytes();
    for (size_t cut = 0; cut < full.size(); ++cut) {
        const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
        const std::string message = error_of(prefix);
        // Cuts inside the trailing padding leave a complete file: no tensors need the data section.
        if (cut >= full.size() - 31 && message == "parsed") continue;
        EXPECT_NE(message, "parsed") << "cut at " << cut;
    }
}

TEST(GgufMalformed, Header) {
    EXPECT_ERROR(std::vector<uint8_t>{}, "not a GGUF file: only 0 bytes long");
    EXPECT_ERROR(gguf_bytes().u32(0x67676a74).u32(3).data, "not a GGUF file: starts with bytes 74 6a 67 67");
    EXPECT_ERROR(gguf_bytes().header(0, 0, 1).data, "GGUF version 1 is not supported (only versions 2 and 3) at byte 4");
    EXPECT_ERROR(gguf_bytes().header(0, 0, 4).data, "unsupported GGUF version 4");
    EXPECT_ERROR(gguf_bytes().header(0, 0, 0x03000000).data, "big-endian");
    EXPECT_ERROR(gguf_bytes().magic().u32(3).data, "unexpected end of file at byte 8 reading the tensor count");
    EXPECT_EQ(error_of(gguf_bytes().header(0, 0, 2).data), "parsed");
    EXPECT_EQ(error_of(gguf_bytes().header(0, 0, 3).data), "parsed");
    // A null buffer is an empty file, not a crash.
    EXPECT_THROW((void)file::parse(nullptr, 0), strata::error);
}

TEST(GgufMalformed, AbsurdCounts) {
    EXPECT_ERROR(gguf_bytes().header(0, 1ull << 60).data, "KV count 1152921504606846976 is impossible");
    EXPECT_ERROR(gguf_bytes().header(~0ull, 0).data, "tensor count 18446744073709551615 is impossible");
    EXPECT_ERROR(gguf_bytes().header(0, 1).str("k").u32(8).u64(1ull << 62).data,
                 "the string value of KV #0 'k' claims 4611686018427387904 bytes but only 0 remain at byte 37");
    EXPECT_ERROR(gguf_bytes().header(0, 1).u64(~0ull).zeros(16).data, "the key of KV #0 claims 18446744073709551615 bytes");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("k", 9).array_of(4, 1ull << 61).u32(0).data,
                 "KV #0 'k' has an array of 2305843009213693952 u32 elements that cannot fit");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("k", 9).array_of(8, 1ull << 40).u64(0).data,
                 "array of 1099511627776 string elements that cannot fit");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("k", 9).array_of(9, ~0ull).data,
                 "array of 18446744073709551615 array elements that cannot fit");
    // A string array element with a huge length.
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("k", 9).array_of(8, 1).u64(1ull << 50).data,
                 "an array string of KV #0 'k' claims 1125899906842624 bytes");
}

TEST(GgufMalformed, BadValues) {
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("a", 13).u32(0).data, "KV #0 'a' has unknown value type 13 (known: 0..12) at byte 33");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("a", 9).array_of(99, 0).data, "KV #0 'a' has unknown array element type 99");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("", 4).u32(0).data, "KV #0 has an empty key");
    EXPECT_ERROR(gguf_bytes().header(0, 2).key("a", 4).u32(0).key("a", 8).str("x").data,
                 "duplicate key 'a' in KV #1 (first defined in KV #0) at byte 41");
    gguf_bytes deep;
    deep.header(0, 1).key("deep", 9);
    for (int i = 0; i < 20; ++i) deep.array_of(9, 1);
    deep.array_of(0, 0);
    EXPECT_ERROR(deep.data, "KV #0 'deep' nests arrays more than 8 deep");
    gguf_bytes ok_depth;
    ok_depth.header(0, 1).key("deep", 9);
    for (int i = 0; i < 7; ++i) ok_depth.array_of(9, 1);
    ok_depth.array_of(0, 1).u8(5);
    EXPECT_EQ(error_of(ok_depth.data), "parsed");
    EXPECT_EQ(file::parse(ok_depth.data.data(), ok_depth.data.size()).kv_summary(0), "[[[[[[[[5]]]]]]]]");
}

TEST(GgufMalformed, Alignment) {
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("general.alignment", 4).u32(48).data,
                 "KV 'general.alignment' is 48, which is not a nonzero power of two");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("general.alignment", 4).u32(0).data,
                 "KV 'general.alignment' is 0, which is not a nonzero power of two");
    EXPECT_ERROR(gguf_bytes().header(0, 1).key("general.alignment", 10).u64(64).data,
                 "KV 'general.alignment' is u64, expected u32");
    gguf_bytes misaligned;
    misaligned.header(1, 0).tensor_info("w", {4}, 0, 16).pad_to(32).zeros(64);
    EXPECT_ERROR(misaligned.data, "tensor info #0 'w' has data offset 16, which is not a multiple of the alignment 32");
    gguf_bytes custom;
    custom.header(1, 1).key("general.alignment", 4).u32(16).tensor_info("w", {4}, 0, 16).pad_to(16).zeros(32);
    const std::string ok = error_of(custom.data);
    EXPECT_EQ(ok, "parsed");
}

TEST(GgufMalformed, TensorShapesAndTypes) {
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {1, 1, 1, 1, 1}, 0, 0).data,
                 "tensor info #0 'w' has 5 dimensions (at most 4 are allowed) at byte 33");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {~0ull}, 0, 0).data, "has a negative dimension ne[0] = -1");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {1ull << 32, 1ull << 32}, 0, 0).data,
                 "has an element count that overflows 64 bits");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {1ull << 62}, 28, 0).data,
                 "has a byte size that overflows 64 bits");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {4}, 99, 0).data, "tensor info #0 'w' has unknown ggml type 99");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {32}, 4, 0).data, "unknown ggml type 4");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("w", {33, 2}, 8, 0).data,
                 "has row length 33, which is not a multiple of the Q8_0 block size 32");
    EXPECT_ERROR(gguf_bytes().header(1, 0).tensor_info("", {4}, 0, 0).data, "tensor info #0 has an empty name");
    gguf_bytes dup;
    dup.header(2, 0).tensor_info("w", {4}, 0, 0).tensor_info("w", {4}, 0, 32).pad_to(32).zeros(64);
    EXPECT_ERROR(dup.data, "duplicate tensor name 'w' in tensor info #1 (first in tensor info #0) at byte 57");
}

TEST(GgufMalformed, TensorData) {
    EXPECT_EQ(error_of(one_tensor_file(16, 16).data), "parsed");
    const gguf_bytes short_data = one_tensor_file(16, 15);
    EXPECT_ERROR(short_data.data,
                 "bad.gguf: tensor 'w' data [offset 0, 64 bytes] runs past end of file (size 124, data section at byte "
                 "64); the file is truncated or corrupt");
    gguf_bytes overflow;
    overflow.header(1, 0).tensor_info("w", {16}, 0, ~0ull - 31).pad_to(32).zeros(64);
    EXPECT_ERROR(overflow.data, "tensor 'w' (info at byte 24) data [offset 18446744073709551584, 64 bytes] overflows 64 bits");
    gguf_bytes far;
    far.header(1, 0).tensor_info("w", {16}, 0, 1ull << 40).pad_to(32).zeros(64);
    EXPECT_ERROR(far.data, "data [offset 1099511627776, 64 bytes] runs past end of file");
    gguf_bytes no_data_section;
    no_data_section.header(1, 0).tensor_info("w", {0}, 0, 0);
    EXPECT_ERROR(no_data_section.data, "the data section would start at byte 64 (after 1 tensor infos), past the end");
}

TEST(GgufMalformed, WrongTypedLookupsNameKeyAndOffset) {
    const std::vector<uint8_t> bytes = gguf_bytes().header(0, 1).key("llama.block_count", 8).str("five").data;
    const file f = file::parse(bytes.data(), bytes.size(), "bad.gguf");
    try {
        (void)f.get_uint("llama.block_count");
        FAIL() << "no error";
    } catch (const strata::error &e) {
        EXPECT_STREQ(e.what(), "bad.gguf: KV 'llama.block_count' (at byte 24) is string, expected an unsigned integer; "
                               "the file does not follow the GGUF conventions for this key");
    }
}

} // namespace
} // namespace strata::gguf
