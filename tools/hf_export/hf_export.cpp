// hf-export: a GGUF model written as a Hugging Face checkpoint folder, as transformers would save it:
//   hf-export MODEL.gguf OUT_DIR [--shards N] [--dtype keep|f32|bf16] [--no-permute] [--untie] [--multimodal]
// config.json from the GGUF metadata (every <arch>. key translated or refused), the tensors renamed by the same table
// the HF reader uses (core/model_file/hf_architectures.cpp) into model.safetensors or N shards plus
// model.safetensors.index.json, and tokenizer.json / tokenizer_config.json / generation_config.json from the
// SentencePiece vocabulary. Q/K rows of families whose GGUF form is permuted for adjacent-pair RoPE (llama) are put
// back into Hugging Face's rotate-half order with the permutation of transformers' convert_llama_weights_to_hf.py;
// --no-permute skips it (a checkpoint that must NOT match, for tests). --untie writes lm_head.weight from the
// embedding and sets tie_word_embeddings false. --multimodal (gemma3) writes the layout of Gemma 3's multimodal
// checkpoints: Gemma3ForConditionalGeneration with the text settings in text_config (keys at Gemma3TextConfig's
// defaults left out, as transformers saves them), the language model under language_model.model., and two
// vision-tower tensors beside it.
#include "common/error.hpp"
#include "common/half.hpp"
#include "gguf/gguf_file.hpp"
#include "hf_tokenizer_json.hpp"
#include "model_file/hf_architectures.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using strata::fail;
namespace gguf = strata::gguf;

struct options {
    std::string in, out;
    int shards = 1;
    std::string dtype = "keep";
    bool permute = true;
    bool untie = false;
    bool multimodal = false;
};

options parse(int argc, char **argv) {
    options o;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) fail("hf-export: {} needs a value", a);
            return argv[++i];
        };
        if (a == "--shards") {
            const std::string v = val();
            const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), o.shards);
            if (ec != std::errc() || end != v.data() + v.size()) fail("hf-export: --shards takes a number, not '{}'", v);
        }
        else if (a == "--dtype") o.dtype = val();
        else if (a == "--no-permute") o.permute = false;
        else if (a == "--untie") o.untie = true;
        else if (a == "--multimodal") o.multimodal = true;
        else if (a.starts_with("-")) fail("hf-export: unknown option '{}'", a);
        else pos.push_back(a);
    }
    if (pos.size() != 2)
        fail("usage: hf-export MODEL.gguf OUT_DIR [--shards N] [--dtype keep|f32|bf16] [--no-permute] [--untie] "
             "[--multimodal]");
    if (o.shards < 1) fail("hf-export: --shards must be at least 1");
    if (o.dtype != "keep" && o.dtype != "f32" && o.dtype != "bf16") fail("hf-export: --dtype is keep, f32 or bf16");
    o.in = pos[0];
    o.out = pos[1];
    return o;
}

struct out_tensor {
    std::string name;   // HF name
    std::string dtype;  // safetensors dtype
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

// A tensor's values as F32, whatever its float type.
std::vector<float> to_f32(const gguf::tensor_info &t) {
    const size_t n = static_cast<size_t>(t.n_elements());
    std::vector<float> v(n);
    if (t.type == 0) std::memcpy(v.data(), t.data, n * 4);
    else if (t.type == 1 || t.type == 30) {
        for (size_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, t.data + 2 * i, 2);
            v[i] = t.type == 1 ? strata::f16_to_f32(h) : strata::bf16_to_f32(h);
        }
    }
    return v;
}

