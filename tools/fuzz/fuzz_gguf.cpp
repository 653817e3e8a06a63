// libFuzzer target for the GGUF reader: parse arbitrary bytes and touch every accessor. Only strata::error may
// escape the parser; anything else (a crash, a sanitizer report, another exception, a broken invariant) is a bug.
#include "common/error.hpp"
#include "gguf/gguf_file.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

volatile uint64_t sink; // keeps reads from being optimized away

// Runs one getter; a strata::error for a wrong-typed value is an expected outcome.
template <class F> void attempt(F &&f) {
    try {
        f();
    } catch (const strata::error &) {
    }
}

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void touch(const strata::gguf::file &f, const uint8_t *data, size_t size) {
    sink = f.version() + f.alignment() + f.name().size() + f.data_offset() + f.file_size();
    check(f.file_size() == size && f.data_offset() <= size);
    for (size_t i = 0; i < f.kv_count(); ++i) {
        const std::string_view key = f.kv_key(i);
        check(f.has(key) && f.type_of(key) == f.kv_type(i));
        sink = sink + f.kv_summary(i).size() + f.kv_summary(i, 0).size() + f.kv_summary(i, 7).size();
        attempt([&] { sink = sink + f.get_uint(key).value_or(0); });
        attempt([&] { sink = sink + static_cast<uint64_t>(f.get_int(key).value_or(0)); });
        attempt([&] { sink = sink + (f.get_float(key).value_or(0) > 0); });
        attempt([&] { sink = sink + f.get_bool(key).value_or(false); });
        attempt([&] {
            const auto s = f.get_string(key);
            if (s) check(s->data()[s->size()] == '\0');
        });
        attempt([&] {
            const auto v = f.get_string_array(key);
            if (v)
                for (std::string_view s : *v) check(s.data()[s.size()] == '\0');
        });
        attempt([&] { sink = sink + f.get_float_array(key).value_or(std::vector<float>{}).size(); });
        attempt([&] { sink = sink + f.get_int_array(key).value_or(std::vector<int64_t>{}).size(); });
    }
    for (const strata::gguf::tensor_info &t : f.tensors()) {
        check(f.find_tensor(t.name) == &t);
        check(t.n_dims <= 4 && t.n_elements() >= 0 && strata::gguf::ggml_type_traits(t.type) != nullptr);
        check(t.offset % f.alignment() == 0);
        check(t.data >= data + f.data_offset() && t.n_bytes <= size && t.data + t.n_bytes <= data + size);
        if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
    }
    check(f.find_tensor("") == nullptr);
    sink = sink + f.has("general.alignment") + f.get_uint("general.alignment").value_or(32);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        strata::gguf::file parsed = strata::gguf::file::parse(data, size, "fuzz.gguf");
        strata::gguf::file moved = std::move(parsed); // views must survive a move
        touch(moved, data, size);
    } catch (const strata::error &) {
    }
    return 0;
}
