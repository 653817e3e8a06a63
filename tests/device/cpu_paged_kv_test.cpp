// The paged KV ops (ABI 1.5): kv_store puts rows where the block layout says, and paged_attention over blocks
// scattered across two pools equals the contiguous attention op over the same rows bit for bit — for several
// sequences of different lengths in one call, GQA, block sizes 16, 1 and 5, on 1, 2 and 7 threads and both kernel
// sets. Bad arguments are refused with a message and leave the blocks and the output untouched.
#include "cpu_test_support.hpp"

#include <strata/float16.hpp>
#include <strata/float8.hpp>
#include <strata/kv_layout.hpp>
#include <strata/kv_q8_0.hpp>

#include <limits>
#include <numeric>

namespace {

using namespace cpu_test;

constexpr int32_t n_heads = 8, n_kv_heads = 2, head_dim = 32, kv_dim = n_kv_heads * head_dim; // heads of whole q8_0 groups
constexpr int32_t n_layers = 2;

uint64_t block_bytes(int32_t block_size, uint32_t type = STRATA_KV_F32) {
    return strata::kv_layout::block_bytes(n_layers, block_size, kv_dim, type);
}

uint64_t layer_offset(int32_t layer, int32_t block_size, uint32_t type = STRATA_KV_F32) {
    return strata::kv_layout::layer_offset(layer, block_size, kv_dim, type);
}

// Blocks for every sequence, drawn in random order from two separately allocated pools, which start out as all-ones
// bytes (a NaN in every KV type) so a read of a slot nobody wrote shows in the result.
struct paged_cache {
    int32_t block_size;
    uint32_t type;
    std::vector<float> pool_a, pool_b; // float storage keeps every block aligned for any element type
    std::vector<void *> block_base;
    std::vector<int32_t> seq_block_start;
    strata_paged_kv kv{};

    paged_cache(int32_t bs, const std::vector<int32_t> &seq_lengths, uint32_t seed, uint32_t kv_type = STRATA_KV_F32)
        : block_size(bs), type(kv_type) {
        std::vector<int32_t> blocks_of;
        int32_t total = 0;
        for (int32_t len : seq_lengths) {
            blocks_of.push_back((len + bs - 1) / bs);
            total += blocks_of.back();
        }
        const size_t floats_per_block = block_bytes(bs, type) / sizeof(float);
        const int32_t in_a = total / 2 + 1, in_b = total - in_a + 2; // a spare block in each pool
        pool_a.resize(floats_per_block * static_cast<size_t>(in_a));
        pool_b.resize(floats_per_block * static_cast<size_t>(in_b));
        std::memset(pool_a.data(), 0xff, pool_a.size() * sizeof(float));
        std::memset(pool_b.data(), 0xff, pool_b.size() * sizeof(float));
        std::vector<void *> free_blocks;
        for (int32_t i = 0; i < in_a; ++i) free_blocks.push_back(pool_a.data() + floats_per_block * size_t(i));
        for (int32_t i = 0; i < in_b; ++i) free_blocks.push_back(pool_b.data() + floats_per_block * size_t(i));
        std::mt19937 rng(seed);
        std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
        seq_block_start.push_back(0);
        for (int32_t n : blocks_of) {
            for (int32_t i = 0; i < n; ++i) block_base.push_back(free_blocks[block_base.size()]);
            seq_block_start.push_back(static_cast<int32_t>(block_base.size()));
        }
        kv.struct_size = sizeof kv;
        kv.block_size = bs;
        kv.kv_dim = kv_dim;
        kv.n_seqs = static_cast<int32_t>(seq_lengths.size());
        kv.seq_block_start = seq_block_start.data();
        kv.block_base = block_base.data();
        kv.kv_type = type;
    }

    strata_paged_kv layer(int32_t l) const {
        strata_paged_kv k = kv;
        k.layer_offset_bytes = layer_offset(l, block_size, type);
        return k;
    }
    // Row `pos` of sequence `seq` in layer l: its K row, or its V row when `value` (kv_dim elements of the type).
    const void *row(int32_t l, int32_t seq, int32_t pos, bool value) const {
        const size_t block = size_t(seq_block_start[size_t(seq)] + pos / block_size);
        const auto *base = static_cast<const char *>(block_base[block]) + layer_offset(l, block_size, type);
        const uint64_t row_bytes = strata::kv_layout::row_bytes(kv_dim, type);
        return base + (value ? strata::kv_layout::v_offset(block_size, kv_dim, type) : 0) + uint64_t(pos % block_size) * row_bytes;
    }
};

// Several sequences, each with contiguous K/V rows (the reference cache) and some query tokens at its last positions.
struct batch_case {
    std::vector<int32_t> lengths{37, 5, 80};
    std::vector<std::vector<float>> k, v; // per sequence, lengths[s] x kv_dim
    // The query tokens, interleaved across sequences: a prefill chunk of seq 0 mixed with decodes of the others.
    std::vector<int32_t> token_seq{0, 2, 0, 1, 0, 2, 0, 0, 0, 0};
    std::vector<int32_t> positions;
    std::vector<float> q;
    float scale = 1.0f / std::sqrt(float{head_dim});
    float softcap = 0.0f; // ABI 1.14 terms, passed to both ops
    int32_t window = 0;

    explicit batch_case(uint32_t seed) {
        for (size_t s = 0; s < lengths.size(); ++s) {
            k.push_back(random_floats(size_t(lengths[s]) * kv_dim, seed + 10 * uint32_t(s), -2.0f, 2.0f));
            v.push_back(random_floats(size_t(lengths[s]) * kv_dim, seed + 10 * uint32_t(s) + 1));
        }
        // Token i of sequence s in the batch sits at the next of its sequence's last positions, ending at length-1
        // for its last token; seq 2's two tokens are positions 50 and 79 (not adjacent: any slot may be queried).
        std::vector<int32_t> count(lengths.size(), 0), seen(lengths.size(), 0);
        for (int32_t s : token_seq) ++count[size_t(s)];
        for (int32_t s : token_seq) {
            const int32_t i = seen[size_t(s)]++;
            int32_t p = lengths[size_t(s)] - count[size_t(s)] + i;
            if (s == 2 && i == 0) p = 50;
            positions.push_back(p);
        }
        q = random_floats(token_seq.size() * n_heads * head_dim, seed + 99, -2.0f, 2.0f);
    }
    int32_t n_tokens() const { return static_cast<int32_t>(token_seq.size()); }
    // New sequences of these lengths, their K rows in [-2, 2) from k_seed + s and V rows from v_seed + s.
    void set_sequences(const std::vector<int32_t> &lens, uint32_t k_seed, uint32_t v_seed) {
        lengths = lens;
        k.clear();
        v.clear();
        for (size_t s = 0; s < lengths.size(); ++s) {
            k.push_back(random_floats(size_t(lengths[s]) * kv_dim, k_seed + uint32_t(s), -2.0f, 2.0f));
            v.push_back(random_floats(size_t(lengths[s]) * kv_dim, v_seed + uint32_t(s)));
        }
    }
    // paged_attention's arguments for these queries over `kv`, into `out`.
    strata_paged_attention_args paged_args(const strata_paged_kv &kv, float *out) const {
        strata_paged_attention_args a{};
        a.struct_size = sizeof a;
        a.n_tokens = n_tokens();
        a.n_heads = n_heads;
        a.n_kv_heads = n_kv_heads;
        a.head_dim = head_dim;
        a.token_seq = token_seq.data();
        a.positions = positions.data();
        a.q = q.data();
        a.scale = scale;
        a.out = out;
        a.kv = &kv;
        a.softcap = softcap;
        a.window = window;
        return a;
    }