out_tensor convert(const gguf::tensor_info &t, const std::string &hf_name, const std::string &dtype,
                   float shift = 0.0f) {
    if (t.type != 0 && t.type != 1 && t.type != 30)
        fail("hf-export: tensor '{}' is quantized (ggml type {}); hf-export writes F32, F16 and BF16 tensors only",
             t.name, t.type);
    out_tensor o;
    o.name = hf_name;
    for (uint32_t d = t.n_dims; d-- > 0;) o.shape.push_back(t.ne[d]);
    if (dtype == "keep" && shift == 0.0f) {
        o.dtype = t.type == 0 ? "F32" : t.type == 1 ? "F16" : "BF16";
        o.bytes.assign(t.data, t.data + t.n_bytes);
        return o;
    }
    std::vector<float> v = to_f32(t);
    for (float &x : v) x += shift; // Gemma's norms: HF stores w - 1
    if (dtype == "f32" || (dtype == "keep" && t.type == 0)) {
        o.dtype = "F32";
        o.bytes.resize(v.size() * 4);
        std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    } else {
        o.dtype = "BF16";
        o.bytes.resize(v.size() * 2);
        for (size_t i = 0; i < v.size(); ++i) {
            const uint16_t b = strata::f32_to_bf16(v[i]);
            std::memcpy(o.bytes.data() + 2 * i, &b, 2);
        }
    }
    return o;
}

// transformers' convert_llama_weights_to_hf.py permute(w, n_heads): within each head, row 2i+p (Meta's and GGUF's
// adjacent pairs) moves to row p*head_dim/2 + i (rotate-half). Rows are whole (any dtype).
void permute_rows(out_tensor &t, int64_t n_heads) {
    const int64_t rows = t.shape[0];
    if (rows % n_heads != 0 || (rows / n_heads) % 2 != 0)
        fail("hf-export: '{}' has {} rows, not {} heads of an even size", t.name, rows, n_heads);
    const size_t row_bytes = t.bytes.size() / static_cast<size_t>(rows);
    const int64_t hd = rows / n_heads;
    std::vector<uint8_t> out(t.bytes.size());
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < hd / 2; ++i)
            for (int64_t p = 0; p < 2; ++p)
                std::memcpy(out.data() + static_cast<size_t>(h * hd + p * hd / 2 + i) * row_bytes,
                            t.bytes.data() + static_cast<size_t>(h * hd + 2 * i + p) * row_bytes, row_bytes);
    t.bytes = std::move(out);
}

void write_file(const fs::path &p, const std::string &text) {
    std::ofstream o(p, std::ios::binary);
    o << text;
    if (!o) fail("hf-export: cannot write {}", p.string());
}

void write_safetensors(const fs::path &p, const std::vector<const out_tensor *> &list) {
    ordered_json h = ordered_json::object();
    h["__metadata__"] = {{"format", "pt"}};
    uint64_t off = 0;
    for (const out_tensor *t : list) {
        h[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {off, off + t->bytes.size()}}};
        off += t->bytes.size();
    }
    std::string header = h.dump();
    header.append((8 - header.size() % 8) % 8, ' '); // keeps every tensor 8-byte aligned, as safetensors does
    std::ofstream o(p, std::ios::binary);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
    o.write(reinterpret_cast<const char *>(len), 8);
    o << header;
    for (const out_tensor *t : list) o.write(reinterpret_cast<const char *>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
    if (!o) fail("hf-export: cannot write {}", p.string());
}

} // namespace

