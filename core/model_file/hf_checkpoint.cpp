#include "model_file/hf_checkpoint.hpp"

#include "common/error.hpp"
#include "common/half.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "common/text_file.hpp"
#include "model_file/json_input.hpp"
#include "tokenizer/hf_tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace strata {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A shard named by the index must be a plain file name beside it: no folder part, no way out of the folder.
void check_shard_name(const std::string &shard, const std::string &origin) {
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
        shard == "." || shard == ".." || !shard.ends_with(".safetensors"))
        fail("{}: weight_map names shard '{}', which is not a .safetensors file name in the same folder", origin, shard);
}

// Whether config.json says a tensor of the name table is in the checkpoint.
bool expected_in_checkpoint(const hf_architecture &a, const hf_config &cfg, hf_presence p) {
    switch (p) {
    case hf_presence::always: return true;
    case hf_presence::untied: return !cfg.tie_word_embeddings;
    case hf_presence::qkv_bias: return a.qkv_bias || cfg.attention_bias;
    case hf_presence::o_bias: return cfg.attention_bias;
    case hf_presence::mlp_bias: return cfg.mlp_bias;
    case hf_presence::qk_norm: return a.qk_norm;
    }
    return false;
}

} // namespace

int32_t ggml_type_of_dtype(const std::string &dtype) {
    if (dtype == "F32") return 0;
    if (dtype == "F16") return 1;
    if (dtype == "BF16") return 30;
    return -1;
}

std::map<std::string, std::set<std::string>> parse_weight_map(std::string_view text, const std::string &origin) {
    const json j = parse_json_input(text, origin);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
        fail("{}: no 'weight_map' object naming each tensor's shard", origin);
    std::map<std::string, std::set<std::string>> by_shard;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it->is_string()) fail("{}: weight_map['{}'] is {}, expected a shard file name", origin, it.key(), brief_json(*it));
        const std::string shard = it->get<std::string>();
        check_shard_name(shard, origin);
        by_shard[shard].insert(it.key());
    }
    return by_shard;
}

hf_checkpoint::hf_checkpoint(std::string folder)
    : name_(std::move(folder)), meta_((fs::path(name_) / "config.json").string()) {}

std::unique_ptr<hf_checkpoint> hf_checkpoint::open(const std::string &folder, const open_options &how,
                                                   bool plan_only) {
    if (!fs::is_directory(folder)) fail("{}: not a folder; pass an HF checkpoint folder or a .gguf file", folder);
    const fs::path config = fs::path(folder) / "config.json";
    if (!fs::exists(config))
        fail("{}: no config.json; an HF checkpoint folder holds config.json, its safetensors shards and "
             "tokenizer.json (huggingface-cli download MODEL --local-dir FOLDER)", folder);
    std::unique_ptr<hf_checkpoint> c(new hf_checkpoint(folder));
    const hf_config cfg = map_hf_config(read_text_file(config), config.string(), c->meta_);
    if (cfg.quant.desc_act && !cfg.quant.static_groups && cfg.architecture->expert_count_key != nullptr)
        fail("{}: an act-order (desc_act) GPTQ checkpoint of a mixture of experts ({}) is not implemented: a stacked "
             "expert tensor has no input order; use a checkpoint quantized without desc_act", folder,
             cfg.architecture->hf_name);
    c->trim_vocab_ = cfg.architecture->trim_vocab;
    c->meta_.set_string("general.name", fs::path(folder).lexically_normal().filename().string().empty()
                                            ? fs::path(folder).lexically_normal().parent_path().filename().string()
                                            : fs::path(folder).lexically_normal().filename().string());
    if (plan_only && !c->has_weights()) {
        c->shapes_from_config(cfg);
        log::info("model", "{}: no safetensors shards here; planning with the shapes and dtype config.json implies",
                  folder);
        if (fs::exists(fs::path(folder) / "tokenizer.json")) c->read_tokenizer();
        return c;
    }
    c->open_shards(how);
    c->map_tensors(cfg);
    c->read_tokenizer();
    return c;
}

bool hf_checkpoint::has_weights() const {
    const fs::path dir(name_);
    if (fs::exists(dir / "model.safetensors")) return true;
    if (!fs::exists(dir / "model.safetensors.index.json")) return false;
    for (const auto &entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".safetensors") return true;
    return false;
}

