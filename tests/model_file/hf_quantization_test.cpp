// repack_quantized_linear against AutoGPTQ's and AutoAWQ's packing written out by hand: every integer, zero point
// and scale of a small layer lands in the group-integer block the ABI describes (plugin_abi.h STRATA_TYPE_*), and
// parts whose dtype or shape do not fit the packing are refused naming the tensor.
#include "common/error.hpp"
#include "model_file/hf_quantization.hpp"

#include <gtest/gtest.h>

#include <strata/plugin_abi.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace strata;

constexpr int64_t in = 64, out = 16, group = 32, groups = in / group;

int q_of(int64_t o, int64_t i) { return static_cast<int>((3 * o + i) % 16); }
int zero_of(int64_t g, int64_t o) { return static_cast<int>((g + 5 * o) % 15) + 1; } // 1..15: stored minus one fits

struct layer_bytes {
    std::vector<int32_t> qweight, qzeros, g_idx;
    std::vector<uint16_t> scales;
    safetensors_tensor tw, tz, ts, tg;
    layer_bytes() {
        tw.name = "l.qweight", tz.name = "l.qzeros", ts.name = "l.scales", tg.name = "l.g_idx";
        tw.dtype = tz.dtype = tg.dtype = "I32";
        ts.dtype = "F16";
        ts.shape = {groups, out};
        tg.shape = {in};
    }
    quantized_linear parts() {
        tw.data = reinterpret_cast<const uint8_t *>(qweight.data());
        tz.data = reinterpret_cast<const uint8_t *>(qzeros.data());
        ts.data = reinterpret_cast<const uint8_t *>(scales.data());
        tg.data = reinterpret_cast<const uint8_t *>(g_idx.data());
        quantized_linear p;
        p.prefix = "l";
        p.qweight = &tw, p.qzeros = &tz, p.scales = &ts, p.g_idx = g_idx.empty() ? nullptr : &tg;
        return p;
    }
};

// Scale of group g, output o: an f16 2^-(g+1) * (1 + o / 16), exact.
uint16_t scale_bits(int64_t g, int64_t o) { return static_cast<uint16_t>(((14 - g) << 10) | (o << 6)); }

// AutoGPTQ (qlinear pack): qweight[i / 8][o] holds input i at bit 4 (i % 8); qzeros[g][o / 8] holds zero - 1 at
// bit 4 (o % 8); scales[g][o]; g_idx[i] = i / group.
layer_bytes gptq_layer() {
    layer_bytes l;
    l.qweight.assign(in / 8 * out, 0);
    for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o)
            l.qweight[(i / 8) * out + o] |= static_cast<int32_t>(static_cast<uint32_t>(q_of(o, i)) << (4 * (i % 8)));
    l.qzeros.assign(groups * out / 8, 0);
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t o = 0; o < out; ++o)
            l.qzeros[g * (out / 8) + o / 8] |= static_cast<int32_t>(static_cast<uint32_t>(zero_of(g, o) - 1) << (4 * (o % 8)));
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t o = 0; o < out; ++o) l.scales.push_back(scale_bits(g, o));
    for (int64_t i = 0; i < in; ++i) l.g_idx.push_back(static_cast<int32_t>(i / group));
    l.tw.shape = {in / 8, out};
    l.tz.shape = {groups, out / 8};
    return l;
}

// AutoAWQ GEMM: qweight[i][o / 8] holds output o at bit 4 * k where AWQ's order puts o % 8 at position k
// (order 0 2 4 6 1 3 5 7); qzeros[g][o / 8] the same with the zero itself.
layer_bytes awq_layer() {
    static constexpr int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    layer_bytes l;
    l.qweight.assign(in * out / 8, 0);
    for (int64_t i = 0; i < in; ++i)
        for (int64_t ob = 0; ob < out; ob += 8)
            for (int k = 0; k < 8; ++k)
                l.qweight[i * (out / 8) + ob / 8] |= static_cast<int32_t>(static_cast<uint32_t>(q_of(ob + order[k], i)) << (4 * k));
    l.qzeros.assign(groups * out / 8, 0);
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t ob = 0; ob < out; ob += 8)
            for (int k = 0; k < 8; ++k)
                l.qzeros[g * (out / 8) + ob / 8] |= static_cast<int32_t>(static_cast<uint32_t>(zero_of(g, ob + order[k])) << (4 * k));
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t o = 0; o < out; ++o) l.scales.push_back(scale_bits(g, o));
    l.tw.shape = {in, out / 8};
    l.tz.shape = {groups, out / 8};
    return l;
}

