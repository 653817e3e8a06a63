// gpu-decode-bench: a Llama-shaped forward pass issued straight through the cuda device plugin's ops (the same op
// sequence the llama model_arch plugin runs: embedding, per layer RMSNorm, Q/K/V matmuls, RoPE, paged KV store and
// attention, output matmul, residual, RMSNorm, SwiGLU FFN, residual; final norm, classifier, logits copied back).
// It measures what the device's kernels achieve on a model of a given shape without the engine: no tokenizer, no
// sampling, random weights (one random matrix per shape, uploaded once per layer so every layer reads its own
// memory). Prints `key value` lines for tools/gpu/check.sh.
//
//   gpu-decode-bench [--dim 2048 --layers 16 --heads 16 --kv-heads 16 --ff 5632 --vocab 32000]
//                    [--type q8_0|q4_0|f16|bf16|f32] [--context 512] [--tokens 64] [--device-index N]
//
// The prefill figure is the --context prompt tokens in one batch; decode is --tokens single-token steps after it,
// each ending with the logits copied to the host (which waits for the step's kernels).
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <boost/dll/runtime_symbol_info.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

struct options {
    int32_t dim = 2048, layers = 16, heads = 16, kv_heads = 16, ff = 5632, vocab = 32000;
    std::string type = "q8_0";
    int32_t context = 512, tokens = 64;
    int64_t device_index = 0;
};

[[noreturn]] void die(const std::string &what) {
    std::fprintf(stderr, "gpu-decode-bench: %s\n", what.c_str());
    std::exit(1);
}

void check(int32_t rc, const strata_status &st, const char *what) {
    if (rc != STRATA_OK) die(std::string(what) + ": " + st.message);
}

options parse(int argc, char **argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto text = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + a);
            return argv[++i];
        };
        auto num = [&]() -> int32_t {
            const std::string v = text();
            char *end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || n <= 0) die(a + " needs a positive integer, got " + v);
            return static_cast<int32_t>(n);
        };
        if (a == "--dim") o.dim = num();
        else if (a == "--layers") o.layers = num();
        else if (a == "--heads") o.heads = num();
        else if (a == "--kv-heads") o.kv_heads = num();
        else if (a == "--ff") o.ff = num();
        else if (a == "--vocab") o.vocab = num();
        else if (a == "--type") o.type = text();
        else if (a == "--context") o.context = num();
        else if (a == "--tokens") o.tokens = num();
        else if (a == "--device-index") o.device_index = std::strtol(text().c_str(), nullptr, 10);
        else die("unknown option " + a + " (see the header of tools/gpu/decode_bench.cpp)");
    }
    if (o.dim % o.heads != 0 || o.heads % o.kv_heads != 0) die("--dim must divide by --heads, --heads by --kv-heads");
    return o;
}

// The [cuda] table with only device_index set.
struct cuda_table {
    int64_t device_index = 0;
    strata_config_view view() {
        strata_config_view v{};
        v.struct_size = sizeof v;
        v.ctx = this;
        v.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            if (std::strcmp(key, "device_index") != 0) return 0;
            *out = static_cast<cuda_table *>(ctx)->device_index;
            return 1;
        };
        return v;
    }
};

class bench {
  public:
    bench(const options &o, const strata_device_desc *dev_desc, strata_device *dev, const strata_quant_desc *q)
        : o_(o), d_(*dev_desc), dev_(dev), q_(*q) {}

    ~bench() {
        for (void *p : allocations_) d_.mem_free(dev_, p);
    }

    void *alloc(uint64_t bytes) {
        strata_status st{};
        void *p = d_.mem_alloc(dev_, bytes, &st);
        if (p == nullptr) die(std::string("mem_alloc: ") + st.message);
        allocations_.push_back(p);
        return p;
    }

    void upload(void *dst, const void *src, uint64_t bytes) {
        strata_status st{};
        check(d_.copy(dev_, dst, src, bytes, STRATA_COPY_H2D, &st), st, "copy H2D");
    }

