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

// One tensor of every block format the quant plugin reads (K-quant super-blocks of 256, the 32-element formats),
// a two-row Q4_K_M-like mixture, so mutations hit each type's size arithmetic.
void write_quant_mixture(const std::string &dir) {
    strata::gguf::writer w;
    w.add_string("general.architecture", "llama");
    w.add_u32("general.file_type", 15); // MOSTLY_Q4_K_M
    w.add_tensor("blk.0.attn_q.weight", 12, {256, 2}, filled(2 * 144, 3));  // Q4_K
    w.add_tensor("blk.0.attn_v.weight", 14, {256, 1}, filled(210, 4));      // Q6_K
    w.add_tensor("blk.0.ffn_up.weight", 10, {256, 1}, filled(84, 5));       // Q2_K
    w.add_tensor("blk.0.ffn_gate.weight", 11, {256, 1}, filled(110, 6));    // Q3_K
    w.add_tensor("blk.0.ffn_down.weight", 13, {256, 1}, filled(176, 7));    // Q5_K
    w.add_tensor("blk.0.attn_k.weight", 23, {256, 1}, filled(136, 8));      // IQ4_XS
    w.add_tensor("blk.0.attn_output.weight", 20, {32, 1}, filled(18, 9));   // IQ4_NL
    w.add_tensor("blk.1.attn_q.weight", 3, {32, 1}, filled(20, 10));        // Q4_1
    w.add_tensor("blk.1.attn_k.weight", 6, {32, 1}, filled(22, 11));        // Q5_0
    w.add_tensor("blk.1.attn_v.weight", 7, {32, 1}, filled(24, 12));        // Q5_1
    w.write(dir + "/tiny-quant-mixture.gguf");
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
        write_quant_mixture(argv[1]);
    } catch (const strata::error &e) {
        std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
