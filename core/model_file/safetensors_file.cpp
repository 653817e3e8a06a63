#include "model_file/safetensors_file.hpp"

#include "common/error.hpp"

#include "model_file/json_input.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

namespace strata {

namespace {

using json = nlohmann::json;

// Hugging Face's reader refuses headers above 100 MB; so does this one (a 70B model's header is under 1 MB).
constexpr uint64_t k_max_header = 100'000'000;

constexpr int k_max_json_depth = 8;

const char *k_fix = "the file is damaged or was not written by a safetensors writer; download or convert it again";

} // namespace

uint32_t safetensors_file::dtype_bytes(const std::string &d) {
    static const std::map<std::string, uint32_t, std::less<>> sizes{
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
    const auto it = sizes.find(d);
    return it == sizes.end() ? 0 : it->second;
}

safetensors_file safetensors_file::open(const std::string &path, const open_options &how) {
    mapped_file mapping = mapped_file::open(path, how, ".safetensors file");
    safetensors_file f = parse(mapping.data(), mapping.size(), path);
    f.mapping_ = std::move(mapping);
    return f;
}

safetensors_file safetensors_file::parse(const void *data, size_t size, std::string name) {
    safetensors_file f;
    f.name_ = std::move(name);
    f.size_ = size;
    const auto *bytes = static_cast<const uint8_t *>(data);
    if (size < 8 || bytes == nullptr)
        fail("{}: {} bytes is too short for a safetensors file (an 8-byte header length comes first); {}", f.name_,
             size, k_fix);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > k_max_header)
        fail("{}: the header length at byte 0 is {} bytes, above the format's limit of {}; {}", f.name_, n,
             k_max_header, k_fix);
    if (n > size - 8)
        fail("{}: the header length at byte 0 is {} bytes, but only {} bytes follow it; the file is truncated", f.name_,
             n, size - 8);
    if (n < 2 || bytes[8] != '{')
        fail("{}: the header at byte 8 does not start with '{{'; {}", f.name_, k_fix);
    const auto *header = reinterpret_cast<const char *>(bytes + 8);
    const uint64_t data_begin = 8 + n;
    const uint64_t data_size = size - data_begin;

    // Duplicate keys would let two readers see two different files; refuse them at every level. A header nests two
    // levels (three with __metadata__); deeper nesting is refused before anything recurses over it.
    std::vector<std::set<std::string>> seen;
    std::string duplicate;
    const json::parser_callback_t check = [&](int depth, json::parse_event_t ev, json &parsed) {
        if (depth > k_max_json_depth)
            fail("{}: the JSON header nests deeper than {} levels; {}", f.name_, k_max_json_depth, k_fix);
        if (ev == json::parse_event_t::object_start) seen.emplace_back();
        else if (ev == json::parse_event_t::object_end && !seen.empty()) seen.pop_back();
        else if (ev == json::parse_event_t::key && !seen.empty() && !seen.back().insert(parsed.get<std::string>()).second)
            duplicate = parsed.get<std::string>();
        return true;
    };
    json h;
    try {
        h = json::parse(header, header + n, check);
    } catch (const json::exception &e) {
        fail("{}: the JSON header (bytes 8..{}) does not parse: {}; {}", f.name_, data_begin, e.what(), k_fix);
    }
    if (!duplicate.empty()) fail("{}: the header names '{}' twice; {}", f.name_, duplicate, k_fix);
    if (!h.is_object()) fail("{}: the header is not a JSON object; {}", f.name_, k_fix);

    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string &key = it.key();
        const json &v = it.value();
        if (key == "__metadata__") {
            if (!v.is_object()) fail("{}: '__metadata__' is not an object of strings; {}", f.name_, k_fix);
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    fail("{}: '__metadata__' entry '{}' is not a string; {}", f.name_, m.key(), k_fix);
                f.metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        auto bad = [&](const std::string &what) { fail("{}: tensor '{}': {}; {}", f.name_, key, what, k_fix); };
        if (!v.is_object()) bad("its entry is not an object");
        for (auto field = v.begin(); field != v.end(); ++field)
            if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
                bad("unknown field '" + field.key() + "' (expected dtype, shape, data_offsets)");
        if (!v.contains("dtype") || !v["dtype"].is_string()) bad("'dtype' is missing or not a string");
        if (!v.contains("shape") || !v["shape"].is_array()) bad("'shape' is missing or not an array");
        if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
            bad("'data_offsets' is missing or not [begin, end]");
        safetensors_tensor t;
        t.name = key;
        t.dtype = v["dtype"].get<std::string>();
        const uint32_t esize = dtype_bytes(t.dtype);
        if (esize == 0) bad("dtype '" + t.dtype + "' is not a safetensors dtype");
        uint64_t count = 1;
        for (const json &d : v["shape"]) {
            if (!d.is_number_unsigned()) bad("'shape' holds " + brief_json(d) + ", not a non-negative integer");
            const uint64_t dim = d.get<uint64_t>();
            if (__builtin_mul_overflow(count, dim, &count) || count > (uint64_t{1} << 56))
                bad("its shape is too large");
            t.shape.push_back(static_cast<int64_t>(dim));
        }
        for (const json &o : v["data_offsets"])
            if (!o.is_number_unsigned()) bad("'data_offsets' holds " + brief_json(o) + ", not a non-negative integer");
        const uint64_t begin = v["data_offsets"][0].get<uint64_t>();
        const uint64_t end = v["data_offsets"][1].get<uint64_t>();
        if (begin > end) bad(fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
        if (end > data_size)
            bad(fmt::format("data_offsets [{}, {}] reach past the data's {} bytes (the file is truncated or the "
                            "header lies)", begin, end, data_size));
        uint64_t need = 0;
        if (__builtin_mul_overflow(count, uint64_t{esize}, &need)) bad("its shape is too large");
        if (end - begin != need)
            bad(fmt::format("data_offsets [{}, {}] hold {} bytes, but {} elements of {} need {}", begin, end,
                            end - begin, count, t.dtype, need));
        if ((data_begin + begin) % esize != 0)
            bad(fmt::format("its data at byte {} is not aligned to its {}-byte elements", data_begin + begin, esize));
        t.begin = begin;
        t.n_bytes = end - begin;
        t.data = bytes + data_begin + begin;
        f.tensors_.push_back(std::move(t));
    }

    // The ranges must tile the data exactly, as Hugging Face's reader requires: no overlap, no hole, no tail.
    std::vector<const safetensors_tensor *> order;
    for (const auto &t : f.tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const auto *a, const auto *b) {
        return a->begin != b->begin ? a->begin < b->begin : a->n_bytes < b->n_bytes;
    });
    uint64_t at = 0;
    for (const safetensors_tensor *t : order) {
        if (t->begin < at)
            fail("{}: tensor '{}' (data_offsets from {}) overlaps the tensor before it, which ends at {}; {}", f.name_,
                 t->name, t->begin, at, k_fix);
        if (t->begin > at)
            fail("{}: bytes {}..{} of the data belong to no tensor (before '{}'); {}", f.name_, at, t->begin, t->name,
                 k_fix);
        at = t->begin + t->n_bytes;
    }
    if (at != data_size)
        fail("{}: the tensors end at data byte {}, but the data holds {} bytes; {}", f.name_, at, data_size, k_fix);
    return f;
}

} // namespace strata
