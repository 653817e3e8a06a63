// The persistent KV prefix store (core/kv): round trips, restarts, every kind of damaged or foreign entry (a miss that
// deletes the file, never data), LRU eviction across restarts, unwritable folders, concurrent use; and its LRU index.
#include "common/error.hpp"
#include "kv/entry_format.hpp"
#include "kv/lru_index.hpp"
#include "kv/prefix_store.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <list>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using strata::kv::entry_header;
using strata::kv::lru_index;
using strata::kv::prefix_store;

constexpr int32_t k_block = 4;
constexpr uint64_t k_block_bytes = 256;
constexpr uint64_t k_entry_bytes = strata::kv::entry_file_bytes(k_block, k_block_bytes);

std::vector<int32_t> tokens_of(uint64_t hash) {
    std::vector<int32_t> t(k_block);
    for (int32_t i = 0; i < k_block; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((hash * 31 + static_cast<uint64_t>(i)) % 32000);
    return t;
}

// The payload of version `v` of block `hash`: its first 16 bytes name both, the rest follows from them.
std::vector<uint8_t> payload_of(uint64_t hash, uint64_t v = 0) {
    std::vector<uint8_t> p(k_block_bytes);
    std::memcpy(p.data(), &hash, 8);
    std::memcpy(p.data() + 8, &v, 8);
    for (size_t i = 16; i < p.size(); ++i) p[i] = static_cast<uint8_t>(hash * 7 + v * 13 + i);
    return p;
}

class PrefixStore : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        root_ = std::string(STRATA_BINARY_DIR) + "/kv_test_files/" + info->name() + "_" + std::to_string(::getpid());
        fs::remove_all(root_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    prefix_store::options opts(uint64_t capacity_entries = 64, uint64_t fingerprint = 0xabc) const {
        prefix_store::options o;
        o.dir = root_;
        o.capacity_bytes = capacity_entries * k_entry_bytes;
        o.model_fingerprint = fingerprint;
        o.block_size = k_block;
        o.block_bytes = k_block_bytes;
        return o;
    }
    std::string entry_path(uint64_t hash, uint64_t fingerprint = 0xabc) const {
        char buf[64];
        std::snprintf(buf, sizeof buf, "/%016llx/%016llx.kvb", static_cast<unsigned long long>(fingerprint),
                      static_cast<unsigned long long>(hash));
        return root_ + buf;
    }
    static bool put(prefix_store &s, uint64_t hash, uint64_t v = 0) {
        const auto t = tokens_of(hash);
        const auto p = payload_of(hash, v);
        return s.put(hash, t, p.data());
    }
    // True when get hits and returns exactly version v's payload.
    static bool get_is(prefix_store &s, uint64_t hash, uint64_t v = 0) {
        const auto t = tokens_of(hash);
        std::vector<uint8_t> out(k_block_bytes);
        return s.get(hash, t, out.data()) && out == payload_of(hash, v);
    }
    std::string root_;
};

void flip_byte(const std::string &path, uint64_t offset) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path;
    uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
    b ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
    ::close(fd);
}

TEST_F(PrefixStore, RoundTrip) {
    prefix_store s(opts());
    EXPECT_EQ(s.dir(), root_);
    EXPECT_EQ(s.capacity_entries(), 64u);
    EXPECT_FALSE(s.contains(42));
    EXPECT_FALSE(get_is(s, 42));
    ASSERT_TRUE(put(s, 42));
    EXPECT_TRUE(s.contains(42));
    EXPECT_EQ(s.entries(), 1u);
    EXPECT_TRUE(fs::exists(entry_path(42)));
    EXPECT_EQ(fs::file_size(entry_path(42)), k_entry_bytes);
    EXPECT_TRUE(get_is(s, 42));
    // Overwriting replaces the payload and keeps one entry.
    ASSERT_TRUE(put(s, 42, 1));
    EXPECT_EQ(s.entries(), 1u);
    EXPECT_TRUE(get_is(s, 42, 1));
    // A caller's span of the wrong length is its mistake: a miss, and the entry stays.
    std::vector<int32_t> short_tokens(k_block - 1);
    std::vector<uint8_t> out(k_block_bytes);
    EXPECT_FALSE(s.get(42, short_tokens, out.data()));
    EXPECT_FALSE(s.put(43, short_tokens, out.data()));
    EXPECT_TRUE(s.contains(42));
    EXPECT_FALSE(s.contains(43));
    s.erase(42);
    EXPECT_FALSE(s.contains(42));
    EXPECT_FALSE(fs::exists(entry_path(42)));
    EXPECT_EQ(s.entries(), 0u);
}

