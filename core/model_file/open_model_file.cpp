#include "model_file/open_model_file.hpp"

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "model_file/hf_checkpoint.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

#include <filesystem>

namespace strata {

std::unique_ptr<model_file> open_model_file(const std::string &path, const open_options &how, bool plan_only) {
    try {
        if (std::filesystem::is_directory(path)) return hf_checkpoint::open(path, how, plan_only);
    } catch (const std::filesystem::filesystem_error &e) { // an unreadable folder or file in it
        fail("{}: {}; check the folder's permissions", path, e.what());
    }
    return std::make_unique<gguf::file>(gguf::file::open(path, how));
}

bool has_vocabulary(const model_file &f) { return f.own_vocab() != nullptr || f.has("tokenizer.ggml.tokens"); }

vocab_data load_model_vocab(const model_file &f) {
    if (const vocab_data *v = f.own_vocab()) return *v;
    return load_vocab(f);
}

} // namespace strata
