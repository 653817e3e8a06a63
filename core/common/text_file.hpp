// A whole (small) text file into a string: config.json, tokenizer.json, a shard index, a template.
#pragma once

#include <filesystem>
#include <string>

namespace strata {

// Throws strata::error naming the file when it cannot be opened or read.
std::string read_text_file(const std::filesystem::path &p);

} // namespace strata
