// The link between the processes of one job (#16): pipeline and tensor-parallel ranks that are processes of their own,
// launched by mpirun (one process per rank, on one host or several), exchange commands, steps, the residual stream,
// partial sums and KV blocks through this interface. The only implementation is MPI's (mpi_transport.cpp, OpenMPI from Debian); the engine never
// names MPI, and a build without MPI (STRATA_WITH_MPI=OFF) has no transport and refuses to start under mpirun.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::distributed {

class transport {
  public:
    virtual ~transport() = default;
    // This process's rank among size() processes; rank 0 runs the frontend, the scheduler and the first stage.
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // The processes on this host (they share its memory) and this one's index among them.
    virtual int local_rank() const = 0;
    virtual int local_size() const = 0;
    virtual const std::string &host_name() const = 0;
    // Point-to-point messages of bytes (in order per source and tag). recv waits for one and returns the bytes
    // received; it throws strata::error when the message is larger than `capacity`. A waiting receive polls and
    // sleeps in between (up to 200 microseconds), so a rank waiting for its next step leaves the CPU to the ranks
    // computing on it.
    virtual void send(int dest, int tag, const void *data, size_t bytes) = 0;
    virtual size_t recv(int src, int tag, void *data, size_t capacity) = 0;
    // As send, but gives up after timeout_s seconds (a receiver that stopped taking messages) and returns false; the
    // message may still go out later, so the caller must treat the link as broken.
    virtual bool send_within(int dest, int tag, const void *data, size_t bytes, double timeout_s) = 0;
    // As recv, but gives up after timeout_s seconds and returns false (nothing received).
    virtual bool recv_within(int src, int tag, void *data, size_t capacity, double timeout_s, size_t &received) = 0;
    // Waits for the next message from `src` with `tag` without receiving it and returns its size in bytes (to size
    // the buffer for a message whose length varies).
    virtual size_t next_size(int src, int tag) = 0;
    // A message of any length (text: an error, a name).
    virtual std::string recv_text(int src, int tag) = 0;
    // An all-gather among every process of the job, in point-to-point messages with `tag`: each sends its `bytes` at
    // `mine` to every other and rank k's message lands at all + k * bytes (this one's own copied there too), its
    // length in received[k] (a rank may send a shorter message: process_all_reduce's end of a step). Every process
    // must call it, in the same order. A waiting process spins, then yields its core, then sleeps. False when some
    // rank's message did not arrive within timeout_s (> 0) seconds: `late` is the first such rank, and the link is
    // broken (a message may still be under way).
    virtual bool all_gather_within(int tag, const void *mine, size_t bytes, void *all, size_t *received,
                                   double timeout_s, int &late) = 0;
    // Ends every process of the job with `code` (a rank that cannot go on and cannot tell rank 0 why in a message).
    [[noreturn]] virtual void abort(int code) = 0;
    // The pipeline broke (a rank stopped answering): every process of the job ends with `code` after `seconds` (time
    // for the frontends to answer the failed requests), from a thread of its own, or at once when this process
    // reaches finalize_transport first (MPI_Finalize would wait for the rank that stopped answering).
    virtual void abort_after(double seconds, int code) = 0;
};

// The transport of this process when mpirun (or another MPI launcher) started it with more than one process, else
// nullptr (one process: pipeline ranks run in it, as before). Initializes MPI on the first call; call it on the main
// thread before any other thread starts. Throws strata::error when launched by MPI but built without it.
transport *launched_transport(int *argc, char ***argv);
// Finalizes MPI if launched_transport started it (at the end of main).
void finalize_transport();

} // namespace strata::distributed
