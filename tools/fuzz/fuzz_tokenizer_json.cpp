// libFuzzer target for Hugging Face tokenizer files: the input is a tokenizer.json, optionally followed by a NUL
// and a tokenizer_config.json. A file that loads must build a tokenizer that encodes and decodes a few texts
// (including special-token texts and invalid UTF-8) without anything but strata::error coming out; ids stay in
// range.
#include "common/error.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char *>(data), size);
    const size_t nul = bytes.find('\0');
    const std::string_view tokenizer_json = bytes.substr(0, nul);
    const std::string_view config_json = nul == std::string_view::npos ? std::string_view() : bytes.substr(nul + 1);
    try {
        const auto tok = strata::make_tokenizer(strata::parse_hf_tokenizer(tokenizer_json, config_json, "fuzz.json").vocab);
        for (const std::string_view text : {std::string_view("Hello world 123, it's \xE2\x82\xAC!"), std::string_view("<s>a</s>\n\n"),
                                            std::string_view("\xFF\xC3 \xE2\x96\x81x"), tokenizer_json.substr(0, 64)}) {
            for (const bool special : {false, true}) {
                const auto ids = tok->encode(text, true, special);
                for (const int32_t id : ids) check(id >= 0 && id < tok->n_vocab());
                (void)tok->decode(ids);
            }
        }
    } catch (const strata::error &) {
    }
    return 0;
}
