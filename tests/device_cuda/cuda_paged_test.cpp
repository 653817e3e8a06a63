// The paged KV cache on the GPU: kv_store writes each token's K and V rows into the right slot of the right block
// (and nothing else), and paged_attention over those blocks equals attention over the same rows laid out
// contiguously bit for bit (the ABI's rule), and the CPU device's attention to 1e-4.
#include "cuda_test_support.hpp"

#include <numeric>

namespace {

using namespace cuda_test;

constexpr int32_t block_size = 16;
constexpr int32_t n_kv_heads = 2;
constexpr int32_t head_dim = 64;
constexpr int32_t kv_dim = n_kv_heads * head_dim;
constexpr int32_t n_layers = 2;
constexpr int32_t layer = 1; // the layer under test: its rows sit after layer 0's in every block
constexpr size_t layer_floats = size_t{2} * block_size * kv_dim;
constexpr size_t block_floats = layer_floats * n_layers;
constexpr float sentinel = -12345.0f;

struct paged_cache {
    std::vector<int32_t> seq_len;
    std::vector<int32_t> seq_block_start;
    std::vector<void *> block_base;
    std::vector<std::pair<int, size_t>> block_home; // (pool, block index in the pool) of each block_base entry
    std::vector<std::unique_ptr<device_buffer>> pools;
    std::vector<std::vector<float>> k, v; // per sequence, seq_len x kv_dim

