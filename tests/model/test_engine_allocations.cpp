// Issue #15, item 4: the step loop allocates nothing per token. This binary counts every operator new of the process
// but the submitting thread's (the engine thread, the CPU device's pool and the plugins share the process's operator
// new), and greedy requests record the count at each of their token events; past the first steps (which size the
// step's buffers) a decode step allocates nothing, also when a block fills and is offered to the prefix cache.
// Sanitizers bring their own operator new: there the test skips.
#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRATA_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define STRATA_SANITIZED 1
#endif
#endif

#if !defined(STRATA_SANITIZED)
namespace {

std::atomic<uint64_t> g_allocations{0};
// The test's own thread (submitting requests, which allocates per request) is not the step loop: not counted.
thread_local bool t_not_counted = false;

void *counted(std::size_t n, std::size_t align) {
    if (!t_not_counted) g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (n == 0) n = 1;
    void *p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
    return p;
}

} // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete" // these operators are malloc and free, as they pair them
#endif
void *operator new(std::size_t n) {
    if (void *p = counted(n, 0)) return p;
    throw std::bad_alloc();
}
void *operator new[](std::size_t n) {
    if (void *p = counted(n, 0)) return p;
    throw std::bad_alloc();
}
void *operator new(std::size_t n, std::align_val_t a) {
    if (void *p = counted(n, static_cast<std::size_t>(a))) return p;
    throw std::bad_alloc();
}
void *operator new[](std::size_t n, std::align_val_t a) {
    if (void *p = counted(n, static_cast<std::size_t>(a))) return p;
    throw std::bad_alloc();
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return counted(n, 0); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return counted(n, 0); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace strata;
using namespace strata::testing;

namespace {

constexpr int k_tokens = 96;

struct allocation_trace {
    uint64_t at_token[k_tokens] = {};
    int n = 0;
};

void record(void *user, const strata_token_event *ev) {
    auto *t = static_cast<allocation_trace *>(user);
    if (ev->token < 0 || t->n >= k_tokens) return;
    t->at_token[t->n++] = g_allocations.load(std::memory_order_relaxed);
}

// Runs the prompts at once, each for k_tokens greedy tokens; `t[i]` holds the allocation count at each of its tokens.
void run_traced(engine::engine &e, const std::vector<std::vector<int32_t>> &prompts, std::vector<allocation_trace> &t) {
    t_not_counted = true;
    t.assign(prompts.size(), {});
    std::vector<strata_request_id> ids;
    for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(e.submit(greedy_request(prompts[i], k_tokens, record, &t[i])));
    for (const auto id : ids) e.wait(id);
}

} // namespace
#endif // !STRATA_SANITIZED

// One sequence, then four decoding together (16-token blocks: five of them fill on the way, each hashed into the
// prefix cache, and a finished request's blocks go into the cache's LRU list); between two tokens of a sequence past
// its 16th, the process allocated nothing.
TEST(StepLoopAllocations, DecodeStepsPastTheFirstAllocateNothingPerToken) {
#if defined(STRATA_SANITIZED)
    GTEST_SKIP() << "a sanitizer build replaces operator new, which this test counts";
#else
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"), 256, 32);
    for (const int n : {1, 4}) {
        SCOPED_TRACE(std::to_string(n) + " sequences");
        std::vector<allocation_trace> traces;
        run_traced(*e, story_prompts(*e, n), traces);
        for (const auto &t : traces) {
            ASSERT_EQ(t.n, k_tokens);
            for (int i = 16; i + 1 < k_tokens; ++i)
                EXPECT_EQ(t.at_token[i + 1] - t.at_token[i], 0u) << "allocations between tokens " << i << " and " << i + 1;
        }
    }
#endif
}