TEST_F(PrefixStore, SurvivesANewInstance) {
    {
        prefix_store s(opts());
        for (uint64_t h : {1ull, 2ull, 0xffffffffffffffffull}) ASSERT_TRUE(put(s, h));
    }
    prefix_store again(opts());
    EXPECT_EQ(again.entries(), 3u);
    for (uint64_t h : {1ull, 2ull, 0xffffffffffffffffull}) EXPECT_TRUE(get_is(again, h)) << h;
}

TEST_F(PrefixStore, ADamagedHeaderFieldTokenOrPayloadIsAMissAndDeletesTheEntry) {
    struct damage {
        const char *what;
        uint64_t offset;
    };
    const uint64_t payload = strata::kv::entry_payload_offset(k_block);
    const damage cases[] = {
        {"magic", offsetof(entry_header, magic)},
        {"version", offsetof(entry_header, version)},
        {"block_size", offsetof(entry_header, block_size)},
        {"model_fingerprint", offsetof(entry_header, model_fingerprint)},
        {"hash", offsetof(entry_header, hash) + 7},
        {"payload_bytes", offsetof(entry_header, payload_bytes)},
        {"payload_checksum", offsetof(entry_header, payload_checksum) + 3},
        {"first token", strata::kv::entry_tokens_offset()},
        {"last token", payload - 1},
        {"first payload byte", payload},
        {"last payload byte", k_entry_bytes - 1},
    };
    prefix_store s(opts());
    for (const damage &d : cases) {
        SCOPED_TRACE(d.what);
        ASSERT_TRUE(put(s, 7));
        flip_byte(entry_path(7), d.offset);
        EXPECT_FALSE(get_is(s, 7));
        EXPECT_FALSE(fs::exists(entry_path(7)));
        EXPECT_FALSE(s.contains(7));
        EXPECT_EQ(s.entries(), 0u);
    }
}

TEST_F(PrefixStore, DamageFoundAfterARestartIsAMissToo) {
    {
        prefix_store s(opts());
        ASSERT_TRUE(put(s, 8));
    }
    flip_byte(entry_path(8), strata::kv::entry_payload_offset(k_block) + 5);
    prefix_store s(opts());
    EXPECT_TRUE(s.contains(8)); // the scan reads names only
    EXPECT_FALSE(get_is(s, 8));
    EXPECT_FALSE(fs::exists(entry_path(8)));
    EXPECT_EQ(s.entries(), 0u);
}

TEST_F(PrefixStore, ATruncatedOrExtendedFileIsAMissAndDeleted) {
    prefix_store s(opts());
    for (uint64_t size : {uint64_t{0}, uint64_t{20}, uint64_t{sizeof(entry_header)}, strata::kv::entry_payload_offset(k_block),
                          k_entry_bytes - 1, k_entry_bytes + 1}) {
        SCOPED_TRACE(size);
        ASSERT_TRUE(put(s, 9));
        fs::resize_file(entry_path(9), size);
        EXPECT_FALSE(get_is(s, 9));
        EXPECT_FALSE(fs::exists(entry_path(9)));
        EXPECT_EQ(s.entries(), 0u);
    }
}

TEST_F(PrefixStore, AnotherFingerprintsEntriesAreLeftAloneAndAForeignFileIsAMiss) {
    {
        prefix_store a(opts(64, 1));
        ASSERT_TRUE(put(a, 5));
    }
    {
        prefix_store b(opts(64, 2));
        EXPECT_EQ(b.entries(), 0u);
        EXPECT_FALSE(b.contains(5));
        EXPECT_FALSE(get_is(b, 5));
    }
    EXPECT_TRUE(fs::exists(entry_path(5, 1)));
    // A's file copied into B's folder under the right name is still A's: B refuses and deletes its copy.
    fs::copy_file(entry_path(5, 1), entry_path(5, 2));
    prefix_store b(opts(64, 2));
    EXPECT_TRUE(b.contains(5));
    EXPECT_FALSE(get_is(b, 5));
    EXPECT_FALSE(fs::exists(entry_path(5, 2)));
    EXPECT_TRUE(fs::exists(entry_path(5, 1)));
    prefix_store a(opts(64, 1));
    EXPECT_TRUE(get_is(a, 5));
}

