// Device memory and the copy slots: round trips of odd sizes at odd offsets, ordering with the compute stream, fences
// and copy_after (ids, ordering, old and unknown fences, a copying thread beside the queueing one), clear errors for
// impossible allocations and bad copy kinds, and the index staging ring under many ops and one large one.
#include "cuda_test_support.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>

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

// Fences (ABI 1.7): ids grow from 1; copy_after round-trips bytes in every direction and sees the ops queued before
// its fence; the ops queued after it see its bytes.
TEST_F(CudaMemory, FenceIdsGrowAndCopyAfterRoundTripsInOrder) {
    uint64_t f1 = 0, f2 = 0;
    ASSERT_EQ(cuda().fence_record(dev(), &f1, &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(cuda().fence_record(dev(), &f2, &st_), STRATA_OK) << st_.message;
    EXPECT_GT(f1, 0u) << "0 is never a fence";
    EXPECT_GT(f2, f1);

    const size_t bytes = (1u << 20) + 3;
    std::vector<unsigned char> src(bytes);
    std::mt19937 rng(7);
    for (auto &b : src) b = static_cast<unsigned char>(rng());
    device_buffer a(dev(), bytes), b(dev(), bytes);
    ASSERT_EQ(cuda().copy_after(dev(), f2, a.get(), src.data(), bytes, STRATA_COPY_H2D, &st_), STRATA_OK)
        << st_.message;
    ASSERT_EQ(cuda().copy_after(dev(), f1, b.get(), a.get(), bytes, STRATA_COPY_D2D, &st_), STRATA_OK) << st_.message;
    std::vector<unsigned char> back(bytes, 0);
    ASSERT_EQ(cuda().copy_after(dev(), f2, back.data(), b.get(), bytes, STRATA_COPY_D2H, &st_), STRATA_OK)
        << st_.message;
    EXPECT_EQ(back, src);

    // Ops before the fence are seen by the copy; ops queued after a copy_after see its bytes.
    const int64_t n = 1 << 22;
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    auto x = to_device(dev(), ones);
    for (int i = 0; i < 20; ++i) ASSERT_EQ(cuda().add(dev(), x->f(), x->f(), n, x->f(), &st_), STRATA_OK);
    uint64_t f3 = 0;
    ASSERT_EQ(cuda().fence_record(dev(), &f3, &st_), STRATA_OK) << st_.message;
    EXPECT_GT(f3, f2);
    std::vector<float> got(static_cast<size_t>(n), 0.0f);
    const size_t fbytes = sizeof(float) * static_cast<size_t>(n);
    ASSERT_EQ(cuda().copy_after(dev(), f3, got.data(), x->get(), fbytes, STRATA_COPY_D2H, &st_), STRATA_OK);
    EXPECT_EQ(got.front(), 1048576.0f);
    EXPECT_EQ(got.back(), 1048576.0f);
    const std::vector<float> twos(static_cast<size_t>(n), 2.0f);
    ASSERT_EQ(cuda().copy_after(dev(), f3, x->get(), twos.data(), fbytes, STRATA_COPY_H2D, &st_), STRATA_OK);
    ASSERT_EQ(cuda().add(dev(), x->f(), x->f(), n, x->f(), &st_), STRATA_OK);
    const auto four = floats_from(dev(), x->get(), static_cast<size_t>(n));
    EXPECT_EQ(four.front(), 4.0f);
    EXPECT_EQ(four.back(), 4.0f);
}

// A fence older than the device's event pool is waited on through a newer record (later ops: safe); a fence never
// returned is refused with a clear error.
TEST_F(CudaMemory, OldFencesStillWorkAndUnknownFencesAreRefused) {
    uint64_t first = 0, last = 0;
    ASSERT_EQ(cuda().fence_record(dev(), &first, &st_), STRATA_OK) << st_.message;
    for (int i = 0; i < 300; ++i) {
        uint64_t f = 0;
        ASSERT_EQ(cuda().fence_record(dev(), &f, &st_), STRATA_OK) << st_.message;
        ASSERT_GT(f, last > 0 ? last : first) << "ids grow";
        last = f;
    }
    float x = 3.0f, y = 0.0f;
    device_buffer buf(dev(), sizeof x);
    ASSERT_EQ(cuda().copy_after(dev(), first, buf.get(), &x, sizeof x, STRATA_COPY_H2D, &st_), STRATA_OK)
        << st_.message;
    ASSERT_EQ(cuda().copy_after(dev(), last, &y, buf.get(), sizeof y, STRATA_COPY_D2H, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(y, 3.0f);
    for (uint64_t bad : {uint64_t{0}, last + 1}) {
        EXPECT_EQ(cuda().copy_after(dev(), bad, buf.get(), &x, sizeof x, STRATA_COPY_H2D, &st_),
                  STRATA_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::strstr(st_.message, "never returned by fence_record"), nullptr) << st_.message;
    }
    EXPECT_EQ(cuda().copy_after(dev(), last, buf.get(), &x, sizeof x, 7, &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st_.message, "cuda copy_after: kind 7"), nullptr) << st_.message;
    EXPECT_EQ(cuda().fence_record(dev(), nullptr, &st_), STRATA_ERR_INVALID_ARGUMENT);
}

// The ring's pattern: one thread records fences and queues ops while another copies after them; no deadlock, and
// every copy lands.
TEST_F(CudaMemory, CopyAfterFromAnotherThreadWhileOpsAreQueued) {
    const int64_t n = 1 << 20;
    auto work = to_device(dev(), std::vector<float>(static_cast<size_t>(n), 1.0f));
    constexpr int rounds = 50;
    std::vector<float> src(1024);
    device_buffer slot(dev(), sizeof(float) * src.size());
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint64_t> fences;
    bool copier_failed = false;
    std::thread copier([&] {
        strata_status st{};
        std::vector<float> data(src.size()), back(src.size());
        for (int r = 0; r < rounds; ++r) {
            uint64_t f = 0;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return static_cast<int>(fences.size()) > r; });
                f = fences[static_cast<size_t>(r)];
            }
            std::fill(data.begin(), data.end(), static_cast<float>(r));
            if (cuda().copy_after(dev(), f, slot.get(), data.data(), sizeof(float) * data.size(), STRATA_COPY_H2D,
                                  &st) != STRATA_OK ||
                cuda().copy_after(dev(), f, back.data(), slot.get(), sizeof(float) * back.size(), STRATA_COPY_D2H,
                                  &st) != STRATA_OK ||
                back != data) {
                std::lock_guard lock(mu);
                copier_failed = true;
                return;
            }
        }
    });
    // No ASSERT here: the copier must always get its `rounds` fences (a failed record passes 0, which it reports).
    for (int r = 0; r < rounds; ++r) {
        EXPECT_EQ(cuda().add(dev(), work->f(), work->f(), n, work->f(), &st_), STRATA_OK) << st_.message;
        uint64_t f = 0;
        EXPECT_EQ(cuda().fence_record(dev(), &f, &st_), STRATA_OK) << st_.message;
        std::lock_guard lock(mu);
        fences.push_back(f);
        cv.notify_all();
    }
    copier.join();
    EXPECT_FALSE(copier_failed);
    const auto got = floats_from(dev(), work->get(), 1);
    EXPECT_EQ(got[0], std::ldexp(1.0f, rounds)) << "each round doubled the work buffer once";
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