// Checks every block of a repacked 4-bit, group-32 layer: scale, zero and each nibble where the ABI puts them. With an
// input order (act-order), repacked column k holds input order[k] and the order follows the rows.
void expect_blocks(const repacked_weight &r, const std::vector<int32_t> &order = {}) {
    ASSERT_EQ(r.type, static_cast<uint32_t>(STRATA_TYPE_Q4_G32));
    ASSERT_EQ(r.rows, out);
    ASSERT_EQ(r.cols, in);
    ASSERT_EQ(r.input_order, !order.empty());
    const int64_t block_bytes = 4 + group / 2, row_bytes = in / group * block_bytes;
    ASSERT_EQ(r.bytes.size(), static_cast<size_t>(out * row_bytes) + order.size() * 4);
    if (!order.empty()) {
        std::vector<int32_t> stored(order.size());
        std::memcpy(stored.data(), r.bytes.data() + out * row_bytes, order.size() * 4);
        EXPECT_EQ(stored, order);
    }
    auto input_of = [&](int64_t k) { return order.empty() ? k : int64_t{order[static_cast<size_t>(k)]}; };
    for (int64_t o = 0; o < out; ++o)
        for (int64_t g = 0; g < groups; ++g) {
            const uint8_t *b = r.bytes.data() + o * row_bytes + g * block_bytes;
            uint16_t s;
            std::memcpy(&s, b, 2);
            EXPECT_EQ(s, scale_bits(g, o)) << "output " << o << " group " << g;
            EXPECT_EQ(b[2], zero_of(g, o)) << "output " << o << " group " << g;
            for (int64_t j = 0; j < group; ++j) {
                const int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
                ASSERT_EQ(q, q_of(o, input_of(g * group + j))) << "output " << o << " column " << g * group + j;
            }
        }
}

TEST(HfQuantization, GptqLayersRepackIntoTheAbisBlocks) {
    hf_quantization q;
    q.method = "gptq", q.bits = 4, q.group_size = group, q.zeros_minus_one = true, q.sym = false;
    layer_bytes l = gptq_layer();
    expect_blocks(repack_quantized_linear(q, l.parts(), "shard"));
}

TEST(HfQuantization, AwqLayersRepackIntoTheAbisBlocks) {
    hf_quantization q;
    q.method = "awq", q.bits = 4, q.group_size = group;
    layer_bytes l = awq_layer();
    l.g_idx.clear();
    expect_blocks(repack_quantized_linear(q, l.parts(), "shard"));
}

// Act-order (desc_act): g_idx puts input i in group (7 i mod 64) / 32, a permutation of the inputs among the groups.
// The repacked rows hold the inputs sorted by group (stable), so each block is one group's scale and zero point
// again, and the sorted order follows the rows as int32 (input_order): block g's element j is input order[32 g + j].
TEST(HfQuantization, AnActOrderLayerIsSortedByGroupAndKeepsItsInputOrder) {
    hf_quantization q;
    q.method = "gptq", q.bits = 4, q.group_size = group, q.zeros_minus_one = true, q.sym = false, q.desc_act = true;
    layer_bytes l = gptq_layer();
    for (int64_t i = 0; i < in; ++i) l.g_idx[static_cast<size_t>(i)] = static_cast<int32_t>((7 * i % in) / group);
    std::vector<int32_t> expected;
    for (int32_t g = 0; g < groups; ++g)
        for (int32_t i = 0; i < in; ++i)
            if (l.g_idx[static_cast<size_t>(i)] == g) expected.push_back(i);
    expect_blocks(repack_quantized_linear(q, l.parts(), "shard"), expected);
    // g_idx in order (static groups, or desc_act without a permutation): no input order.
    EXPECT_FALSE(repack_quantized_linear(q, gptq_layer().parts(), "shard").input_order);
}

