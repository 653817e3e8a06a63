// Parses and validates a GGUF buffer into file::impl. The buffer is untrusted: nothing is read, reserved or
// pointed at before it has been checked against the end of the buffer and for overflow.
#include "common/error.hpp"
#include "gguf/gguf_internal.hpp"

#include <limits>

namespace strata::gguf::detail {

namespace {

// Smallest possible encodings, used to reject counts that the remaining bytes cannot hold.
constexpr uint64_t min_kv_bytes = 8 + 1 + 4 + 1;              // key length, 1-byte key, type, 1-byte value
constexpr uint64_t min_tensor_info_bytes = 8 + 1 + 4 + 4 + 8; // name length, 1-byte name, n_dims, type, offset
constexpr uint32_t default_alignment = 32;
constexpr const char *corrupt_hint = "the file is truncated or corrupt";

class parser {
  public:
    parser(const uint8_t *data, size_t size, std::string name)
        : f_(std::make_unique<file::impl>()), c_(data, size, 0) {
        f_->name = std::move(name);
        f_->base = data;
        f_->size = size;
    }

    std::unique_ptr<file::impl> run() {
        read_header();
        for (uint64_t i = 0; i < kv_count_; ++i) read_kv(i);
        index_kvs();
        read_alignment();
        for (uint64_t i = 0; i < tensor_count_; ++i) read_tensor_info(i);
        index_tensors();
        place_tensors();
        return std::move(f_);
    }

  private:
    std::unique_ptr<file::impl> f_;
    cursor c_;
    uint64_t kv_count_ = 0;
    uint64_t tensor_count_ = 0;
    std::vector<uint64_t> tensor_info_offsets_; // for messages about a tensor found after its info was read

    // What is being read, for messages: "KV #3 'llama.block_count'" or "tensor info #5 'blk.0.attn_q.weight'".
    const char *item_kind_ = "header";
    uint64_t item_index_ = 0;
    std::string_view item_name_;
    bool item_has_index_ = false;

    std::string where() const {
        std::string w = item_kind_;
        if (item_has_index_) w += fmt::format(" #{}", item_index_);
        if (!item_name_.empty()) w += fmt::format(" '{}'", item_name_);
        return w;
    }
    void enter(const char *kind, uint64_t index) {
        item_kind_ = kind;
        item_index_ = index;
        item_has_index_ = true;
        item_name_ = {};
    }

    [[noreturn]] void fail_at(uint64_t offset, const std::string &what, std::string_view hint) const {
        fail("{}: {} at byte {}; {}", f_->name, what, offset, hint);
    }

    [[noreturn]] void truncated(std::string_view what, uint64_t need) const {
        fail("{}: unexpected end of file at byte {} reading {} of {} (needs {} bytes, {} left); {}", f_->name,
             c_.pos(), what, where(), need, c_.remaining(), corrupt_hint);
    }

    template <class T> T read(std::string_view what) {
        T v{};
        if (!c_.read(v)) truncated(what, sizeof(T));
        return v;
    }

    // Reads a gguf_string and returns its bytes (still in the buffer).
    std::string_view read_string(std::string_view what) {
        const uint64_t at = c_.pos();
        const uint64_t len = read<uint64_t>(what);
        if (!c_.has(len))
            fail_at(at, fmt::format("{} of {} claims {} bytes but only {} remain", what, where(), len, c_.remaining()),
                    corrupt_hint);
        std::string_view s(reinterpret_cast<const char *>(c_.here()), static_cast<size_t>(len));
        c_.skip(static_cast<size_t>(len));
        return s;
    }

    stored_string store(std::string_view s) {
        stored_string r{f_->arena.size(), s.size()};
        f_->arena.insert(f_->arena.end(), s.begin(), s.end());
        f_->arena.push_back('\0');
        return r;
    }

