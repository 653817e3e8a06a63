// make-model: writes a Llama-shaped GGUF with seeded random weights, for tests and benchmarks at sizes the real model
// lacks. Quantized types go through the quant plugins' reference quantizers, so the file is what the runtime reads.
//
//   make-model --out F.gguf [--arch llama] [--dim 768 --layers 12 --heads 12 --kv-heads 12 --ff 2048 --ctx 1024]
//              [--head-dim N] [--type TYPE] [--seed 1] [--vocab-from VOCAB.gguf] [--untied] [--pure]
//              [--weight-scale 1] [--feature NAME]...
//
// --shape-only writes every weight matrix as a hole (zeros, sparse on disk): a file of a real model's shape and size
// (Mixtral-8x7B's 49.6 GB in Q8_0) in seconds, for `runtime plan`; its general.name says so and its outputs mean nothing.
//
// --weight-scale multiplies every matrix (default 1: rows uniform in ±1.7/sqrt(cols), activations of unit scale and
// nearly uniform next-token distributions); 3 gives peaked distributions whose top tokens are decided, for
// teacher-forced comparisons.
//
// --arch writes that GGUF architecture with the tensors llama.cpp's converter writes for it: llama (the default),
// qwen2 (Q/K/V biases on every layer, NEOX RoPE), qwen3 (per-head attn_q_norm / attn_k_norm), phi3 (Q/K/V fused in
// attn_qkv, gate and up fused in ffn_up with 2 x ff rows, no ffn_gate, as Phi-3/3.5/4 GGUFs are). --head-dim sets
// attention.key_length/value_length when the head size is not dim / heads (Qwen3: 128 with 1024 / 16). gemma2 and
// gemma3 write what llama.cpp's Gemma2Model / Gemma3Model converters write: post_attention_norm and post_ffw_norm in
// every layer (gemma3 also attn_q_norm / attn_k_norm), the key and value lengths, a tied classifier (gemma2 has no
// output.weight at all), attention.sliding_window (--window N; gemma2 4096, gemma3 512 unless given, 0 for none on
// gemma3), gemma2's attn_logit_softcapping 50 and final_logit_softcapping 30 (--attn-softcap X / --final-softcap X;
// gemma3 writes a final cap only when given), gemma3's rope.freq_base 1000000 (its windowed layers' 10000 is
// llama.cpp's default). --swa-pattern N writes attention.sliding_window_pattern (default: none, the family's 2 or 6).
// --experts N --experts-used K make every layer's feed-forward a mixture of N experts, K per token, as llama.cpp's
// converter writes Mixtral (--arch llama: expert_count, expert_used_count, ffn_gate_inp and the 3-D
// ffn_{gate,up,down}_exps of --ff), Qwen3-MoE (--arch qwen3moe, which always has them: qwen3's attention and
// expert_feed_forward_length, --expert-ff N, default ff / K) and Qwen2-MoE (--arch qwen2moe: qwen2's attention with
// Q/K/V biases, the same expert keys, a shared expert of --ff (expert_shared_feed_forward_length) with its 1-D gate
// ffn_gate_inp_shexp, and a separate output.weight). Routers stay F32 whatever --type, as llama-quantize leaves them.
//
// TYPE is a GGML type (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q2_k q3_k... see quant_mixture.hpp) or one of
// llama-quantize's mixtures (q2_k, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k, iq4_nl, iq4_xs): each tensor then gets the type
// llama.cpp's rules give it (output in Q6_K, some attn_v/ffn_down layers with more bits, fallbacks when a row does
// not fit the block); --pure gives every tensor the base type, as llama-quantize --pure does.
//
// The vocabulary (every tokenizer.* key: SentencePiece or byte-level BPE, special ids, chat template) is copied from
// --vocab-from (default: llama.cpp's Llama 2 SPM vocab in ../shared/models/vocab), which also fixes the vocabulary
// size; e.g. --vocab-from ../shared/models/vocab/ggml-vocab-llama-bpe.gguf gives a model with Llama 3's tokenizer.
//
// --feature adds what real Llama-family GGUFs carry beyond the nine tensors per layer, as llama.cpp's converter
// writes it: rope-freqs (rope_freqs.weight, Llama 3.1's frequency factors: 1 for the fastest pair rising to 8 for the
// slowest, as Llama 3's "llama3" scaling gives), qkv-bias (blk.N.attn_{q,k,v}.bias, as Qwen2 and some Llama
// fine-tunes have), mlp-bias (blk.N.ffn_{gate,up,down}.bias, llama.cpp's optional MLP biases), fused-qkv (Q, K and V
// rows, and their biases, in one blk.N.attn_qkv tensor, as llama.cpp accepts for every family: the same weights as the
// separate file of the same seed when the types agree), rope-scaling-linear /
// rope-scaling-yarn (<arch>.rope.scaling.type "linear" / "yarn", factor 4), longrope (phi3: Phi-3 128k's LongRoPE as
// its converter writes it: rope_factors_long.weight rising from 1 to 8 and rope_factors_short.weight near 1, an
// original context of --ctx / 2 and rope.scaling.attn_factor sqrt(1 + ln 2 / ln(ctx / 2))), output-bias (output.bias,
// which llama.cpp's qwen2 adds to the logits).
#include "quant_mixture.hpp"
#include "splitmix64.hpp"
#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "plugin_host/registry.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

