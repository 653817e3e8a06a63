// The MPI transport: MPI_Send/MPI_Recv on MPI_COMM_WORLD, the host's processes from MPI_Comm_split_type(SHARED).
#include "distributed/launch_env.hpp"
#include "distributed/transport.hpp"

#include "common/error.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace strata::distributed {

namespace {

std::string mpi_error_text(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<size_t>(len));
}

void check(int code, const char *what) {
    if (code != MPI_SUCCESS) fail("MPI {}: {}", what, mpi_error_text(code));
}

std::atomic<int> g_abort_code{0}; // abort_after's code once the pipeline broke

// MPI_Abort needs no transport object: abort_after's thread may call it while the main thread is in MPI (MPI is
// initialised with MPI_THREAD_MULTIPLE where the library gives it) or has left main.
[[noreturn]] void abort_job(int code) {
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

class mpi_transport final : public transport {
  public:
    mpi_transport() {
        check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "Comm_rank");
        check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "Comm_size");
        MPI_Comm local = MPI_COMM_NULL;
        check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
              "Comm_split_type");
        check(MPI_Comm_rank(local, &local_rank_), "Comm_rank (host)");
        check(MPI_Comm_size(local, &local_size_), "Comm_size (host)");
        MPI_Comm_free(&local);
        char name[MPI_MAX_PROCESSOR_NAME];
        int len = 0;
        if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS) host_.assign(name, static_cast<size_t>(len));
        // Errors come back as codes (and become strata::error) instead of ending the job inside MPI.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int local_rank() const override { return local_rank_; }
    int local_size() const override { return local_size_; }
    const std::string &host_name() const override { return host_; }

    void send(int dest, int tag, const void *data, size_t bytes) override { send_within(dest, tag, data, bytes, 0); }

    bool send_within(int dest, int tag, const void *data, size_t bytes, double timeout_s) override {
        if (bytes > static_cast<size_t>(INT_MAX)) fail("MPI send of {} bytes to rank {}: over 2 GiB", bytes, dest);
        MPI_Request request = MPI_REQUEST_NULL;
        check(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dest, tag, MPI_COMM_WORLD, &request), "Isend");
        // The sender spins: a message larger than MPI's eager limit (the logits rows) moves in fragments, each needing
        // the sender's progress, and a sleep between tests would add up to the whole step's time. The receiver is
        // normally waiting already, so this is short; only a receiver that stopped taking messages makes it last.
        return poll(timeout_s, /*sleep=*/false, [&] {
            int done = 0;
            check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "Test");
            return done != 0;
        });
    }

    size_t recv(int src, int tag, void *data, size_t capacity) override {
        size_t received = 0;
        recv_within(src, tag, data, capacity, 0, received);
        return received;
    }

    bool recv_within(int src, int tag, void *data, size_t capacity, double timeout_s, size_t &received) override {
        MPI_Status status;
        if (!wait_for(src, tag, timeout_s, status)) return false;
        int count = 0;
        check(MPI_Get_count(&status, MPI_BYTE, &count), "Get_count");
        if (static_cast<size_t>(count) > capacity)
            fail("internal: a message of {} bytes from rank {} (tag {}) where at most {} were expected", count, src,
                 tag, capacity);
        check(MPI_Recv(data, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "Recv");
        received = static_cast<size_t>(count);
        return true;
    }

    size_t next_size(int src, int tag) override {
        MPI_Status status;
        wait_for(src, tag, 0, status);
        int count = 0;
        check(MPI_Get_count(&status, MPI_BYTE, &count), "Get_count");
        return static_cast<size_t>(count);
    }

    std::string recv_text(int src, int tag) override {
        MPI_Status status;
        wait_for(src, tag, 0, status);
        int count = 0;
        check(MPI_Get_count(&status, MPI_BYTE, &count), "Get_count");
        std::string text(static_cast<size_t>(count), '\0');
        check(MPI_Recv(text.data(), count, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "Recv");
        return text;
    }

    bool all_gather_within(int tag, const void *mine, size_t bytes, void *all, size_t *received, double timeout_s,
                           int &late) override {
        if (bytes > static_cast<size_t>(INT_MAX)) fail("MPI all-gather of {} bytes: over 2 GiB", bytes);
        const int n = static_cast<int>(bytes);
        // One receive from and one send to every other rank (reserved once: nothing is allocated per call).
        requests_.assign(2 * static_cast<size_t>(size_), MPI_REQUEST_NULL);
        statuses_.resize(requests_.size());
        auto *out = static_cast<unsigned char *>(all);
        for (int k = 0; k < size_; ++k) {
            if (k == rank_) continue;
            check(MPI_Irecv(out + static_cast<size_t>(k) * bytes, n, MPI_BYTE, k, tag, MPI_COMM_WORLD,
                            &requests_[static_cast<size_t>(k)]),
                  "Irecv");
        }
        for (int k = 0; k < size_; ++k) {
            if (k == rank_) continue;
            check(MPI_Isend(mine, n, MPI_BYTE, k, tag, MPI_COMM_WORLD, &requests_[static_cast<size_t>(size_ + k)]),
                  "Isend");
        }
        if (bytes > 0) std::memcpy(out + static_cast<size_t>(rank_) * bytes, mine, bytes);
        // The ranks reach each all-gather about together (it sits between two layers' matmuls, twice a layer): a
        // sleep, whose least is the kernel's timer slack (50 us), would cost more than the exchange. So the wait
        // spins, yielding the core after a while to a rank that shares it, and sleeps only after milliseconds.
        const bool done = poll_yielding(timeout_s, [&] {
            int all_done = 0;
            check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &all_done, statuses_.data()),
                  "Testall");
            return all_done != 0;
        });
        if (done) {
            for (int k = 0; k < size_; ++k) {
                int count = static_cast<int>(bytes);
                if (k != rank_) check(MPI_Get_count(&statuses_[static_cast<size_t>(k)], MPI_BYTE, &count), "Get_count");
                received[k] = static_cast<size_t>(count);
            }
            return true;
        }
        // (MPI_Testall leaves every request as it was unless all completed: test the receives one by one.)
        late = -1;
        for (int k = 0; k < size_ && late < 0; ++k) {
            if (k == rank_) continue;
            int arrived = 0;
            check(MPI_Test(&requests_[static_cast<size_t>(k)], &arrived, MPI_STATUS_IGNORE), "Test");
            if (arrived == 0) late = k;
        }
        if (late < 0) late = rank_ == 0 ? 1 : 0; // every receive arrived: a send is stuck at its receiver
        return false;
    }

    [[noreturn]] void abort(int code) override { abort_job(code); }

    void abort_after(double seconds, int code) override {
        if (g_abort_code.exchange(code) != 0) return; // already arranged
        std::thread([seconds, code] {
            std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
            abort_job(code);
        }).detach();
    }

  private:
    // Waits until a message from `src` with `tag` can be received (its size in `status`), for at most timeout_s
    // seconds when > 0. MPI's blocking calls spin on a core; this polls, sleeping between polls from 1 up to 200
    // microseconds (poll), so waiting ranks leave the CPU to the ranks computing (often on the same host).
    bool wait_for(int src, int tag, double timeout_s, MPI_Status &status) {
        return poll(timeout_s, /*sleep=*/true, [&] {
            int ready = 0;
            check(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &ready, &status), "Iprobe");
            return ready != 0;
        });
    }

    // Calls done() until it says true (then true) or timeout_s seconds passed when > 0 (then false): spinning for the
    // first 20 microseconds, then yielding the core between calls (sched_yield: at once when no one else wants it)
    // up to 5 ms, then as poll with sleeps.
    template <class Done> static bool poll_yielding(double timeout_s, Done &&done) {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        for (;;) {
            if (done()) return true;
            const double waited = std::chrono::duration<double>(clock::now() - start).count();
            if (timeout_s > 0 && waited > timeout_s) return false;
            if (waited > 5e-3) break;
            if (waited > 20e-6) sched_yield();
        }
        const double spent = std::chrono::duration<double>(clock::now() - start).count();
        return poll(timeout_s > 0 ? std::max(timeout_s - spent, 1e-9) : 0, /*sleep=*/true, done);
    }

    // Calls done() until it says true (then true) or timeout_s seconds passed when > 0 (then false); with `sleep`,
    // sleeps between calls after the first few.
    template <class Done> static bool poll(double timeout_s, bool sleep, Done &&done) {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        auto pause = std::chrono::microseconds(1);
        for (int polls = 0;; ++polls) {
            if (done()) return true;
            if (timeout_s > 0 && std::chrono::duration<double>(clock::now() - start).count() > timeout_s) return false;
            if (!sleep || polls < 64) continue; // a message due any moment: poll without sleeping first
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(200));
        }
    }

    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
    std::string host_;
    std::vector<MPI_Request> requests_; // all_gather_within's
    std::vector<MPI_Status> statuses_;
};

