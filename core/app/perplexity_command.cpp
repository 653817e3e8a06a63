#include "app/perplexity_command.hpp"

#include "app/engine_config.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/engine.hpp"
#include "eval/kl_base_file.hpp"
#include "eval/perplexity_math.hpp"
#include "model_file/open_model_file.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

namespace strata::app {

namespace fs = std::filesystem;

const char *const k_perplexity_usage = R"(usage: runtime perplexity -m MODEL.gguf -f TEXT [options]
llama.cpp's llama-perplexity on Strata's engine. The text is tokenized with BOS and cut into chunks of --ctx tokens;
each chunk runs from an empty context with its first token replaced by BOS (when the vocabulary adds one) and the
second half of its positions is scored. Prints the running perplexity after each chunk ([1]12.3456,[2]...,) and
"Final estimate: PPL = X +/- Y" on stdout.
  -m, --model FILE               the model to evaluate
  -f, --file FILE                the text, byte for byte (one trailing newline is dropped, as llama.cpp does)
  -c, --ctx, --ctx-size N        tokens per chunk (default 512, or the model's trained context when that is
                                 smaller); the text must hold at least 2 * N tokens
      --chunks N                 evaluate at most N chunks (default -1: all)
KL divergence (llama-perplexity --kl-divergence):
      --kl-divergence-model F    a base model (say the F16 file) run on the same chunks: prints the PPL of both,
                                 the mean KL divergence, top-1 agreement ("Same top p") and llama.cpp's other
                                 statistics. Both models are loaded at once.
      --kl-divergence-base FILE  llama-perplexity's base file: written from MODEL when FILE does not exist (or with
                                 --save-kl-base), else read and MODEL compared against it (-f is then optional:
                                 the file holds the tokens). Files move between Strata and llama-perplexity.
      --kl-divergence            FILE must exist and is read (llama.cpp's spelling)
      --save-kl-base             write FILE even when it exists (it is replaced)
      --save-all-logits FILE     llama.cpp's spelling of --kl-divergence-base FILE --save-kl-base
Every other option configures the engine as for `runtime` (--threads, --device, --config, --set, ...; see
runtime --help); max_model_len is set to the chunk size.
)";

namespace {

int32_t parse_int(const std::string &flag, const std::string &v) {
    int32_t out = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || end != v.data() + v.size() || v.empty())
        fail("runtime perplexity: {} takes an integer, not '{}'", flag, v);
    return out;
}

std::string read_text(const std::string &path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) fail("runtime perplexity: the text file {} does not exist (-f/--file)", path);
    if (fs::is_directory(path, ec)) fail("runtime perplexity: {} is a folder; -f/--file takes a text file", path);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("runtime perplexity: cannot open the text file {}", path);
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) fail("runtime perplexity: reading the text file {} failed", path);
    std::string text = s.str();
    if (!text.empty() && text.back() == '\n') text.pop_back(); // llama.cpp's -f
    return text;
}

// The model's trained context (`<architecture>.context_length`), 0 when the file does not say.
int32_t trained_context(const std::string &model_path) {
    const std::unique_ptr<model_file> f = open_model_file(model_path);
    const auto arch = f->get_string("general.architecture");
    if (!arch) return 0;
    const auto n = f->get_uint(std::string(*arch) + ".context_length");
    return n && *n <= static_cast<uint64_t>(INT32_MAX) ? static_cast<int32_t>(*n) : 0;
}

// BOS for a chunk's first position, or -1 when the vocabulary adds none; refuses a vocabulary that adds EOS to a text
// (llama-perplexity asserts it does not: the scored text would end in an EOS it never had).
int32_t chunk_bos(const engine::engine &e, const std::string &model) {
    const tokenizer &tok = e.tokenizer();
    if (tok.vocab().data().add_eos)
        fail("{}: its vocabulary adds EOS to every text (tokenizer.ggml.add_eos_token), which perplexity as "
             "llama-perplexity computes it does not allow",
             model);
    if (!tok.add_bos()) return -1;
    if (tok.bos() < 0 || tok.bos() >= tok.n_vocab())
        fail("{}: its vocabulary adds BOS but has no valid BOS token ({})", model, tok.bos());
    return tok.bos();
}

std::string duration_text(double s) {
    if (s >= 3600) {
        const int hours = static_cast<int>(s / 3600);
        return fmt::format("{} h {:.0f} min", hours, (s - 3600.0 * hours) / 60);
    }
    if (s >= 60) return fmt::format("{:.1f} min", s / 60);
    return fmt::format("{:.1f} s", s);
}