struct options {
    std::string out;
    std::string arch = "llama";
    int64_t head_dim = 0; // 0: dim / heads
    int64_t dim = 768, layers = 12, heads = 12, kv_heads = 12, ff = 2048, ctx = 1024;
    std::string type = "q8_0";
    uint64_t seed = 1;
    std::string vocab_from;
    bool untied = false;
    float weight_scale = 1.0f;
    bool pure = false; // --pure: the base type everywhere (llama-quantize --pure)
    std::vector<std::string> features; // --feature NAME (repeatable)
    int64_t window = -1;                // gemma: --window N (-1: the family's)
    float attn_softcap = 0.0f, final_softcap = 0.0f; // gemma: 0: the family's
    int64_t swa_pattern = -1;           // gemma: --swa-pattern N (-1: not written)
    int64_t experts = 0, experts_used = 0, expert_ff = 0; // --experts, --experts-used, --expert-ff
    bool shape_only = false; // --shape-only: the weight matrices are holes (zeros, sparse on disk), for `runtime plan`
};

const char *const k_features[] = {"rope-freqs", "qkv-bias", "mlp-bias", "fused-qkv", "rope-scaling-linear",
                                  "rope-scaling-yarn", "longrope", "output-bias"};
const char *const k_archs[] = {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "qwen3moe", "qwen2moe"};

using rng = strata::tools::splitmix64; // identical weights for a seed on every machine

[[noreturn]] void usage(const char *why) {
    std::fprintf(stderr,
                 "make-model: %s\nusage: make-model --out F.gguf [--arch ARCH] [--dim N --layers N --heads N --kv-heads N --ff N "
                 "--ctx N] [--head-dim N] [--type TYPE] [--seed N] [--vocab-from VOCAB.gguf] [--untied] [--pure] "
                 "[--weight-scale X] [--feature NAME]... [--window N] [--swa-pattern N] [--attn-softcap X] "
                 "[--final-softcap X] [--experts N --experts-used K [--expert-ff N]] [--shape-only]\n"
                 "ARCH: llama qwen2 qwen3 phi3 gemma2 gemma3 qwen3moe qwen2moe\n"
                 "NAME: rope-freqs qkv-bias mlp-bias fused-qkv rope-scaling-linear rope-scaling-yarn longrope output-bias\n"
                 "TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl iq4_xs q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m "
                 "q5_k_s q5_k_m q6_k\n",
                 why);
    std::exit(2);
}

