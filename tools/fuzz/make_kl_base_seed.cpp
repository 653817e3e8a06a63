// Writes a small valid KL-divergence base file (2 chunks of 8 tokens, a 5-token vocabulary) as fuzz_kl_base's seed.
#include "common/error.hpp"
#include "eval/kl_base_file.hpp"

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <output-dir>\n", argv[0]);
        return 2;
    }
    try {
        const int32_t n_ctx = 8, n_vocab = 5, n_chunk = 2;
        std::vector<int32_t> tokens;
        for (int32_t i = 0; i < n_ctx * n_chunk; ++i) tokens.push_back(i % n_vocab);
        strata::eval::kl_base_writer w(std::string(argv[1]) + "/tiny.kld", n_ctx, n_vocab, n_chunk, tokens);
        for (int32_t r = 0; r < n_chunk * (n_ctx - 1 - n_ctx / 2); ++r) {
            const float logits[n_vocab] = {0.5f * static_cast<float>(r), -1.0f, 2.0f, 0.0f, -30.0f};
            w.write_row(logits);
        }
        w.finish();
    } catch (const strata::error &e) {
        std::fprintf(stderr, "make_kl_base_seed: %s\n", e.what());
        return 1;
    }
    return 0;
}