void hf_checkpoint::shapes_from_config(const hf_config &cfg) {
    const hf_architecture &a = *cfg.architecture;
    if (cfg.n_vocab <= 0) fail("{}: config.json has no vocab_size, which the plan needs without the shards", name_);
    uint32_t matrix_type = 30;
    if (cfg.torch_dtype == "float16") matrix_type = 1;
    else if (cfg.torch_dtype == "float32") matrix_type = 0;
    else if (cfg.torch_dtype != "bfloat16" && !cfg.torch_dtype.empty())
        fail("{}: torch_dtype '{}' is not one Strata reads (bfloat16, float16, float32)", name_, cfg.torch_dtype);
    auto dim = [&](std::string_view d) -> int64_t {
        if (d == "vocab") return cfg.n_vocab;
        if (d == "embd") return cfg.n_embd;
        if (d == "q") return cfg.n_head * cfg.head_dim;
        if (d == "kv") return cfg.n_head_kv * cfg.head_dim;
        if (d == "qkv") return (cfg.n_head + 2 * cfg.n_head_kv) * cfg.head_dim;
        if (d == "ff") return cfg.n_ff;
        if (d == "ff2") return 2 * cfg.n_ff;
        if (d == "experts") return cfg.n_expert;
        if (d == "ff_exp") return cfg.n_ff_exp;
        if (d == "ff_shexp") return cfg.n_ff_shexp;
        if (d == "one") return 1;
        return cfg.head_dim; // "head"
    };
    auto present = [&](hf_presence p) { return expected_in_checkpoint(a, cfg, p); };
    // The names: the index's when it is here (exactly what the checkpoint holds), else the architecture's set.
    std::vector<std::string> names;
    const fs::path index = fs::path(name_) / "model.safetensors.index.json";
    if (fs::exists(index)) {
        for (const auto &[shard, in_shard] : parse_weight_map(read_text_file(index), index.string()))
            for (const auto &raw : in_shard) {
                const std::optional<std::string> n = cfg.multimodal ? multimodal_text_name(raw) : raw;
                if (n && !is_hf_buffer_tensor(*n) && !(*n == "lm_head.weight" && cfg.tie_word_embeddings))
                    names.push_back(*n);
            }
    } else {
        for (const hf_name_pair &n : *a.names) {
            if (!present(n.presence)) continue;
            // An expert row stands for its stacked tensor: expert 0's name per layer.
            if (std::string_view(n.hf).find("{L}") == std::string_view::npos) names.push_back(n.hf);
            else
                for (int64_t l = 0; l < cfg.n_layer; ++l) names.push_back(hf_name_in_layer(n, l));
        }
    }
    uint64_t largest = 0;
    const hf_quantization &quant = cfg.quant;
    std::set<std::string> quantized; // HF .weight names whose layer is stored as GPTQ / AWQ groups or FP8
    if (!quant.method.empty()) {
        std::vector<std::string> plain;
        for (std::string &n : names) {
            const size_t dot = n.rfind('.');
            const std::string part = dot == std::string::npos ? std::string() : n.substr(dot + 1);
            if (part == "qzeros" || part == "scales" || part == "g_idx" || part == "input_scale") continue;
            if (part == "qweight" || part == "weight_scale" || part == "weight_scale_inv") {
                // GPTQ / AWQ: the layer's .weight is its qweight; FP8: a .weight with scales is an e4m3 one.
                quantized.insert(n.substr(0, dot) + ".weight");
                if (part == "qweight") plain.push_back(n.substr(0, dot) + ".weight");
            } else {
                plain.push_back(std::move(n));
            }
        }
        names = std::move(plain);
        if (!fs::exists(index)) // the architecture's set: the blocks' linear layers (and lm_head when it says so)
            for (const std::string &hf : names) {
                const hf_name_pair *row = find_hf_name_pair(a, hf);
                const std::string_view pattern = row != nullptr ? row->hf : "";
                if (((pattern.find("{L}") != std::string_view::npos &&
                      (pattern.ends_with("proj.weight") || (row != nullptr && is_expert_row(*row)))) ||
                     (quant.quantized_lm_head && pattern == "lm_head.weight")) &&
                    !quant.ignores(hf.substr(0, hf.size() - std::string_view(".weight").size())))
                    quantized.insert(hf);
            }
    }
    for (const std::string &hf : names) {
        const hf_name_pair *row = find_hf_name_pair(a, hf);
        if (row == nullptr)
            fail("{}: the index names '{}', which has no meaning Strata knows for {}", name_, hf, a.hf_name);
        // The experts of a layer are one stacked tensor: counted once, at expert 0.
        if (hf_expert_index(a, hf).value_or(0) != 0) continue;
        gguf::tensor_info t;
        t.name = *gguf_tensor_name(a, hf);
        std::vector<int64_t> shape;
        if (is_expert_row(*row)) shape.push_back(cfg.n_expert);
        for (std::string_view rest = row->shape; !rest.empty();) {
            const size_t comma = rest.find(',');
            shape.push_back(dim(rest.substr(0, comma)));
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        }
        t.n_dims = static_cast<uint32_t>(shape.size());
        for (size_t d = 0; d < shape.size(); ++d) t.ne[d] = shape[shape.size() - 1 - d];
        t.type = shape.size() == 1 ? 0 : matrix_type;
        t.n_bytes = static_cast<uint64_t>(t.n_elements()) * (t.type == 0 ? 4 : 2);
        if (quantized.count(hf)) {
            t.type = repacked_type(quant, t.ne[0]);
            if (t.type == 0 && quant.is_fp8())
                fail("{}: '{}' has {} inputs; Strata's FP8 blocks need a multiple of 32", name_, hf, t.ne[0]);
            if (t.type == 0)
                fail("{}: '{}' has {} inputs, which group_size {} does not divide", name_, hf, t.ne[0], quant.group_size);
            // An act-order checkpoint's layers (desc_act) carry their input order, unless their g_idx turns out
            // to keep the groups in place (known only from the weights; always so with static_groups, whose groups
            // AutoGPTQ fixes on the columns before it permutes them).
            t.input_order = quant.desc_act && !quant.static_groups && quant.group_size > 0 && quant.group_size < t.ne[0];
            if (is_expert_row(*row)) t.input_order = false; // refused at open: act-order mixtures
            t.n_bytes = repacked_bytes(t.type, t.ne[1], t.ne[0], t.input_order) * static_cast<uint64_t>(t.ne[2]);
        }
        largest = std::max(largest, t.n_bytes);
        index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
        size_ += tensors_.back().n_bytes;
    }
    computed_ = cfg.computed;
    add_computed_tensors();
    zeros_ = mapped_file::zeros(static_cast<size_t>(largest));
    for (auto &t : tensors_)
        if (t.data == nullptr) t.data = zeros_.data();
}