    // Contiguous attention, one call per query token (each token's result depends only on its own rows).
    std::vector<float> reference(strata_device *dev) const {
        const size_t row = size_t(n_heads) * head_dim;
        std::vector<float> out(q.size());
        for (int32_t t = 0; t < n_tokens(); ++t) {
            const size_t s = size_t(token_seq[size_t(t)]);
            strata_attention_args a{};
            a.struct_size = sizeof a;
            a.n_tokens = 1;
            a.n_heads = n_heads;
            a.n_kv_heads = n_kv_heads;
            a.head_dim = head_dim;
            a.kv_row_stride = kv_dim;
            a.positions = &positions[size_t(t)];
            a.q = q.data() + size_t(t) * row;
            a.k_cache = k[s].data();
            a.v_cache = v[s].data();
            a.scale = scale;
            a.out = out.data() + size_t(t) * row;
            a.softcap = softcap;
            a.window = window;
            strata_status st{};
            EXPECT_EQ(ops().attention(dev, &a, &st), STRATA_OK) << st.message;
        }
        return out;
    }
};

// paged_attention of all of c's tokens over kv in one call on dev.
std::vector<float> attend_all(strata_device *dev, const batch_case &c, const strata_paged_kv &kv) {
    std::vector<float> out(c.q.size());
    const strata_paged_attention_args a = c.paged_args(kv, out.data());
    strata_status st{};
    EXPECT_EQ(ops().paged_attention(dev, &a, &st), STRATA_OK) << st.message;
    return out;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// paged_attention of c's token t alone, and whether its output equals the token's rows of `batched` bit for bit.
bool alone_equals(strata_device *dev, const batch_case &c, const strata_paged_kv &kv, int32_t t,
                  const std::vector<float> &batched) {
    const size_t row = size_t(n_heads) * head_dim;
    std::vector<float> alone(row);
    strata_paged_attention_args one_token = c.paged_args(kv, alone.data());
    one_token.n_tokens = 1;
    one_token.token_seq = &c.token_seq[size_t(t)];
    one_token.positions = &c.positions[size_t(t)];
    one_token.q = c.q.data() + size_t(t) * row;
    strata_status st{};
    EXPECT_EQ(ops().paged_attention(dev, &one_token, &st), STRATA_OK) << st.message;
    return std::memcmp(alone.data(), batched.data() + size_t(t) * row, row * sizeof(float)) == 0;
}

// Writes every row of every sequence into layer l with one kv_store call, tokens of the sequences interleaved.
void store_all(strata_device *dev, const paged_cache &cache, int32_t l, const std::vector<std::vector<float>> &k,
               const std::vector<std::vector<float>> &v, const std::vector<int32_t> &lengths) {
    std::vector<int32_t> seq, pos;
    std::vector<float> kr, vr;
    const int32_t longest = *std::max_element(lengths.begin(), lengths.end());
    for (int32_t p = longest - 1; p >= 0; --p) // descending: order within the call must not matter
        for (size_t s = 0; s < lengths.size(); ++s)
            if (p < lengths[s]) {
                seq.push_back(int32_t(s));
                pos.push_back(p);
                kr.insert(kr.end(), k[s].begin() + p * kv_dim, k[s].begin() + (p + 1) * kv_dim);
                vr.insert(vr.end(), v[s].begin() + p * kv_dim, v[s].begin() + (p + 1) * kv_dim);
            }
    const strata_paged_kv kv = cache.layer(l);
    strata_kv_store_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = static_cast<int32_t>(seq.size());
    a.token_seq = seq.data();
    a.positions = pos.data();
    a.k = kr.data();
    a.v = vr.data();
    a.kv = &kv;
    strata_status st{};
    ASSERT_EQ(ops().kv_store(dev, &a, &st), STRATA_OK) << st.message;
}

class CpuPagedKv : public ::testing::TestWithParam<std::tuple<int, bool>> {
  protected:
    void SetUp() override {
        dev_ = make_device(std::get<0>(GetParam()), std::get<1>(GetParam()));
        ASSERT_NE(dev_, nullptr);
    }
    strata_device *dev() { return dev_.get(); }

  private:
    device_ptr dev_;
};

TEST_P(CpuPagedKv, PagedAttentionEqualsContiguousBitForBit) {
    ASSERT_TRUE(STRATA_HAS_SLOT(&ops(), kv_store) && STRATA_HAS_SLOT(&ops(), paged_attention));
    // With ABI 1.14's soft-capping and sliding window too (windows shorter and longer than a block).
    for (const auto &[block_size, softcap, window] :
         {std::tuple<int32_t, float, int32_t>{16, 0.0f, 0}, {1, 0.0f, 0}, {5, 0.0f, 0}, {16, 2.0f, 0}, {5, 0.0f, 3},
          {16, 1.5f, 40}}) {
        SCOPED_TRACE("block_size " + std::to_string(block_size) + " softcap " + std::to_string(softcap) + " window " +
                     std::to_string(window));
        batch_case c(static_cast<uint32_t>(block_size) * 7 + 1);
        c.softcap = softcap;
        c.window = window;
        paged_cache cache(block_size, c.lengths, static_cast<uint32_t>(block_size));
        // Layer 0 holds other rows, so a wrong layer offset shows; the attended layer is 1.
        const batch_case other(static_cast<uint32_t>(block_size) * 7 + 500);
        store_all(dev(), cache, 0, other.k, other.v, c.lengths);
        store_all(dev(), cache, 1, c.k, c.v, c.lengths);

        // kv_store put each row where the layout says.
        for (size_t s = 0; s < c.lengths.size(); ++s)
            for (int32_t p = 0; p < c.lengths[s]; ++p) {
                ASSERT_EQ(std::memcmp(cache.row(1, int32_t(s), p, false), c.k[s].data() + p * kv_dim,
                                      kv_dim * sizeof(float)), 0) << "K row " << p << " of seq " << s;
                ASSERT_EQ(std::memcmp(cache.row(1, int32_t(s), p, true), c.v[s].data() + p * kv_dim,
                                      kv_dim * sizeof(float)), 0) << "V row " << p << " of seq " << s;
            }

        const std::vector<float> want = c.reference(dev());
        std::vector<float> got(c.q.size(), -7.0f);
        const strata_paged_kv kv = cache.layer(1);
        const strata_paged_attention_args a = c.paged_args(kv, got.data());
        strata_status st{};
        ASSERT_EQ(ops().paged_attention(dev(), &a, &st), STRATA_OK) << st.message;
        for (int32_t t = 0; t < c.n_tokens(); ++t) {
            const size_t row = size_t(n_heads) * head_dim;
            EXPECT_EQ(std::memcmp(got.data() + size_t(t) * row, want.data() + size_t(t) * row, row * sizeof(float)), 0)
                << "token " << t << " (seq " << c.token_seq[size_t(t)] << ", position " << c.positions[size_t(t)]
                << ") differs from contiguous attention";
        }
        // Not trivially equal: the output is finite and not the same for every token.
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
        EXPECT_NE(std::memcmp(got.data(), got.data() + n_heads * head_dim, n_heads * head_dim * sizeof(float)), 0);
    }
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndKernels, CpuPagedKv,
                         ::testing::Combine(::testing::Values(1, 2, 7), ::testing::Values(false, true)),
                         [](const auto &info) {
                             return std::to_string(std::get<0>(info.param)) + "threads" +
                                    (std::get<1>(info.param) ? "Scalar" : "Fast");
                         });

// The 16-bit, FP8 (ABI 1.20) and q8_0 (1.23) KV caches: kv_store rounds each float (q8_0: each group of 32) to the
// type (the SDK's scalar conversion, bit for bit, on both kernel sets), and paged attention over those rows equals
// the contiguous float attention over the same rows widened back to float, bit for bit.
class CpuPagedKvRounded : public ::testing::TestWithParam<std::tuple<uint32_t, bool>> {};

// The code the SDK's conversion gives x in `type`, and the code stored at element i of a row.
uint32_t encoded(uint32_t type, float x) {
    switch (type) {
    case STRATA_KV_F16: return strata::float16::fp32_to_fp16(x);
    case STRATA_KV_BF16: return strata::float16::fp32_to_bf16(x);
    case STRATA_KV_FP8_E4M3: return strata::float8::fp32_to_e4m3(x);
    default: return strata::float8::fp32_to_e5m2(x);
    }
}
uint32_t stored_code(uint32_t type, const void *row, int32_t i) {
    if (strata::kv_layout::group_bytes(type) == 1) return static_cast<const uint8_t *>(row)[i];
    return static_cast<const uint16_t *>(row)[i];
}
// Whether a stored row holds the type's encoding of `want` (kv_dim floats): code by code, or (q8_0) the SDK
// quantizer's groups byte for byte. Names the first difference.
::testing::AssertionResult stores(uint32_t type, const void *row, const float *want) {
    if (type == STRATA_KV_Q8_0) {
        for (int32_t g = 0; g < kv_dim / 32; ++g) {
            strata::kv_q8_0::group expect{};
            strata::kv_q8_0::quantize(want + 32 * g, &expect);
            if (std::memcmp(static_cast<const strata::kv_q8_0::group *>(row) + g, &expect, sizeof expect) != 0)
                return ::testing::AssertionFailure() << "group " << g;
        }
        return ::testing::AssertionSuccess();
    }
    for (int32_t i = 0; i < kv_dim; ++i)
        if (stored_code(type, row, i) != encoded(type, want[i]))
            return ::testing::AssertionFailure() << "element " << i;
    return ::testing::AssertionSuccess();
}
// A row of kv_dim floats as the cache gives it back.
void widen_row(uint32_t type, float *x) {
    for (int32_t i = 0; i < kv_dim; ++i) {
        switch (type) {
        case STRATA_KV_F16: x[i] = strata::float16::fp16_to_fp32(strata::float16::fp32_to_fp16(x[i])); break;
        case STRATA_KV_BF16: x[i] = strata::float16::bf16_to_fp32(strata::float16::fp32_to_bf16(x[i])); break;
        case STRATA_KV_FP8_E4M3: x[i] = strata::float8::e4m3_to_fp32(strata::float8::fp32_to_e4m3(x[i])); break;
        case STRATA_KV_FP8_E5M2: x[i] = strata::float8::e5m2_to_fp32(strata::float8::fp32_to_e5m2(x[i])); break;
        default: break;
        }
    }
    if (type == STRATA_KV_Q8_0)
        for (int32_t g = 0; g < kv_dim / 32; ++g) {
            strata::kv_q8_0::group q{};
            strata::kv_q8_0::quantize(x + 32 * g, &q);
            for (int i = 0; i < 32; ++i) x[32 * g + i] = strata::kv_q8_0::value(q, i);
        }
}

TEST_P(CpuPagedKvRounded, StoresRoundedRowsAndAttendsAsFloatOverThemBitForBit) {
    const uint32_t type = std::get<0>(GetParam());
    device_ptr dev = make_device(2, std::get<1>(GetParam()));
    ASSERT_NE(dev, nullptr);
    for (const auto &[block_size, softcap, window] :
         {std::tuple<int32_t, float, int32_t>{16, 0.0f, 0}, {5, 0.0f, 0}, {16, 1.5f, 40}}) {
        SCOPED_TRACE("block_size " + std::to_string(block_size));
        batch_case c(static_cast<uint32_t>(block_size) * 11 + 3);
        c.softcap = softcap;
        c.window = window;
        // Values a narrow type cannot hold exactly, ties and extremes among them: 1 + 2^-11 (a half tie), 65520
        // (rounds to half's infinity; FP8 saturates it), a half subnormal (0 in FP8).
        c.k[0][0] = 1.0f + 1.0f / 2048.0f;
        c.k[0][1] = 65520.0f;
        c.v[0][2] = 3.0e-7f;
        paged_cache cache(block_size, c.lengths, static_cast<uint32_t>(block_size), type);
        const batch_case other(static_cast<uint32_t>(block_size) * 11 + 700);
        store_all(dev.get(), cache, 0, other.k, other.v, c.lengths);
        store_all(dev.get(), cache, 1, c.k, c.v, c.lengths);
        for (size_t s = 0; s < c.lengths.size(); ++s)
            for (int32_t p = 0; p < c.lengths[s]; ++p)
                for (int32_t value = 0; value < 2; ++value) {
                    const void *row = cache.row(1, int32_t(s), p, value != 0);
                    const float *want = (value ? c.v[s] : c.k[s]).data() + p * kv_dim;
                    ASSERT_TRUE(stores(type, row, want)) << (value ? "V" : "K") << " row " << p << " of seq " << s;
                }
        // The reference: contiguous float attention over the rows as the cache holds them. Half's infinity would
        // make every score of that key infinite; keep the reference finite by not attending that key's head there.
        c.k[0][1] = 1.0f;
        store_all(dev.get(), cache, 1, c.k, c.v, c.lengths);
        batch_case widened = c;
        for (auto *rows : {&widened.k, &widened.v})
            for (auto &seq : *rows)
                for (size_t r = 0; r < seq.size(); r += kv_dim) widen_row(type, seq.data() + r);
        const std::vector<float> want = widened.reference(dev.get());
        std::vector<float> got(c.q.size(), -7.0f);
        const strata_paged_kv kv = cache.layer(1);
        const strata_paged_attention_args a = c.paged_args(kv, got.data());
        strata_status st{};
        ASSERT_EQ(ops().paged_attention(dev.get(), &a, &st), STRATA_OK) << st.message;
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "paged attention over the rounded rows differs from float attention over the same values";
        // The rounding is real: float rows give another result.
        const std::vector<float> unrounded = c.reference(dev.get());
        EXPECT_NE(std::memcmp(got.data(), unrounded.data(), got.size() * sizeof(float)), 0);
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
    }
}

INSTANTIATE_TEST_SUITE_P(TypesAndKernels, CpuPagedKvRounded,
                         ::testing::Combine(::testing::Values(uint32_t{STRATA_KV_F16}, uint32_t{STRATA_KV_BF16},
                                                              uint32_t{STRATA_KV_FP8_E4M3}, uint32_t{STRATA_KV_FP8_E5M2},
                                                              uint32_t{STRATA_KV_Q8_0}),
                                            ::testing::Values(false, true)),
                         [](const auto &info) {
                             const uint32_t t = std::get<0>(info.param);
                             return std::string(t == STRATA_KV_F16    ? "F16"
                                                : t == STRATA_KV_BF16 ? "Bf16"
                                                : t == STRATA_KV_FP8_E4M3 ? "Fp8E4m3"
                                                : t == STRATA_KV_FP8_E5M2 ? "Fp8E5m2"
                                                                          : "Q8_0") +
                                    (std::get<1>(info.param) ? "Scalar" : "Fast");
                         });

TEST(CpuPagedKvRounded, AnUnknownKvTypeIsRefusedAndTheDeviceSaysSoAtLoad) {
    device_ptr dev = make_device(1, false);
    ASSERT_NE(dev, nullptr);
    batch_case c(5);
    paged_cache cache(16, c.lengths, 5, STRATA_KV_F16);
    strata_paged_kv kv = cache.layer(0);
    kv.kv_type = 9; // ggml's Q8_1: not a type this cache stores
    std::vector<float> row(kv_dim, 1.0f);
    const int32_t seq = 0, pos = 0;
    strata_kv_store_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = 1;
    a.token_seq = &seq;
    a.positions = &pos;
    a.k = row.data();
    a.v = row.data();
    a.kv = &kv;
    strata_status st{};
    EXPECT_EQ(ops().kv_store(dev.get(), &a, &st), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(st.message).find("kv.kv_type = 9"), std::string::npos) << st.message;
    ASSERT_TRUE(STRATA_HAS_SLOT(&ops(), supports));
    strata_support_query q{};
    q.struct_size = sizeof q;
    q.kind = STRATA_SUPPORT_ATTENTION;
    q.n_heads = n_heads;
    q.n_kv_heads = n_kv_heads;
    q.head_dim = head_dim;
    char why[256] = {0};
    for (uint32_t t : {uint32_t{STRATA_KV_F32}, uint32_t{STRATA_KV_F16}, uint32_t{STRATA_KV_BF16},
                       uint32_t{STRATA_KV_FP8_E4M3}, uint32_t{STRATA_KV_FP8_E5M2}, uint32_t{STRATA_KV_Q8_0}}) {
        q.kv_type = t;
        EXPECT_EQ(ops().supports(dev.get(), &q, why, sizeof why), 1) << t;
    }
    q.kv_type = 9;
    EXPECT_EQ(ops().supports(dev.get(), &q, why, sizeof why), 0);
    EXPECT_NE(std::string(why).find("float16"), std::string::npos) << why;
    // q8_0 keeps heads in whole groups of 32 values: heads of 16 are refused at load, and by the ops if called.
    q.kv_type = STRATA_KV_Q8_0;
    q.head_dim = 16;
    EXPECT_EQ(ops().supports(dev.get(), &q, why, sizeof why), 0);
    EXPECT_NE(std::string(why).find("heads of 16 values are not whole groups"), std::string::npos) << why;
    paged_cache q8(16, c.lengths, 5, STRATA_KV_Q8_0);
    const strata_paged_kv q8_kv = q8.layer(0);
    std::vector<float> out(c.q.size());
    strata_paged_attention_args pa = c.paged_args(q8_kv, out.data());
    pa.n_kv_heads = 4;
    pa.head_dim = 16; // 4 x 16 = kv_dim, but a head is half a group
    EXPECT_EQ(ops().paged_attention(dev.get(), &pa, &st), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(st.message).find("head_dim = 16 is not one"), std::string::npos) << st.message;
}

// A long context through the paged path: the score scratch grows past its preallocated 4096 positions.
TEST(CpuPagedKvLong, LongSequenceGrowsScratchAndStillMatches) {
    device_ptr dev = make_device(2);
    ASSERT_NE(dev, nullptr);
    batch_case c(3);
    c.lengths = {5000};
    c.k = {random_floats(size_t(5000) * kv_dim, 4, -2.0f, 2.0f)};
    c.v = {random_floats(size_t(5000) * kv_dim, 5)};
    c.token_seq = {0, 0};
    c.positions = {4998, 4999};
    c.q = random_floats(2 * n_heads * head_dim, 6, -2.0f, 2.0f);
    paged_cache cache(16, c.lengths, 9);
    store_all(dev.get(), cache, 0, c.k, c.v, c.lengths);
    const std::vector<float> want = c.reference(dev.get());
    std::vector<float> got(c.q.size());
    const strata_paged_kv kv = cache.layer(0);
    strata_paged_attention_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = 2;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv_heads;
    a.head_dim = head_dim;
    a.token_seq = c.token_seq.data();
    a.positions = c.positions.data();
    a.q = c.q.data();
    a.scale = c.scale;
    a.out = got.data();
    a.kv = &kv;
    strata_status st{};
    ASSERT_EQ(ops().paged_attention(dev.get(), &a, &st), STRATA_OK) << st.message;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

// Contexts longer than segment_rows (512) keys are attended by segments merged in order (flash decoding): a token's
// bits depend on its rows only — the same in a batch (an item attends its segments in turn) as alone on 2 or 7
// threads (each segment an item of its own, merged in a second pass), on any thread count, paged or contiguous —
// and equal float64 attention within 2e-6 (softmax weights of an exact float64 computation; values in [-1, 1]).
TEST(CpuPagedKvLong, SegmentedContextsGiveEachTokenTheSameBitsAloneOrBatchedOnAnyThreadsNearFloat64) {
    for (bool scalar : {false, true})
        for (const auto &[softcap, window] : {std::pair<float, int32_t>{0.0f, 0}, {3.0f, 0}, {0.0f, 700}}) {
            SCOPED_TRACE(std::string(scalar ? "scalar" : "fast") + " softcap " + std::to_string(softcap) + " window " +
                         std::to_string(window));
            batch_case c(11);
            c.set_sequences({1500, 600, 513, 2100}, 20, 30);
            // Around the segment edges (511/512/513 keys), mid-segment, a sequence's last row.
            c.token_seq = {0, 0, 0, 0, 0, 0, 1, 2, 3, 3};
            c.positions = {510, 511, 512, 1023, 1024, 1499, 599, 512, 1536, 2099};
            c.q = random_floats(c.token_seq.size() * n_heads * head_dim, 40, -2.0f, 2.0f);
            c.softcap = softcap;
            c.window = window;
            paged_cache cache(16, c.lengths, 13);
            const size_t row = size_t(n_heads) * head_dim;

            device_ptr one = make_device(1, scalar);
            ASSERT_NE(one, nullptr);
            store_all(one.get(), cache, 0, c.k, c.v, c.lengths);
            const strata_paged_kv kv = cache.layer(0);
            const std::vector<float> batched = attend_all(one.get(), c, kv);
            // Contiguous attention, one token per call, on the same device.
            const std::vector<float> contiguous = c.reference(one.get());
            EXPECT_EQ(std::memcmp(contiguous.data(), batched.data(), batched.size() * sizeof(float)), 0);

            for (int threads : {2, 7}) {
                device_ptr dev = make_device(threads, scalar);
                ASSERT_NE(dev, nullptr);
                EXPECT_TRUE(same_bits(attend_all(dev.get(), c, kv), batched)) << threads << " threads, batched";
                for (int32_t t = 0; t < c.n_tokens(); ++t)
                    EXPECT_TRUE(alone_equals(dev.get(), c, kv, t, batched))
                        << threads << " threads, token " << t << " (position " << c.positions[size_t(t)] << ") alone";
            }

            // float64: softmax over the attended rows of scale * q.k (soft-capped), then the weighted values.
            double worst = 0.0;
            for (int32_t t = 0; t < c.n_tokens(); ++t) {
                const size_t sq = size_t(c.token_seq[size_t(t)]);
                const int32_t pos = c.positions[size_t(t)];
                const int32_t first = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
                for (int32_t h = 0; h < n_heads; ++h) {
                    const int32_t kvh = h / (n_heads / n_kv_heads);
                    const float *qh = c.q.data() + size_t(t) * row + size_t(h) * head_dim;
                    std::vector<double> w(size_t(pos + 1), 0.0);
                    double top = -1e300;
                    for (int32_t j = first; j <= pos; ++j) {
                        double dot = 0.0;
                        for (int32_t d = 0; d < head_dim; ++d)
                            dot += double(qh[d]) * double(c.k[sq][size_t(j) * kv_dim + size_t(kvh) * head_dim + size_t(d)]);
                        double sc = dot * double(c.scale);
                        if (softcap > 0.0f) sc = std::tanh(sc / softcap) * softcap;
                        w[size_t(j)] = sc;
                        top = std::max(top, sc);
                    }
                    double sum = 0.0;
                    for (int32_t j = first; j <= pos; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - top));
                    for (int32_t d = 0; d < head_dim; ++d) {
                        double y = 0.0;
                        for (int32_t j = first; j <= pos; ++j)
                            y += w[size_t(j)] / sum * double(c.v[sq][size_t(j) * kv_dim + size_t(kvh) * head_dim + size_t(d)]);
                        worst = std::max(worst, std::abs(y - double(batched[size_t(t) * row + size_t(h) * head_dim + size_t(d)])));
                    }
                }
            }
            EXPECT_LT(worst, 2e-6);
            EXPECT_GT(worst, 0.0); // float arithmetic: not trivially exact
        }
}

// A prefill's tokens are attended in query blocks (attention_items: query_block consecutive tokens of a sequence read
// each row together once there are 2 * threads * query_block tokens): every token keeps the bits it gets alone — for
// prompts whose blocks straddle segment_rows (tokens attended whole and by segments in one block), the first rows
// of a sequence, blocks cut where the sequence changes, decode tokens after a prompt, windows and soft-caps, each KV
// type, on 1, 2, 7 and 16 threads (16: too few tokens for blocks; a long token alone on 7 threads takes the split
// path) and both kernel sets; and the contiguous op over a prompt chunk in blocks gives the paged op's bits.
TEST(CpuPagedKvLong, QueryBlocksGiveEachTokenTheBitsItGetsAlone) {
    for (uint32_t type : {uint32_t{STRATA_KV_F32}, uint32_t{STRATA_KV_F16}, uint32_t{STRATA_KV_BF16},
                          uint32_t{STRATA_KV_FP8_E4M3}, uint32_t{STRATA_KV_FP8_E5M2}, uint32_t{STRATA_KV_Q8_0}})
        for (bool scalar : {false, true})
            for (const auto &[softcap, window] :
                 {std::pair<float, int32_t>{0.0f, 0}, {2.0f, 0}, {0.0f, 40}, {0.0f, 530}}) {
                SCOPED_TRACE("type " + std::to_string(type) + (scalar ? " scalar" : " fast") + " softcap " +
                             std::to_string(softcap) + " window " + std::to_string(window));
                batch_case c(23);
                c.set_sequences({600, 70, 530}, 50, 60);
                // Sequence 1's whole prompt (positions 0..69), sequence 0's chunk 480..560 (contexts 481..561 keys:
                // one segment, then two), then three tokens of sequence 2 (not adjacent).
                c.token_seq.clear();
                c.positions.clear();
                for (int32_t p = 0; p < 70; ++p) c.token_seq.push_back(1), c.positions.push_back(p);
                for (int32_t p = 480; p <= 560; ++p) c.token_seq.push_back(0), c.positions.push_back(p);
                for (int32_t p : {100, 529, 300}) c.token_seq.push_back(2), c.positions.push_back(p);
                c.q = random_floats(c.token_seq.size() * n_heads * head_dim, 70, -2.0f, 2.0f);
                c.softcap = softcap;
                c.window = window;
                paged_cache cache(16, c.lengths, 17, type);
                const size_t row = size_t(n_heads) * head_dim;

                device_ptr one = make_device(1, scalar);
                ASSERT_NE(one, nullptr);
                store_all(one.get(), cache, 0, c.k, c.v, c.lengths);
                const strata_paged_kv kv = cache.layer(0);
                const std::vector<float> batched = attend_all(one.get(), c, kv);
                EXPECT_TRUE(std::all_of(batched.begin(), batched.end(), [](float x) { return std::isfinite(x); }));
                for (int32_t t = 0; t < c.n_tokens(); ++t)
                    EXPECT_TRUE(alone_equals(one.get(), c, kv, t, batched))
                        << "token " << t << " (sequence " << c.token_seq[size_t(t)] << ", position "
                        << c.positions[size_t(t)] << ") alone";
                for (int threads : {2, 7, 16}) {
                    device_ptr dev = make_device(threads, scalar);
                    ASSERT_NE(dev, nullptr);
                    EXPECT_TRUE(same_bits(attend_all(dev.get(), c, kv), batched)) << threads << " threads";
                    if (threads != 7) continue;
                    for (int32_t t = 70; t < c.n_tokens(); t += 9) // sequence 0's and 2's: segments as items
                        EXPECT_TRUE(alone_equals(dev.get(), c, kv, t, batched)) << "token " << t << " alone on 7 threads";
                }
                strata_status st{};
                if (type != STRATA_KV_F32) continue;
                // The contiguous op over sequence 0's chunk (tokens 70..150) in one call: blocks of one run.
                std::vector<float> contiguous(size_t(81) * row);
                strata_attention_args ca{};
                ca.struct_size = sizeof ca;
                ca.n_tokens = 81;
                ca.n_heads = n_heads;
                ca.n_kv_heads = n_kv_heads;
                ca.head_dim = head_dim;
                ca.kv_row_stride = kv_dim;
                ca.positions = &c.positions[70];
                ca.q = c.q.data() + size_t(70) * row;
                ca.k_cache = c.k[0].data();
                ca.v_cache = c.v[0].data();
                ca.scale = c.scale;
                ca.out = contiguous.data();
                ca.softcap = softcap;
                ca.window = window;
                ASSERT_EQ(ops().attention(one.get(), &ca, &st), STRATA_OK) << st.message;
                EXPECT_EQ(std::memcmp(contiguous.data(), batched.data() + size_t(70) * row,
                                      contiguous.size() * sizeof(float)),
                          0)
                    << "contiguous attention in blocks";
            }
}

// A segment whose every score is -inf (keys whose dot with the query overflows) weighs nothing, as such rows do in
// one pass: the result is the attention over the other rows, finite.
TEST(CpuPagedKvLong, ASegmentOfMinusInfinityScoresWeighsNothing) {
    device_ptr dev = make_device(2);
    ASSERT_NE(dev, nullptr);
    batch_case c(5);
    c.lengths = {1100};
    std::vector<float> keys = random_floats(size_t(1100) * kv_dim, 6, -1.0f, 1.0f);
    std::fill(keys.begin(), keys.begin() + 512 * kv_dim, -3e38f); // rows 0..511: q.k = -inf
    c.k = {keys};
    c.v = {random_floats(size_t(1100) * kv_dim, 7)};
    c.token_seq = {0};
    c.positions = {1099};
    c.q.assign(size_t(n_heads) * head_dim, 1.0f);
    paged_cache cache(16, c.lengths, 8);
    store_all(dev.get(), cache, 0, c.k, c.v, c.lengths);
    std::vector<float> got(c.q.size());
    const strata_paged_kv kv = cache.layer(0);
    const strata_paged_attention_args a = c.paged_args(kv, got.data());
    strata_status st{};
    ASSERT_EQ(ops().paged_attention(dev.get(), &a, &st), STRATA_OK) << st.message;
    double worst = 0.0;
    for (int32_t h = 0; h < n_heads; ++h) {
        const int32_t kvh = h / (n_heads / n_kv_heads);
        std::vector<double> w;
        double top = -1e300, sum = 0.0;
        for (int32_t j = 512; j < 1100; ++j) {
            double dot = 0.0;
            for (int32_t d = 0; d < head_dim; ++d) dot += double(keys[size_t(j) * kv_dim + size_t(kvh) * head_dim + size_t(d)]);
            w.push_back(dot * double(c.scale));
            top = std::max(top, w.back());
        }
        for (double &x : w) sum += (x = std::exp(x - top));
        for (int32_t d = 0; d < head_dim; ++d) {
            double y = 0.0;
            for (int32_t j = 512; j < 1100; ++j)
                y += w[size_t(j - 512)] / sum * double(c.v[0][size_t(j) * kv_dim + size_t(kvh) * head_dim + size_t(d)]);
            const float x = got[size_t(h) * head_dim + size_t(d)];
            ASSERT_TRUE(std::isfinite(x)) << "head " << h;
            worst = std::max(worst, std::abs(y - double(x)));
        }
    }
    EXPECT_LT(worst, 2e-6);
}

class CpuPagedKvBadArguments : public ::testing::Test {
  protected:
    void SetUp() override { dev_ = make_device(2); }

    // Asserts an invalid-argument failure whose message names `needle`, then clears the status.
    void expect_invalid(int32_t code, const char *what, const char *needle) {
        EXPECT_EQ(code, STRATA_ERR_INVALID_ARGUMENT) << what;
        EXPECT_EQ(st_.code, STRATA_ERR_INVALID_ARGUMENT) << what;
        EXPECT_NE(std::strstr(st_.message, needle), nullptr) << what << ": message '" << st_.message
                                                             << "' does not mention '" << needle << "'";
        st_ = strata_status{};
    }

    device_ptr dev_;
    strata_status st_{};
};

TEST_F(CpuPagedKvBadArguments, KvStoreRefusesAndWritesNothing) {
    strata_device *d = dev_.get();
    paged_cache cache(4, {6, 3}, 1); // seq 0: 2 blocks (8 slots), seq 1: 1 block (4 slots)
    const std::vector<float> pool_a = cache.pool_a, pool_b = cache.pool_b;
    const std::vector<float> k = random_floats(2 * kv_dim, 1), v = random_floats(2 * kv_dim, 2);
    std::vector<int32_t> seq{0, 1}, pos{7, 3};
    strata_paged_kv kv = cache.layer(1);
    strata_kv_store_args good{};
    good.struct_size = sizeof good;
    good.n_tokens = 2;
    good.token_seq = seq.data();
    good.positions = pos.data();
    good.k = k.data();
    good.v = v.data();
    good.kv = &kv;

    expect_invalid(ops().kv_store(nullptr, &good, &st_), "null device", "device is NULL");
    expect_invalid(ops().kv_store(d, nullptr, &st_), "null args", "args is NULL");
    auto a = good;
    a.struct_size = 8;
    expect_invalid(ops().kv_store(d, &a, &st_), "old struct", "struct_size");
    a = good;
    a.n_tokens = 0;
    expect_invalid(ops().kv_store(d, &a, &st_), "zero tokens", "n_tokens");
    a = good;
    a.v = nullptr;
    expect_invalid(ops().kv_store(d, &a, &st_), "null v", "k or v is NULL");
    a = good;
    a.kv = nullptr;
    expect_invalid(ops().kv_store(d, &a, &st_), "null kv", "kv (the block table) is NULL");
    a = good;
    a.token_seq = nullptr;
    expect_invalid(ops().kv_store(d, &a, &st_), "null token_seq", "token_seq is NULL");
    a = good;
    a.positions = nullptr;
    expect_invalid(ops().kv_store(d, &a, &st_), "null positions", "positions is NULL");

    seq = {0, 2};
    expect_invalid(ops().kv_store(d, &good, &st_), "seq past n_seqs", "token_seq[1] = 2");
    seq = {-1, 1};
    expect_invalid(ops().kv_store(d, &good, &st_), "negative seq", "token_seq[0] = -1");
    seq = {0, 1};
    pos = {8, 3};
    expect_invalid(ops().kv_store(d, &good, &st_), "position past the blocks", "past the 8 slots of sequence 0");
    pos = {7, 4};
    expect_invalid(ops().kv_store(d, &good, &st_), "position past a one-block sequence", "past the 4 slots");
    pos = {-2, 3};
    expect_invalid(ops().kv_store(d, &good, &st_), "negative position", "must be >= 0");
    pos = {7, 3};

    strata_paged_kv bad = kv;
    good.kv = &bad;
    bad.struct_size = 4;
    expect_invalid(ops().kv_store(d, &good, &st_), "old kv struct", "kv.struct_size");
    bad = kv;
    bad.block_size = 0;
    expect_invalid(ops().kv_store(d, &good, &st_), "zero block size", "kv.block_size = 0");
    bad = kv;
    bad.kv_dim = -1;
    expect_invalid(ops().kv_store(d, &good, &st_), "negative kv_dim", "kv.kv_dim = -1");
    bad = kv;
    bad.n_seqs = 0;
    expect_invalid(ops().kv_store(d, &good, &st_), "no sequences", "kv.n_seqs = 0");
    bad = kv;
    bad.seq_block_start = nullptr;
    expect_invalid(ops().kv_store(d, &good, &st_), "null seq_block_start", "seq_block_start is NULL");
    bad = kv;
    bad.block_base = nullptr;
    expect_invalid(ops().kv_store(d, &good, &st_), "null block_base", "block_base is NULL");
    bad = kv;
    bad.layer_offset_bytes = 6;
    expect_invalid(ops().kv_store(d, &good, &st_), "odd layer offset", "layer_offset_bytes = 6");
    const std::vector<int32_t> descending{0, 2, 1};
    bad = kv;
    bad.seq_block_start = descending.data();
    expect_invalid(ops().kv_store(d, &good, &st_), "descending block ranges", "must ascend");
    std::vector<void *> with_null = cache.block_base;
    with_null[2] = nullptr;
    bad = kv;
    bad.block_base = with_null.data();
    expect_invalid(ops().kv_store(d, &good, &st_), "a null block", "block_base[2] is NULL");
    good.kv = &kv;

    EXPECT_EQ(std::memcmp(cache.pool_a.data(), pool_a.data(), pool_a.size() * sizeof(float)), 0)
        << "a refused kv_store wrote into the blocks";
    EXPECT_EQ(std::memcmp(cache.pool_b.data(), pool_b.data(), pool_b.size() * sizeof(float)), 0)
        << "a refused kv_store wrote into the blocks";
    ASSERT_EQ(ops().kv_store(d, &good, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(std::memcmp(cache.row(1, 1, 3, true), v.data() + kv_dim, kv_dim * sizeof(float)), 0);
}

TEST_F(CpuPagedKvBadArguments, PagedAttentionRefusesAndLeavesOutputUntouched) {
    strata_device *d = dev_.get();
    paged_cache cache(4, {6, 3}, 2);
    const batch_case rows(5);
    store_all(d, cache, 0, {rows.k[0], rows.k[1]}, {rows.v[0], rows.v[1]}, {6, 3});
    std::vector<int32_t> seq{1, 0}, pos{2, 5};
    const std::vector<float> q = random_floats(2 * n_heads * head_dim, 3);
    std::vector<float> out(q.size(), -7.0f);
    const strata_paged_kv kv = cache.layer(0);
    strata_paged_attention_args good{};
    good.struct_size = sizeof good;
    good.n_tokens = 2;
    good.n_heads = n_heads;
    good.n_kv_heads = n_kv_heads;
    good.head_dim = head_dim;
    good.token_seq = seq.data();
    good.positions = pos.data();
    good.q = q.data();
    good.scale = 0.25f;
    good.out = out.data();
    good.kv = &kv;

    expect_invalid(ops().paged_attention(nullptr, &good, &st_), "null device", "device is NULL");
    expect_invalid(ops().paged_attention(d, nullptr, &st_), "null args", "args is NULL");
    auto a = good;
    a.struct_size = 12;
    expect_invalid(ops().paged_attention(d, &a, &st_), "old struct", "struct_size");
    a = good;
    a.window = -1;
    expect_invalid(ops().paged_attention(d, &a, &st_), "negative window", "window = -1");
    a = good;
    a.softcap = NAN;
    expect_invalid(ops().paged_attention(d, &a, &st_), "NaN softcap", "softcap = nan");

    a = good;
    a.n_kv_heads = 3;
    expect_invalid(ops().paged_attention(d, &a, &st_), "heads not a multiple", "not a multiple");
    a = good;
    a.head_dim = 8;
    expect_invalid(ops().paged_attention(d, &a, &st_), "kv_dim mismatch",
                   "kv.kv_dim = 64 but n_kv_heads * head_dim = 16");
    a = good;
    a.q = nullptr;
    expect_invalid(ops().paged_attention(d, &a, &st_), "null q", "q or out is NULL");
    a = good;
    a.scale = std::numeric_limits<float>::infinity();
    expect_invalid(ops().paged_attention(d, &a, &st_), "infinite scale", "must be finite");
    a = good;
    a.kv = nullptr;
    expect_invalid(ops().paged_attention(d, &a, &st_), "null kv", "kv (the block table) is NULL");
    seq = {1, 1};
    expect_invalid(ops().paged_attention(d, &good, &st_), "position past the sequence's blocks", "past the 4 slots");
    seq = {3, 0};
    expect_invalid(ops().paged_attention(d, &good, &st_), "seq past n_seqs", "outside [0, kv.n_seqs = 2)");
    seq = {1, 0};
    // Attention reads every block up to the slot, so a NULL earlier block is caught too (kv_store checks only the
    // slot's own block).
    std::vector<void *> with_null = cache.block_base;
    with_null[0] = nullptr;
    strata_paged_kv bad = kv;
    bad.block_base = with_null.data();
    a = good;
    a.kv = &bad;
    expect_invalid(ops().paged_attention(d, &a, &st_), "a null block before the slot", "block_base[0] is NULL");
    EXPECT_EQ(out, std::vector<float>(q.size(), -7.0f)) << "a refused paged_attention wrote its output";
    ASSERT_EQ(ops().paged_attention(d, &good, &st_), STRATA_OK) << st_.message;
    EXPECT_NE(out, std::vector<float>(q.size(), -7.0f));
    // A pre-1.14 caller: its struct ends before softcap, so the (garbage) terms after it are not read.
    a = good;
    a.struct_size = static_cast<uint32_t>(offsetof(strata_paged_attention_args, softcap));
    a.window = -1;
    EXPECT_EQ(ops().paged_attention(d, &a, &st_), STRATA_OK) << st_.message;
}

TEST_F(CpuPagedKvBadArguments, CopyAndHostAddressable) {
    strata_device *d = dev_.get();
    ASSERT_TRUE(STRATA_HAS_SLOT(&ops(), copy) && STRATA_HAS_SLOT(&ops(), host_addressable));
    EXPECT_EQ(ops().host_addressable(d), 1);
    std::vector<char> src(100), dst(100, 0);
    std::iota(src.begin(), src.end(), 0);
    for (int32_t kind : {STRATA_COPY_H2D, STRATA_COPY_D2H, STRATA_COPY_D2D}) {
        std::fill(dst.begin(), dst.end(), 0);
        ASSERT_EQ(ops().copy(d, dst.data(), src.data(), 100, kind, &st_), STRATA_OK) << st_.message;
        EXPECT_EQ(dst, src);
    }
    EXPECT_EQ(ops().copy(d, nullptr, nullptr, 0, STRATA_COPY_H2D, &st_), STRATA_OK) << "0 bytes need no buffers";
    expect_invalid(ops().copy(d, dst.data(), src.data(), 100, 9, &st_), "unknown kind", "kind 9 is unknown");
    expect_invalid(ops().copy(d, nullptr, src.data(), 100, STRATA_COPY_H2D, &st_), "null dst", "dst or src is NULL");
    expect_invalid(ops().copy(nullptr, dst.data(), src.data(), 100, STRATA_COPY_H2D, &st_), "null device",
                   "device is NULL");
}

// Fences (ABI 1.7): ids grow from 1, copy_after copies like copy, and a fence never returned is refused.
TEST_F(CpuPagedKvBadArguments, FenceRecordAndCopyAfter) {
    strata_device *d = dev_.get();
    ASSERT_TRUE(STRATA_HAS_SLOT(&ops(), fence_record) && STRATA_HAS_SLOT(&ops(), copy_after));
    expect_invalid(ops().copy_after(d, 1, nullptr, nullptr, 0, STRATA_COPY_H2D, &st_), "before any fence",
                   "fence 1 was never returned");
    uint64_t f1 = 0, f2 = 0;
    ASSERT_EQ(ops().fence_record(d, &f1, &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(ops().fence_record(d, &f2, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(f1, 1u) << "0 is never a fence";
    EXPECT_EQ(f2, f1 + 1);
    std::vector<char> src(100), dst(100, 0);
    std::iota(src.begin(), src.end(), 0);
    ASSERT_EQ(ops().copy_after(d, f1, dst.data(), src.data(), 100, STRATA_COPY_H2D, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(dst, src);
    expect_invalid(ops().copy_after(d, 0, dst.data(), src.data(), 100, STRATA_COPY_H2D, &st_), "fence 0",
                   "fence 0 was never returned");
    expect_invalid(ops().copy_after(d, f2 + 1, dst.data(), src.data(), 100, STRATA_COPY_H2D, &st_), "future fence",
                   "the newest is 2");
    expect_invalid(ops().copy_after(d, f1, dst.data(), src.data(), 100, 9, &st_), "unknown kind", "kind 9 is unknown");
    expect_invalid(ops().copy_after(nullptr, f1, dst.data(), src.data(), 100, STRATA_COPY_H2D, &st_), "null device",
                   "device is NULL");
    expect_invalid(ops().fence_record(d, nullptr, &st_), "null fence", "fence is NULL");
    expect_invalid(ops().fence_record(nullptr, &f1, &st_), "null device", "device is NULL");
}

// separate_memory mode stands in for a GPU in the engine's tests, so it must fault where a GPU would: ops refuse
// memory mem_alloc did not hand out, and copies check their direction.
TEST_F(CpuPagedKvBadArguments, SeparateMemoryRefusesHostPointersAndWrongCopyDirections) {
    device_ptr gpu = make_device(2, false, true);
    strata_device *d = gpu.get();
    EXPECT_EQ(ops().host_addressable(d), 0);
    constexpr int64_t n = 64;
    auto *a = static_cast<float *>(ops().mem_alloc(d, n * sizeof(float), &st_));
    auto *b = static_cast<float *>(ops().mem_alloc(d, n * sizeof(float), &st_));
    ASSERT_TRUE(a != nullptr && b != nullptr) << st_.message;
    std::vector<float> host(n, 1.0f);
    ASSERT_EQ(ops().copy(d, a, host.data(), n * sizeof(float), STRATA_COPY_H2D, &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(ops().copy(d, b, host.data(), n * sizeof(float), STRATA_COPY_H2D, &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(ops().add(d, a, b, n, a, &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(ops().copy(d, host.data(), a, n * sizeof(float), STRATA_COPY_D2H, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(host[0], 2.0f);
    expect_invalid(ops().add(d, a, host.data(), n, a, &st_), "a host operand", "b (");
    expect_invalid(ops().add(d, a, b, n + 1, a, &st_), "past the end of an allocation", "is not device memory");
    expect_invalid(ops().copy(d, host.data(), a, 16, STRATA_COPY_H2D, &st_), "H2D into host memory",
                   "H2D of 16 bytes from device memory to host memory");
    expect_invalid(ops().copy(d, a, host.data(), 16, STRATA_COPY_D2H, &st_), "D2H from host memory",
                   "D2H of 16 bytes from host memory to device memory");
    expect_invalid(ops().copy(d, a, host.data(), 16, STRATA_COPY_D2D, &st_), "D2D from host memory", "D2D");
    ops().mem_free(d, b);
    expect_invalid(ops().add(d, a, b, n, a, &st_), "freed memory", "is not device memory");
    ops().mem_free(d, a);
    // The normal mode reads host memory: the same add is fine there.
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    ASSERT_EQ(ops().add(dev_.get(), x.data(), y.data(), n, x.data(), &st_), STRATA_OK) << st_.message;
}

} // namespace
