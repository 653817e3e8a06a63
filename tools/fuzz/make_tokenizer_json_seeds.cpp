// Writes small valid tokenizer.json inputs for fuzz_tokenizer_json into the folder it is given: a byte-level BPE
// with a regex split and a TemplateProcessing post-processor, and a SentencePiece-style one with byte_fallback,
// each also with a tokenizer_config.json after a NUL.
#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_tokenizer_json_seeds DIR\n");
        return 2;
    }
    const std::string byte_level = R"({"added_tokens": [{"id": 6, "content": "<|end|>", "special": true, "rstrip": true}],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
    "behavior": "Isolated", "invert": false},
   {"type": "Digits", "individual_digits": true},
   {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
 "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "<|end|>"}}]},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "ignore_merges": true, "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, "He": 4, "\u0120": 5},
           "merges": [["H", "e"], "He l"]}})";
    const std::string spm = R"({"added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
 "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true},
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
   {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
 "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
           "vocab": {"<unk>": 0, "<s>": 1, "<0x41>": 2, "\u2581": 3, "a": 4, "\u2581a": 5}, "merges": ["\u2581 a"]}})";
    const std::string config = R"({"add_bos_token": true, "bos_token": {"content": "<s>"}, "chat_template": "{{ x }}"})";
    int n = 0;
    for (const std::string &body : {byte_level, spm, spm + std::string(1, '\0') + config}) {
        std::ofstream(std::string(argv[1]) + "/seed_" + std::to_string(n++) + ".json", std::ios::binary) << body;
    }
    return 0;
}
