// repack_quantized_linear against AutoGPTQ's and AutoAWQ's packing written out by hand: every integer, zero point
// and scale of a small layer lands in the group-integer block the ABI describes (plugin_abi.h STRATA_TYPE_*), and
// parts whose dtype or shape do not fit the packing are refused naming the tensor.
#include "common/error.hpp"
#include "model_file/hf_fp8.hpp"
#include "model_file/hf_quantization.hpp"

#include <gtest/gtest.h>

#include <strata/plugin_abi.h>

#include <cmath>
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

// An FP8 layer as compressed-tensors / fp8 store it: weight F8_E4M3 [out, in] and its scales.
struct fp8_layer {
    int64_t rows, cols;
    std::vector<uint8_t> weight;
    std::vector<float> scales, input;
    safetensors_tensor tw, ts, ti;
    fp8_layer(int64_t r, int64_t c, std::vector<int64_t> scale_shape) : rows(r), cols(c) {
        weight.resize(static_cast<size_t>(r * c));
        for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<uint8_t>((i * 7 + 3) % 0x7e);
        int64_t n = 1;
        for (int64_t d : scale_shape) n *= d;
        for (int64_t i = 0; i < n; ++i) scales.push_back(0.5f + static_cast<float>(i));
        input = {0.25f};
        tw.name = "l.weight", ts.name = "l.weight_scale", ti.name = "l.input_scale";
        tw.dtype = "F8_E4M3", ts.dtype = ti.dtype = "F32";
        tw.shape = {r, c}, ts.shape = std::move(scale_shape), ti.shape = {1};
    }
    quantized_linear parts(bool with_input = false) {
        tw.data = weight.data();
        ts.data = reinterpret_cast<const uint8_t *>(scales.data());
        ti.data = reinterpret_cast<const uint8_t *>(input.data());
        quantized_linear p;
        p.prefix = "l";
        p.weight = &tw, p.weight_scale = &ts, p.input_scale = with_input ? &ti : nullptr;
        return p;
    }
};

hf_quantization fp8_scheme(const char *scales, int64_t block = 0) {
    hf_quantization q;
    q.method = "compressed-tensors", q.bits = 8, q.fp8_scales = scales, q.block_rows = q.block_cols = block;
    return q;
}

// Every block of the repacked rows holds the e4m3 bytes as stored and the scale of its (row, column) by the layout.
void expect_fp8_blocks(const repacked_weight &r, const fp8_layer &l, int64_t b, auto scale_of) {
    ASSERT_EQ(r.rows, l.rows);
    ASSERT_EQ(r.cols, l.cols);
    ASSERT_EQ(r.bytes.size(), static_cast<size_t>(l.rows * (l.cols / b) * (4 + b)));
    EXPECT_EQ(r.bytes.size(), repacked_bytes(r.type, l.rows, l.cols));
    for (int64_t row = 0; row < l.rows; ++row)
        for (int64_t c = 0; c < l.cols; c += b) {
            const uint8_t *blk = r.bytes.data() + (row * (l.cols / b) + c / b) * (4 + b);
            float s;
            std::memcpy(&s, blk, 4);
            ASSERT_EQ(s, scale_of(row, c)) << row << " " << c;
            ASSERT_EQ(std::memcmp(blk + 4, l.weight.data() + row * l.cols + c, static_cast<size_t>(b)), 0) << row << " " << c;
        }
}

TEST(HfQuantization, Fp8LayersRepackIntoTheAbisBlocks) {
    fp8_layer channel(6, 256, {6, 1});
    const repacked_weight rc = repack_quantized_linear(fp8_scheme("channel"), channel.parts(), "shard");
    EXPECT_EQ(rc.type, static_cast<uint32_t>(STRATA_TYPE_F8_E4M3_B128));
    expect_fp8_blocks(rc, channel, 128, [&](int64_t row, int64_t) { return channel.scales[static_cast<size_t>(row)]; });
    fp8_layer tensor(3, 96, {}); // AutoFP8's scalar scale
    const repacked_weight rt = repack_quantized_linear(fp8_scheme("tensor"), tensor.parts(), "shard");
    EXPECT_EQ(rt.type, static_cast<uint32_t>(STRATA_TYPE_F8_E4M3_B32));
    expect_fp8_blocks(rt, tensor, 32, [&](int64_t, int64_t) { return tensor.scales[0]; });
    // 64 x 64 blocks over a [100, 192] weight: ceil(100 / 64) = 2 rows, 3 columns of scales; blocks of 32 each.
    fp8_layer block(100, 192, {2, 3});
    const repacked_weight rb = repack_quantized_linear(fp8_scheme("block", 64), block.parts(), "shard");
    EXPECT_EQ(rb.type, static_cast<uint32_t>(STRATA_TYPE_F8_E4M3_B32));
    expect_fp8_blocks(rb, block, 32, [&](int64_t row, int64_t c) { return block.scales[static_cast<size_t>(row / 64 * 3 + c / 64)]; });
    EXPECT_EQ(fp8_type(4096, 128), static_cast<uint32_t>(STRATA_TYPE_F8_E4M3_B128));
    EXPECT_EQ(fp8_type(4096, 64), static_cast<uint32_t>(STRATA_TYPE_F8_E4M3_B32));
    EXPECT_EQ(fp8_type(4096 + 32, 0), static_cast<uint32_t>(STRATA_TYPE_F8_E4M3_B32));
    EXPECT_EQ(fp8_type(100, 0), 0u);
}