    strata_paged_kv view() const {
        strata_paged_kv kv{};
        kv.struct_size = sizeof kv;
        kv.block_size = block_size;
        kv.kv_dim = kv_dim;
        kv.n_seqs = static_cast<int32_t>(seq_len.size());
        kv.seq_block_start = seq_block_start.data();
        kv.block_base = block_base.data();
        kv.layer_offset_bytes = sizeof(float) * layer_floats * layer;
        return kv;
    }
};

// Three sequences whose blocks are spread over two separate allocations in shuffled order, every float of both
// pools set to the sentinel first.
paged_cache make_cache(strata_device *dev) {
    paged_cache c;
    c.seq_len = {37, 16, 70};
    int32_t n_blocks = 0;
    c.seq_block_start.push_back(0);
    for (int32_t len : c.seq_len) {
        n_blocks += (len + block_size - 1) / block_size;
        c.seq_block_start.push_back(n_blocks);
    }
    const size_t per_pool = static_cast<size_t>(n_blocks + 1) / 2 + 1;
    for (int pool = 0; pool < 2; ++pool) {
        c.pools.push_back(std::make_unique<device_buffer>(dev, per_pool * block_floats * sizeof(float)));
        const std::vector<float> fill(per_pool * block_floats, sentinel);
        upload(dev, c.pools.back()->get(), fill.data(), fill.size() * sizeof(float));
    }
    std::vector<std::pair<int, size_t>> homes;
    for (size_t i = 0; i < per_pool; ++i)
        for (int pool = 0; pool < 2; ++pool) homes.push_back({pool, i});
    std::mt19937 rng(7);
    std::shuffle(homes.begin(), homes.end(), rng);
    for (int32_t b = 0; b < n_blocks; ++b) {
        const auto [pool, index] = homes[static_cast<size_t>(b)];
        c.block_home.push_back({pool, index});
        c.block_base.push_back(c.pools[static_cast<size_t>(pool)]->f() + index * block_floats);
    }
    for (size_t s = 0; s < c.seq_len.size(); ++s) {
        c.k.push_back(random_floats(static_cast<size_t>(c.seq_len[s]) * kv_dim, 100 + static_cast<uint32_t>(s), -2, 2));
        c.v.push_back(random_floats(static_cast<size_t>(c.seq_len[s]) * kv_dim, 200 + static_cast<uint32_t>(s)));
    }
    return c;
}

// Every token of every sequence, interleaved across sequences, in one kv_store call.
void store_all(strata_device *dev, paged_cache &c) {
    std::vector<int32_t> token_seq, positions;
    std::vector<float> k, v;
    const int32_t longest = *std::max_element(c.seq_len.begin(), c.seq_len.end());
    for (int32_t p = longest - 1; p >= 0; --p) // backwards: slot order must not matter
        for (size_t s = 0; s < c.seq_len.size(); ++s)
            if (p < c.seq_len[s]) {
                token_seq.push_back(static_cast<int32_t>(s));
                positions.push_back(p);
                const auto row = c.k[s].begin() + static_cast<ptrdiff_t>(p) * kv_dim;
                k.insert(k.end(), row, row + kv_dim);
                const auto vrow = c.v[s].begin() + static_cast<ptrdiff_t>(p) * kv_dim;
                v.insert(v.end(), vrow, vrow + kv_dim);
            }
    auto k_dev = to_device(dev, k);
    auto v_dev = to_device(dev, v);
    const strata_paged_kv kv = c.view();
    strata_kv_store_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = static_cast<int32_t>(token_seq.size());
    a.token_seq = token_seq.data();
    a.positions = positions.data();
    a.k = k_dev->f();
    a.v = v_dev->f();
    a.kv = &kv;
    strata_status st{};
    ASSERT_EQ(loaded().cuda->kv_store(dev, &a, &st), STRATA_OK) << st.message;
}

TEST(CudaPaged, KvStoreWritesEachRowIntoItsSlotOnly) {
    REQUIRE_GPU();
    strata_status st{};
    device_ptr gpu = create_device(loaded().cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    paged_cache c = make_cache(gpu.get());
    store_all(gpu.get(), c);

    // The expected pools: sentinel everywhere except this layer's K/V rows of the slots in use.
    std::vector<std::vector<float>> want;
    for (const auto &pool : c.pools) want.emplace_back(pool->size() / sizeof(float), sentinel);
    for (size_t s = 0; s < c.seq_len.size(); ++s)
        for (int32_t p = 0; p < c.seq_len[s]; ++p) {
            const size_t b = static_cast<size_t>(c.seq_block_start[s] + p / block_size);
            const auto [pool, index] = c.block_home[b];
            float *layer_rows = want[static_cast<size_t>(pool)].data() + index * block_floats + layer * layer_floats;
            std::copy_n(c.k[s].begin() + static_cast<ptrdiff_t>(p) * kv_dim, kv_dim,
                        layer_rows + static_cast<size_t>(p % block_size) * kv_dim);
            std::copy_n(c.v[s].begin() + static_cast<ptrdiff_t>(p) * kv_dim, kv_dim,
                        layer_rows + static_cast<size_t>(block_size + p % block_size) * kv_dim);
        }
    for (size_t pool = 0; pool < c.pools.size(); ++pool)
        EXPECT_EQ(floats_from(gpu.get(), c.pools[pool]->get(), want[pool].size()), want[pool]) << "pool " << pool;
}

TEST(CudaPaged, PagedAttentionEqualsContiguousBitForBitAndMatchesCpu) {
    REQUIRE_GPU();
    plugins &p = loaded();
    strata_status st{};
    device_ptr gpu = create_device(p.cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    device_ptr cpu = create_device(p.cpu, &st);
    ASSERT_NE(cpu, nullptr) << st.message;
    paged_cache c = make_cache(gpu.get());
    store_all(gpu.get(), c);

    // Query tokens of all three sequences in one batch, at block edges and in the middle.
    const std::vector<int32_t> token_seq = {0, 2, 1, 2, 0, 2};
    const std::vector<int32_t> positions = {36, 69, 15, 16, 0, 31};
    const int32_t n_heads = 8, n_tokens = static_cast<int32_t>(token_seq.size());
    const size_t q_row = static_cast<size_t>(n_heads) * head_dim;
    const auto q = random_floats(q_row * static_cast<size_t>(n_tokens), 300, -2.0f, 2.0f);
    auto q_dev = to_device(gpu.get(), q);
    device_buffer out_dev(gpu.get(), q.size() * sizeof(float));
    const strata_paged_kv kv = c.view();
    strata_paged_attention_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = n_tokens;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv_heads;
    a.head_dim = head_dim;
    a.token_seq = token_seq.data();
    a.positions = positions.data();
    a.q = q_dev->f();
    a.scale = 0.125f;
    a.out = out_dev.f();
    a.kv = &kv;
    ASSERT_EQ(p.cuda->paged_attention(gpu.get(), &a, &st), STRATA_OK) << st.message;
    const auto paged = floats_from(gpu.get(), out_dev.get(), q.size());

    for (int32_t t = 0; t < n_tokens; ++t) {
        SCOPED_TRACE(testing::Message() << "token " << t);
        const size_t s = static_cast<size_t>(token_seq[static_cast<size_t>(t)]);
        auto k_dev = to_device(gpu.get(), c.k[s]);
        auto v_dev = to_device(gpu.get(), c.v[s]);
        device_buffer one_out(gpu.get(), q_row * sizeof(float));
        const std::vector<float> q_t(q.begin() + static_cast<ptrdiff_t>(t * q_row),
                                     q.begin() + static_cast<ptrdiff_t>((t + 1) * q_row));
        auto q_t_dev = to_device(gpu.get(), q_t);
        strata_attention_args ca{};
        ca.struct_size = sizeof ca;
        ca.n_tokens = 1;
        ca.n_heads = n_heads;
        ca.n_kv_heads = n_kv_heads;
        ca.head_dim = head_dim;
        ca.kv_row_stride = kv_dim;
        ca.positions = &positions[static_cast<size_t>(t)];
        ca.q = q_t_dev->f();
        ca.k_cache = k_dev->f();
        ca.v_cache = v_dev->f();
        ca.scale = a.scale;
        ca.out = one_out.f();
        ASSERT_EQ(p.cuda->attention(gpu.get(), &ca, &st), STRATA_OK) << st.message;
        const auto contiguous = floats_from(gpu.get(), one_out.get(), q_row);
        const std::vector<float> paged_t(paged.begin() + static_cast<ptrdiff_t>(t * q_row),
                                         paged.begin() + static_cast<ptrdiff_t>((t + 1) * q_row));
        EXPECT_EQ(std::memcmp(paged_t.data(), contiguous.data(), q_row * sizeof(float)), 0)
            << "paged and contiguous attention differ";

        std::vector<float> want(q_row);
        ca.q = q_t.data();
        ca.k_cache = c.k[s].data();
        ca.v_cache = c.v[s].data();
        ca.out = want.data();
        ASSERT_EQ(p.cpu->attention(cpu.get(), &ca, &st), STRATA_OK) << st.message;
        EXPECT_LT(normwise_error(paged_t, want), 1e-4);
    }
}

TEST(CudaPaged, BadBlockTablesAreRefusedBeforeAnythingRuns) {
    REQUIRE_GPU();
    strata_status st{};
    device_ptr gpu = create_device(loaded().cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    paged_cache c = make_cache(gpu.get());
    device_buffer rows(gpu.get(), sizeof(float) * kv_dim * 4);
    std::vector<int32_t> token_seq = {0}, positions = {0};
    strata_paged_kv kv = c.view();
    strata_kv_store_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = 1;
    a.token_seq = token_seq.data();
    a.positions = positions.data();
    a.k = rows.f();
    a.v = rows.f();
    a.kv = &kv;
    ASSERT_EQ(loaded().cuda->kv_store(gpu.get(), &a, &st), STRATA_OK) << st.message;

    token_seq[0] = 3; // only sequences 0..2 exist
    EXPECT_EQ(loaded().cuda->kv_store(gpu.get(), &a, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st.message, "token_seq[0] = 3"), nullptr) << st.message;
    token_seq[0] = 1;
    positions[0] = 16; // sequence 1 has one block: slots 0..15
    EXPECT_EQ(loaded().cuda->kv_store(gpu.get(), &a, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st.message, "needs block 1 of sequence 1"), nullptr) << st.message;
    positions[0] = 0;
    c.block_base[3] = nullptr;
    kv = c.view();
    EXPECT_EQ(loaded().cuda->kv_store(gpu.get(), &a, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st.message, "block_base[3] is NULL"), nullptr) << st.message;
}

} // namespace