TEST_F(PrefixStore, OtherTokensUnderTheSameHashAreAMiss) {
    prefix_store s(opts());
    ASSERT_TRUE(put(s, 11));
    std::vector<int32_t> other = tokens_of(11);
    other[2] += 1; // a different prefix whose chained hash collided
    std::vector<uint8_t> out(k_block_bytes);
    EXPECT_FALSE(s.get(11, other, out.data()));
    EXPECT_FALSE(s.contains(11));
    EXPECT_FALSE(fs::exists(entry_path(11)));
}

TEST_F(PrefixStore, CapacityEvictsTheLeastRecentlyUsedAlsoAcrossRestarts) {
    {
        prefix_store s(opts(3));
        ASSERT_TRUE(put(s, 1));
        ASSERT_TRUE(put(s, 2));
        ASSERT_TRUE(put(s, 3));
        ASSERT_TRUE(get_is(s, 1)); // order now 2, 3, 1
        ASSERT_TRUE(put(s, 4));    // evicts 2
        EXPECT_FALSE(s.contains(2));
        EXPECT_FALSE(fs::exists(entry_path(2)));
        EXPECT_EQ(s.entries(), 3u);
        ASSERT_TRUE(put(s, 3, 1)); // overwriting counts as a use: order 1, 4, 3
    }
    {
        prefix_store s(opts(3)); // the order comes back from the files' mtimes
        EXPECT_EQ(s.entries(), 3u);
        ASSERT_TRUE(put(s, 5)); // evicts 1
        EXPECT_FALSE(s.contains(1));
        EXPECT_TRUE(s.contains(4));
        EXPECT_TRUE(get_is(s, 3, 1));
        EXPECT_TRUE(s.contains(5)); // order 4, 3, 5
    }
    prefix_store smaller(opts(2)); // a smaller capacity drops the oldest at start
    EXPECT_EQ(smaller.entries(), 2u);
    EXPECT_FALSE(smaller.contains(4));
    EXPECT_FALSE(fs::exists(entry_path(4)));
    EXPECT_TRUE(get_is(smaller, 3, 1));
    EXPECT_TRUE(get_is(smaller, 5));
    // The capacity is in bytes of whole entries: one byte short of two entries holds one.
    prefix_store::options o = opts(2);
    o.capacity_bytes -= 1;
    prefix_store::options fresh = o;
    fresh.model_fingerprint = 0x777;
    prefix_store one(fresh);
    EXPECT_EQ(one.capacity_entries(), 1u);
}

TEST_F(PrefixStore, StartRemovesUnfinishedWritesAndIgnoresOtherFiles) {
    { prefix_store s(opts()); }
    const std::string folder = fs::path(entry_path(1)).parent_path();
    const std::string temp = folder + "/" + strata::kv::temp_file_name(1, 3).text;
    const std::string other = folder + "/notes.txt";
    const std::string upper = folder + "/00000000000000AB.kvb";
    for (const std::string &p : {temp, other, upper}) {
        const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT, 0644);
        ASSERT_GE(fd, 0) << p;
        ::close(fd);
    }
    prefix_store s(opts());
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_TRUE(fs::exists(other));
    EXPECT_TRUE(fs::exists(upper));
    EXPECT_EQ(s.entries(), 0u);
}

