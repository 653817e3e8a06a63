// engine::forward_logits (teacher forcing for perplexity and KL divergence) on stories260K: every position's logits
// equal the ones forward_for_testing gives for that prefix alone, bit for bit, however the text is cut into pieces
// (max_num_batched_tokens tokens, max_num_seqs rows) — the greedy invariance the engine keeps for batching, held for
// evaluation too. Bad arguments are errors, not crashes.
#include "engine_fixture.hpp"

#include "common/error.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using namespace strata;
using namespace strata::testing;

namespace {

std::unique_ptr<engine::engine> make_split_engine(const std::string &model, int32_t max_tokens, int32_t max_rows) {
    engine::engine_options o;
    o.model_path = model;
    o.max_model_len = 256;
    o.prefill_chunk = max_tokens;
    o.scheduler.max_num_batched_tokens = max_tokens;
    o.scheduler.max_num_seqs = max_rows;
    o.device = "cpu";
    o.print_plan = false;
    o.offload.measure_bandwidth = false;
    o.offload.bandwidth_cache_path = std::string(STRATA_BINARY_DIR) + "/test-bandwidth.json";
    o.offload.kv_cache_memory = uint64_t{16} << 20; // one text of 256 tokens: not the CPU default of 1 GiB
    o.kv.swap_space_gib = 0;
    return std::make_unique<engine::engine>(test_registry(), test_host(), o);
}

const char *k_text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
                     "One day, she saw a big dog. The dog was very friendly. Lily and the dog played all day. "
                     "When the sun went down, Lily went home and told her mom about her new friend.";

std::string mismatch(const std::vector<float> &a, const std::vector<float> &b, int32_t n_vocab) {
    if (a.size() != b.size()) return "sizes differ";
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return "row " + std::to_string(i / static_cast<size_t>(n_vocab)) + " token " +
                   std::to_string(i % static_cast<size_t>(n_vocab)) + ": " + std::to_string(a[i]) + " vs " +
                   std::to_string(b[i]);
    return "";
}

class ForwardLogits : public ::testing::TestWithParam<const char *> {};

} // namespace

TEST_P(ForwardLogits, EveryRowEqualsThePrefixAloneWhateverThePieces) {
    const std::string model = shared_path(std::string("models/") + GetParam());
    auto wide = make_split_engine(model, 256, 256); // the whole text in one forward call
    const int32_t n_vocab = wide->hparams().n_vocab;
    const std::vector<int32_t> tokens = wide->tokenizer().encode(k_text, true);
    const int32_t n = static_cast<int32_t>(tokens.size());
    ASSERT_GT(n, 40);
    const int32_t first = n / 2;
    const size_t rows = static_cast<size_t>(n - first);
    std::vector<float> one(rows * static_cast<size_t>(n_vocab));
    wide->forward_logits(tokens.data(), n, first, one.data());

    // Pieces of 7 tokens asking at most 3 rows, and of 16 tokens asking at most 5: the same bits.
    for (const auto &[max_tokens, max_rows] : {std::pair{7, 3}, std::pair{16, 5}, std::pair{1, 1}}) {
        auto split = make_split_engine(model, max_tokens, max_rows);
        std::vector<float> got(one.size(), -1.f);
        split->forward_logits(tokens.data(), n, first, got.data());
        EXPECT_EQ(mismatch(one, got, n_vocab), "") << max_tokens << " tokens, " << max_rows << " rows per piece";
    }

    // Each row is the last-token logits of its prefix run alone (forward_for_testing), and a second call with another
    // first row (a fresh context over the same private slot) gives the same rows again.
    std::vector<int32_t> pos(tokens.size());
    std::iota(pos.begin(), pos.end(), 0);
    for (const int32_t p : {first, first + 3, n - 1}) {
        const float *alone = wide->forward_for_testing(tokens.data(), pos.data(), p + 1);
        const std::vector<float> expected(alone, alone + n_vocab);
        const std::vector<float> row(one.begin() + static_cast<std::ptrdiff_t>(p - first) * n_vocab,
                                     one.begin() + static_cast<std::ptrdiff_t>(p - first + 1) * n_vocab);
        EXPECT_EQ(mismatch(expected, row, n_vocab), "") << "position " << p;
    }
    std::vector<float> again((static_cast<size_t>(n) - 1) * static_cast<size_t>(n_vocab));
    wide->forward_logits(tokens.data(), n, 1, again.data());
    const std::vector<float> tail(again.begin() + static_cast<std::ptrdiff_t>(first - 1) * n_vocab, again.end());
    EXPECT_EQ(mismatch(one, tail, n_vocab), "");
}

INSTANTIATE_TEST_SUITE_P(Stories, ForwardLogits, ::testing::Values("stories260K-f32.gguf", "stories260K-q8_0.gguf"));

TEST(ForwardLogitsErrors, BadArgumentsAreErrorsWithTheReason) {
    auto e = make_split_engine(shared_path("models/stories260K-f32.gguf"), 16, 4);
    std::vector<int32_t> tokens(10, 5);
    std::vector<float> out(10 * static_cast<size_t>(e->hparams().n_vocab));
    tokens[4] = e->hparams().n_vocab;
    try {
        e->forward_logits(tokens.data(), 10, 0, out.data());
        FAIL() << "no error";
    } catch (const strata::error &x) {
        EXPECT_NE(std::string(x.what()).find("token 512 at position 4 is outside the vocabulary"), std::string::npos)
            << x.what();
    }
    tokens[4] = 5;
    EXPECT_THROW(e->forward_logits(tokens.data(), 10, 10, out.data()), strata::error); // no row asked
    EXPECT_THROW(e->forward_logits(tokens.data(), 0, 0, out.data()), strata::error);
    std::vector<int32_t> longer(300, 5);
    try {
        e->forward_logits(longer.data(), 300, 299, out.data());
        FAIL() << "no error";
    } catch (const strata::error &x) {
        EXPECT_NE(std::string(x.what()).find("max_model_len = 256"), std::string::npos) << x.what();
    }
    // The engine still works after refusing.
    e->forward_logits(tokens.data(), 10, 9, out.data());
}
