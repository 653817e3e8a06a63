// Bit-exact agreement with ggml: the shared stories260K GGUF files hold tensors that ggml's reference quantizers
// produced from the F32 model. Quantizing the F32 tensors ourselves must give the same bytes.
#include "ggml_quants.hpp"
#include "gguf/gguf_file.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace q = strata::quants;
namespace gguf = strata::gguf;

namespace {

const std::string models_dir = std::string(STRATA_SHARED_DIR) + "/models/";

using quantize_fn = void (*)(const float *, void *, int64_t);

quantize_fn quantizer_for(uint32_t type) {
    switch (type) {
    case q::ggml_type_f16: return q::quantize_row_f16;
    case q::ggml_type_q8_0: return q::quantize_row_q8_0;
    case q::ggml_type_q4_0: return q::quantize_row_q4_0;
    default: return nullptr;
    }
}

// Index of the first differing byte, or -1.
int64_t first_difference(const std::vector<uint8_t> &a, const uint8_t *b) {
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i]) return static_cast<int64_t>(i);
    }
    return -1;
}

// Requantizes every tensor of `quantized_name` whose type is one of ours (F32 tensors are copies and skipped) and
// returns how many tensors of type `focus_type` matched, so the caller can assert the file was actually covered.
int check_file_against_f32(const std::string &quantized_name, uint32_t focus_type) {
    const gguf::file reference = gguf::file::open(models_dir + "stories260K-f32.gguf");
    const gguf::file quantized = gguf::file::open(models_dir + quantized_name);
    int focus_matches = 0;
    for (const gguf::tensor_info &t : quantized.tensors()) {
        const std::string &name = t.name;
        if (t.type == q::ggml_type_f32) continue;
        const quantize_fn quantize = quantizer_for(t.type);
        EXPECT_NE(quantize, nullptr) << quantized_name << ": tensor " << name << " has unexpected type " << t.type;
        if (quantize == nullptr) continue;
        const gguf::tensor_info *source = reference.find_tensor(name);
        EXPECT_NE(source, nullptr) << name << " missing from the F32 model";
        if (source == nullptr) continue;
        EXPECT_EQ(source->type, q::ggml_type_f32);
        EXPECT_EQ(source->ne, t.ne) << name;
        if (source->type != q::ggml_type_f32 || source->ne != t.ne) continue;

        std::vector<float> f32(static_cast<size_t>(source->n_elements()));
        std::memcpy(f32.data(), source->data, f32.size() * sizeof(float));
        std::vector<uint8_t> ours(t.n_bytes);
        // Row by row, as a converter would (rows are whole blocks; the result equals one call on the whole tensor).
        const int64_t row_len = t.ne[0];
        const uint64_t row_bytes = t.n_bytes / static_cast<uint64_t>(t.n_elements() / row_len);
        for (int64_t r = 0; r < t.n_elements() / row_len; ++r) {
            quantize(f32.data() + r * row_len, ours.data() + static_cast<uint64_t>(r) * row_bytes, row_len);
        }
        const int64_t diff = first_difference(ours, t.data);
        EXPECT_EQ(diff, -1) << quantized_name << ": tensor " << name << " differs from ggml at byte " << diff;
        if (diff == -1 && t.type == focus_type) ++focus_matches;
    }
    return focus_matches;
}

TEST(QuantGolden, Q8_0MatchesGgmlBytes) {
    const int matched = check_file_against_f32("stories260K-q8_0.gguf", q::ggml_type_q8_0);
    // token_embd plus attn_q/k/v/output and ffn_gate/up of 5 layers.
    EXPECT_GE(matched, 31);
    const gguf::file quantized = gguf::file::open(models_dir + "stories260K-q8_0.gguf");
    const gguf::tensor_info *attn_q = quantized.find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(attn_q, nullptr);
    EXPECT_EQ(attn_q->type, q::ggml_type_q8_0);
}

TEST(QuantGolden, Q4_0MatchesGgmlBytes) {
    EXPECT_GE(check_file_against_f32("stories260K-q4_0.gguf", q::ggml_type_q4_0), 31);
}

TEST(QuantGolden, F16MatchesGgmlBytes) {
    // Every matrix is F16 here (norms stay F32).
    EXPECT_GE(check_file_against_f32("stories260K-f16.gguf", q::ggml_type_f16), 36);
}

// The F32 source really is the model the quantized files were made from (not, say, an all-zero tensor that
// every quantizer maps to the same bytes).
TEST(QuantGolden, SourceTensorsAreNonTrivial) {
    const gguf::file reference = gguf::file::open(models_dir + "stories260K-f32.gguf");
    const gguf::tensor_info *attn_q = reference.find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(attn_q, nullptr);
    ASSERT_EQ(attn_q->type, q::ggml_type_f32);
    ASSERT_EQ(attn_q->n_bytes, 64u * 64u * 4u);
    std::vector<float> values(64 * 64);
    std::memcpy(values.data(), attn_q->data, attn_q->n_bytes);
    int nonzero = 0;
    for (float v : values) nonzero += v != 0.0f ? 1 : 0;
    EXPECT_GT(nonzero, 4000);
}

} // namespace
