// vLLM-style YAML config files (`--config serve.yaml`): a mapping of option names to values, as vLLM's --config reads
// them (`max_model_len: 4096`, `tensor-parallel-size: 2`), optionally with Strata tables as nested mappings
// (`memory: {swap_space: 8}`). Read with yaml-cpp; the names are resolved against the schema by document.
#pragma once

#include <string>
#include <vector>

namespace strata::config {

struct yaml_entry {
    std::string name;  // "max_model_len", "tensor-parallel-size", or "table.key" from a nested mapping
    std::string value; // the scalar as written; a sequence's items joined with ','
    bool is_list = false;
    int line = 0; // 1-based
};

// Throws strata::error "path:line:col: ..." for YAML syntax errors, a top level that is not a mapping, a value that
// is a nested mapping below a table, a sequence of non-scalars, or a name given twice.
std::vector<yaml_entry> read_yaml_config(std::string_view text, const std::string &source_name);

// True for names ending in .yaml or .yml (case-insensitive).
bool is_yaml_path(const std::string &path);

} // namespace strata::config
