// `runtime tokenize`: llama.cpp's llama-tokenize on Strata's tokenizer (the code /tokenize and every prompt use).
// Only the vocabulary is read, so it works on vocab-only GGUFs and on models whose weights would not fit.
#pragma once

namespace strata::app {

// argv[1] is "tokenize". Returns the exit code; throws strata::error on bad input.
int run_tokenize_command(int argc, char **argv);

} // namespace strata::app