// Progress on stderr: the time of the first chunk with an estimate of the whole (as llama-perplexity prints it), then
// a line at most every 10 s.
class chunk_progress {
  public:
    explicit chunk_progress(int32_t n_chunk) : n_chunk_(n_chunk), start_(clock::now()), last_(start_) {}
    void chunk_done(int32_t done) {
        const auto now = clock::now();
        const double elapsed = std::chrono::duration<double>(now - start_).count();
        const double eta = elapsed / done * (n_chunk_ - done);
        if (done == 1) {
            log::info("perplexity", "{:.2f} seconds per chunk - ETA {}", elapsed, duration_text(eta));
            last_ = now;
        } else if (done < n_chunk_ && std::chrono::duration<double>(now - last_).count() >= 10.0) {
            log::info("perplexity", "chunk {}/{} ({:.0f}%), {} so far, ETA {}", done, n_chunk_, 100.0 * done / n_chunk_,
                      duration_text(elapsed), duration_text(eta));
            last_ = now;
        }
    }

  private:
    using clock = std::chrono::steady_clock;
    int32_t n_chunk_;
    clock::time_point start_, last_;
};

enum class mode { plain, save_base, read_base, compare_model };

// The text's tokens with BOS, as llama-perplexity makes them (special-token texts stay text).
std::vector<int32_t> tokenize(const engine::engine &e, const std::string &text) {
    return e.tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/false);
}

void say(const std::string &s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

} // namespace

perplexity_args parse_perplexity_args(int argc, char **argv, std::vector<char *> &rest) {
    perplexity_args a;
    rest.clear();
    rest.push_back(argv[0]);
    bool kl_base_given = false, save_all_logits = false;
    for (int i = 2; i < argc; ++i) {
        const std::string w = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("runtime perplexity: {} needs a value (see runtime perplexity --help)", w);
            return argv[++i];
        };
        if (w == "-f" || w == "--file") a.text_file = value();
        else if (w == "-c" || w == "--ctx" || w == "--ctx-size") a.ctx = parse_int(w, value()), a.ctx_given = true;
        else if (w == "--chunks") a.chunks = parse_int(w, value());
        else if (w == "--kl-divergence-base") a.kl_base = value(), kl_base_given = true;
        else if (w == "--save-all-logits") a.kl_base = value(), a.kl_save = true, save_all_logits = true;
        else if (w == "--kl-divergence") a.kl_read = true;
        else if (w == "--save-kl-base") a.kl_save = true;
        else if (w == "--kl-divergence-model") a.kl_model = value();
        else if (w == "-h" || w == "--help") a.help = true;
        else if (w == "--ppl-stride" || w == "--ppl-output-type" || w == "--hellaswag" || w == "--winogrande" ||
                 w == "--multiple-choice" || w == "--hellaswag-tasks" || w == "--winogrande-tasks")
            fail("runtime perplexity: llama-perplexity's {} is not implemented here; the perplexity of chunks (the "
                 "default) and --kl-divergence are",
                 w);
        else rest.push_back(argv[i]);
    }
    if (a.help) return a;
    if (kl_base_given && save_all_logits)
        fail("runtime perplexity: --save-all-logits and --kl-divergence-base both name the base file; give one");
    if (a.ctx_given && a.ctx < eval::k_min_ctx)
        fail("runtime perplexity: --ctx {}: a chunk needs at least {} tokens (its first half is context, the rest is "
             "scored)",
             a.ctx, eval::k_min_ctx);
    if (a.chunks == 0 || a.chunks < -1)
        fail("runtime perplexity: --chunks {}: give a positive number of chunks, or -1 for all of them", a.chunks);
    if (a.kl_read && a.kl_save)
        fail("runtime perplexity: --kl-divergence reads the base file and --save-kl-base writes it; give one");
    if ((a.kl_read || a.kl_save) && a.kl_base.empty())
        fail("runtime perplexity: {} needs the base file: --kl-divergence-base FILE",
             a.kl_read ? "--kl-divergence" : "--save-kl-base");
    if (!a.kl_model.empty() && !a.kl_base.empty())
        fail("runtime perplexity: --kl-divergence-model compares with a base model run beside MODEL, "
             "--kl-divergence-base with a base file; give one of them");
    if (a.kl_base.empty() && a.kl_model.empty() && a.text_file.empty())
        fail("runtime perplexity: give the text: runtime perplexity -m MODEL.gguf -f TEXT (see runtime perplexity "
             "--help)");
    return a;
}