// What a crash (or a power cut without fsync) leaves behind: entries cut short at any point (empty, inside the header,
// after it, inside the payload), one grown past its end, one with a flipped payload byte, and unfinished writes under
// temporary names. A restart discards every one whose size is wrong and every temporary file, and says so; the flipped
// one is caught by its checksum when first read. None is ever served; each put again is served whole.
TEST_F(PrefixStore, ARestartDiscardsTornEntriesAndUnfinishedWritesAndNeverServesThem) {
    const uint64_t payload = strata::kv::entry_payload_offset(k_block);
    const std::vector<uint64_t> cut = {0, 20, sizeof(entry_header), payload, payload + 100, k_entry_bytes - 1,
                                       k_entry_bytes + 1};
    const uint64_t flipped = 100, intact = 101;
    {
        prefix_store s(opts());
        for (uint64_t h = 0; h < cut.size(); ++h) ASSERT_TRUE(put(s, h));
        ASSERT_TRUE(put(s, flipped));
        ASSERT_TRUE(put(s, intact));
    }
    for (uint64_t h = 0; h < cut.size(); ++h) fs::resize_file(entry_path(h), cut[h]);
    flip_byte(entry_path(flipped), payload + 7);
    const std::string folder = fs::path(entry_path(0)).parent_path();
    std::vector<std::string> temps;
    for (uint64_t n : {uint64_t{0}, uint64_t{50}, k_entry_bytes}) { // an empty, a partial and a complete but unrenamed write
        temps.push_back(folder + "/" + strata::kv::temp_file_name(200 + n, n).text);
        fs::copy_file(entry_path(intact), temps.back());
        fs::resize_file(temps.back(), n);
    }
    {
        ::testing::internal::CaptureStderr();
        prefix_store s(opts());
        const std::string log = ::testing::internal::GetCapturedStderr();
        const std::string discarded = "discarded " + std::to_string(cut.size() + temps.size()) +
                                      " partial entries left by an interrupted run (3 unfinished write(s), " +
                                      std::to_string(cut.size()) + " torn";
        EXPECT_NE(log.find(discarded), std::string::npos) << log;
        for (uint64_t h = 0; h < cut.size(); ++h) {
            EXPECT_FALSE(fs::exists(entry_path(h))) << "cut at " << cut[h];
            EXPECT_FALSE(s.contains(h)) << "cut at " << cut[h];
            EXPECT_FALSE(get_is(s, h)) << "cut at " << cut[h];
        }
        for (const std::string &t : temps) EXPECT_FALSE(fs::exists(t)) << t;
        EXPECT_EQ(s.entries(), 2u) << "only the flipped and the intact entry are indexed";
        ::testing::internal::CaptureStderr();
        EXPECT_FALSE(get_is(s, flipped));
        const std::string on_read = ::testing::internal::GetCapturedStderr();
        EXPECT_NE(on_read.find("deleted, payload checksum mismatch"), std::string::npos) << on_read;
        EXPECT_FALSE(fs::exists(entry_path(flipped)));
        EXPECT_TRUE(get_is(s, intact));
        // Recomputed blocks are written again and served whole.
        for (uint64_t h = 0; h < cut.size(); ++h) ASSERT_TRUE(put(s, h, 3));
        ASSERT_TRUE(put(s, flipped, 3));
        for (uint64_t h = 0; h < cut.size(); ++h) EXPECT_TRUE(get_is(s, h, 3));
        EXPECT_TRUE(get_is(s, flipped, 3));
    }
    // A clean restart has nothing to discard and says nothing about it.
    ::testing::internal::CaptureStderr();
    prefix_store again(opts());
    EXPECT_EQ(::testing::internal::GetCapturedStderr().find("discarded"), std::string::npos);
    EXPECT_EQ(again.entries(), cut.size() + 2);
}

TEST_F(PrefixStore, AFileDeletedByHandIsAMiss) {
    prefix_store s(opts());
    ASSERT_TRUE(put(s, 12));
    fs::remove(entry_path(12));
    EXPECT_FALSE(get_is(s, 12));
    EXPECT_EQ(s.entries(), 0u);
    ASSERT_TRUE(put(s, 12, 2));
    EXPECT_TRUE(get_is(s, 12, 2));
}

TEST_F(PrefixStore, ASecondStoreOnTheSameFolderIsAClearError) {
    prefix_store s(opts());
    try {
        prefix_store t(opts());
        FAIL() << "two stores share one folder";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("in use by another store"), std::string::npos) << e.what();
    }
}

TEST_F(PrefixStore, UnusableOptionsAreClearErrors) {
    auto refused = [](prefix_store::options o, const std::string &needle) {
        try {
            prefix_store s(std::move(o));
            ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
        } catch (const strata::error &e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    prefix_store::options o = opts();
    o.capacity_bytes = k_entry_bytes - 1;
    refused(o, "holds no entry");
    o = opts();
    o.block_size = 0;
    refused(o, "block_size");
    o = opts();
    o.block_bytes = 0;
    refused(o, "block_bytes");
    o = opts();
    o.dir.clear();
    refused(o, "no directory");
    EXPECT_FALSE(fs::exists(root_)) << "a refused store must not create its folder";
}

// Runs `body` in a child process as an unprivileged user when this test runs as root (root may write anywhere) and
// returns what the child wrote; fails the test if the child could not drop privileges.
std::string run_unprivileged(const std::function<std::string()> &body) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(fds[0]);
        int code = 0;
        std::string out;
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) code = 2;
        if (code == 0) out = body();
        const ssize_t w = ::write(fds[1], out.data(), out.size());
        (void)w;
        ::close(fds[1]);
        ::_exit(code);
    }
    ::close(fds[1]);
    std::string got;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    EXPECT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "could not drop to an unprivileged user in the child";
    return got;
}

