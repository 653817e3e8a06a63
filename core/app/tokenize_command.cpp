#include "app/tokenize_command.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

namespace strata::app {

namespace {

constexpr const char *k_usage = R"(usage: runtime tokenize -m MODEL.gguf (-p TEXT | -f FILE | --stdin) [options]
Prints the token ids of a text as Strata's tokenizer makes them for MODEL (llama.cpp's llama-tokenize).
  -m, --model FILE        the GGUF whose vocabulary to use (its weights are not read), or a Hugging Face model
                          folder or tokenizer.json (with tokenizer_config.json beside it)
  -p, --prompt TEXT       the text
  -f, --file FILE         the text is this file, byte for byte
      --stdin             the text is standard input (wins over -f and -p)
      --ids               print only the ids, as a list: [1, 2, 3]
      --no-bos            do not add BOS (or EOS) even when the vocabulary asks for them
      --no-parse-special  special-token texts (<|im_start|>, ...) stay text (default: they become their tokens)
      --parse-special     the default, as for prompts
  -e, --escape            turn \n \r \t \' \" \\ \xNN in the text into their characters (default)
      --no-escape         take the text as it is
      --show-count        print the number of tokens after them
      --jsonl             each input line is a JSON string; print each one's ids as a JSON array on its own line
      --detokenize        the input is ids ([1, 2, 3] or 1 2 3); print their text
      --pre-tokenizers    list the tokenizer.ggml.pre names this build knows, one per line, and exit
)";

// llama.cpp's string_process_escapes.
std::string process_escapes(const std::string &in) {
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '\\' || i + 1 >= in.size()) {
            out += in[i];
            continue;
        }
        const char c = in[++i];
        switch (c) {
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'x':
            if (i + 2 < in.size()) {
                const char hex[3] = {in[i + 1], in[i + 2], 0};
                char *end = nullptr;
                const long v = std::strtol(hex, &end, 16);
                if (end == hex + 2) {
                    out += static_cast<char>(v);
                    i += 2;
                    break;
                }
            }
            [[fallthrough]];
        default:
            out += '\\';
            out += c;
        }
    }
    return out;
}

std::string read_all(std::istream &in, const std::string &what) {
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) fail("runtime tokenize: could not read {}", what);
    return s.str();
}

// What llama-tokenize prints for a token: its bytes, or a special token's own text (<|begin_of_text|>).
std::string_view shown(const tokenizer &tok, int32_t id) {
    return tok.vocab().is_special(id) ? std::string_view(tok.token_text(id)) : tok.piece(id);
}

} // namespace

int run_tokenize_command(int argc, char **argv) {
    std::string model, prompt, file;
    bool have_prompt = false, use_stdin = false, ids_only = false, no_bos = false, parse_special = true;
    bool escape = true, show_count = false, jsonl = false, detokenize = false;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("runtime tokenize: {} needs a value (see runtime tokenize --help)", a);
            return argv[++i];
        };
        if (a == "-m" || a == "--model") model = value();
        else if (a == "-p" || a == "--prompt") prompt = value(), have_prompt = true;
        else if (a == "-f" || a == "--file") file = value();
        else if (a == "--stdin") use_stdin = true;
        else if (a == "--ids") ids_only = true;
        else if (a == "--no-bos") no_bos = true;
        else if (a == "--no-parse-special") parse_special = false;
        else if (a == "--parse-special") parse_special = true;
        else if (a == "-e" || a == "--escape") escape = true;
        else if (a == "--no-escape") escape = false;
        else if (a == "--show-count") show_count = true;
        else if (a == "--jsonl") jsonl = true;
        else if (a == "--detokenize") detokenize = true;
        else if (a == "--pre-tokenizers") {
            for (const std::string_view name : pre_tokenizer_names()) std::cout << name << "\n";
            return 0;
        }
        else if (a == "-h" || a == "--help") {
            std::cout << k_usage;
            return 0;
        } else {
            fail("runtime tokenize: unknown option '{}' (see runtime tokenize --help)", a);
        }
    }
    if (model.empty()) fail("runtime tokenize: give the model: runtime tokenize -m MODEL.gguf -p TEXT");
    if (!use_stdin && file.empty() && !have_prompt)
        fail("runtime tokenize: give the text with -p TEXT, -f FILE or --stdin");

    // A GGUF, or a Hugging Face model folder / tokenizer.json.
    const std::unique_ptr<tokenizer> tok = [&] {
        namespace fs = std::filesystem;
        if (fs::is_directory(model) || fs::path(model).extension() == ".json")
            return make_tokenizer(load_hf_tokenizer(model).vocab);
        const gguf::file f = gguf::file::open(model);
        return make_tokenizer(load_vocab(f));
    }();

    std::string text;
    if (use_stdin) {
        text = read_all(std::cin, "standard input");
    } else if (!file.empty()) {
        std::ifstream in(file, std::ios::binary);
        if (!in) fail("runtime tokenize: cannot open {}", file);
        text = read_all(in, file);
    } else {
        text = prompt;
    }
    const bool add_special = !no_bos;

    if (jsonl) {
        std::istringstream lines(text);
        std::string line;
        std::vector<int32_t> ids;
        size_t n = 0;
        while (std::getline(lines, line)) {
            ++n;
            const auto j = nlohmann::json::parse(line, nullptr, false);
            if (!j.is_string()) fail("runtime tokenize --jsonl: line {} is not a JSON string", n);
            tok->encode_into(j.get_ref<const std::string &>(), add_special, parse_special, ids);
            std::cout << nlohmann::json(ids).dump() << "\n";
        }
        return 0;
    }
    if (escape) text = process_escapes(text); // all three sources, as llama-tokenize does

    if (detokenize) {
        std::vector<int32_t> ids;
        std::string cleaned = text;
        for (char &c : cleaned)
            if (c == '[' || c == ']' || c == ',') c = ' ';
        std::istringstream in(cleaned);
        std::string word;
        while (in >> word) {
            char *end = nullptr;
            const long v = std::strtol(word.c_str(), &end, 10);
            if (end != word.c_str() + word.size()) fail("runtime tokenize --detokenize: '{}' is not a token id", word);
            ids.push_back(static_cast<int32_t>(v));
        }
        std::cout << tok->decode(ids);
        return 0;
    }

    const std::vector<int32_t> ids = tok->encode(text, add_special, parse_special);
    if (ids_only) {
        std::cout << "[";
        for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
        std::cout << "]\n";
    } else {
        for (const int32_t id : ids) {
            const std::string_view p = shown(*tok, id);
            std::printf("%6d -> '", id);
            std::fwrite(p.data(), 1, p.size(), stdout);
            std::printf("'\n");
        }
        std::fflush(stdout);
    }
    if (show_count) std::cout << "Total number of tokens: " << ids.size() << "\n";
    return 0;
}

} // namespace strata::app
