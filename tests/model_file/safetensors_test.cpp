// The safetensors reader: a valid file's tensors, and each defect Hugging Face's reader refuses, refused with the file
// and what is wrong (never a tensor reaching past the file).
#include "common/error.hpp"
#include "model_file/safetensors_file.hpp"
#include "safetensors_bytes.hpp"

#include <gtest/gtest.h>

namespace {

using strata::safetensors_file;
using strata::testing::safetensors_bytes;

std::string error_of(const std::vector<uint8_t> &b) {
    try {
        (void)safetensors_file::parse(b.data(), b.size(), "x.safetensors");
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

TEST(Safetensors, ReadsTensorsMetadataAndDataInPlace) {
    const auto b = safetensors_bytes(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],)"
                                     R"("data_offsets":[0,24]},"n":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})",
                                     32);
    const auto f = safetensors_file::parse(b.data(), b.size(), "x.safetensors");
    ASSERT_EQ(f.tensors().size(), 2u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    const auto &w = f.tensors()[0].name == "w" ? f.tensors()[0] : f.tensors()[1];
    EXPECT_EQ(w.dtype, "F32");
    EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(w.n_bytes, 24u);
    EXPECT_EQ(w.data, b.data() + (b.size() - 32));
}

TEST(Safetensors, RefusesEachDefectWithTheFileAndTheReason) {
    struct bad {
        std::vector<uint8_t> bytes;
        const char *expect;
    };
    std::vector<uint8_t> truncated = safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
    truncated.resize(truncated.size() - 1);
    std::vector<uint8_t> huge(16, 0);
    huge[4] = 0x10; // a 68 GB header
    const std::vector<bad> cases = {
        {{1, 2, 3}, "too short"},
        {huge, "above the format's limit"},
        {safetensors_bytes("[1,2]", 0), "does not start with '{'"},
        {safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8), "does not parse"},
        {truncated, "reach past the data"},
        {safetensors_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "need 12"},
        {safetensors_bytes(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8), "not a safetensors dtype"},
        {safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "end before they begin"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
         "overlaps"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "belong to no tensor"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8), "the data holds 8 bytes"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
         "names 'a' twice"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "not a non-negative"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4), "unknown field 'x'"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4, false), "not aligned"},
        {safetensors_bytes(R"({"__metadata__":{"k":1}})", 0), "is not a string"},
        // 2^31 x 2^31 F32 elements: the byte count would wrap to 0 in 64 bits.
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})", 0),
         "too large"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":)" + std::string(100000, '[') + "}}", 0),
         "nests deeper than"},
    };
    for (const auto &c : cases) {
        const std::string e = error_of(c.bytes);
        EXPECT_NE(e.find("x.safetensors"), std::string::npos) << e;
        EXPECT_NE(e.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << e;
    }
}

} // namespace