options parse(int argc, char **argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        auto positive = [&]() -> float {
            const std::string v = val();
            char *end = nullptr;
            const float x = std::strtof(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(x > 0.0f) || !std::isfinite(x))
                usage((a + " needs a positive number, got " + v).c_str());
            return x;
        };
        auto num = [&](bool zero_ok = false) -> int64_t {
            std::string v = val();
            char *end = nullptr;
            long long n = std::strtoll(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || n < (zero_ok ? 0 : 1))
                usage((a + " needs a " + (zero_ok ? "non-negative" : "positive") + " integer, got " + v).c_str());
            return n;
        };
        if (a == "--out") o.out = val();
        else if (a == "--shape-only") o.shape_only = true;
        else if (a == "--arch") {
            o.arch = val();
            if (std::find_if(std::begin(k_archs), std::end(k_archs), [&](const char *x) { return o.arch == x; }) ==
                std::end(k_archs))
                usage(("unknown architecture " + o.arch).c_str());
        }
        else if (a == "--head-dim") o.head_dim = num();
        else if (a == "--weight-scale") o.weight_scale = positive();
        else if (a == "--attn-softcap") o.attn_softcap = positive();
        else if (a == "--final-softcap") o.final_softcap = positive();
        else if (a == "--window") o.window = num(true);
        else if (a == "--swa-pattern") o.swa_pattern = num();
        else if (a == "--experts") o.experts = num();
        else if (a == "--experts-used") o.experts_used = num();
        else if (a == "--expert-ff") o.expert_ff = num();
        else if (a == "--dim") o.dim = num();
        else if (a == "--layers") o.layers = num();
        else if (a == "--heads") o.heads = num();
        else if (a == "--kv-heads") o.kv_heads = num();
        else if (a == "--ff") o.ff = num();
        else if (a == "--ctx") o.ctx = num();
        else if (a == "--type") o.type = val();
        else if (a == "--seed") o.seed = static_cast<uint64_t>(num());
        else if (a == "--vocab-from") o.vocab_from = val();
        else if (a == "--untied") o.untied = true;
        else if (a == "--pure") o.pure = true;
        else if (a == "--feature") {
            std::string f = val();
            if (std::find_if(std::begin(k_features), std::end(k_features), [&](const char *x) { return f == x; }) ==
                std::end(k_features))
                usage(("unknown feature " + f).c_str());
            o.features.push_back(f);
        }
        else if (a == "--help" || a == "-h") usage("help");
        else usage(("unknown option " + a).c_str());
    }
    if (o.out.empty()) usage("--out is required");
    if (o.heads % o.kv_heads != 0) usage("heads must be a multiple of kv-heads");
    if (o.head_dim == 0) {
        if (o.dim % o.heads != 0) usage("heads must divide dim (or give --head-dim)");
        o.head_dim = o.dim / o.heads;
    }
    if (o.head_dim % 2 != 0) usage("the head size must be even for RoPE");
    const bool gemma = o.arch == "gemma2" || o.arch == "gemma3";
    if (!gemma && (o.window >= 0 || o.swa_pattern >= 0 || o.attn_softcap > 0.0f || o.final_softcap > 0.0f))
        usage("--window, --swa-pattern, --attn-softcap and --final-softcap are for --arch gemma2 / gemma3");
    if (o.arch == "gemma3" && o.attn_softcap > 0.0f) usage("gemma3 has no attention soft-cap (--attn-softcap)");
    if (o.arch == "gemma2" && o.window == 0) usage("gemma2 windows every other layer: --window must be > 0");
    if (o.arch == "gemma2" && o.untied) usage("gemma2 has no output.weight (--untied)");
    const bool qwen_moe = o.arch == "qwen3moe" || o.arch == "qwen2moe";
    if (qwen_moe && o.experts == 0) usage(("--arch " + o.arch + " needs --experts N --experts-used K").c_str());
    if (o.arch == "qwen2moe") o.untied = true; // llama.cpp's qwen2moe requires output.weight
    if (o.experts > 0 && (o.experts_used <= 0 || o.experts_used > o.experts))
        usage("--experts-used K must be in 1..--experts");
    if (o.experts > 0 && o.arch != "llama" && !qwen_moe)
        usage("--experts is for --arch llama (Mixtral), qwen2moe and qwen3moe");
    if (o.expert_ff > 0 && !qwen_moe) usage("--expert-ff is for qwen2moe / qwen3moe (Mixtral's experts have --ff)");
    if (o.experts == 0 && (o.experts_used > 0 || o.expert_ff > 0)) usage("--experts-used / --expert-ff need --experts");
    if (qwen_moe && o.expert_ff == 0) o.expert_ff = o.ff / o.experts_used;
    if (o.arch == "llama") o.expert_ff = o.ff;
    return o;
}