    void read_header() {
        item_kind_ = "the header";
        static constexpr char magic[4] = {'G', 'G', 'U', 'F'};
        if (!c_.has(4))
            fail("{}: not a GGUF file: only {} bytes long (a GGUF header has at least 24); {}", f_->name, c_.remaining(),
                 corrupt_hint);
        if (std::memcmp(c_.here(), magic, 4) != 0) {
            const uint8_t *m = c_.here();
            fail("{}: not a GGUF file: starts with bytes {:02x} {:02x} {:02x} {:02x}, expected 'GGUF' (47 47 55 46) at "
                 "byte 0; pass a .gguf model file (older GGML/GGJT files must be re-converted)",
                 f_->name, m[0], m[1], m[2], m[3]);
        }
        c_.skip(4);
        const uint32_t version = read<uint32_t>("the version");
        if (version == 1)
            fail_at(4, "GGUF version 1 is not supported (only versions 2 and 3)",
                    "re-convert the model with a current llama.cpp converter");
        if (version != 2 && version != 3) {
            if ((version & 0xffffu) == 0 && (version >> 24) >= 1 && (version >> 24) <= 3)
                fail_at(4, fmt::format("GGUF version field reads {:#x}, which is a big-endian file", version),
                        "only little-endian GGUF files are supported; re-convert on a little-endian machine");
            fail_at(4, fmt::format("unsupported GGUF version {} (only versions 2 and 3 are supported)", version),
                    "the file may be corrupt or from a newer format; re-convert it");
        }
        f_->version = version;
        tensor_count_ = read<uint64_t>("the tensor count");
        kv_count_ = read<uint64_t>("the KV count");
        if (kv_count_ > c_.remaining() / min_kv_bytes)
            fail_at(16, fmt::format("KV count {} is impossible: the remaining {} bytes hold at most {} KVs", kv_count_,
                                    c_.remaining(), c_.remaining() / min_kv_bytes),
                    corrupt_hint);
        if (tensor_count_ > c_.remaining() / min_tensor_info_bytes)
            fail_at(8, fmt::format("tensor count {} is impossible: the remaining {} bytes hold at most {} tensor infos",
                                   tensor_count_, c_.remaining(), c_.remaining() / min_tensor_info_bytes),
                    corrupt_hint);
        f_->kvs.reserve(static_cast<size_t>(kv_count_));
        f_->tensors.reserve(static_cast<size_t>(tensor_count_));
        tensor_info_offsets_.reserve(static_cast<size_t>(tensor_count_));
    }

    value_type read_value_type(std::string_view what) {
        const uint64_t at = c_.pos();
        const uint32_t t = read<uint32_t>(what);
        if (!is_known(t))
            fail_at(at, fmt::format("{} has unknown {} {} (known: 0..12)", where(), what, t),
                    "the file is corrupt or uses a newer GGUF value type");
        return static_cast<value_type>(t);
    }

    // Skips (and validates) one value nested inside an array; depth counts array levels.
    void skip_value(value_type t, int depth) {
        if (t == value_type::string) {
            read_string("an array element string");
        } else if (t == value_type::array) {
            skip_array_payload(depth + 1);
        } else {
            const size_t n = fixed_value_size(t);
            if (!c_.has(n)) truncated("an array element", n);
            c_.skip(n);
        }
    }

    // Reads an array's element type and count and validates its elements; returns them with the cursor past them.
    struct array_header {
        value_type elem;
        uint64_t count;
    };
    array_header read_array_header(int depth) {
        const uint64_t at = c_.pos();
        if (depth > max_array_depth)
            fail_at(at, fmt::format("{} nests arrays more than {} deep", where(), max_array_depth), corrupt_hint);
        const value_type elem = read_value_type("array element type");
        const uint64_t count_at = c_.pos();
        const uint64_t count = read<uint64_t>("an array count");
        // Smallest encoding of one element; checked before anything is reserved or iterated.
        const uint64_t min_elem = elem == value_type::string  ? 8
                                  : elem == value_type::array ? 4 + 8
                                                              : fixed_value_size(elem);
        if (count > c_.remaining() / min_elem)
            fail_at(count_at,
                    fmt::format("{} has an array of {} {} elements that cannot fit in the remaining {} bytes", where(),
                                count, value_type_name(elem), c_.remaining()),
                    corrupt_hint);
        return {elem, count};
    }

    void skip_array_payload(int depth) {
        const array_header h = read_array_header(depth);
        if (h.elem != value_type::string && h.elem != value_type::array) {
            c_.skip(static_cast<size_t>(h.count * fixed_value_size(h.elem))); // fits: checked in read_array_header
            return;
        }
        for (uint64_t i = 0; i < h.count; ++i) skip_value(h.elem, depth);
    }