    // A rows x cols matrix in the benchmark's format per call, filled from one random matrix per shape.
    strata_tensor_view matrix(int64_t rows, int64_t cols, const char *name) {
        const auto key = std::make_pair(rows, cols);
        auto it = host_matrices_.find(key);
        if (it == host_matrices_.end()) {
            std::mt19937 rng(static_cast<uint32_t>(rows * 31 + cols));
            std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
            std::vector<float> w(static_cast<size_t>(cols));
            const int64_t row_bytes = cols / q_.block_elems * q_.block_bytes;
            std::vector<unsigned char> bytes(static_cast<size_t>(rows * row_bytes));
            for (int64_t r = 0; r < rows; ++r) {
                for (auto &x : w) x = dist(rng);
                q_.quantize_row(w.data(), bytes.data() + r * row_bytes, cols);
            }
            it = host_matrices_.emplace(key, std::move(bytes)).first;
        }
        void *data = alloc(it->second.size());
        upload(data, it->second.data(), it->second.size());
        strata_tensor_view v{};
        v.struct_size = sizeof v;
        v.ggml_type = q_.ggml_type;
        v.quant = &q_;
        v.data = data;
        v.rows = rows;
        v.cols = cols;
        v.row_bytes = cols / q_.block_elems * q_.block_bytes;
        v.name = name;
        weight_bytes_ += static_cast<double>(it->second.size());
        return v;
    }