void hf_checkpoint::open_shards(const open_options &how) {
    const fs::path dir(name_);
    const fs::path index = dir / "model.safetensors.index.json";
    if (!fs::exists(index)) {
        const fs::path single = dir / "model.safetensors";
        if (!fs::exists(single))
            fail("{}: neither model.safetensors nor model.safetensors.index.json is there; Strata reads safetensors "
                 "checkpoints (not pytorch_model.bin pickles)", name_);
        shards_.push_back(safetensors_file::open(single.string(), how));
        size_ += shards_.back().size();
        return;
    }
    const std::string origin = index.string();
    const auto by_shard = parse_weight_map(read_text_file(index), origin);
    for (const auto &[shard, names] : by_shard) {
        const fs::path path = dir / shard;
        if (!fs::exists(path))
            fail("{}: shard '{}' named by the index (for '{}' and {} more tensor(s)) is missing; the download is "
                 "incomplete", name_, shard, *names.begin(), names.size() - 1);
        shards_.push_back(safetensors_file::open(path.string(), how));
        size_ += shards_.back().size();
        std::set<std::string> found;
        for (const auto &t : shards_.back().tensors()) {
            if (!names.count(t.name))
                fail("{}: tensor '{}' is in shard '{}' but the index does not put it there; the index and shards are "
                     "from different checkpoints", origin, t.name, shard);
            found.insert(t.name);
        }
        for (const auto &n : names)
            if (!found.count(n))
                fail("{}: the index puts tensor '{}' in shard '{}', which does not hold it; the download is damaged",
                     origin, n, shard);
    }
}

