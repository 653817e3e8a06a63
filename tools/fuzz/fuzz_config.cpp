// libFuzzer target for config files: the same bytes as a TOML document and as a vLLM-style YAML one, each resolved
// against the runtime's core schema, validated, and read through every typed getter and `settings`. Only
// strata::error may come out (a bad file is an error with file:line); anything else is a bug.
#include "app/core_schema.hpp"
#include "common/error.hpp"
#include "config/document.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

volatile size_t sink;

template <class F> void attempt(F &&f) {
    try {
        f();
    } catch (const strata::error &) {
    }
}

void read_everything(const strata::config::document &doc, const strata::config::schema &s) {
    attempt([&] { doc.validate(s); });
    for (const auto &setting : doc.settings(s)) sink = sink + setting.key.size() + setting.value.size();
    for (const auto &t : s.tables())
        for (const auto &k : t.keys) {
            attempt([&] {
                switch (k.type) {
                case STRATA_CONFIG_BOOL: sink = sink + doc.get_bool(t.name, k.name, s).value_or(false); break;
                case STRATA_CONFIG_INT: sink = sink + static_cast<size_t>(doc.get_int(t.name, k.name, s).value_or(0)); break;
                case STRATA_CONFIG_FLOAT: sink = sink + (doc.get_float(t.name, k.name, s).value_or(0) > 0); break;
                case STRATA_CONFIG_STRING: sink = sink + doc.get_string(t.name, k.name, s).value_or("").size(); break;
                case STRATA_CONFIG_BYTES: sink = sink + static_cast<size_t>(doc.get_bytes(t.name, k.name, s).value_or(0)); break;
                case STRATA_CONFIG_STRING_LIST: sink = sink + doc.get_string_list(t.name, k.name, s).size(); break;
                }
            });
        }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const strata::config::schema s = strata::app::core_schema();
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    attempt([&] {
        const auto doc = strata::config::document::from_string(text, "fuzz.toml");
        read_everything(doc, s);
    });
    attempt([&] {
        auto doc = strata::config::document::from_yaml_string(text, "fuzz.yaml");
        doc.resolve_yaml(s, false);
        attempt([&] { doc.resolve_yaml(s, true); });
        read_everything(doc, s);
    });
    return 0;
}
