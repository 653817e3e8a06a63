// vLLM's --generation-config: the sampling defaults a model folder ships in generation_config.json.
#pragma once

#include <optional>
#include <string>

namespace strata::app {

struct generation_defaults {
    std::optional<double> temperature, top_p, min_p, repetition_penalty;
    std::optional<int64_t> top_k, max_new_tokens;
};

// `where` is a folder holding generation_config.json or the file itself. Throws strata::error when it is missing,
// is not JSON, or holds a known key of the wrong type. Keys this runtime has no sampler for (num_beams > 1,
// typical_p != 1, ...) are an error rather than ignored; bookkeeping keys (bos/eos/pad ids, transformers_version,
// do_sample) are read or skipped as vLLM does.
generation_defaults read_generation_config(const std::string &where);

} // namespace strata::app
