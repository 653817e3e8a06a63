// `runtime perplexity`: llama.cpp's llama-perplexity on Strata's engine. The text is tokenized with BOS, cut into
// chunks of --ctx tokens, each chunk run from an empty context (first token replaced by BOS) and the second half of
// each scored; KL divergence against a base model (--kl-divergence-model) or llama-perplexity's base file
// (--kl-divergence-base). The math is core/eval/; this file is the command line and the loop over chunks.
#pragma once

#include "config/document.hpp"
#include "config/schema.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata::topology {
struct machine;
}

namespace strata::app {

extern const char *const k_perplexity_usage;

struct perplexity_args {
    std::string text_file; // -f, --file
    int32_t ctx = 512;     // -c, --ctx, --ctx-size
    bool ctx_given = false;
    int32_t chunks = -1;         // --chunks (-1: all)
    std::string kl_base;         // --kl-divergence-base FILE
    bool kl_read = false;        // --kl-divergence: FILE must exist and is read
    bool kl_save = false;        // --save-kl-base, or --save-all-logits FILE: FILE is written
    std::string kl_model;        // --kl-divergence-model F.gguf: the base model, run beside the evaluated one
    bool help = false;
};

// argv[1] is "perplexity". Takes perplexity's own options out of argv and returns them; `rest` receives argv[0] and
// every other argument, unchanged, for the engine's configuration (-m/--model, --threads, --device, --config, --set,
// ...). Throws strata::error on a bad value or a contradictory combination.
perplexity_args parse_perplexity_args(int argc, char **argv, std::vector<char *> &rest);

// Runs the evaluation with the engine configured by `doc` (as `runtime` would be, with max_model_len = the chunk
// size). Results go to stdout, progress and logs to stderr. Returns the exit code; throws strata::error.
int run_perplexity(const perplexity_args &args, const plugins::registry &registry, const strata_host_services *host,
                   const config::document &doc, const config::schema &s, const std::string &model_argument,
                   const topology::machine &machine);

} // namespace strata::app
