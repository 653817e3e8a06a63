#include "config/foreign_options.hpp"

#include <array>
#include <utility>

namespace strata::config {

namespace {

constexpr std::string_view k_local_files = "models are read from local files only (no model hub); pass the path";
constexpr std::string_view k_one_process = "one process serves the model; parallelism is not available yet";
constexpr std::string_view k_from_file = "the model file says it (GGUF metadata), and a file this runtime cannot run "
                                         "as written is refused at load";

constexpr std::array<std::pair<std::string_view, std::string_view>, 24> k_foreign{{
    {"--trust-remote-code", "no Python code runs here: the architecture is the plugin named by general.architecture"},
    {"--download-dir", k_local_files},
    {"--hf-token", k_local_files},
    {"--revision", k_local_files},
    {"--tokenizer-revision", k_local_files},
    {"--code-revision", k_local_files},
    {"--tokenizer", "the tokenizer is the one inside the GGUF file"},
    {"--tokenizer-mode", "the tokenizer is the one inside the GGUF file"},
    {"--load-format", "GGUF is read directly (mapped, or read with --no-mmap)"},
    {"--hf-overrides", k_from_file},
    {"--worker-use-ray", k_one_process},
    {"--distributed-executor-backend", k_one_process},
    {"--split-mode", "one device computes the model; place layers across memory tiers with -ngl or --cpu-offload-gb"},
    {"-sm", "one device computes the model; place layers across memory tiers with -ngl or --cpu-offload-gb"},
    {"--tensor-split", "one device computes the model; place layers across memory tiers with -ngl or --cpu-offload-gb"},
    {"-ts", "one device computes the model; place layers across memory tiers with -ngl or --cpu-offload-gb"},
    {"--main-gpu", "pick the GPU with --set cuda.device_index=N"},
    {"-mg", "pick the GPU with --set cuda.device_index=N"},
    {"--numa", "bind to one NUMA node with --numa-bind N; numa_ram places offloaded weights on the process's nodes"},
    {"--rope-scaling", k_from_file},
    {"--rope-scale", k_from_file},
    {"--rope-freq-base", k_from_file},
    {"--rope-freq-scale", k_from_file},
    {"--override-kv", k_from_file},
}};

} // namespace

std::optional<std::string_view> why_not_here(std::string_view flag) {
    for (const auto &[name, why] : k_foreign)
        if (name == flag) return why;
    return std::nullopt;
}

} // namespace strata::config