void hf_checkpoint::map_tensors(const hf_config &cfg) {
    const hf_architecture &a = *cfg.architecture;
    std::vector<std::string> unmapped;
    computed_ = cfg.computed;
    tensors_.reserve(computed_.size() + 64);
    auto add = [&](gguf::tensor_info t, const std::string &from) {
        if (!index_.emplace(t.name, tensors_.size()).second)
            fail("{}: '{}' appears twice (the second time as '{}')", name_, t.name, from);
        tensors_.push_back(std::move(t));
    };
    size_t vision_tensors = 0; // a multimodal checkpoint's vision tower and projector
    // Each stacked expert tensor's per-expert matrices, by its GGUF name, in expert order.
    std::map<std::string, std::vector<const safetensors_tensor *>> experts;
    // Quantized layers by prefix ("model.layers.0.mlp.down_proj"), with the shard that holds their qweight (GPTQ /
    // AWQ) or e4m3 weight (FP8).
    std::map<std::string, std::pair<quantized_linear, std::string>> quantized;
    const bool is_quantized = !cfg.quant.method.empty();
    const bool fp8 = cfg.quant.is_fp8();
    const std::string_view scale_part = cfg.quant.method == "fp8" && cfg.quant.fp8_scales == "block" ? "weight_scale_inv" : "weight_scale";
    for (const safetensors_file &shard : shards_) {
        for (const safetensors_tensor &st : shard.tensors()) {
            // A multimodal checkpoint's language model under its text names; its vision tower set aside.
            const std::optional<std::string> text_name = cfg.multimodal ? multimodal_text_name(st.name) : st.name;
            if (!text_name) {
                ++vision_tensors;
                continue;
            }
            const std::string &name = *text_name;
            if (is_quantized) {
                const size_t dot = name.rfind('.');
                const std::string_view part = dot == std::string::npos ? std::string_view() : std::string_view(name).substr(dot + 1);
                const safetensors_tensor *quantized_linear::*slot = nullptr;
                if (!fp8) {
                    slot = part == "qweight" ? &quantized_linear::qweight : part == "qzeros" ? &quantized_linear::qzeros
                           : part == "scales" ? &quantized_linear::scales : part == "g_idx" ? &quantized_linear::g_idx
                           : nullptr;
                } else {
                    slot = part == scale_part ? &quantized_linear::weight_scale
                           : part == "input_scale" ? &quantized_linear::input_scale
                           : part == "weight" && st.dtype.starts_with("F8_") ? &quantized_linear::weight : nullptr;
                }
                if (slot != nullptr) {
                    auto &[q, where] = quantized[name.substr(0, dot)];
                    q.prefix = name.substr(0, dot);
                    q.*slot = &st;
                    if (part == "qweight" || part == "weight") where = shard.name();
                    continue;
                }
            }
            if (is_hf_buffer_tensor(name)) {
                log::info("model", "{}: '{}' is a cached RoPE table, not a weight; it is recomputed", shard.name(), st.name);
                continue;
            }
            if (name == "lm_head.weight" && cfg.tie_word_embeddings) {
                log::info("model", "{}: 'lm_head.weight' is not read: tie_word_embeddings is true, so the output "
                                   "layer is the embedding (as transformers and vLLM run it)", shard.name());
                continue;
            }
            const auto gname = gguf_tensor_name(a, name);
            if (!gname) {
                unmapped.push_back(st.name);
                continue;
            }
            if (const auto e = hf_expert_index(a, name)) {
                auto &members = experts[*gname];
                if (*e >= cfg.n_expert)
                    fail("{}: '{}' is expert {}, but config.json's {} is {}", shard.name(), st.name, *e,
                         a.expert_count_key, cfg.n_expert);
                members.resize(static_cast<size_t>(cfg.n_expert), nullptr);
                members[static_cast<size_t>(*e)] = &st;
                continue;
            }
            const int32_t type = ggml_type_of_dtype(st.dtype);
            if (type < 0)
                fail("{}: tensor '{}' is {}; Strata reads F32, F16 and BF16 safetensors weights (quantized ones need "
                     "their quantization_config)", shard.name(), st.name, st.dtype);
            if (st.shape.empty() || st.shape.size() > 4)
                fail("{}: tensor '{}' has {} dimensions; weights have 1 to 4", shard.name(), st.name, st.shape.size());
            gguf::tensor_info t;
            const bool shifted_norm = a.norm_minus_one && name.ends_with("norm.weight");
            if (st.shape.size() == 1 && (type != 0 || shifted_norm)) {
                // Norms and biases in F32, as llama.cpp's converter writes every 1-D tensor: widened once here
                // (kilobytes), so a BF16 checkpoint runs with the same plugins and kernels as its GGUF; Gemma's
                // norms stored as w - 1 get their 1 back, as the converter adds it.
                std::vector<float> wide(st.n_bytes / (type == 0 ? 4 : 2));
                for (size_t i = 0; i < wide.size(); ++i) {
                    if (type == 0) {
                        std::memcpy(&wide[i], st.data + 4 * i, 4);
                    } else {
                        uint16_t h;
                        std::memcpy(&h, st.data + 2 * i, 2);
                        wide[i] = type == 1 ? f16_to_f32(h) : bf16_to_f32(h);
                    }
                    if (shifted_norm) wide[i] += 1.0f;
                }
                computed_.push_back({*gname, std::move(wide)});
                continue;
            }
            t.name = *gname;
            t.n_dims = static_cast<uint32_t>(st.shape.size());
            for (size_t d = 0; d < st.shape.size(); ++d) t.ne[d] = st.shape[st.shape.size() - 1 - d];
            t.type = static_cast<uint32_t>(type);
            t.offset = st.begin;
            t.data = st.data;
            t.n_bytes = st.n_bytes;
            add(std::move(t), st.name);
        }
    }
    if (vision_tensors > 0)
        log::info("model", "{}: {} vision tensors (vision_tower, multi_modal_projector) are not loaded: Strata runs "
                           "this multimodal checkpoint's language model; requests with images are refused", name_,
                  vision_tensors);
    stack_experts(experts);
    if (is_quantized && quantized.empty())
        fail("{}: config.json's quantization_config says {}, but no tensor is quantized (no {}); the checkpoint and "
             "its config.json disagree", name_, cfg.quant.method, fp8 ? "F8_E4M3 .weight" : ".qweight");
    std::vector<std::pair<quantized_linear, std::string>> layers; // (parts, shard) in name order
    for (const auto &[prefix, q] : quantized) {
        if (!gguf_tensor_name(a, prefix + ".weight")) {
            unmapped.push_back(prefix + (fp8 ? ".weight" : ".qweight"));
            continue;
        }
        if (prefix == "lm_head" && cfg.tie_word_embeddings)
            fail("{}: lm_head is quantized but tie_word_embeddings is true", name_);
        if (fp8 && cfg.quant.ignores(prefix))
            fail("{}: '{}' is stored as FP8 but quantization_config's ignore list leaves it unquantized; the "
                 "checkpoint and its config.json disagree", name_, prefix);
        if (prefix == "lm_head" && !fp8 && !cfg.quant.quantized_lm_head)
            fail("{}: lm_head is quantized but quantization_config.lm_head is false; the checkpoint and its "
                 "config.json disagree", name_);
        layers.emplace_back(q.first, q.second.empty() ? name_ : q.second);
    }
    std::vector<repacked_weight> packed = repack_quantized_linears(cfg.quant, layers);
    std::set<std::string> block_types; // "Q4_G128", for the start-up line
    // A mixture's quantized experts: each repacked alone, then stacked like unquantized ones (by GGUF name, in
    // expert order).
    std::map<std::string, std::vector<repacked_weight *>> expert_stacks;
    for (size_t i = 0; i < layers.size(); ++i) {
        const std::string hf_weight = layers[i].first.prefix + ".weight";
        if (const auto e = hf_expert_index(a, hf_weight)) {
            auto &members = expert_stacks[*gguf_tensor_name(a, hf_weight)];
            if (*e >= cfg.n_expert)
                fail("{}: '{}' is expert {}, but config.json's {} is {}", name_, layers[i].first.prefix, *e,
                     a.expert_count_key, cfg.n_expert);
            members.resize(static_cast<size_t>(cfg.n_expert), nullptr);
            members[static_cast<size_t>(*e)] = &packed[i];
            continue;
        }
        const gguf::type_traits *tr = gguf::ggml_type_traits(add_repacked(cfg, layers[i].first.prefix, std::move(packed[i])));
        block_types.insert(tr != nullptr ? tr->name : "repacked");
    }
    for (const auto &[gname, members] : expert_stacks) {
        const gguf::type_traits *tr = gguf::ggml_type_traits(add_repacked_experts(gname, members));
        block_types.insert(tr != nullptr ? tr->name : "repacked");
    }
    quant_method_ = cfg.quant.method;
    if (!repacked_.empty()) {
        uint64_t bytes = 0;
        for (const auto &r : repacked_) bytes += r.size();
        const std::string scheme = fp8 ? fmt::format("e4m3, {} scales", cfg.quant.fp8_scales)
                                       : fmt::format("{} bits, group_size {}", cfg.quant.bits, cfg.quant.group_size);
        log::info("model", "{}: {} {} layers ({}) repacked once into {} blocks ({:.1f} MiB in all); they stay "
                           "quantized in memory and on every tier", name_, repacked_.size(), cfg.quant.method, scheme,
                  fmt::join(block_types, "/"), static_cast<double>(bytes) / 1048576.0);
        if (fp8)
            log::info("model", "{}: FP8 weights run weight-only: the activations stay f32 (as vLLM's Marlin FP8 "
                               "path){}", name_, cfg.quant.static_input_scale ? "; the input_scale tensors are checked, "
                                                                               "not applied" : "");
    }
    if (!unmapped.empty())
        fail("{}: {} tensor(s) have no meaning Strata knows for {}: {}; a checkpoint of another architecture or "
             "with parts Strata does not implement", name_, unmapped.size(), a.hf_name,
             fmt::join(unmapped.begin(), unmapped.begin() + std::min<size_t>(unmapped.size(), 8), ", "));
    if (!cfg.tie_word_embeddings && !index_.count("output.weight"))
        fail("{}: tie_word_embeddings is false but there is no lm_head.weight; the checkpoint is incomplete", name_);
    add_computed_tensors();
    // Biases and Q/K norms exactly where config.json says (attention_bias, mlp_bias, the architecture): transformers
    // would drop a bias its config does not declare, and a declared one that is missing leaves the model incomplete.
    for (const hf_name_pair &row : *a.names) {
        if (row.presence == hf_presence::always || row.presence == hf_presence::untied) continue;
        const bool expected = expected_in_checkpoint(a, cfg, row.presence);
        for (int64_t l = 0; l < cfg.n_layer; ++l) {
            const std::string hf = hf_name_in_layer(row, l);
            const bool found = index_.count(*gguf_tensor_name(a, hf)) > 0;
            if (found && !expected)
                fail("{}: the checkpoint holds '{}' but config.json does not declare it ({}); transformers would "
                     "ignore it and Strata will not guess: fix config.json or remove the tensor",
                     name_, hf, row.presence == hf_presence::mlp_bias ? "mlp_bias" : "attention_bias");
            if (!found && expected)
                fail("{}: config.json declares '{}' (attention_bias / mlp_bias, or the architecture's own), but the "
                     "checkpoint lacks it; the download is incomplete", name_, hf);
        }
    }
}

