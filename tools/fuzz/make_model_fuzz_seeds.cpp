// Seeds for fuzz_model_load: one tiny complete GGUF per decoder family (and Mixtral-style experts on llama), written
// from the family table itself (decoder_family.hpp): every tensor a family's layers must have, with the shape the
// decoder resolves for it. The dense families have a second seed with as many KV heads as heads, which fuzz_model_load
// can cut into two tensor-parallel parts (its last byte, 0x3f, picks two).
//   make_model_fuzz_seeds <folder>
#include "decoder_model.hpp"
#include "gguf/gguf_file.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace strata::decoder;

// dim 8, 2 heads of 4 (1 KV head, or 2 in the tensor-parallel seeds), ff 16, 2 layers, vocab 8; experts: 4 of 8, 2
// per token.
constexpr int64_t n_embd = 8, n_head = 2, head = 4, n_ff = 16, n_layer = 2, n_vocab = 8;
constexpr int64_t n_expert = 4, n_used = 2, n_ff_exp = 8;


void f32_tensor(strata::gguf::writer &w, const std::string &name, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (int64_t x : ne) n *= x;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4, 0);
    for (size_t i = 0; i < bytes.size(); i += 4) bytes[i + 3] = 0x3f; // 0.5f
    w.add_tensor(name, 0, std::move(ne), std::move(bytes));
}

void write_seed(const std::string &folder, const family &fam, bool experts, int64_t n_kv = 1) {
    strata::gguf::writer w;
    const std::string p = std::string(fam.arch) + ".";
    w.add_string("general.architecture", fam.arch);
    w.add_u32(p + "embedding_length", n_embd);
    w.add_u32(p + "block_count", n_layer);
    w.add_u32(p + "feed_forward_length", n_ff);
    w.add_u32(p + "attention.head_count", n_head);
    w.add_u32(p + "attention.head_count_kv", n_kv);
    w.add_u32(p + "context_length", 64);
    w.add_f32(p + "rope.freq_base", 10000.0f);
    if (experts) {
        w.add_u32(p + "expert_count", n_expert);
        w.add_u32(p + "expert_used_count", n_used);
        if (fam.expert_ff_key) w.add_u32(p + "expert_feed_forward_length", n_ff_exp);
    }
    if (fam.window.use == window_use::pattern) w.add_u32(p + "attention.sliding_window", 4);
    // The shapes as the decoder resolves them (llama's experts have feed_forward_length; qwen*moe their own).
    strata_model_hparams hp{};
    hp.n_embd = n_embd;
    hp.n_head = n_head;
    hp.n_head_kv = n_kv;
    hp.head_dim = head;
    hp.n_ff = n_ff;
    expert_dims ex;
    ex.n_expert = n_expert;
    ex.n_used = n_used;
    ex.n_ff = fam.expert_ff_key ? n_ff_exp : n_ff;
    ex.n_ff_shared = n_ff;
    f32_tensor(w, "token_embd.weight", {n_embd, n_vocab});
    f32_tensor(w, "output_norm.weight", {n_embd});
    if (fam.output == presence::required) f32_tensor(w, "output.weight", {n_embd, n_vocab});
    for (int64_t l = 0; l < n_layer; ++l) {
        for (const layer_tensor &t : k_layer_tensors) {
            const presence how = fam.layer[static_cast<size_t>(t.r)];
            const bool shared_role = t.r == role::shexp_gate_inp || t.r == role::shexp_gate ||
                                     t.r == role::shexp_up || t.r == role::shexp_down;
            const bool expert_role = t.r == role::router || t.r == role::gate_exps || t.r == role::up_exps ||
                                     t.r == role::down_exps || (shared_role && fam.shared_expert);
            const bool dense_role = t.r == role::w_gate || t.r == role::w_up || t.r == role::w_down ||
                                    t.r == role::w_gate_up;
            bool write = how == presence::required || t.r == role::wq || t.r == role::wk || t.r == role::wv;
            if (experts && dense_role) write = false;
            if (experts && expert_role) write = true;
            if (!write || (how == presence::absent && !expert_role)) continue;
            std::vector<int64_t> ne{resolve(t.cols, hp, ex)};
            if (!t.is_vector) ne.push_back(resolve(t.rows, hp, ex));
            if (t.stack != dim::one) ne.push_back(resolve(t.stack, hp, ex));
            f32_tensor(w, "blk." + std::to_string(l) + "." + t.name, ne);
        }
    }
    const std::string path = folder + "/" + fam.arch + (experts ? "-experts" : "") + (n_kv > 1 ? "-tp" : "") + ".gguf";
    w.write(path);
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_model_fuzz_seeds <folder>\n");
        return 2;
    }
    for (const family &fam : k_families) {
        if (fam.experts != presence::required) write_seed(argv[1], fam, false);
        if (fam.experts != presence::required) write_seed(argv[1], fam, false, 2);
        if (fam.experts != presence::absent) write_seed(argv[1], fam, true);
    }
    return 0;
}
