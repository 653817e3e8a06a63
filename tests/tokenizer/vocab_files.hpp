// Shared helpers for the tokenizer tests: paths to the shared models, loading a tokenizer from a GGUF, and
// llama.cpp's vocab test vectors.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

namespace strata::test {

inline std::string shared_model(const std::string &rel) { return std::string(STRATA_SHARED_DIR) + "/models/" + rel; }

inline std::unique_ptr<tokenizer> tokenizer_from(const std::string &rel) {
    const gguf::file f = gguf::file::open(shared_model(rel));
    return make_tokenizer(load_vocab(f));
}

inline std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

struct vector_case {
    std::string input;
    std::vector<int32_t> expected;
};

// llama.cpp's vectors for a vocab file (models/vocab/README.md: split .inp on the separator and drop the last empty
// piece; .out has the ids of each case on its line). `rel` is the GGUF's path under models/ (the GGUF itself need
// not exist: vectors-only/ has none).
inline std::vector<vector_case> read_vectors(const std::string &rel) {
    const std::string inp = read_file(shared_model(rel + ".inp"));
    const std::string out = read_file(shared_model(rel + ".out"));
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<vector_case> cases;
    for (size_t pos = 0; pos < inp.size();) {
        const size_t end = inp.find(sep, pos);
        if (end == std::string::npos) break;
        cases.push_back({inp.substr(pos, end - pos), {}});
        pos = end + sep.size();
    }
    std::istringstream lines(out);
    std::string line;
    size_t i = 0;
    while (std::getline(lines, line)) {
        if (i >= cases.size()) throw std::runtime_error(rel + ".out has more lines than .inp has cases");
        std::istringstream ids(line);
        int32_t id;
        while (ids >> id) cases[i].expected.push_back(id);
        ++i;
    }
    if (i != cases.size()) throw std::runtime_error(rel + ".out has fewer lines than .inp has cases");
    return cases;
}

// A test input with its control characters visible.
inline std::string quoted(const std::string &s) {
    std::string q = "\"";
    for (const char c : s) {
        if (c == '\n')
            q += "\\n";
        else if (c == '\t')
            q += "\\t";
        else if (c == '\r')
            q += "\\r";
        else
            q += c;
    }
    return q + "\"";
}

} // namespace strata::test