TEST(HfQuantization, Fp8PartsThatDoNotFitTheSchemeAreRefusedByName) {
    auto error_of = [](const hf_quantization &q, fp8_layer &l, bool with_input = false) {
        try {
            repack_quantized_linear(q, l.parts(with_input), "shard");
        } catch (const strata::error &e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const hf_quantization channel = fp8_scheme("channel");
    fp8_layer e5m2(4, 64, {4, 1});
    e5m2.tw.dtype = "F8_E5M2";
    EXPECT_NE(error_of(channel, e5m2).find("'l.weight' is F8_E5M2"), std::string::npos) << error_of(channel, e5m2);
    fp8_layer per_tensor(4, 64, {1});
    EXPECT_NE(error_of(channel, per_tensor).find("'l.weight_scale' is F32 [1]; channel"), std::string::npos)
        << error_of(channel, per_tensor);
    fp8_layer i32_scales(4, 64, {4, 1});
    i32_scales.ts.dtype = "I32";
    EXPECT_NE(error_of(channel, i32_scales).find("'l.weight_scale' is I32"), std::string::npos);
    fp8_layer inf_scale(4, 64, {4, 1});
    inf_scale.scales[2] = INFINITY;
    EXPECT_NE(error_of(channel, inf_scale).find("damaged"), std::string::npos) << error_of(channel, inf_scale);
    fp8_layer odd(4, 80, {4, 1});
    EXPECT_NE(error_of(channel, odd).find("80 inputs"), std::string::npos) << error_of(channel, odd);
    fp8_layer unexpected(4, 64, {4, 1});
    EXPECT_NE(error_of(channel, unexpected, true).find("'l.input_scale' is present"), std::string::npos);
    hf_quantization static_acts = fp8_scheme("channel");
    static_acts.static_input_scale = true;
    fp8_layer missing(4, 64, {4, 1});
    EXPECT_NE(error_of(static_acts, missing).find("has no input_scale"), std::string::npos) << error_of(static_acts, missing);
    fp8_layer negative(4, 64, {4, 1});
    negative.input = {-1.0f};
    EXPECT_NE(error_of(static_acts, negative, true).find("finite and positive"), std::string::npos);
    fp8_layer fine(4, 64, {4, 1});
    EXPECT_EQ(error_of(static_acts, fine, true), "accepted");
    fp8_layer no_scale(4, 64, {4, 1});
    quantized_linear p = no_scale.parts();
    p.weight_scale = nullptr;
    try {
        repack_quantized_linear(channel, p, "shard");
        ADD_FAILURE() << "a layer without scales was accepted";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("has no weight_scale"), std::string::npos) << e.what();
    }
}

TEST(HfQuantization, TheBlockTypeIsTheLargestThatLiesInOneGroup) {
    EXPECT_EQ(group_int_type(4, 128, 4096), static_cast<uint32_t>(STRATA_TYPE_Q4_G128));
    EXPECT_EQ(group_int_type(4, 256, 4096), static_cast<uint32_t>(STRATA_TYPE_Q4_G128)); // the scale repeats
    EXPECT_EQ(group_int_type(8, 64, 4096), static_cast<uint32_t>(STRATA_TYPE_Q8_G64));
    EXPECT_EQ(group_int_type(4, -1, 4096), static_cast<uint32_t>(STRATA_TYPE_Q4_G128));
    EXPECT_EQ(group_int_type(4, -1, 96), static_cast<uint32_t>(STRATA_TYPE_Q4_G32));
    EXPECT_EQ(group_int_type(4, 128, 192), 0u); // 128 does not divide 192
    EXPECT_EQ(repacked_bytes(STRATA_TYPE_Q4_G128, 2, 256), 2u * 2u * 68u);
}

} // namespace
