#include "tokenizer/regex_split.hpp"

#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>

#include "common/error.hpp"

namespace strata {

namespace {

// Work budget of one match attempt (PCRE2's own default is 10,000,000): enough for every real pre-tokenizer on any
// text, small enough that a pathological input fails in well under a second instead of hanging a request.
constexpr uint32_t k_match_limit = 10'000'000;
// Heap PCRE2 may use for backtracking, in KiB.
constexpr uint32_t k_heap_limit_kib = 64 * 1024;

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    const int n = pcre2_get_error_message(code, buffer, sizeof buffer / sizeof buffer[0]);
    std::string out;
    for (int i = 0; i < n; ++i) out += buffer[i] < 0x80 ? static_cast<char>(buffer[i]) : '?';
    return out;
}

struct match_data_deleter {
    void operator()(pcre2_match_data *m) const { pcre2_match_data_free(m); }
};
struct match_context_deleter {
    void operator()(pcre2_match_context *c) const { pcre2_match_context_free(c); }
};
struct jit_stack_deleter {
    void operator()(pcre2_jit_stack *s) const { pcre2_jit_stack_free(s); }
};

} // namespace

struct regex_scratch::state {
    std::unique_ptr<pcre2_match_data, match_data_deleter> md;
    std::unique_ptr<pcre2_match_context, match_context_deleter> ctx;
    std::unique_ptr<pcre2_jit_stack, jit_stack_deleter> jit_stack;
};

regex_scratch::regex_scratch() : s_(std::make_unique<state>()) {
    s_->md.reset(pcre2_match_data_create(1, nullptr)); // only the whole match's offsets are read
    s_->ctx.reset(pcre2_match_context_create(nullptr));
    if (!s_->md || !s_->ctx) throw std::bad_alloc();
    pcre2_set_match_limit(s_->ctx.get(), k_match_limit);
    pcre2_set_heap_limit(s_->ctx.get(), k_heap_limit_kib);
    // The JIT's own stack, grown on demand up to 8 MiB (its default is 32 KiB of the machine stack).
    s_->jit_stack.reset(pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr));
    if (s_->jit_stack) pcre2_jit_stack_assign(s_->ctx.get(), nullptr, s_->jit_stack.get());
}
regex_scratch::~regex_scratch() = default;
regex_scratch::regex_scratch(regex_scratch &&) noexcept = default;
regex_scratch &regex_scratch::operator=(regex_scratch &&) noexcept = default;

struct split_regex::compiled {
    pcre2_code *code = nullptr;
    bool jit = false;
    ~compiled() { pcre2_code_free(code); }
};

split_regex::split_regex(std::u32string pattern, bool unicode, std::string name)
    : re_(std::make_unique<compiled>()), name_(std::move(name)) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    // DOLLAR_ENDONLY: `$` means the piece's end only, as in ECMAScript (deepseek-llm's "\s+$") and Rust.
    // MATCH_INVALID_UTF: a lone surrogate in the text (from CESU-style bytes) is an unmatched character, not an error.
    const uint32_t options =
        PCRE2_DOLLAR_ENDONLY | (unicode ? PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF : uint32_t{0});
    re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &code, &offset,
                              nullptr);
    if (re_->code == nullptr)
        fail("pre-tokenizer regex {}: PCRE2 cannot compile it at code unit {}: {}", name_, offset, pcre2_message(code));
    re_->jit = pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE) == 0;
}

split_regex::~split_regex() = default;
split_regex::split_regex(split_regex &&) noexcept = default;
split_regex &split_regex::operator=(split_regex &&) noexcept = default;

void split_regex::segments(std::span<const uint32_t> piece, regex_scratch &scratch, std::vector<segment> &out) const {
    out.clear();
    pcre2_match_data *md = scratch.get().md.get();
    pcre2_match_context *ctx = scratch.get().ctx.get();
    const auto *s = reinterpret_cast<PCRE2_SPTR>(piece.data());
    const size_t length = piece.size();

    // One attempt at `at`; false when there is no match. An interrupted JIT match (its stack limit) is run again
    // by the interpreter, which backtracks on the heap.
    const auto match = [&](size_t at, uint32_t options, size_t &begin, size_t &end) {
        int rc = pcre2_match(re_->code, s, length, at, options, md, ctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re_->code, s, length, at, options | PCRE2_NO_JIT, md, ctx);
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0)
            fail("pre-tokenizer regex {} gave up on a piece of {} characters: {} (the text is pathological for this "
                 "tokenizer; shorten or split it)",
                 name_, length, pcre2_message(rc));
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        begin = ov[0];
        end = ov[1];
        return true;
    };

    size_t done = 0; // end of the last match
    size_t at = 0;   // where the next search starts
    bool after_empty = false;
    while (at <= length) {
        size_t b = 0, e = 0;
        bool found = false;
        if (after_empty) {
            // std::regex_iterator after an empty match: a non-empty match right here, else search from one on.
            if (at == length) break;
            found = match(at, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED, b, e);
            if (!found) found = match(at + 1, 0, b, e);
        } else {
            found = match(at, 0, b, e);
        }
        if (!found) break;
        if (b > done) out.push_back({b - done, false});
        out.push_back({e - b, true});
        done = e;
        after_empty = e == b;
        at = e; // a non-empty match that ends the piece still searches once more there (empty matches)
    }
    if (done < length) out.push_back({length - done, false});
}

} // namespace strata