TEST_F(PrefixStore, AnUnwritableDirectoryIsAClearError) {
    // Case 1: the store's folder would have to be created inside a read-only directory.
    // Case 2: the fingerprint's folder exists (an earlier run) but is read-only.
    const fs::perms read_only = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec;
    prefix_store::options one = opts(), two = opts();
    one.dir = root_ + "/one/store";
    two.dir = root_ + "/two";
    const std::string two_folder = two.dir + "/0000000000000abc"; // the fingerprint 0xabc as 16 hex digits
    fs::create_directories(root_ + "/one");
    fs::permissions(root_ + "/one", read_only);
    fs::create_directories(two_folder);
    fs::permissions(two_folder, read_only);
    const std::string got = run_unprivileged([&] {
        std::string out;
        for (const prefix_store::options &o : {one, two}) {
            try {
                prefix_store s(o);
                out += "CREATED\n";
            } catch (const strata::error &e) {
                out += std::string(e.what()) + "\n";
            }
        }
        return out;
    });
    fs::permissions(root_ + "/one", fs::perms::owner_all);
    fs::permissions(two_folder, fs::perms::owner_all);
    EXPECT_EQ(got.find("CREATED"), std::string::npos) << got;
    const size_t eol = got.find('\n');
    ASSERT_NE(eol, std::string::npos) << got;
    const std::string first = got.substr(0, eol), second = got.substr(eol + 1);
    EXPECT_NE(first.find("cannot create the folder '" + one.dir + "/0000000000000abc'"), std::string::npos) << first;
    EXPECT_NE(first.find("choose a directory this user can write"), std::string::npos) << first;
    EXPECT_NE(second.find("'" + two_folder + "' is not writable"), std::string::npos) << second;
    EXPECT_NE(second.find("choose a directory this user can write"), std::string::npos) << second;
    EXPECT_FALSE(fs::exists(one.dir));
}

TEST_F(PrefixStore, ConcurrentPutsAndGetsNeverReturnATornOrForeignPayload) {
    prefix_store s(opts(16));
    std::atomic<uint64_t> hits{0}, bad{0}, failed_puts{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
            std::vector<uint8_t> out(k_block_bytes);
            for (int i = 0; i < 1500; ++i) {
                const uint64_t hash = rng() % 32;
                const auto tokens = tokens_of(hash);
                if (rng() % 2 == 0) {
                    const auto p = payload_of(hash, rng() % 1000);
                    if (!s.put(hash, tokens, p.data())) failed_puts.fetch_add(1);
                } else if (s.get(hash, tokens, out.data())) {
                    hits.fetch_add(1);
                    uint64_t h = 0, v = 0;
                    std::memcpy(&h, out.data(), 8);
                    std::memcpy(&v, out.data() + 8, 8);
                    if (h != hash || out != payload_of(hash, v)) bad.fetch_add(1);
                }
            }
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_EQ(failed_puts.load(), 0u);
    EXPECT_GT(hits.load(), 0u);
    EXPECT_LE(s.entries(), 16u);
    // The index and the folder agree.
    uint64_t files = 0;
    for (const auto &e : fs::directory_iterator(fs::path(entry_path(0)).parent_path())) files += e.path().extension() == ".kvb";
    EXPECT_EQ(files, s.entries());
}

// The index against a plain list model, through many random inserts, touches and erases (the hash table's
// backward-shift deletion is the part worth checking).
TEST(KvLruIndex, MatchesAListModel) {
    lru_index index;
    std::list<uint64_t> model; // front = oldest
    std::mt19937_64 rng(5);
    for (int i = 0; i < 200000; ++i) {
        // Hashes with equal low bits collide in the table often; mix both kinds.
        const uint64_t h = (rng() % 3 == 0) ? (rng() % 300) << 40 : rng() % 600;
        const auto it = std::find(model.begin(), model.end(), h);
        switch (rng() % 4) {
        case 0:
        case 1:
            index.insert_or_touch(h);
            if (it != model.end()) model.erase(it);
            model.push_back(h);
            break;
        case 2:
            ASSERT_EQ(index.touch(h), it != model.end());
            if (it != model.end()) model.splice(model.end(), model, it);
            break;
        default:
            ASSERT_EQ(index.erase(h), it != model.end());
            if (it != model.end()) model.erase(it);
            if (!model.empty() && rng() % 2 == 0) { // also evict like the store does
                ASSERT_EQ(index.oldest(), model.front());
                ASSERT_TRUE(index.erase(model.front()));
                model.pop_front();
            }
        }
        ASSERT_EQ(index.size(), model.size());
        ASSERT_EQ(index.oldest(), model.empty() ? std::nullopt : std::optional<uint64_t>(model.front()));
    }
    for (uint64_t h : model) EXPECT_TRUE(index.contains(h));
}

} // namespace