// Many layers on several threads give what one-by-one repacking gives, in the layers' order; with two bad layers the
// error thrown is the first one's in that order, whichever thread met it first.
TEST(HfQuantization, ManyLayersRepackOnThreadsAsOneByOne) {
    hf_quantization q;
    q.method = "gptq", q.bits = 4, q.group_size = group, q.zeros_minus_one = true, q.sym = false, q.desc_act = true;
    std::vector<std::unique_ptr<layer_bytes>> kept;
    std::vector<std::pair<quantized_linear, std::string>> layers;
    for (int k = 0; k < 7; ++k) {
        kept.push_back(std::make_unique<layer_bytes>(gptq_layer()));
        layer_bytes &l = *kept.back();
        for (int64_t i = 0; i < in; ++i) l.g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(((2 * k + 1) * i % in) / group);
        l.qweight[static_cast<size_t>(k)] ^= 0x11; // each layer's integers differ
        layers.emplace_back(l.parts(), "shard-" + std::to_string(k));
        layers.back().first.prefix = "layer" + std::to_string(k);
    }
    const std::vector<repacked_weight> all = repack_quantized_linears(q, layers, 3);
    ASSERT_EQ(all.size(), layers.size());
    for (size_t k = 0; k < layers.size(); ++k) {
        const repacked_weight one = repack_quantized_linear(q, layers[k].first, layers[k].second);
        EXPECT_EQ(all[k].bytes, one.bytes) << k;
        EXPECT_EQ(all[k].input_order, k != 0) << k; // layer 0's g_idx is in order
    }
    kept[2]->tz.shape = {groups + 1, out / 8};
    kept[5]->tz.shape = {groups + 1, out / 8};
    for (unsigned threads : {1u, 4u}) {
        try {
            repack_quantized_linears(q, layers, threads);
            ADD_FAILURE() << "two bad layers were accepted";
        } catch (const strata::error &e) {
            EXPECT_NE(std::string(e.what()).find("shard-2"), std::string::npos) << e.what();
        }
    }
}

TEST(HfQuantization, PartsThatDoNotFitThePackingAreRefusedByName) {
    hf_quantization q;
    q.method = "gptq", q.bits = 4, q.group_size = group, q.zeros_minus_one = true, q.sym = false;
    auto error_of = [&](layer_bytes &l) {
        try {
            repack_quantized_linear(q, l.parts(), "shard");
        } catch (const strata::error &e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    layer_bytes wrong_zeros = gptq_layer();
    wrong_zeros.tz.shape = {groups + 1, out / 8};
    EXPECT_NE(error_of(wrong_zeros).find("'l.qzeros'"), std::string::npos) << error_of(wrong_zeros);
    layer_bytes permuted = gptq_layer();
    std::swap(permuted.g_idx[0], permuted.g_idx[40]);
    EXPECT_NE(error_of(permuted).find("desc_act is false"), std::string::npos) << error_of(permuted);
    layer_bytes uneven = gptq_layer();
    uneven.g_idx[0] = 1; // group 0 has 31 inputs, group 1 has 33
    EXPECT_NE(error_of(uneven).find("puts 31 inputs in group 0"), std::string::npos) << error_of(uneven);
    layer_bytes outside = gptq_layer();
    outside.g_idx[5] = groups;
    EXPECT_NE(error_of(outside).find("outside the 2 groups"), std::string::npos) << error_of(outside);
    layer_bytes f32_weight = gptq_layer();
    f32_weight.tw.dtype = "F32";
    EXPECT_NE(error_of(f32_weight).find("'l.qweight'"), std::string::npos);
    q.sym = true; // the hand-made zero points are not the middle value: a sym checkpoint must store 8 everywhere
    layer_bytes asym_zeros = gptq_layer();
    EXPECT_NE(error_of(asym_zeros).find("says sym"), std::string::npos) << error_of(asym_zeros);
    q.sym = false;
    q.group_size = 48; // a group that does not divide the inputs
    layer_bytes odd = gptq_layer();
    EXPECT_NE(error_of(odd).find("group_size 48"), std::string::npos) << error_of(odd);
}

TEST(HfQuantization, TheBlockTypeIsTheLargestThatLiesInOneGroup) {
    EXPECT_EQ(group_int_type(4, 128, 4096), static_cast<uint32_t>(STRATA_TYPE_Q4_G128));
    EXPECT_EQ(group_int_type(4, 256, 4096), static_cast<uint32_t>(STRATA_TYPE_Q4_G128)); // the scale repeats
    EXPECT_EQ(group_int_type(8, 64, 4096), static_cast<uint32_t>(STRATA_TYPE_Q8_G64));
    EXPECT_EQ(group_int_type(4, -1, 4096), static_cast<uint32_t>(STRATA_TYPE_Q4_G128));
    EXPECT_EQ(group_int_type(4, -1, 96), static_cast<uint32_t>(STRATA_TYPE_Q4_G32));
    EXPECT_EQ(group_int_type(4, 128, 192), 0u); // 128 does not divide 192
    EXPECT_EQ(group_int_bytes(STRATA_TYPE_Q4_G128, 2, 256), 2u * 2u * 68u);
}

} // namespace
