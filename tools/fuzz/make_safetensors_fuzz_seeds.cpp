// Seeds for fuzz_safetensors: a small valid .safetensors file (mode 0), config.json files of each mapped family
// (mode 1, FP8 quantization_configs among them), a shard index (mode 2), GPTQ layers (mode 3: a settings byte, then a
// .safetensors file; groups in order and act-order) and an FP8 layer (mode 4), each prefixed by its mode byte.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

void write(const std::string &dir, const std::string &name, char mode, const std::string &body) {
    std::ofstream o(dir + "/" + name, std::ios::binary);
    o.put(mode);
    o << body;
}

std::string safetensors() {
    std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                         R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
    out += header;
    out.append(24, '\x01');
    return out;
}

// One 4-bit GPTQ layer of 64 inputs and 8 outputs in groups of 32: qweight [8, 8], qzeros [2, 1], scales [2, 8],
// g_idx [64] (in order, or with act_order input i in group (5 i mod 64) / 32).
std::string gptq_layer(bool act_order) {
    std::string header = R"({"l.qweight":{"dtype":"I32","shape":[8,8],"data_offsets":[0,256]},)"
                         R"("l.qzeros":{"dtype":"I32","shape":[2,1],"data_offsets":[256,264]},)"
                         R"("l.scales":{"dtype":"F16","shape":[2,8],"data_offsets":[264,296]},)"
                         R"("l.g_idx":{"dtype":"I32","shape":[64],"data_offsets":[296,552]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
    out += header;
    for (int i = 0; i < 256; ++i) out.push_back(static_cast<char>(i * 37));
    out.append("\x77\x77\x77\x77\x77\x77\x77\x77", 8);
    for (int i = 0; i < 16; ++i) out.append("\x00\x3c", 2); // f16 1.0
    for (int i = 0; i < 64; ++i) {
        const int32_t g = (act_order ? i * 5 % 64 : i) / 32;
        out.append(reinterpret_cast<const char *>(&g), 4);
    }
    return out;
}

// One FP8 layer of 64 inputs and 4 outputs: weight F8_E4M3 [4, 64], weight_scale F32 [4, 1] (channel), and an
// input_scale F32 [1].
std::string fp8_layer() {
    std::string header = R"({"l.weight_scale":{"dtype":"F32","shape":[4,1],"data_offsets":[0,16]},)"
                         R"("l.input_scale":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                         R"("l.weight":{"dtype":"F8_E4M3","shape":[4,64],"data_offsets":[20,276]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
    out += header;
    for (int i = 0; i < 5; ++i) out.append("\x00\x00\x80\x3e", 4); // f32 0.25
    for (int i = 0; i < 256; ++i) out.push_back(static_cast<char>(i * 37 % 0x7e));
    return out;
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <output-dir>\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    write(dir, "tiny.safetensors", 0, safetensors());
    write(dir, "llama3_config.json", 1,
          R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,"intermediate_size":172,)"
          R"("num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":4,"rms_norm_eps":1e-5,)"
          R"("rope_theta":500000.0,"max_position_embeddings":131072,"vocab_size":512,"tie_word_embeddings":true,)"
          R"("rope_scaling":{"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,)"
          R"("original_max_position_embeddings":8192,"rope_type":"llama3"},"torch_dtype":"bfloat16"})");
    write(dir, "qwen3_config.json", 1,
          R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,"intermediate_size":128,)"
          R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,)"
          R"("use_sliding_window":false,"sliding_window":null,"max_window_layers":28,)"
          R"("rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})");
    write(dir, "mistral_config.json", 1,
          R"({"architectures":["MistralForCausalLM"],"model_type":"mistral","hidden_size":64,"intermediate_size":128,)"
          R"("num_hidden_layers":2,"num_attention_heads":4,"sliding_window":4096,"rope_scaling":{"type":"linear","factor":2}})");
    write(dir, "index.json", 2,
          R"({"metadata":{"total_size":96},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
          R"("b":"model-00002-of-00002.safetensors"}})");
    write(dir, "gptq_layer.bin", 3, std::string(1, '\x40') + gptq_layer(false)); // gptq v1, 4 bits, group 32
    write(dir, "gptq_act_order.bin", 3, std::string(1, '\xc0') + gptq_layer(true)); // the same with desc_act
    write(dir, "fp8_channel_static.bin", 4, std::string(1, '\x05') + fp8_layer()); // compressed-tensors, channel, static
    write(dir, "compressed_tensors_config.json", 1,
          R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,"intermediate_size":128,)"
          R"("num_hidden_layers":2,"num_attention_heads":4,"vocab_size":512,"quantization_config":{)"
          R"("quant_method":"compressed-tensors","format":"float-quantized","quantization_status":"compressed",)"
          R"("ignore":["lm_head","re:.*gate$"],"kv_cache_scheme":null,"config_groups":{"group_0":{"targets":["Linear"],)"
          R"("weights":{"num_bits":8,"type":"float","symmetric":true,"strategy":"block","block_structure":[128,128],)"
          R"("dynamic":false},"input_activations":{"num_bits":8,"type":"float","strategy":"group","group_size":128,)"
          R"("dynamic":true},"output_activations":null}}}})");
    write(dir, "fp8_config.json", 1,
          R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,"intermediate_size":128,)"
          R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":512,)"
          R"("quantization_config":{"quant_method":"fp8","activation_scheme":"dynamic","fmt":"e4m3",)"
          R"("weight_block_size":[128,128],"modules_to_not_convert":["lm_head"]}})");
    return 0;
}