uint32_t hf_checkpoint::add_repacked(const hf_config &cfg, const std::string &prefix, repacked_weight r) {
    const std::string gname = *gguf_tensor_name(*cfg.architecture, prefix + ".weight");
    gguf::tensor_info t;
    t.name = gname;
    t.n_dims = 2;
    t.ne[0] = r.cols;
    t.ne[1] = r.rows;
    t.type = r.type;
    t.n_bytes = r.bytes.size();
    t.input_order = r.input_order;
    repacked_.push_back(std::move(r.bytes));
    t.data = repacked_.back().data();
    if (!index_.emplace(t.name, tensors_.size()).second)
        fail("{}: '{}' is quantized and also stored as '{}.weight'; remove one", name_, prefix, prefix);
    tensors_.push_back(std::move(t));
    return r.type;
}

void hf_checkpoint::stack_experts(const std::map<std::string, std::vector<const safetensors_tensor *>> &experts) {
    if (experts.empty()) return;
    struct stack {
        std::string name;
        std::vector<const safetensors_tensor *> members;
        uint8_t *to = nullptr;
    };
    std::vector<stack> stacks;
    uint64_t total = 0;
    for (const auto &[gname, members] : experts) {
        const safetensors_tensor *first = members[0];
        for (size_t e = 0; e < members.size(); ++e) {
            const safetensors_tensor *m = members[e];
            if (m == nullptr)
                fail("{}: expert {} of '{}' is missing (the checkpoint holds {} of its {} experts); the download is "
                     "incomplete", name_, e, gname, std::count_if(members.begin(), members.end(), [](auto *x) { return x != nullptr; }),
                     members.size());
            if (m->dtype != first->dtype || m->shape != first->shape || m->shape.size() != 2)
                fail("{}: '{}' is {} [{}] but '{}' is {} [{}]; the experts of a layer are matrices of one shape and dtype",
                     name_, m->name, m->dtype, fmt::join(m->shape, ", "), first->name, first->dtype,
                     fmt::join(first->shape, ", "));
        }
        const int32_t type = ggml_type_of_dtype(first->dtype);
        if (type < 0)
            fail("{}: tensor '{}' is {}; Strata reads F32, F16 and BF16 expert weights", name_, first->name, first->dtype);
        gguf::tensor_info t;
        t.name = gname;
        t.n_dims = 3;
        t.ne[0] = first->shape[1];
        t.ne[1] = first->shape[0];
        t.ne[2] = static_cast<int64_t>(members.size());
        t.type = static_cast<uint32_t>(type);
        t.n_bytes = first->n_bytes * members.size();
        stacked_.emplace_back(new uint8_t[t.n_bytes]);
        t.data = stacked_.back().get();
        stacks.push_back({gname, members, stacked_.back().get()});
        total += t.n_bytes;
        if (!index_.emplace(t.name, tensors_.size()).second) fail("{}: '{}' appears twice", name_, t.name);
        tensors_.push_back(std::move(t));
    }
    // One copy per expert matrix, on one thread per core, with a progress line over the bytes.
    progress bar(fmt::format("stacking {} expert tensors ({:.1f} MiB)", stacks.size(), static_cast<double>(total) / 1048576.0), total);
    std::mutex bar_mutex;
    uint64_t done = 0;
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i = next++; i < stacks.size(); i = next++) {
            uint8_t *to = stacks[i].to;
            for (const safetensors_tensor *m : stacks[i].members) {
                std::memcpy(to, m->data, m->n_bytes);
                to += m->n_bytes;
            }
            std::lock_guard lock(bar_mutex);
            done += static_cast<uint64_t>(to - stacks[i].to);
            bar.update(done);
        }
    };
    {
        std::vector<std::jthread> pool;
        for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(work);
        work();
    }
    bar.finish();
    log::info("model", "{}: {} expert tensors stacked from their per-expert matrices ({:.1f} MiB copied once into "
                       "memory, as GGUF stores them)", name_, stacks.size(), static_cast<double>(total) / 1048576.0);
}

