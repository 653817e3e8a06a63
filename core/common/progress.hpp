// Progress for long operations (model load, tier warm-up): a redrawn line on a terminal, a few log lines otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

class progress {
  public:
    progress(std::string what, uint64_t total);
    ~progress();
    void update(uint64_t done); // cheap when nothing new is to be shown
    void finish();

  private:
    std::string what_;
    uint64_t total_;
    int last_shown_ = -1; // percent (terminal) or quarter (log) last printed
    bool tty_;
    bool finished_ = false;
};

// Reads one byte of every page of a memory-mapped range so it is resident (after asking the kernel to read ahead).
void prefault(const void *data, uint64_t size);

// Reads every page of a memory-mapped range once so later compute does not stall on page faults, showing progress.
void prefault_with_progress(const void *data, uint64_t size, const std::string &what);

} // namespace strata
