// Device memory and the copy slot: round trips of odd sizes at odd offsets, ordering with the compute stream, clear
// errors for impossible allocations and bad copy kinds, and the index staging ring under many ops and one large one.
#include "cuda_test_support.hpp"

namespace {

using namespace cuda_test;

class CudaMemory : public ::testing::Test {
  protected:
    void SetUp() override {
        REQUIRE_GPU();
        strata_status st{};
        gpu_ = create_device(loaded().cuda, &st);
        ASSERT_NE(gpu_, nullptr) << st.message;
    }
    const strata_device_desc &cuda() const { return *loaded().cuda; }
    strata_device *dev() const { return gpu_.get(); }

    device_ptr gpu_{nullptr, device_deleter{loaded().cuda}};
    strata_status st_{};
};

TEST_F(CudaMemory, CopiesRoundTripAtOddSizesAndOffsets) {
    for (size_t bytes : {size_t{1}, size_t{3}, size_t{4096 + 5}, size_t{(1u << 20) + 3}, size_t{64u << 20}}) {
        SCOPED_TRACE(testing::Message() << bytes << " bytes");
        std::vector<unsigned char> src(bytes);
        std::mt19937 rng(static_cast<uint32_t>(bytes));
        for (auto &b : src) b = static_cast<unsigned char>(rng());
        device_buffer a(dev(), bytes + 8), b(dev(), bytes + 8);
        auto *a_at = static_cast<unsigned char *>(a.get()) + 1;
        auto *b_at = static_cast<unsigned char *>(b.get()) + 3;
        ASSERT_EQ(cuda().copy(dev(), a_at, src.data(), bytes, STRATA_COPY_H2D, &st_), STRATA_OK) << st_.message;
        ASSERT_EQ(cuda().copy(dev(), b_at, a_at, bytes, STRATA_COPY_D2D, &st_), STRATA_OK) << st_.message;
        std::vector<unsigned char> back(bytes, 0);
        ASSERT_EQ(cuda().copy(dev(), back.data(), b_at, bytes, STRATA_COPY_D2H, &st_), STRATA_OK) << st_.message;
        EXPECT_EQ(back, src);
    }
    EXPECT_EQ(cuda().copy(dev(), nullptr, nullptr, 0, STRATA_COPY_D2H, &st_), STRATA_OK) << "0 bytes is a no-op";
}

// A copy issued after an op sees the op's result: the copy stream waits for the compute stream.
TEST_F(CudaMemory, CopyIsOrderedAfterEarlierOps) {
    const int64_t n = 1 << 22;
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    auto a = to_device(dev(), ones);
    for (int i = 0; i < 20; ++i) ASSERT_EQ(cuda().add(dev(), a->f(), a->f(), n, a->f(), &st_), STRATA_OK);
    std::vector<float> back(static_cast<size_t>(n), 0.0f);
    ASSERT_EQ(cuda().copy(dev(), back.data(), a->get(), sizeof(float) * static_cast<size_t>(n), STRATA_COPY_D2H, &st_),
              STRATA_OK);
    EXPECT_EQ(back.front(), 1048576.0f);
    EXPECT_EQ(back.back(), 1048576.0f);
}

TEST_F(CudaMemory, ImpossibleAllocationsAndBadCopiesAreClearErrors) {
    EXPECT_EQ(cuda().mem_alloc(dev(), 0, &st_), nullptr);
    EXPECT_EQ(st_.code, STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(cuda().mem_alloc(dev(), uint64_t{1} << 60, &st_), nullptr);
    EXPECT_EQ(st_.code, STRATA_ERR_OUT_OF_MEMORY) << st_.message;
    EXPECT_NE(std::strstr(st_.message, "cudaMalloc"), nullptr) << st_.message;
    // The failed allocation leaves the device usable.
    device_buffer buf(dev(), 256);
    float x = 2.0f;
    EXPECT_EQ(cuda().copy(dev(), buf.get(), &x, sizeof x, 7, &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st_.message, "kind 7"), nullptr) << st_.message;
    EXPECT_EQ(cuda().copy(dev(), buf.get(), nullptr, 4, STRATA_COPY_H2D, &st_), STRATA_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(cuda().copy(dev(), buf.get(), &x, sizeof x, STRATA_COPY_H2D, &st_), STRATA_OK) << st_.message;
    float y = 0.0f;
    ASSERT_EQ(cuda().copy(dev(), &y, buf.get(), sizeof y, STRATA_COPY_D2H, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(y, 2.0f);
}

// Thousands of ops each staging its own token ids cycle the staging ring many times while earlier ops may still be
// queued; every op must have read its own ids. One op with more ids than a segment holds makes the ring grow.
TEST_F(CudaMemory, IndexStagingSurvivesWrapAndGrowth) {
    const int64_t rows = 97, cols = 32;
    std::vector<float> table(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) table[static_cast<size_t>(r * cols + k)] = static_cast<float>(r * 1000 + k);
    auto table_dev = to_device(dev(), table);
    strata_tensor_view v{};
    v.struct_size = sizeof v;
    v.ggml_type = 0;
    v.data = table_dev->get();
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = cols * 4;
    v.name = "table";

    const int32_t calls = 1500, per_call = 300; // 1500 x 1.2 KB of ids: about 7 trips around a 1 MiB ring
    device_buffer out(dev(), sizeof(float) * static_cast<size_t>(calls) * per_call * cols);
    std::vector<int32_t> ids(static_cast<size_t>(per_call));
    for (int32_t c = 0; c < calls; ++c) {
        for (int32_t t = 0; t < per_call; ++t) ids[static_cast<size_t>(t)] = static_cast<int32_t>((c * 7 + t) % rows);
        ASSERT_EQ(cuda().embedding(dev(), &v, ids.data(), per_call,
                                   out.f() + static_cast<size_t>(c) * per_call * cols, &st_),
                  STRATA_OK)
            << st_.message;
        ids.assign(ids.size(), -1); // the caller may reuse its array as soon as the op returns
    }
    const auto got = floats_from(dev(), out.get(), static_cast<size_t>(calls) * per_call * cols);
    for (int32_t c = 0; c < calls; ++c)
        for (int32_t t = 0; t < per_call; ++t) {
            const int64_t r = (c * 7 + t) % rows;
            ASSERT_EQ(got[(static_cast<size_t>(c) * per_call + static_cast<size_t>(t)) * cols], static_cast<float>(r * 1000))
                << "call " << c << " token " << t;
        }

    const int32_t big = 100000; // 400 KB of ids: more than one 256 KiB segment
    std::vector<int32_t> many(static_cast<size_t>(big));
    for (int32_t t = 0; t < big; ++t) many[static_cast<size_t>(t)] = (t * 13) % static_cast<int32_t>(rows);
    device_buffer big_out(dev(), sizeof(float) * static_cast<size_t>(big) * cols);
    ASSERT_EQ(cuda().embedding(dev(), &v, many.data(), big, big_out.f(), &st_), STRATA_OK) << st_.message;
    const auto big_got = floats_from(dev(), big_out.get(), static_cast<size_t>(big) * cols);
    for (int32_t t = 0; t < big; t += 997)
        ASSERT_EQ(big_got[static_cast<size_t>(t) * cols + 5], static_cast<float>(((t * 13) % rows) * 1000 + 5));
}

} // namespace