int main(int argc, char **argv) try {
    const options o = parse(argc, argv);
    const gguf::file f = gguf::file::open(o.in);
    const std::string arch(f.get_string("general.architecture").value_or(""));
    const strata::hf_architecture *a = strata::find_hf_architecture_for_gguf(arch);
    // GGUF runs Mixtral as llama with experts.
    if (arch == "llama" && f.get_uint("llama.expert_count").value_or(0) > 0)
        a = strata::find_hf_architecture("MixtralForCausalLM");
    if (a == nullptr)
        fail("hf-export: {}: architecture '{}' has no HF mapping (mapped: {})", o.in, arch,
             strata::hf_architecture_names());
    const std::string p = arch + ".";
    auto need = [&](const std::string &k) {
        const auto v = f.get_uint(p + k);
        if (!v) fail("hf-export: {}: missing {}{}", o.in, p, k);
        return *v;
    };

    // config.json: every <arch>. key translated, or refused.
    ordered_json c;
    c["architectures"] = {a->hf_name};
    c["model_type"] = a->model_type;
    const uint64_t n_embd = need("embedding_length"), n_head = need("attention.head_count");
    const uint64_t n_head_kv = f.get_uint(p + "attention.head_count_kv").value_or(n_head);
    c["hidden_size"] = n_embd;
    c["intermediate_size"] = need("feed_forward_length");
    c["num_hidden_layers"] = need("block_count");
    c["num_attention_heads"] = n_head;
    c["num_key_value_heads"] = n_head_kv;
    c["hidden_act"] = a->activation;
    c["rms_norm_eps"] = f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5);
    c["rope_theta"] = f.get_float(p + "rope.freq_base").value_or(10000.0);
    if (auto v = f.get_uint(p + "context_length")) c["max_position_embeddings"] = *v;
    const uint64_t head_dim = f.get_uint(p + "attention.key_length").value_or(n_embd / n_head);
    c["head_dim"] = head_dim; // always: the config classes' defaults differ (Qwen3 128, Gemma 256)
    // Biases as config.json declares them: attention_bias covers q, k, v and o together (Qwen2's q/k/v biases are
    // its architecture's own, and it has no o bias); mlp_bias the three MLP projections.
    const bool q_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    const bool o_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
    if (a->qkv_bias ? o_bias : q_bias != o_bias)
        fail("hf-export: {}: its attention biases (q {}, output {}) have no config.json form for {}", o.in, q_bias,
             o_bias, a->hf_name);
    if (!a->qkv_bias) c["attention_bias"] = q_bias;
    c["mlp_bias"] = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
    if (auto v = f.get_uint(p + "rope.scaling.original_context_length")) c["original_max_position_embeddings"] = *v;
    if (f.has(p + "attention.sliding_window")) {
        const uint64_t w = f.get_uint(p + "attention.sliding_window").value_or(0);
        if (a->sliding_window_key || a->norm_minus_one) c["sliding_window"] = w > 0 ? ordered_json(w) : ordered_json(nullptr);
        else if (w > 0) fail("hf-export: {}: {}attention.sliding_window {} has no config.json form for {}", o.in, p, w, a->hf_name);
    }
    if (a->norm_minus_one) { // Gemma 2 / 3
        const bool g2 = arch == "gemma2";
        c["hidden_activation"] = "gelu_pytorch_tanh";
        if (auto v = f.get_float(p + "attn_logit_softcapping")) c["attn_logit_softcapping"] = *v;
        else if (!g2) c["attn_logit_softcapping"] = nullptr;
        if (auto v = f.get_float(p + "final_logit_softcapping")) c["final_logit_softcapping"] = *v;
        else if (!g2) c["final_logit_softcapping"] = nullptr;
        if (auto v = f.get_uint(p + "attention.sliding_window_pattern")) c["sliding_window_pattern"] = *v;
        else if (!g2 && f.get_uint(p + "attention.sliding_window").value_or(0) == 0)
            c["sliding_window_pattern"] = 1; // no windowed layer (the config class would default to 5 of 6)
        if (auto v = f.get_float(p + "rope.freq_base_swa")) c["rope_local_base_freq"] = *v;
        const uint64_t n_layer = need("block_count");
        c["query_pre_attn_scalar"] = n_layer == (g2 ? 46u : 62u) ? n_embd / n_head
                                                                 : f.get_uint(p + "attention.key_length").value_or(256);
    }
    if (a->expert_count_key != nullptr) {
        c[a->expert_count_key] = need("expert_count");
        c["num_experts_per_tok"] = need("expert_used_count");
        if (a->expert_ff_key) c["moe_intermediate_size"] = need("expert_feed_forward_length");
        if (a->shared_expert) c["shared_expert_intermediate_size"] = need("expert_shared_feed_forward_length");
        if (a->norm_topk_prob_computed != a->norm_topk_prob_default || a->expert_ff_key)
            c["norm_topk_prob"] = a->norm_topk_prob_computed;
    } else if (f.get_uint(p + "expert_count").value_or(0) > 0) {
        fail("hf-export: {}: {} experts have no config.json form for {}", o.in, arch, a->hf_name);
    }
    const std::set<std::string> translated = {
        "expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length",
        "attn_logit_softcapping", "final_logit_softcapping", "attention.sliding_window_pattern", "rope.freq_base_swa",
        "rope.scaling.original_context_length", "attention.sliding_window",
        "embedding_length", "attention.head_count", "attention.head_count_kv", "feed_forward_length", "block_count",
        "attention.layer_norm_rms_epsilon", "rope.freq_base", "context_length", "attention.key_length",
        "attention.value_length", "rope.dimension_count", "vocab_size"};
    for (size_t i = 0; i < f.kv_count(); ++i) {
        const std::string key(f.kv_key(i));
        if (key.starts_with(p) && !translated.count(key.substr(p.size())))
            fail("hf-export: {}: {} has no config.json translation here; export a model without it", o.in, key);
    }
    if (f.get_uint(p + "attention.value_length").value_or(head_dim) != head_dim ||
        f.get_uint(p + "rope.dimension_count").value_or(head_dim) != head_dim)
        fail("hf-export: {}: partial RoPE or a separate value head size is not exported", o.in);
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    c["vocab_size"] = tokens ? tokens->size() : f.get_uint(p + "vocab_size").value_or(0);

    // Tensors.
    const bool tied = f.find_tensor("output.weight") == nullptr;
    c["tie_word_embeddings"] = tied && !o.untie;
    std::vector<out_tensor> out;
    std::string dtype_seen;
    for (const gguf::tensor_info &t : f.tensors()) {
        if (t.n_dims == 3) { // a stacked expert tensor: one HF matrix per expert
            gguf::tensor_info one = t;
            one.n_dims = 2;
            one.ne[2] = 1;
            one.n_bytes = t.n_bytes / static_cast<uint64_t>(t.ne[2]);
            for (int64_t e = 0; e < t.ne[2]; ++e) {
                const auto hf = strata::hf_tensor_name(*a, t.name, e);
                if (!hf) fail("hf-export: {}: tensor '{}' has no per-expert HF name for {}", o.in, t.name, a->hf_name);
                one.data = t.data + static_cast<uint64_t>(e) * one.n_bytes;
                out.push_back(convert(one, *hf, o.dtype));
                dtype_seen = out.back().dtype;
            }
            continue;
        }
        const auto hf = strata::hf_tensor_name(*a, t.name);
        if (!hf) fail("hf-export: {}: tensor '{}' has no HF name for {}", o.in, t.name, a->hf_name);
        const bool shifted_norm = a->norm_minus_one && hf->ends_with("norm.weight");
        out.push_back(convert(t, *hf, o.dtype, shifted_norm ? -1.0f : 0.0f));
        out_tensor &ot = out.back();
        // A vector GGUF keeps 1-D that HF stores as a 1-row matrix (Qwen2-MoE's shared_expert_gate).
        if (const strata::hf_name_pair *row = strata::find_hf_name_pair(*a, *hf);
            row != nullptr && ot.shape.size() == 1 && std::string_view(row->shape).find(',') != std::string_view::npos)
            ot.shape.insert(ot.shape.begin(), 1);
        if (a->gguf_qk_pairs && o.permute) {
            if (t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_q.bias")) permute_rows(ot, static_cast<int64_t>(n_head));
            if (t.name.ends_with(".attn_k.weight") || t.name.ends_with(".attn_k.bias")) permute_rows(ot, static_cast<int64_t>(n_head_kv));
        }
        if (t.n_dims >= 2) dtype_seen = ot.dtype;
        if (t.name == "token_embd.weight" && tied && o.untie) {
            out_tensor head = convert(t, "lm_head.weight", o.dtype);
            out.push_back(std::move(head));
        }
    }
    c["torch_dtype"] = dtype_seen == "BF16" ? "bfloat16" : dtype_seen == "F16" ? "float16" : "float32";
    c["bos_token_id"] = f.get_int("tokenizer.ggml.bos_token_id").value_or(1);
    c["eos_token_id"] = f.get_int("tokenizer.ggml.eos_token_id").value_or(2);

    if (o.multimodal) {
        if (arch != "gemma3") fail("hf-export: --multimodal writes Gemma 3's multimodal layout; {} is {}", o.in, arch);
        ordered_json text = ordered_json::object();
        const ordered_json text_defaults = {{"sliding_window", 4096}, {"rope_local_base_freq", 10000.0},
                                            {"query_pre_attn_scalar", 256}, {"tie_word_embeddings", true}};
        for (auto it = c.begin(); it != c.end(); ++it) {
            if (it.key() == "architectures" || it.key() == "torch_dtype" || it.key() == "bos_token_id" ||
                it.key() == "eos_token_id")
                continue;
            if (auto d = text_defaults.find(it.key()); d != text_defaults.end() && *d == *it) continue;
            text[it.key()] = *it;
        }
        text["model_type"] = "gemma3_text";
        ordered_json mm;
        mm["architectures"] = {"Gemma3ForConditionalGeneration"};
        mm["model_type"] = "gemma3";
        mm["text_config"] = text;
        mm["vision_config"] = {{"model_type", "siglip_vision_model"}, {"hidden_size", 16}, {"image_size", 896},
                               {"patch_size", 14}, {"num_hidden_layers", 1}};
        mm["boi_token_index"] = 255999;
        mm["eoi_token_index"] = 256000;
        mm["image_token_index"] = 262144;
        mm["mm_tokens_per_image"] = 256;
        mm["torch_dtype"] = c["torch_dtype"];
        mm["bos_token_id"] = c["bos_token_id"];
        mm["eos_token_id"] = c["eos_token_id"];
        c = mm;
        for (out_tensor &t : out) {
            if (t.name.starts_with("model.")) t.name = "language_model.model." + t.name.substr(6);
            else if (t.name == "lm_head.weight") t.name = "language_model.lm_head.weight";
        }
        for (const auto &[name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
                 {"vision_tower.vision_model.post_layernorm.weight", {16}},
                 {"multi_modal_projector.mm_input_projection_weight", {16, static_cast<int64_t>(n_embd)}}}) {
            out_tensor v;
            v.name = name;
            v.dtype = "F32";
            v.shape = shape;
            v.bytes.assign(static_cast<size_t>(shape[0] * (shape.size() > 1 ? shape[1] : 1) * 4), 0);
            out.push_back(std::move(v));
        }
    }
    fs::create_directories(o.out);
    const fs::path dir(o.out);
    write_file(dir / "config.json", c.dump(2) + "\n");
    const auto tok = hf_export::spm_tokenizer_json(f);
    write_file(dir / "tokenizer.json", tok.tokenizer.dump(2) + "\n");
    write_file(dir / "tokenizer_config.json", tok.config.dump(2) + "\n");
    ordered_json gen = {{"bos_token_id", c["bos_token_id"]}, {"eos_token_id", c["eos_token_id"]}};
    write_file(dir / "generation_config.json", gen.dump(2) + "\n");

    const size_t n_shards = std::min<size_t>(static_cast<size_t>(o.shards), out.size());
    if (n_shards == 1) {
        std::vector<const out_tensor *> all;
        for (const auto &t : out) all.push_back(&t);
        write_safetensors(dir / "model.safetensors", all);
    } else {
        ordered_json index;
        uint64_t total = 0;
        ordered_json map = ordered_json::object();
        for (size_t s = 0; s < n_shards; ++s) {
            const std::string name = fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, n_shards);
            std::vector<const out_tensor *> part;
            for (size_t i = s * out.size() / n_shards; i < (s + 1) * out.size() / n_shards; ++i) {
                part.push_back(&out[i]);
                map[out[i].name] = name;
                total += out[i].bytes.size();
            }
            write_safetensors(dir / name, part);
        }
        index["metadata"] = {{"total_size", total}};
        index["weight_map"] = map;
        write_file(dir / "model.safetensors.index.json", index.dump(2) + "\n");
    }
    std::fprintf(stderr, "hf-export: %s -> %s (%s, %zu tensors, %zu shard(s)%s)\n", o.in.c_str(), o.out.c_str(),
                 a->hf_name, out.size(), n_shards, a->gguf_qk_pairs && !o.permute ? ", Q/K NOT permuted" : "");
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
