#include "app/generation_config.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace strata::app {

generation_defaults read_generation_config(const std::string &where) {
    namespace fs = std::filesystem;
    fs::path file(where);
    if (fs::is_directory(file)) file /= "generation_config.json";
    std::ifstream in(file);
    if (!in) fail("--generation-config {}: cannot read {}; give a folder holding generation_config.json, the file, "
                  "auto or vllm", where, file.string());
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("--generation-config: {} is not a JSON object", file.string());

    generation_defaults d;
    std::string used, skipped;
    const auto number = [&](const char *key, std::optional<double> &out) {
        if (!j.contains(key) || j[key].is_null()) return;
        if (!j[key].is_number()) fail("--generation-config: {}: \"{}\" must be a number, got {}", file.string(), key, j[key].dump());
        out = j[key].get<double>();
        used += fmt::format("{}{} {}", used.empty() ? "" : ", ", key, j[key].dump());
    };
    const auto integer = [&](const char *key, std::optional<int64_t> &out) {
        if (!j.contains(key) || j[key].is_null()) return;
        if (!j[key].is_number_integer()) fail("--generation-config: {}: \"{}\" must be an integer, got {}", file.string(), key, j[key].dump());
        out = j[key].get<int64_t>();
        used += fmt::format("{}{} {}", used.empty() ? "" : ", ", key, j[key].dump());
    };
    number("temperature", d.temperature);
    number("top_p", d.top_p);
    number("min_p", d.min_p);
    number("repetition_penalty", d.repetition_penalty);
    integer("top_k", d.top_k);
    integer("max_new_tokens", d.max_new_tokens);
    // Decoding modes with no sampler here: refusing them beats sampling differently from what the model card says.
    if (j.contains("num_beams") && j["num_beams"].is_number_integer() && j["num_beams"].get<int64_t>() > 1)
        fail("--generation-config: {} asks for beam search (num_beams {}), which this runtime does not do; pass "
             "--generation-config vllm for Strata's defaults", file.string(), j["num_beams"].get<int64_t>());
    for (const auto &[key, value] : j.items()) {
        static const char *const read[] = {"temperature", "top_p", "min_p", "repetition_penalty", "top_k",
                                           "max_new_tokens", "num_beams"};
        if (std::find(std::begin(read), std::end(read), key) != std::end(read)) continue;
        skipped += (skipped.empty() ? "" : ", ") + key;
    }
    log::info("runtime", "generation config {}: defaults {}{}", file.string(), used.empty() ? "none" : used,
              skipped.empty() ? "" : fmt::format("; not sampling defaults (vLLM reads only the six above): {}", skipped));
    return d;
}

} // namespace strata::app
