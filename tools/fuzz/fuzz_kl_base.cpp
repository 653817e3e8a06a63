// libFuzzer target for the KL-divergence base file reader (core/eval/kl_base_file.*, llama-perplexity's format): the
// input is the whole file. Opening it and reading every chunk must either succeed or throw strata::error with a
// message; a crash, a sanitizer report, another exception or an allocation beyond the file's own size is a bug.
#include "common/error.hpp"
#include "eval/kl_base_file.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string g_path;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void remove_file() { std::remove(g_path.c_str()); }

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const char *tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/strata_fuzz_kl_XXXXXX";
    const int fd = ::mkstemp(templ.data());
    check(fd >= 0);
    ::close(fd);
    g_path = templ;
    std::atexit(remove_file);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::FILE *f = std::fopen(g_path.c_str(), "wb");
    check(f != nullptr);
    check(size == 0 || std::fwrite(data, 1, size, f) == size);
    check(std::fclose(f) == 0);
    try {
        strata::eval::kl_base_reader reader(g_path);
        const auto &h = reader.header();
        check(h.n_ctx > 0 && h.n_vocab > 0 && h.n_chunk > 0);
        check(h.tokens.size() == static_cast<size_t>(h.n_chunk) * static_cast<size_t>(h.n_ctx));
        // The header was checked against the file's size, so every chunk's rows are within what was read.
        std::vector<float> log_probs;
        for (int32_t c = 0; c < h.n_chunk; ++c) {
            reader.read_chunk(log_probs);
            check(log_probs.size() == static_cast<size_t>(h.n_scored()) * static_cast<size_t>(h.n_vocab));
        }
    } catch (const strata::error &e) {
        check(e.what()[0] != '\0');
    }
    return 0;
}
