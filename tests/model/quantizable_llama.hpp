// The float model the GPTQ / AWQ tests quantize (tools/hf_quantize): a 5-layer random Llama whose matrices' input
// sizes (128, 256) take groups up to 128, as an F32 HF folder; made once per build tree.
#pragma once

#include "engine_fixture.hpp"
#include "made_model.hpp"

#include <string>

namespace strata::testing {

inline std::string quantizable_llama_hf() {
    const std::string gguf = made_model("hfq-llama.gguf", "--arch llama --dim 128 --layers 5 --heads 4 --kv-heads 2 "
                                                          "--ff 256 --ctx 256 --type f32 --weight-scale 3 --seed 7 "
                                                          "--vocab-from " + shared_path("models/stories260K-f32.gguf") +
                                                          " 2>/dev/null");
    return exported_hf("hfq-llama", gguf);
}

// A 5-layer random mixture of experts (`arch_args`: --arch qwen3moe ..., or Mixtral's --experts; they may override
// the sizes) with the same input sizes, as an F32 HF folder named `name`; made once per build tree.
inline std::string quantizable_moe_hf(const std::string &name, const std::string &arch_args) {
    const std::string gguf = made_model(name + ".gguf", "--dim 128 --layers 5 --heads 4 --kv-heads 2 --ff 256 --ctx 256 "
                                                        "--type f32 --weight-scale 3 --seed 7 " + arch_args +
                                                            " --vocab-from " + shared_path("models/stories260K-f32.gguf") +
                                                            " 2>/dev/null");
    return exported_hf(name, gguf);
}

} // namespace strata::testing