uint32_t hf_checkpoint::add_repacked_experts(const std::string &gname, const std::vector<repacked_weight *> &members) {
    const repacked_weight *first = members[0];
    for (size_t e = 0; e < members.size(); ++e) {
        const repacked_weight *m = members[e];
        if (m == nullptr)
            fail("{}: expert {} of '{}' is missing (its quantized layer is not in the checkpoint); the download is "
                 "incomplete", name_, e, gname);
        if (m->type != first->type || m->rows != first->rows || m->cols != first->cols)
            fail("{}: the experts of '{}' are quantized in different shapes or block types (expert {} against "
                 "expert 0); a stacked expert tensor has one", name_, gname, e);
        if (m->input_order)
            fail("{}: expert {} of '{}' is act-order (desc_act: its g_idx permutes the inputs among the groups); "
                 "a stacked expert tensor has no input order, so act-order mixtures are not implemented", name_, e,
                 gname);
    }
    gguf::tensor_info t;
    t.name = gname;
    t.n_dims = 3;
    t.ne[0] = first->cols;
    t.ne[1] = first->rows;
    t.ne[2] = static_cast<int64_t>(members.size());
    t.type = first->type;
    std::vector<uint8_t> bytes;
    bytes.reserve(first->bytes.size() * members.size());
    for (const repacked_weight *m : members) bytes.insert(bytes.end(), m->bytes.begin(), m->bytes.end());
    t.n_bytes = bytes.size();
    repacked_.push_back(std::move(bytes));
    t.data = repacked_.back().data();
    if (!index_.emplace(t.name, tensors_.size()).second)
        fail("{}: '{}' has both quantized and unquantized experts; a stacked expert tensor has one type", name_, gname);
    tensors_.push_back(std::move(t));
    return first->type;
}