// The process's transport lives until exit (abort_after's thread may still end the job after main returns).
mpi_transport *g_transport = nullptr;
bool g_initialized = false;

} // namespace

transport *launched_transport(int *argc, char ***argv) {
    if (g_transport != nullptr) return g_transport;
    if (g_initialized || launched_world_size() < 2) return nullptr;
    int provided = 0;
    // The engine's step thread talks to the other ranks while the main thread waits, one thread at a time; only
    // abort_after's thread may call in concurrently (MPI_Abort), which MPI_THREAD_MULTIPLE makes safe.
    check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "Init_thread");
    g_initialized = true;
    if (provided < MPI_THREAD_SERIALIZED)
        fail("this MPI library gives thread level {} but pipeline ranks need MPI_THREAD_SERIALIZED ({})", provided,
             MPI_THREAD_SERIALIZED);
    auto *t = new mpi_transport(); // never deleted: see g_transport
    if (t->size() < 2) {
        delete t;
        return nullptr;
    }
    g_transport = t;
    return g_transport;
}

void finalize_transport() {
    if (!g_initialized) return;
    // A broken pipeline ends the job here: MPI_Finalize would wait for the rank that stopped answering.
    if (const int code = g_abort_code.load(); code != 0) abort_job(code);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

} // namespace strata::distributed
