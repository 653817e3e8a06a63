// Writes small, complete GGUF files with the writer, as seeds for fuzz_gguf (the real models are larger than
// the fuzzer's -max_len and so reach it truncated).
#include "common/error.hpp"
#include "gguf/gguf_file.hpp"

#include <cstdio>
#include <string>

namespace {

std::vector<uint8_t> filled(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

void write_tiny_model(const std::string &dir) {
    strata::gguf::writer w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 1);
    w.add_i32("test.i32", -5);
    w.add_u64("test.u64", 1ull << 40);
    w.add_f32("llama.rope.freq_base", 10000.0f);
    w.add_bool("tokenizer.ggml.add_bos_token", true);
    w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81the"});
    w.add_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1.5f});
    w.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
    w.add_tensor("token_embd.weight", 0, {4, 4}, filled(64, 0x3f));
    w.add_tensor("blk.0.attn_q.weight", 8, {32, 2}, filled(68, 1));  // Q8_0
    w.add_tensor("blk.0.ffn_down.weight", 2, {32, 1}, filled(18, 2)); // Q4_0
    w.add_tensor("blk.0.attn_norm.weight", 1, {4}, filled(8, 0));   // F16
    w.write(dir + "/tiny-model.gguf");
}

void write_vocab_only(const std::string &dir) {
    strata::gguf::writer w;
    w.set_alignment(64);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string_array("tokenizer.ggml.merges", {"a b", "ab c"});
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc"});
    w.write(dir + "/tiny-vocab.gguf");
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <output-dir>\n", argv[0]);
        return 2;
    }
    try {
        write_tiny_model(argv[1]);
        write_vocab_only(argv[1]);
    } catch (const strata::error &e) {
        std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