// Every tokenizer.* key of the vocab file as it is (model, pre-tokenizer, tokens, merges, special ids, add_bos,
// chat template...), so the model tokenizes as the model the vocab came from.
void copy_tokenizer_keys(const strata::gguf::file &from, strata::gguf::writer &w) {
    using strata::gguf::value_type;
    for (size_t i = 0; i < from.kv_count(); ++i) {
        const std::string key(from.kv_key(i));
        if (key.rfind("tokenizer.", 0) != 0) continue;
        switch (from.kv_type(i)) {
        case value_type::string: w.add_string(key, std::string(*from.get_string(key))); break;
        case value_type::boolean: w.add_bool(key, *from.get_bool(key)); break;
        case value_type::f32:
        case value_type::f64: w.add_f32(key, static_cast<float>(*from.get_float(key))); break;
        case value_type::array:
            switch (*from.array_type_of(key)) {
            case value_type::string: {
                const auto v = *from.get_string_array(key);
                w.add_string_array(key, std::vector<std::string>(v.begin(), v.end()));
                break;
            }
            case value_type::f32:
            case value_type::f64: w.add_f32_array(key, *from.get_float_array(key)); break;
            default: {
                const auto v = *from.get_int_array(key);
                w.add_i32_array(key, std::vector<int32_t>(v.begin(), v.end()));
            }
            }
            break;
        default: {
            const int64_t v = *from.get_int(key);
            if (v < 0)
                w.add_i32(key, static_cast<int32_t>(v));
            else
                w.add_u32(key, static_cast<uint32_t>(v));
        }
        }
    }
}

} // namespace

