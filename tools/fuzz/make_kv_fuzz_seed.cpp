// Writes the seed of fuzz_kv_entry: one valid entry file made by the real store (libFuzzer cannot guess an XXH3
// checksum, so without it the fuzzer would never reach the token and payload checks past the header).
// Usage: make_kv_fuzz_seed <output dir>
#include "kv/entry_format.hpp"
#include "kv/prefix_store.hpp"
#include "kv_fuzz_entry.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

int main(int argc, char **argv) {
    using namespace strata::kv_fuzz;
    namespace fs = std::filesystem;
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
        return 2;
    }
    const fs::path out = argv[1];
    const fs::path scratch = out / ("store." + std::to_string(::getpid()));
    try {
        fs::create_directories(out);
        std::vector<unsigned char> payload(k_block_bytes);
        for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<unsigned char>(i * 37 + 11);
        {
            strata::kv::prefix_store::options o;
            o.dir = scratch.string();
            o.capacity_bytes = strata::kv::entry_file_bytes(k_block_size, k_block_bytes);
            o.model_fingerprint = k_fingerprint;
            o.block_size = k_block_size;
            o.block_bytes = k_block_bytes;
            strata::kv::prefix_store store(o);
            if (!store.put(k_hash, k_tokens, payload.data())) throw std::runtime_error("put failed");
        }
        fs::copy_file(scratch / k_fingerprint_folder / k_entry_name, out / "valid_entry.kvb", fs::copy_options::overwrite_existing);
        fs::remove_all(scratch);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "make_kv_fuzz_seed: %s\n", e.what());
        return 1;
    }
    return 0;
}
