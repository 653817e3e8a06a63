// libFuzzer target for the KV prefix store's entry reader: the input is the whole file of one entry. Opening a store
// over it and reading the entry must not crash; an entry of the wrong size is deleted at the start, and any other
// must either return exactly the payload the file holds or be deleted and reported as a miss. Anything else (a
// crash, a sanitizer report, an exception, a broken invariant) is a bug.
#include "common/error.hpp"
#include "common/log.hpp"
#include "kv/entry_format.hpp"
#include "kv/prefix_store.hpp"
#include "kv_fuzz_entry.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;
using namespace strata::kv_fuzz;

std::string g_root;   // a private temporary directory, removed at exit
std::string g_folder; // g_root/<fingerprint>
std::string g_entry;  // the entry's path

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void remove_root() {
    std::error_code ec;
    fs::remove_all(g_root, ec);
}

strata::kv::prefix_store::options store_options() {
    strata::kv::prefix_store::options o;
    o.dir = g_root;
    o.capacity_bytes = 4 * strata::kv::entry_file_bytes(k_block_size, k_block_bytes);
    o.model_fingerprint = k_fingerprint;
    o.block_size = k_block_size;
    o.block_bytes = k_block_bytes;
    return o;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const char *tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/strata_fuzz_kv_XXXXXX";
    check(::mkdtemp(templ.data()) != nullptr);
    g_root = templ;
    g_folder = g_root + "/" + k_fingerprint_folder;
    g_entry = g_folder + "/" + k_entry_name;
    fs::create_directories(g_folder);
    std::atexit(remove_root);
    strata::log::set_level(strata::log::level::off); // the store logs every start and every dropped entry
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const int fd = ::open(g_entry.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0);
    check(size == 0 || ::write(fd, data, size) == static_cast<ssize_t>(size));
    ::close(fd);
    try {
        strata::kv::prefix_store store(store_options());
        // A start deletes an entry of the wrong size (torn by a crash) and indexes every other one.
        const bool whole = size == strata::kv::entry_file_bytes(k_block_size, k_block_bytes);
        check(store.contains(k_hash) == whole && store.entries() == (whole ? 1u : 0u) && fs::exists(g_entry) == whole);
        if (!whole) return 0;
        uint8_t payload[k_block_bytes];
        const bool hit = store.get(k_hash, k_tokens, payload);
        if (hit) {
            const uint64_t at = strata::kv::entry_payload_offset(k_block_size);
            check(size == strata::kv::entry_file_bytes(k_block_size, k_block_bytes));
            check(std::memcmp(payload, data + at, k_block_bytes) == 0);
            check(store.contains(k_hash) && fs::exists(g_entry));
        } else {
            check(!store.contains(k_hash) && store.entries() == 0 && !fs::exists(g_entry));
        }
    } catch (const strata::error &) {
        check(false); // one file in a writable folder never makes the store refuse to start
    }
    ::unlink(g_entry.c_str());
    return 0;
}