int main(int argc, char **argv) try {
    options o = parse(argc, argv);
    namespace fs = std::filesystem;
    const fs::path exe_dir = boost::dll::program_location().parent_path().string();
    if (o.vocab_from.empty()) {
        o.vocab_from = (exe_dir / ".." / ".." / ".." / "shared" / "models" / "vocab" / "ggml-vocab-llama-spm.gguf").string();
#ifdef STRATA_SHARED_DIR
        o.vocab_from = std::string(STRATA_SHARED_DIR) + "/models/vocab/ggml-vocab-llama-spm.gguf";
#endif
    }
    strata_host_services host{};
    host.struct_size = sizeof host;
    host.host_abi_major = STRATA_ABI_MAJOR;
    host.host_abi_minor = STRATA_ABI_MINOR;
    strata::plugins::registry registry(&host);
    registry.load_directory(exe_dir.parent_path() / "plugins");
    if (const char *env = std::getenv("STRATA_PLUGIN_PATH")) registry.load_directory(env);

    const strata::tools::mixture mix = strata::tools::mixture_named(o.type);
    // Every type the mixture can give a tensor must come from a loaded quant plugin (checked as each is used).
    const auto block_elems_of = [&registry](uint32_t type) -> int64_t {
        const auto q = registry.find_quant_by_type(type);
        if (q.desc == nullptr) strata::fail("no quant plugin provides GGML type {}", type);
        return q.desc->block_elems;
    };
    const strata::tools::model_shape shape{o.layers, o.heads / o.kv_heads, !o.untied, o.experts};

    strata::gguf::file vocab = strata::gguf::file::open(o.vocab_from);
    auto tokens = vocab.get_string_array("tokenizer.ggml.tokens");
    if (!tokens) strata::fail("{}: no vocabulary (tokenizer.ggml.tokens)", o.vocab_from);
    const int64_t n_vocab = static_cast<int64_t>(tokens->size());

    strata::gguf::writer w;
    const std::string p = o.arch + ".";
    w.add_string("general.architecture", o.arch);
    w.add_string("general.name", "strata-make-model-" + o.type + (o.shape_only ? "-shape-only" : ""));
    w.add_u32("general.file_type", mix.file_type);
    w.add_u32("general.quantization_version", 2);
    w.add_u32(p + "vocab_size", static_cast<uint32_t>(n_vocab));
    w.add_u32(p + "context_length", static_cast<uint32_t>(o.ctx));
    w.add_u32(p + "embedding_length", static_cast<uint32_t>(o.dim));
    w.add_u32(p + "block_count", static_cast<uint32_t>(o.layers));
    w.add_u32(p + "feed_forward_length", static_cast<uint32_t>(o.ff));
    w.add_u32(p + "attention.head_count", static_cast<uint32_t>(o.heads));
    w.add_u32(p + "attention.head_count_kv", static_cast<uint32_t>(o.kv_heads));
    if (o.head_dim * o.heads != o.dim) {
        w.add_u32(p + "attention.key_length", static_cast<uint32_t>(o.head_dim));
        w.add_u32(p + "attention.value_length", static_cast<uint32_t>(o.head_dim));
    }
    const bool gemma = o.arch == "gemma2" || o.arch == "gemma3";
    if (gemma && o.head_dim * o.heads == o.dim) { // Gemma's converters always write the head size
        w.add_u32(p + "attention.key_length", static_cast<uint32_t>(o.head_dim));
        w.add_u32(p + "attention.value_length", static_cast<uint32_t>(o.head_dim));
    }
    w.add_u32(p + "rope.dimension_count", static_cast<uint32_t>(o.head_dim));
    w.add_f32(p + "rope.freq_base", o.arch == "gemma3" ? 1000000.0f : 10000.0f);
    if (o.arch == "gemma2") {
        w.add_f32(p + "attn_logit_softcapping", o.attn_softcap > 0.0f ? o.attn_softcap : 50.0f);
        w.add_f32(p + "final_logit_softcapping", o.final_softcap > 0.0f ? o.final_softcap : 30.0f);
        w.add_u32(p + "attention.sliding_window", static_cast<uint32_t>(o.window > 0 ? o.window : 4096));
    } else if (o.arch == "gemma3") {
        if (o.final_softcap > 0.0f) w.add_f32(p + "final_logit_softcapping", o.final_softcap);
        const int64_t window = o.window >= 0 ? o.window : 512;
        if (window > 0) w.add_u32(p + "attention.sliding_window", static_cast<uint32_t>(window));
    }
    if (o.swa_pattern >= 0) w.add_u32(p + "attention.sliding_window_pattern", static_cast<uint32_t>(o.swa_pattern));
    if (o.experts > 0) {
        w.add_u32(p + "expert_count", static_cast<uint32_t>(o.experts));
        w.add_u32(p + "expert_used_count", static_cast<uint32_t>(o.experts_used));
        if (o.arch != "llama") w.add_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(o.expert_ff));
        if (o.arch == "qwen2moe") w.add_u32(p + "expert_shared_feed_forward_length", static_cast<uint32_t>(o.ff));
    }
    w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
    const auto has = [&o](const char *f) { return std::find(o.features.begin(), o.features.end(), f) != o.features.end(); };
    if (has("rope-scaling-linear") || has("rope-scaling-yarn")) {
        w.add_string(p + "rope.scaling.type", has("rope-scaling-yarn") ? "yarn" : "linear");
        w.add_f32(p + "rope.scaling.factor", 4.0f);
        w.add_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(o.ctx));
    }
    if (o.arch == "phi3") {
        // What llama.cpp's Phi3MiniModel converter writes for a model without LongRoPE factors (a 4k Phi-3 mini or
        // Phi-4): the original context, and a sliding window of 0 (Phi-4; llama.cpp disables Phi's window anyway).
        if (has("longrope")) {
            const double orig = static_cast<double>(o.ctx / 2);
            w.add_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(o.ctx / 2));
            w.add_f32(p + "rope.scaling.attn_factor",
                      static_cast<float>(std::sqrt(1.0 + std::log(static_cast<double>(o.ctx) / orig) / std::log(orig))));
        } else if (!has("rope-scaling-linear") && !has("rope-scaling-yarn")) {
            w.add_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(o.ctx));
        }
        w.add_u32(p + "attention.sliding_window", 0);
    }
    copy_tokenizer_keys(vocab, w);

    rng r{o.seed};
    std::vector<float> row;
    std::map<std::string, int> type_counts;
    // The quantization of a weight named `name` (the mixture's rule for it), counted for the summary.
    auto quant_for = [&](const std::string &name, int64_t cols, int64_t layer) {
        const auto q = registry.find_quant_by_type(strata::tools::tensor_type(mix, shape, name, layer, cols, o.pure, block_elems_of));
        ++type_counts[q.desc->header.name];
        return q.desc;
    };
    // Appends `rows` random rows of `cols` in type q: uniform in ±1.7 w/sqrt(cols) so activations keep unit scale
    // through the layers.
    auto random_rows = [&](const strata_quant_desc *q, int64_t cols, int64_t rows, std::vector<uint8_t> &bytes) {
        const int64_t row_bytes = cols / q->block_elems * q->block_bytes;
        const size_t at = bytes.size();
        bytes.resize(at + static_cast<size_t>(row_bytes * rows));
        row.resize(static_cast<size_t>(cols));
        const float scale = o.weight_scale / std::sqrt(static_cast<float>(cols));
        for (int64_t i = 0; i < rows; ++i) {
            for (auto &x : row) x = r.uniform() * scale * 1.7f;
            q->quantize_row(row.data(), bytes.data() + at + i * row_bytes, cols);
        }
    };
    auto matrix = [&](const std::string &name, int64_t cols, int64_t rows, int64_t layer) {
        const strata_quant_desc *q = quant_for(name, cols, layer);
        if (o.shape_only) return w.add_tensor_hole(name, q->ggml_type, {cols, rows});
        std::vector<uint8_t> bytes;
        random_rows(q, cols, rows, bytes);
        w.add_tensor(name, q->ggml_type, {cols, rows}, std::move(bytes));
    };
    // Matrices one after another in one tensor, drawn in the same order as separate ones (so a fused file holds the
    // same weights as the separate file of the same seed when the types agree).
    auto fused_matrix = [&](const std::string &name, int64_t cols, std::initializer_list<int64_t> parts, int64_t layer) {
        const strata_quant_desc *q = quant_for(name, cols, layer);
        std::vector<uint8_t> bytes;
        int64_t rows = 0;
        for (const int64_t part : parts) {
            if (!o.shape_only) random_rows(q, cols, part, bytes);
            rows += part;
        }
        if (o.shape_only) return w.add_tensor_hole(name, q->ggml_type, {cols, rows});
        w.add_tensor(name, q->ggml_type, {cols, rows}, std::move(bytes));
    };
    // A router in F32 whatever the type, as llama-quantize leaves routers (and 1-D tensors) unquantized; `ne` its
    // GGUF shape (the shared expert's gate is 1-D).
    auto router = [&](const std::string &name, int64_t cols, int64_t rows, std::vector<int64_t> ne) {
        const strata_quant_desc *q = registry.find_quant_by_type(0).desc;
        ++type_counts[q->header.name];
        std::vector<uint8_t> bytes;
        random_rows(q, cols, rows, bytes);
        w.add_tensor(name, 0, std::move(ne), std::move(bytes));
    };
    // A GGUF [cols, rows, experts] tensor: --experts matrices of rows x cols, one after another.
    auto expert_matrix = [&](const std::string &name, int64_t cols, int64_t rows, int64_t layer) {
        const strata_quant_desc *q = quant_for(name, cols, layer);
        if (o.shape_only) return w.add_tensor_hole(name, q->ggml_type, {cols, rows, o.experts});
        std::vector<uint8_t> bytes;
        random_rows(q, cols, rows * o.experts, bytes);
        w.add_tensor(name, q->ggml_type, {cols, rows, o.experts}, std::move(bytes));
    };
    // An F32 vector of n values 1 + 0.1 u (norm weights, biases), or several drawn one after another in one tensor.
    auto vectors_near_one = [&](const std::string &name, std::initializer_list<int64_t> parts) {
        int64_t n = 0;
        for (const int64_t part : parts) n += part;
        std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
        for (int64_t i = 0; i < n; ++i) {
            float v = 1.0f + 0.1f * r.uniform();
            std::memcpy(bytes.data() + i * 4, &v, 4);
        }
        w.add_tensor(name, 0, {n}, std::move(bytes));
    };
    auto vector_near_one = [&](const std::string &name, int64_t n) { vectors_near_one(name, {n}); };
    auto norm = [&](const std::string &name) { vector_near_one(name, o.dim); };
    const bool phi3 = o.arch == "phi3";
    if (phi3 && has("mlp-bias")) strata::fail("--arch phi3 has no MLP biases (its ffn_up is gate and up fused)");
    if (!phi3 && has("longrope")) strata::fail("--feature longrope is Phi-3's: use it with --arch phi3");
    const bool fused_qkv = phi3 || has("fused-qkv");
    const int64_t head_dim = o.head_dim;
    const int64_t q_dim = o.heads * head_dim, kv_dim = o.kv_heads * head_dim;
    std::fprintf(stderr, "make-model: %s, %s, %ld layers, dim %ld, ff %ld, vocab %ld, type %s\n", o.out.c_str(),
                 o.arch.c_str(), static_cast<long>(o.layers), static_cast<long>(o.dim), static_cast<long>(o.ff),
                 static_cast<long>(n_vocab), o.type.c_str());
    matrix("token_embd.weight", o.dim, n_vocab, -1);
    for (int64_t l = 0; l < o.layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        norm(b + "attn_norm.weight");
        if (fused_qkv) {
            fused_matrix(b + "attn_qkv.weight", o.dim, {q_dim, kv_dim, kv_dim}, l);
        } else {
            matrix(b + "attn_q.weight", o.dim, q_dim, l);
            matrix(b + "attn_k.weight", o.dim, kv_dim, l);
            matrix(b + "attn_v.weight", o.dim, kv_dim, l);
        }
        if (has("qkv-bias") || o.arch == "qwen2" || o.arch == "qwen2moe") {
            if (fused_qkv) {
                vectors_near_one(b + "attn_qkv.bias", {q_dim, kv_dim, kv_dim});
            } else {
                vector_near_one(b + "attn_q.bias", q_dim);
                vector_near_one(b + "attn_k.bias", kv_dim);
                vector_near_one(b + "attn_v.bias", kv_dim);
            }
        }
        if (o.arch == "qwen3" || o.arch == "gemma3" || o.arch == "qwen3moe") {
            vector_near_one(b + "attn_k_norm.weight", head_dim);
            vector_near_one(b + "attn_q_norm.weight", head_dim);
        }
        matrix(b + "attn_output.weight", q_dim, o.dim, l);
        if (gemma) norm(b + "post_attention_norm.weight");
        norm(b + "ffn_norm.weight");
        if (o.experts > 0) { // the router, then each 3-D expert tensor: experts' matrices one after another
            router(b + "ffn_gate_inp.weight", o.dim, o.experts, {o.dim, o.experts});
            expert_matrix(b + "ffn_gate_exps.weight", o.dim, o.expert_ff, l);
            expert_matrix(b + "ffn_down_exps.weight", o.expert_ff, o.dim, l);
            expert_matrix(b + "ffn_up_exps.weight", o.dim, o.expert_ff, l);
            if (o.arch == "qwen2moe") { // the shared expert and its 1-row gate
                router(b + "ffn_gate_inp_shexp.weight", o.dim, 1, {o.dim});
                matrix(b + "ffn_gate_shexp.weight", o.dim, o.ff, l);
                matrix(b + "ffn_down_shexp.weight", o.ff, o.dim, l);
                matrix(b + "ffn_up_shexp.weight", o.dim, o.ff, l);
            }
        } else {
            if (!phi3) matrix(b + "ffn_gate.weight", o.dim, o.ff, l);
            matrix(b + "ffn_down.weight", o.ff, o.dim, l);
            if (phi3) fused_matrix(b + "ffn_up.weight", o.dim, {o.ff, o.ff}, l); // gate rows, then up rows
            else matrix(b + "ffn_up.weight", o.dim, o.ff, l);
        }
        if (has("mlp-bias")) {
            vector_near_one(b + "ffn_gate.bias", o.ff);
            vector_near_one(b + "ffn_down.bias", o.dim);
            vector_near_one(b + "ffn_up.bias", o.ff);
        }
        if (gemma) norm(b + "post_ffw_norm.weight");
        std::fprintf(stderr, "\rmake-model: layer %ld/%ld", static_cast<long>(l + 1), static_cast<long>(o.layers));
    }
    std::fprintf(stderr, "\n");
    norm("output_norm.weight");
    // RoPE frequency factors rising from 1 (the fastest pair) to 8 (the slowest), as Llama 3's "llama3" scaling gives.
    auto factor_ramp = [&](const std::string &name) {
        const int64_t n = head_dim / 2;
        std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
        for (int64_t i = 0; i < n; ++i) {
            const float v = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(std::max<int64_t>(n - 1, 1));
            std::memcpy(bytes.data() + i * 4, &v, 4);
        }
        w.add_tensor(name, 0, {n}, std::move(bytes));
    };
    if (has("rope-freqs")) factor_ramp("rope_freqs.weight");
    if (has("longrope")) {
        factor_ramp("rope_factors_long.weight");
        vector_near_one("rope_factors_short.weight", head_dim / 2);
    }
    if (o.untied) matrix("output.weight", o.dim, n_vocab, -1);
    if (has("output-bias")) { // uniform in ±2: enough to move the argmax of logits this model spreads by about 1
        std::vector<uint8_t> bytes(static_cast<size_t>(n_vocab) * 4);
        for (int64_t i = 0; i < n_vocab; ++i) {
            const float v = 2.0f * r.uniform();
            std::memcpy(bytes.data() + i * 4, &v, 4);
        }
        w.add_tensor("output.bias", 0, {n_vocab}, std::move(bytes));
    }
    std::string counts;
    for (const auto &[type, count] : type_counts) counts += (counts.empty() ? "" : ", ") + type + " " + std::to_string(count);
    std::fprintf(stderr, "make-model: tensor types: %s\n", counts.c_str());
    w.write(o.out);
    std::fprintf(stderr, "make-model: wrote %s\n", o.out.c_str());
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "make-model: error: %s\n", e.what());
    return 1;
}