    float *ones(int64_t n) {
        const std::vector<float> host(static_cast<size_t>(n), 1.0f);
        auto *p = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n)));
        upload(p, host.data(), sizeof(float) * static_cast<uint64_t>(n));
        return p;
    }

    void build() {
        const int64_t head_dim = o_.dim / o_.heads, kv_dim = head_dim * o_.kv_heads;
        for (int32_t l = 0; l < o_.layers; ++l) {
            layer_weights lw;
            lw.wq = matrix(o_.dim, o_.dim, "attn_q");
            lw.wk = matrix(kv_dim, o_.dim, "attn_k");
            lw.wv = matrix(kv_dim, o_.dim, "attn_v");
            lw.wo = matrix(o_.dim, o_.dim, "attn_output");
            lw.w_gate = matrix(o_.ff, o_.dim, "ffn_gate");
            lw.w_up = matrix(o_.ff, o_.dim, "ffn_up");
            lw.w_down = matrix(o_.dim, o_.ff, "ffn_down");
            lw.attn_norm = ones(o_.dim);
            lw.ffn_norm = ones(o_.dim);
            layers_.push_back(lw);
        }
        const double per_token_before_tables = weight_bytes_;
        embedding_ = matrix(o_.vocab, o_.dim, "token_embd");
        output_ = matrix(o_.vocab, o_.dim, "output");
        // The embedding table is read one row per token, not whole.
        weight_bytes_ = per_token_before_tables + static_cast<double>(output_.rows * output_.row_bytes);
        out_norm_ = ones(o_.dim);

        const int32_t n = std::max(o_.context, 1);
        x_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * o_.dim));
        xn_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * o_.dim));
        q_buf_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * o_.dim));
        attn_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * o_.dim));
        k_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * kv_dim));
        v_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * kv_dim));
        gate_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * o_.ff));
        up_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(n) * o_.ff));
        logits_ = static_cast<float *>(alloc(sizeof(float) * static_cast<uint64_t>(o_.vocab)));

        // One sequence's paged KV: every layer's rows in each block (plugin_abi.h's layout).
        const int64_t slots = int64_t{o_.context} + o_.tokens + warmup_tokens;
        const int64_t n_blocks = (slots + block_size - 1) / block_size;
        const uint64_t block_bytes = uint64_t{2} * o_.layers * block_size * static_cast<uint64_t>(kv_dim) * 4;
        auto *pool = static_cast<unsigned char *>(alloc(block_bytes * static_cast<uint64_t>(n_blocks)));
        for (int64_t b = 0; b < n_blocks; ++b) block_base_.push_back(pool + static_cast<uint64_t>(b) * block_bytes);
        seq_block_start_ = {0, static_cast<int32_t>(n_blocks)};
        kv_bytes_per_layer_ = uint64_t{2} * block_size * static_cast<uint64_t>(kv_dim) * 4;
    }

    // One forward pass of n tokens at positions first..first+n-1; the logits of the last one are copied back.
    void forward(int32_t first, int32_t n) {
        const int32_t head_dim = o_.dim / o_.heads, kv_dim = head_dim * o_.kv_heads;
        strata_status st{};
        tokens_.resize(static_cast<size_t>(n));
        positions_.resize(static_cast<size_t>(n));
        token_seq_.assign(static_cast<size_t>(n), 0);
        for (int32_t t = 0; t < n; ++t) {
            tokens_[static_cast<size_t>(t)] = (first + t) * 7919 % o_.vocab;
            positions_[static_cast<size_t>(t)] = first + t;
        }
        strata_paged_kv kv{};
        kv.struct_size = sizeof kv;
        kv.block_size = block_size;
        kv.kv_dim = kv_dim;
        kv.n_seqs = 1;
        kv.seq_block_start = seq_block_start_.data();
        kv.block_base = block_base_.data();
        const int64_t rows = int64_t{n} * o_.dim;
        check(d_.embedding(dev_, &embedding_, tokens_.data(), n, x_, &st), st, "embedding");
        for (int32_t l = 0; l < o_.layers; ++l) {
            const layer_weights &w = layers_[static_cast<size_t>(l)];
            kv.layer_offset_bytes = static_cast<uint64_t>(l) * kv_bytes_per_layer_;
            check(d_.rms_norm(dev_, x_, w.attn_norm, n, o_.dim, 1e-5f, xn_, &st), st, "rms_norm");
            check(d_.matmul(dev_, &w.wq, xn_, n, q_buf_, &st), st, "matmul q");
            check(d_.matmul(dev_, &w.wk, xn_, n, k_, &st), st, "matmul k");
            check(d_.matmul(dev_, &w.wv, xn_, n, v_, &st), st, "matmul v");
            check(d_.rope(dev_, q_buf_, n, o_.heads, head_dim, head_dim, positions_.data(), 10000.0f,
                          STRATA_ROPE_PAIRS, &st),
                  st, "rope q");
            check(d_.rope(dev_, k_, n, o_.kv_heads, head_dim, head_dim, positions_.data(), 10000.0f,
                          STRATA_ROPE_PAIRS, &st),
                  st, "rope k");
            strata_kv_store_args store{};
            store.struct_size = sizeof store;
            store.n_tokens = n;
            store.token_seq = token_seq_.data();
            store.positions = positions_.data();
            store.k = k_;
            store.v = v_;
            store.kv = &kv;
            check(d_.kv_store(dev_, &store, &st), st, "kv_store");
            strata_paged_attention_args attn{};
            attn.struct_size = sizeof attn;
            attn.n_tokens = n;
            attn.n_heads = o_.heads;
            attn.n_kv_heads = o_.kv_heads;
            attn.head_dim = head_dim;
            attn.token_seq = token_seq_.data();
            attn.positions = positions_.data();
            attn.q = q_buf_;
            attn.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
            attn.out = attn_;
            attn.kv = &kv;
            check(d_.paged_attention(dev_, &attn, &st), st, "paged_attention");
            check(d_.matmul(dev_, &w.wo, attn_, n, xn_, &st), st, "matmul o");
            check(d_.add(dev_, x_, xn_, rows, x_, &st), st, "add");
            check(d_.rms_norm(dev_, x_, w.ffn_norm, n, o_.dim, 1e-5f, xn_, &st), st, "rms_norm");
            check(d_.matmul(dev_, &w.w_gate, xn_, n, gate_, &st), st, "matmul gate");
            check(d_.matmul(dev_, &w.w_up, xn_, n, up_, &st), st, "matmul up");
            check(d_.swiglu(dev_, gate_, up_, int64_t{n} * o_.ff, gate_, &st), st, "swiglu");
            check(d_.matmul(dev_, &w.w_down, gate_, n, xn_, &st), st, "matmul down");
            check(d_.add(dev_, x_, xn_, rows, x_, &st), st, "add");
        }
        const float *last = x_ + static_cast<int64_t>(n - 1) * o_.dim;
        check(d_.rms_norm(dev_, last, out_norm_, 1, o_.dim, 1e-5f, xn_, &st), st, "rms_norm");
        check(d_.matmul(dev_, &output_, xn_, 1, logits_, &st), st, "matmul output");
        host_logits_.resize(static_cast<size_t>(o_.vocab));
        check(d_.copy(dev_, host_logits_.data(), logits_, sizeof(float) * static_cast<uint64_t>(o_.vocab),
                      STRATA_COPY_D2H, &st),
              st, "copy logits D2H");
    }

    bool logits_finite() const {
        for (float v : host_logits_)
            if (!std::isfinite(v)) return false;
        return !host_logits_.empty();
    }
    double weight_bytes_per_token() const { return weight_bytes_; }

    static constexpr int32_t warmup_tokens = 2;

  private:
    static constexpr int32_t block_size = 16;
    struct layer_weights {
        strata_tensor_view wq, wk, wv, wo, w_gate, w_up, w_down;
        float *attn_norm, *ffn_norm;
    };

    const options &o_;
    const strata_device_desc &d_;
    strata_device *dev_;
    const strata_quant_desc &q_;
    std::vector<void *> allocations_;
    std::map<std::pair<int64_t, int64_t>, std::vector<unsigned char>> host_matrices_;
    std::vector<layer_weights> layers_;
    strata_tensor_view embedding_{}, output_{};
    float *out_norm_ = nullptr;
    float *x_ = nullptr, *xn_ = nullptr, *q_buf_ = nullptr, *attn_ = nullptr, *k_ = nullptr, *v_ = nullptr;
    float *gate_ = nullptr, *up_ = nullptr, *logits_ = nullptr;
    std::vector<void *> block_base_;
    std::vector<int32_t> seq_block_start_;
    uint64_t kv_bytes_per_layer_ = 0;
    std::vector<int32_t> tokens_, positions_, token_seq_;
    std::vector<float> host_logits_;
    double weight_bytes_ = 0;
};

} // namespace