    void read_kv(uint64_t index) {
        enter("KV", index);
        kv_entry kv;
        kv.file_offset = c_.pos();
        const std::string_view key = read_string("the key");
        if (key.empty()) fail_at(kv.file_offset, fmt::format("{} has an empty key", where()), corrupt_hint);
        kv.key = store(key);
        item_name_ = key; // the buffer, not the arena: the arena may move as values are stored
        kv.type = read_value_type("value type");
        switch (kv.type) {
        case value_type::u8: kv.u = read<uint8_t>("the value"); break;
        case value_type::u16: kv.u = read<uint16_t>("the value"); break;
        case value_type::u32: kv.u = read<uint32_t>("the value"); break;
        case value_type::u64: kv.u = read<uint64_t>("the value"); break;
        case value_type::i8: kv.i = read<int8_t>("the value"); break;
        case value_type::i16: kv.i = read<int16_t>("the value"); break;
        case value_type::i32: kv.i = read<int32_t>("the value"); break;
        case value_type::i64: kv.i = read<int64_t>("the value"); break;
        case value_type::f32: kv.f = read<float>("the value"); break;
        case value_type::f64: kv.f = read<double>("the value"); break;
        case value_type::boolean: kv.u = read<uint8_t>("the value") != 0; break;
        case value_type::string: kv.str = store(read_string("the string value")); break;
        case value_type::array: read_array_kv(kv); break;
        }
        f_->kvs.push_back(kv);
    }

    void read_array_kv(kv_entry &kv) {
        const array_header h = read_array_header(1);
        kv.elem_type = h.elem;
        kv.count = h.count;
        kv.payload_begin = c_.pos();
        if (h.elem == value_type::string) {
            // Copied out so get_string_array can hand out NUL-terminated views.
            kv.first_string = f_->string_elems.size();
            f_->string_elems.reserve(f_->string_elems.size() + static_cast<size_t>(h.count));
            for (uint64_t i = 0; i < h.count; ++i) f_->string_elems.push_back(store(read_string("an array string")));
        } else if (h.elem == value_type::array) {
            for (uint64_t i = 0; i < h.count; ++i) skip_array_payload(2);
        } else {
            c_.skip(static_cast<size_t>(h.count * fixed_value_size(h.elem)));
        }
        kv.payload_end = c_.pos();
    }

    void index_kvs() {
        f_->kv_index.reserve(f_->kvs.size());
        for (size_t i = 0; i < f_->kvs.size(); ++i) {
            const kv_entry &kv = f_->kvs[i];
            const auto [it, inserted] = f_->kv_index.emplace(f_->view(kv.key), i);
            if (!inserted)
                fail_at(kv.file_offset,
                        fmt::format("duplicate key '{}' in KV #{} (first defined in KV #{})", f_->view(kv.key), i,
                                    it->second),
                        corrupt_hint);
        }
    }

    void read_alignment() {
        f_->alignment = default_alignment;
        const auto it = f_->kv_index.find("general.alignment");
        if (it == f_->kv_index.end()) return;
        const kv_entry &kv = f_->kvs[it->second];
        if (kv.type != value_type::u32)
            fail_at(kv.file_offset,
                    fmt::format("KV 'general.alignment' is {}, expected u32", value_type_name(kv.type)),
                    corrupt_hint);
        if (kv.u == 0 || (kv.u & (kv.u - 1)) != 0)
            fail_at(kv.file_offset,
                    fmt::format("KV 'general.alignment' is {}, which is not a nonzero power of two", kv.u),
                    corrupt_hint);
        f_->alignment = kv.u;
    }

