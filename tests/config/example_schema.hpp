// A schema shaped like the runtime's, shared by the config tests.
#pragma once

#include "config/schema.hpp"

namespace strata::config::test_support {

inline schema example_schema() {
    schema s;
    s.add_table({"model", "Which model to load", {{"path", STRATA_CONFIG_STRING, std::nullopt, 0, 0, "GGUF file", "--model|-m"}}});
    s.add_table({"sampling",
                 "Default sampling parameters",
                 {{"temperature", STRATA_CONFIG_FLOAT, "0.8", 0, 2, "0 = greedy", "--temperature"},
                  {"top_p", STRATA_CONFIG_FLOAT, "1.0", 0, 1, "nucleus sampling"},
                  {"top_k", STRATA_CONFIG_INT, "40", 0, 0, "0 = off", "--top-k"}}});
    s.add_table({"engine",
                 "Scheduler",
                 {{"seed", STRATA_CONFIG_INT, std::nullopt, 0, 0, "random seed"},
                  {"threads", STRATA_CONFIG_INT, std::nullopt, 1, 1024, "worker threads", "--threads|-t|--cpu-parallelism"},
                  {"n_gpu_layers", STRATA_CONFIG_INT, std::nullopt, -1, 1024, "layers on the device", "--n-gpu-layers|-ngl"},
                  {"level", STRATA_CONFIG_INT, std::nullopt, 0, 3, "optimization level", "--optimization-level|-O"},
                  {"log_requests", STRATA_CONFIG_BOOL, "false", 0, 0, "log each request",
                   "--enable-log-requests|!--disable-log-requests"}}});
    key_spec offload{"cpu_offload_gb", STRATA_CONFIG_FLOAT, std::nullopt, 0, 0, "offload weights"};
    offload.not_supported = "CPU offload arrives with the tier manager";
    s.add_table({"memory",
                 "Memory planner",
                 {{"kv_cache", STRATA_CONFIG_BYTES, "\"1GiB\"", 0, 0, "KV cache budget", "--kv-cache"}, offload}});
    s.add_table({"cli",
                 "Command-line frontend",
                 {{"output", STRATA_CONFIG_STRING, "\"text\"", 0, 0, "output format", "--output", "text|json"},
                  {"stream", STRATA_CONFIG_BOOL, "true", 0, 0, "print tokens as they come", "--stream"},
                  {"stop", STRATA_CONFIG_STRING_LIST, "[]", 0, 0, "stop strings", "--stop"}}});
    return s;
}

} // namespace strata::config::test_support
