#include "engine/requested_formats.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/text_file.hpp"
#include "model_file/json_input.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

namespace strata::engine {

namespace {

// "Q4_0 (201 tensors), F32 (65 tensors)": what the file holds, for the message.
std::string tensor_types(const model_file &file) {
    std::map<std::string, int> count;
    for (const gguf::tensor_info &t : file.tensors()) {
        const gguf::type_traits *tr = gguf::ggml_type_traits(t.type);
        ++count[tr != nullptr ? std::string(tr->name) : fmt::format("type {}", t.type)];
    }
    std::string out;
    for (const auto &[name, n] : count) out += fmt::format("{}{} ({} tensors)", out.empty() ? "" : ", ", name, n);
    return out;
}

bool accepts_any(const std::string &quantization) {
    return quantization == "auto" || quantization == "None" || quantization.empty();
}

// A named method against the checkpoint's own (config.json's quantization_config.quant_method).
void check_method(std::string_view method, const std::string &quantization, const std::string &path) {
    // vLLM's names for the same checkpoints: its Marlin kernels read GPTQ and AWQ checkpoints as they are.
    if (quantization == method || quantization == std::string(method) + "_marlin") return;
    fail("--quantization {}: {} is a {} checkpoint (config.json's quantization_config); drop --quantization "
         "(auto) or pass --quantization {}", quantization, path, method, method);
}

} // namespace

void check_quantization_before_load(const std::string &quantization, const std::string &path) {
    if (accepts_any(quantization) || quantization == "gguf") return;
    std::error_code ec;
    const std::filesystem::path config = std::filesystem::path(path) / "config.json";
    if (!std::filesystem::is_regular_file(config, ec)) return;
    try {
        const nlohmann::json j = parse_json_input(read_text_file(config), config.string());
        const auto qc = j.find("quantization_config");
        if (qc == j.end() || !qc->is_object()) return;
        const auto method = qc->find("quant_method");
        if (method != qc->end() && method->is_string()) check_method(method->get<std::string>(), quantization, path);
    } catch (const nlohmann::json::exception &) {
        // the full read reports what is wrong with config.json
    } catch (const strata::error &e) {
        if (std::string_view(e.what()).starts_with("--quantization")) throw;
    }
}

void check_quantization(const model_file &file, const std::string &quantization, const std::string &path) {
    if (accepts_any(quantization)) return;
    if (quantization == "gguf") {
        if (const std::string_view method = file.quantization(); !method.empty())
            fail("--quantization gguf: {} is a {} checkpoint (config.json's quantization_config); drop --quantization "
                 "(auto) or pass --quantization {}", path, method, method);
        if (file.format() == "gguf") return;
        fail("--quantization gguf: {} is an HF {} checkpoint, not a GGUF file; drop --quantization (auto)", path,
             file.format());
    }
    if (const std::string_view method = file.quantization(); !method.empty()) return check_method(method, quantization, path);
    if (file.format() == "gguf")
        fail("--quantization {}: {} is a GGUF file holding {}; '{}' names a format of Hugging Face checkpoints. Drop "
             "--quantization (auto) or pass --quantization gguf",
             quantization, path, tensor_types(file), quantization);
    fail("--quantization {}: {} holds unquantized weights ({}) and no quantization_config; '{}' needs a checkpoint "
         "quantized that way. Drop --quantization (auto)",
         quantization, path, tensor_types(file), quantization);
}

void check_cpu_kv_cache(bool cpu_kv_cache, bool device_reads_host, const std::string &device_kind) {
    if (!cpu_kv_cache || device_reads_host) return;
    fail("--cpu-kv-cache: the {} device keeps its KV cache in its own memory and cannot attend KV in host RAM yet; "
         "use --swap-space GiB for host RAM behind it (preempted sequences and long contexts), or --device cpu",
         device_kind);
}

} // namespace strata::engine
