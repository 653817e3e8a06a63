// A tools/make-model model for tests, made once per build tree (shared by the engine, offload and HTTP suites).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <unistd.h>

namespace strata::testing {

// A tools/make-model model, made once per build tree. CTest runs test cases as parallel processes, so each maker
// writes its own file and renames it into place (a rename is atomic; the last one wins with identical bytes).
inline std::string made_model(const std::string &name, const std::string &make_model_args) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-models";
    const fs::path file = dir / name;
    if (fs::exists(file)) return file.string();
    fs::create_directories(dir);
    const fs::path mine = dir / (name + "." + std::to_string(::getpid()) + ".part.gguf");
    const std::string cmd = std::string(STRATA_BINARY_DIR) + "/bin/make-model --out " + mine.string() + " " + make_model_args;
    if (std::system(cmd.c_str()) != 0) return {};
    std::error_code ec;
    fs::rename(mine, file, ec);
    if (ec) return {};
    return file.string();
}

// `gguf` written as an HF checkpoint folder by tools/hf-export (its `args`: --shards N, --dtype, --untie,
// --no-permute), made once per build tree like made_model: each maker writes its own folder and renames it into place.
inline std::string exported_hf(const std::string &name, const std::string &gguf, const std::string &args = "") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-models";
    const fs::path folder = dir / name;
    if (fs::exists(folder / "config.json")) return folder.string();
    fs::create_directories(dir);
    const fs::path mine = dir / (name + "." + std::to_string(::getpid()) + ".part");
    std::error_code ec;
    fs::remove_all(mine, ec);
    const std::string cmd = std::string(STRATA_BINARY_DIR) + "/bin/hf-export " + gguf + " " + mine.string() + " " +
                            args + " 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) return {};
    fs::rename(mine, folder, ec); // fails when another maker got there first: theirs has the same bytes
    if (ec) fs::remove_all(mine, ec);
    return fs::exists(folder / "config.json") ? folder.string() : std::string();
}

// `folder` (an unquantized HF checkpoint) written as a GPTQ or AWQ checkpoint by tools/hf_quantize (its `args`:
// --method, --bits, --group-size, --asym, --act-order, --checkpoint-format), beside the same model dequantized from
// the same integers at `<name>-dequantized`. Made once per build tree; {"", ""} where Python 3 is missing.
inline std::pair<std::string, std::string> quantized_hf(const std::string &name, const std::string &folder,
                                                        const std::string &args) {
    namespace fs = std::filesystem;
    if (std::string(STRATA_PYTHON3).empty() || folder.empty()) return {};
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-models";
    const fs::path out = dir / name, deq = dir / (name + "-dequantized");
    if (!fs::exists(out / "config.json") || !fs::exists(deq / "config.json")) {
        const std::string tag = "." + std::to_string(::getpid()) + ".part";
        const fs::path mine = dir / (name + tag), mine_deq = dir / (name + "-dequantized" + tag);
        std::error_code ec;
        fs::remove_all(mine, ec);
        fs::remove_all(mine_deq, ec);
        const std::string cmd = std::string(STRATA_PYTHON3) + " " STRATA_SOURCE_DIR "/tools/hf_quantize/hf_quantize.py " +
                                folder + " " + mine.string() + " " + args + " --dequantized " + mine_deq.string();
        if (std::system(cmd.c_str()) != 0) return {};
        fs::rename(mine_deq, deq, ec); // another maker may have got there first: theirs has the same bytes
        if (ec) fs::remove_all(mine_deq, ec);
        fs::rename(mine, out, ec);
        if (ec) fs::remove_all(mine, ec);
    }
    return {out.string(), deq.string()};
}

} // namespace strata::testing