int run_perplexity(const perplexity_args &a, const plugins::registry &registry, const strata_host_services *host,
                   const config::document &doc, const config::schema &s, const std::string &model_argument,
                   const topology::machine &machine) {
    std::vector<std::unique_ptr<config::plugin_config_view>> views;
    engine::engine_options opts = engine_options_from(registry, doc, s, model_argument, views);
    opts.machine = &machine;
    if (opts.data_parallel_size > 1)
        fail("runtime perplexity runs one engine; --data-parallel-size {} applies to serving (drop it here)",
             opts.data_parallel_size);
    if (opts.model_path.empty())
        fail("runtime perplexity: give the model to evaluate: runtime perplexity -m MODEL.gguf -f TEXT");

    std::error_code ec;
    mode m = mode::plain;
    if (!a.kl_model.empty()) m = mode::compare_model;
    else if (!a.kl_base.empty()) {
        const bool exists = fs::exists(a.kl_base, ec);
        if (a.kl_read && !exists)
            fail("runtime perplexity: the KL-divergence base file {} does not exist; write it first: runtime "
                 "perplexity -m BASE.gguf -f TEXT --kl-divergence-base {}",
                 a.kl_base, a.kl_base);
        m = a.kl_save || !exists ? mode::save_base : mode::read_base;
        if (exists && fs::is_directory(a.kl_base, ec))
            fail("runtime perplexity: the KL-divergence base file {} is a folder; give a file name", a.kl_base);
    }
    if (m != mode::read_base && a.text_file.empty())
        fail("runtime perplexity: {} needs the text: -f TEXT",
             m == mode::save_base ? "writing a base file" : "perplexity");
    if (m == mode::compare_model && !fs::exists(a.kl_model, ec))
        fail("runtime perplexity: the base model {} does not exist (--kl-divergence-model)", a.kl_model);
    if (m == mode::save_base) {
        const fs::path dir = fs::path(a.kl_base).parent_path();
        if (!dir.empty() && !fs::is_directory(dir, ec))
            fail("runtime perplexity: cannot write the KL-divergence base file {}: the folder {} does not exist",
                 a.kl_base, dir.string());
    }
    // The text is read before any model loads, so a wrong path fails at once.
    const std::string text = a.text_file.empty() ? std::string() : read_text(a.text_file);

    // The chunk size: a base file's own; else --ctx; else 512, or the trained context when that is smaller.
    std::unique_ptr<eval::kl_base_reader> reader;
    int32_t n_ctx = a.ctx;
    if (m == mode::read_base) {
        reader = std::make_unique<eval::kl_base_reader>(a.kl_base);
        const int32_t file_ctx = reader->header().n_ctx;
        if (a.ctx_given && a.ctx != file_ctx)
            fail("runtime perplexity: {} was computed with chunks of {} tokens; drop --ctx {} or pass --ctx {}",
                 a.kl_base, file_ctx, a.ctx, file_ctx);
        n_ctx = file_ctx;
    } else if (!a.ctx_given) {
        const int32_t trained = trained_context(m == mode::compare_model ? a.kl_model : opts.model_path);
        if (trained >= eval::k_min_ctx && trained < n_ctx) {
            log::info("perplexity",
                      "the model was trained on {} tokens of context: chunks of {} tokens (--ctx to choose)", trained,
                      trained);
            n_ctx = trained;
        }
    }
    // One private sequence of one chunk: no host KV pools, no prefix store, no prefix cache.
    opts.max_model_len = n_ctx;
    opts.kv.swap_space_gib = 0;
    opts.kv.nvme_space_gib = 0;
    opts.kv.prefix_store_dir.clear();
    opts.kv.enable_prefix_caching = false;

    std::unique_ptr<engine::engine> base;
    if (m == mode::compare_model) {
        engine::engine_options bo = opts;
        bo.model_argument = a.kl_model;
        bo.model_path = fs::absolute(a.kl_model).lexically_normal().string();
        log::info("perplexity", "loading the base model {}", a.kl_model);
        base = std::make_unique<engine::engine>(registry, host, std::move(bo));
    }
    const std::string model_path = opts.model_path;
    engine::engine q(registry, host, std::move(opts));
    const int32_t n_vocab = q.hparams().n_vocab;
    const int32_t bos_q = chunk_bos(q, model_path);
    const int32_t bos_base = base ? chunk_bos(*base, a.kl_model) : -1;
    if (base && base->hparams().n_vocab != n_vocab)
        fail("runtime perplexity: the base model {} has {} vocabulary entries and {} has {}; KL divergence compares "
             "two models over one vocabulary",
             a.kl_model, base->hparams().n_vocab, model_path, n_vocab);
    if (reader && reader->header().n_vocab != n_vocab)
        fail("runtime perplexity: {} holds log-probabilities over {} tokens but {} has a vocabulary of {}; compare "
             "models of one vocabulary",
             a.kl_base, reader->header().n_vocab, model_path, n_vocab);

    // The tokens and the chunks.
    std::vector<int32_t> tokens;
    eval::chunk_plan plan;
    if (reader) {
        tokens = reader->header().tokens;
        plan.n_ctx = n_ctx;
        plan.first = n_ctx / 2;
        plan.n_chunk = a.chunks < 0 ? reader->header().n_chunk : std::min(a.chunks, reader->header().n_chunk);
        if (!a.text_file.empty()) {
            const std::vector<int32_t> mine = tokenize(q, text);
            if (mine.size() < tokens.size() || !std::equal(tokens.begin(), tokens.end(), mine.begin()))
                log::warn("perplexity", "{} tokenizes differently from the tokens stored in {}; the stored tokens are "
                                        "evaluated (as llama-perplexity does)",
                          a.text_file, a.kl_base);
        }
    } else {
        log::info("perplexity", "tokenizing the input ..");
        tokens = tokenize(base ? *base : q, text);
        if (base && tokenize(q, text) != tokens)
            log::warn("perplexity", "{} and {} tokenize the text differently; both run on the base model's tokens",
                      a.kl_model, model_path);
        plan = eval::plan_chunks(tokens.size(), n_ctx, a.chunks);
    }
    log::info("perplexity", "{} tokens; {} chunks of {} tokens, the last {} positions of each scored",
              tokens.size(), plan.n_chunk, plan.n_ctx, plan.n_scored());

    std::unique_ptr<eval::kl_base_writer> writer;
    if (m == mode::save_base) {
        writer = std::make_unique<eval::kl_base_writer>(a.kl_base, plan.n_ctx, n_vocab, plan.n_chunk, tokens);
        log::info("perplexity", "writing the KL-divergence base to {}", a.kl_base);
    }

    // The last position predicts nothing inside its chunk: n_ctx - 1 tokens run, rows first .. n_ctx - 2 are scored.
    const int32_t n_eval = plan.n_ctx - 1;
    const size_t rows = static_cast<size_t>(plan.n_scored());
    const size_t row_floats = static_cast<size_t>(n_vocab);
    std::vector<float> q_rows(rows * row_floats), base_rows;
    std::vector<int32_t> chunk_q, chunk_base;
    eval::nll_accumulator nll;
    eval::kl_accumulator kl;
    const bool kl_mode = m == mode::read_base || m == mode::compare_model;
    chunk_progress progress(plan.n_chunk);
    for (int32_t k = 0; k < plan.n_chunk; ++k) {
        eval::chunk_tokens(tokens, plan, k, bos_q, chunk_q);
        q.forward_logits(chunk_q.data(), n_eval, plan.first, q_rows.data());
        if (m == mode::compare_model) {
            eval::chunk_tokens(tokens, plan, k, bos_base, chunk_base);
            base_rows.resize(rows * row_floats);
            base->forward_logits(chunk_base.data(), n_eval, plan.first, base_rows.data());
            for (size_t r = 0; r < rows; ++r)
                eval::log_softmax(base_rows.data() + r * row_floats, n_vocab, base_rows.data() + r * row_floats);
        } else if (m == mode::read_base) {
            reader->read_chunk(base_rows);
        }
        for (size_t r = 0; r < rows; ++r) {
            const float *row = q_rows.data() + r * row_floats;
            const int32_t next = chunk_q[static_cast<size_t>(plan.first) + r + 1];
            if (kl_mode) {
                kl.add(row, base_rows.data() + r * row_floats, n_vocab, next);
            } else {
                nll.add(eval::token_nll(row, n_vocab, next));
                if (writer) writer->write_row(row);
            }
        }
        if (kl_mode) {
            if (k == 0) say("\n" + eval::kl_accumulator::table_header() + "\n");
            say(kl.table_row(k + 1) + "\n");
        } else {
            say(eval::running_ppl_item(k + 1, nll));
        }
        progress.chunk_done(k + 1);
    }
    if (kl_mode) {
        say("\n" + kl.report());
    } else {
        say("\n" + eval::final_estimate_line(nll) + "\n");
    }
    if (writer) {
        writer->finish();
        log::info("perplexity", "wrote the KL-divergence base {} ({} chunks of {} tokens, vocabulary {})", a.kl_base,
                  plan.n_chunk, plan.n_ctx, n_vocab);
    }
    return 0;
}

} // namespace strata::app