int main(int argc, char **argv) try {
    const options o = parse(argc, argv);
    const std::map<std::string, uint32_t> types = {{"f32", 0}, {"f16", 1}, {"q4_0", 2}, {"q8_0", 8}, {"bf16", 30}};
    const auto type = types.find(o.type);
    if (type == types.end()) die("--type must be f32, f16, bf16, q8_0 or q4_0");

    strata_host_services host{};
    host.struct_size = sizeof host;
    host.host_abi_major = STRATA_ABI_MAJOR;
    host.host_abi_minor = STRATA_ABI_MINOR;
    strata::plugins::registry registry(&host);
    const std::filesystem::path plugins = boost::dll::program_location().parent_path().parent_path().string() + "/plugins";
    registry.load_file(plugins / "libstrata_cuda.so");
    registry.load_file(plugins / "libstrata_quant_ggml.so");
    const strata_device_desc *cuda = registry.find_device("cuda").desc;
    const strata_quant_desc *quant = registry.find_quant_by_type(type->second).desc;
    if (cuda == nullptr || quant == nullptr) die("the cuda or ggml quant plugin is missing from " + plugins.string());

    cuda_table table{o.device_index};
    const strata_config_view view = table.view();
    strata_device_create_args args{};
    args.struct_size = sizeof args;
    args.host = &host;
    args.config = &view;
    strata_status st{};
    strata_device *dev = cuda->create(&args, &st);
    if (dev == nullptr) die(std::string("cuda device: ") + st.message);
    {
        bench b(o, cuda, dev, quant);
        b.build();
        std::printf("shape %d layers, dim %d, ff %d, heads %d/%d, vocab %d, %s\n", o.layers, o.dim, o.ff, o.heads,
                    o.kv_heads, o.vocab, o.type.c_str());
        const double params = static_cast<double>(o.layers) * (2.0 * o.dim * o.dim + 2.0 * o.dim / o.heads * o.kv_heads * o.dim +
                                                               3.0 * o.dim * o.ff) +
                              2.0 * o.vocab * o.dim;
        std::printf("parameters_millions %.0f\n", params / 1e6);
        std::printf("weight_mib_per_token %.1f\n", b.weight_bytes_per_token() / 1048576.0);

        using clock = std::chrono::steady_clock;
        b.forward(0, o.context); // warm-up: first launches, lazy module loading
        auto t0 = clock::now();
        b.forward(0, o.context);
        const double prefill_s = std::chrono::duration<double>(clock::now() - t0).count();
        std::printf("prefill_tokens %d\n", o.context);
        std::printf("prefill_tokens_per_s %.1f\n", o.context / prefill_s);

        for (int32_t i = 0; i < bench::warmup_tokens; ++i) b.forward(o.context + i, 1); // single-token kernels
        t0 = clock::now();
        for (int32_t i = 0; i < o.tokens; ++i) b.forward(o.context + i, 1);
        const double decode_s = std::chrono::duration<double>(clock::now() - t0).count();
        std::printf("decode_tokens %d\n", o.tokens);
        std::printf("decode_tokens_per_s %.2f\n", o.tokens / decode_s);
        std::printf("decode_ms_per_token %.3f\n", 1e3 * decode_s / o.tokens);
        std::printf("decode_weight_gbps %.1f\n", b.weight_bytes_per_token() * o.tokens / decode_s / 1e9);
        std::printf("logits_finite %s\n", b.logits_finite() ? "yes" : "no");
    }
    cuda->destroy(dev);
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "gpu-decode-bench: error: %s\n", e.what());
    return 1;
}