void hf_checkpoint::add_computed_tensors() {
    for (const computed_tensor &c : computed_) {
        gguf::tensor_info t;
        t.name = c.name;
        t.n_dims = 1;
        t.ne[0] = static_cast<int64_t>(c.values.size());
        t.type = 0;
        t.data = reinterpret_cast<const uint8_t *>(c.values.data());
        t.n_bytes = c.values.size() * sizeof(float);
        if (!index_.emplace(t.name, tensors_.size()).second)
            fail("{}: '{}' is in the checkpoint and also computed from config.json; remove one", name_, t.name);
        tensors_.push_back(std::move(t));
    }
}

void hf_checkpoint::read_tokenizer() {
    hf_tokenizer tok = load_hf_tokenizer(fs::path(name_));
    vocab_ = std::move(tok.vocab);
    // An embedding with more rows than the tokenizer has tokens (Qwen2.5: 151936 rows, 151665 tokens) gets the
    // missing ids as unused "[PAD<id>]" tokens, as llama.cpp's converter writes them; fewer rows is an error.
    const std::string arch(meta_.get_string("general.architecture").value_or(""));
    const gguf::tensor_info *embd = find_tensor("token_embd.weight");
    const auto rows = meta_.get_uint(arch + ".vocab_size");
    const size_t n_rows = rows ? static_cast<size_t>(*rows) : embd ? static_cast<size_t>(embd->ne[1]) : 0;
    const size_t n_tokens = vocab_.tokens.size();
    if (n_rows > 0 && n_tokens > n_rows)
        fail("{}: tokenizer.json has {} tokens but the model has {} vocabulary rows (config.json vocab_size); the "
             "tokenizer belongs to another model", name_, n_tokens, n_rows);
    if (n_rows > n_tokens && trim_vocab_ && embd != nullptr) {
        // Gemma 3: the rows past the tokenizer are cut off, as llama.cpp's converter does (a view of the first rows).
        auto &e = tensors_[index_.at("token_embd.weight")];
        e.n_bytes = e.n_bytes / static_cast<uint64_t>(e.ne[1]) * n_tokens;
        e.ne[1] = static_cast<int64_t>(n_tokens);
        meta_.set_u32(arch + ".vocab_size", n_tokens, "tokenizer.json (rows past it cut off)");
        log::info("model", "{}: the embedding's {} rows beyond tokenizer.json's {} tokens are not used", name_,
                  n_rows - n_tokens, n_tokens);
    } else if (n_rows > n_tokens) {
        if (vocab_.types.empty()) vocab_.types.assign(n_tokens, token_type::normal);
        for (size_t i = n_tokens; i < n_rows; ++i) {
            vocab_.tokens.push_back(fmt::format("[PAD{}]", i));
            if (!vocab_.scores.empty()) vocab_.scores.push_back(0.0f);
            vocab_.types.push_back(token_type::unused);
            if (!vocab_.lstrip.empty()) vocab_.lstrip.push_back(0);
            if (!vocab_.rstrip.empty()) vocab_.rstrip.push_back(0);
        }
        log::info("model", "{}: {} vocabulary rows beyond tokenizer.json's {} tokens are unused [PAD] tokens", name_,
                  n_rows - n_tokens, n_tokens);
    }
    const fs::path jinja = fs::path(name_) / "chat_template.jinja";
    if (tok.chat_templates.empty() && fs::exists(jinja)) tok.chat_templates.emplace_back("default", read_text_file(jinja));
    for (auto &[tname, text] : tok.chat_templates)
        meta_.set_string(tname == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + tname,
                         std::move(text), "tokenizer_config.json chat_template");
}

const gguf::tensor_info *hf_checkpoint::find_tensor(std::string_view name) const {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

} // namespace strata