    void read_tensor_info(uint64_t index) {
        enter("tensor info", index);
        const uint64_t at = c_.pos();
        tensor_info_offsets_.push_back(at);
        tensor_info t;
        const std::string_view name = read_string("the name");
        if (name.empty()) fail_at(at, fmt::format("{} has an empty name", where()), corrupt_hint);
        t.name.assign(name);
        item_name_ = name;
        const uint64_t dims_at = c_.pos();
        t.n_dims = read<uint32_t>("n_dims");
        if (t.n_dims > 4)
            fail_at(dims_at, fmt::format("{} has {} dimensions (at most 4 are allowed)", where(), t.n_dims),
                    corrupt_hint);
        uint64_t n_elements = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const uint64_t ne_at = c_.pos();
            const uint64_t ne = read<uint64_t>("a dimension");
            if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail_at(ne_at, fmt::format("{} has a negative dimension ne[{}] = {}", where(), d, static_cast<int64_t>(ne)),
                        corrupt_hint);
            t.ne[d] = static_cast<int64_t>(ne);
            if (__builtin_mul_overflow(n_elements, ne, &n_elements) ||
                n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail_at(ne_at, fmt::format("{} has an element count that overflows 64 bits", where()), corrupt_hint);
        }
        const uint64_t type_at = c_.pos();
        t.type = read<uint32_t>("the ggml type");
        const type_traits *tt = t.type < first_strata_type ? ggml_type_traits(t.type) : nullptr;
        if (tt == nullptr)
            fail_at(type_at, fmt::format("{} has unknown ggml type {}", where(), t.type),
                    "the file is corrupt or uses a tensor type this build does not know");
        if (t.ne[0] % tt->block_elems != 0)
            fail_at(dims_at,
                    fmt::format("{} has row length {}, which is not a multiple of the {} block size {}", where(), t.ne[0],
                                tt->name, tt->block_elems),
                    corrupt_hint);
        // n_bytes = rows * bytes per row; a block can take more bytes than it holds elements, so this can overflow.
        const uint64_t rows = t.ne[0] == 0 ? 0 : n_elements / static_cast<uint64_t>(t.ne[0]);
        uint64_t row_bytes = 0;
        if (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[0]) / tt->block_elems, tt->block_bytes, &row_bytes) ||
            __builtin_mul_overflow(rows, row_bytes, &t.n_bytes))
            fail_at(dims_at, fmt::format("{} has a byte size that overflows 64 bits", where()), corrupt_hint);
        const uint64_t offset_at = c_.pos();
        t.offset = read<uint64_t>("the data offset");
        if (t.offset % f_->alignment != 0)
            fail_at(offset_at,
                    fmt::format("{} has data offset {}, which is not a multiple of the alignment {}", where(), t.offset,
                                f_->alignment),
                    corrupt_hint);
        f_->tensors.push_back(std::move(t));
    }

    void place_tensors() {
        item_kind_ = "the data section";
        item_has_index_ = false;
        item_name_ = {};
        const uint64_t end_of_infos = c_.pos();
        const uint64_t aligned = (end_of_infos + f_->alignment - 1) / f_->alignment * f_->alignment; // no overflow:
        // end_of_infos <= size < 2^63 in practice, and alignment <= 2^31.
        if (f_->tensors.empty()) {
            // Vocab-only files may end right after the KVs, without padding.
            f_->data_offset = std::min<uint64_t>(aligned, f_->size);
            return;
        }
        if (aligned > f_->size)
            fail("{}: the data section would start at byte {} (after {} tensor infos), past the end of the file "
                 "(size {}); {}",
                 f_->name, aligned, f_->tensors.size(), f_->size, corrupt_hint);
        f_->data_offset = aligned;
        const uint64_t data_size = f_->size - aligned;
        for (size_t i = 0; i < f_->tensors.size(); ++i) {
            tensor_info &t = f_->tensors[i];
            uint64_t end = 0;
            if (__builtin_add_overflow(t.offset, t.n_bytes, &end))
                fail("{}: tensor '{}' (info at byte {}) data [offset {}, {} bytes] overflows 64 bits; {}", f_->name,
                     t.name, tensor_info_offsets_[i], t.offset, t.n_bytes, corrupt_hint);
            if (end > data_size)
                fail("{}: tensor '{}' data [offset {}, {} bytes] runs past end of file (size {}, data section at byte "
                     "{}); {}",
                     f_->name, t.name, t.offset, t.n_bytes, f_->size, aligned, corrupt_hint);
            t.data = f_->base + aligned + t.offset;
        }
    }

    void index_tensors() {
        f_->tensor_index.reserve(f_->tensors.size());
        for (size_t i = 0; i < f_->tensors.size(); ++i) {
            const auto [it, inserted] = f_->tensor_index.emplace(f_->tensors[i].name, i);
            if (!inserted)
                fail_at(tensor_info_offsets_[i],
                        fmt::format("duplicate tensor name '{}' in tensor info #{} (first in tensor info #{})",
                                    f_->tensors[i].name, i, it->second),
                        corrupt_hint);
        }
    }
};

} // namespace

std::unique_ptr<file::impl> parse_buffer(const uint8_t *data, size_t size, std::string name) {
    return parser(data, size, std::move(name)).run();
}

} // namespace strata::gguf::detail
