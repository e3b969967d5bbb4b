// What the commands share about talking to a person: a progress line on stderr (only when it is a
// terminal, so logs and pipes stay clean), human-readable sizes and durations, Ctrl-C turned into
// a flag that long loops poll, and a worker-count default.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::cli {

// True when stderr is a terminal: progress lines use '\r', which only makes sense there.
bool stderr_is_terminal();

// "53.7 MB", "812 B": decimal units, as the datasets README and most tools report sizes.
std::string format_bytes(std::uint64_t bytes);
// "0.84 s", "2 min 03 s".
std::string format_seconds(double seconds);

// Wall time since construction, in seconds.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Redraws "<label> done/total (pct%) elapsed" on stderr ten times a second from its own thread,
// reading a counter the workers bump; the workers never touch the terminal, so they never wait on
// it. Disabled (no thread, no output) when stderr is not a terminal or `enabled` is false.
class ProgressLine {
 public:
  ProgressLine(std::string label, std::uint64_t total, const std::atomic<std::uint64_t>& done,
               bool enabled = stderr_is_terminal());
  ~ProgressLine();  // finish()es
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Stops redrawing and clears the line, so the summary that follows starts at column 0.
  void finish();

 private:
  void draw(bool final_draw);
  void loop();

  std::string label_;
  std::uint64_t total_;
  const std::atomic<std::uint64_t>& done_;
  bool enabled_;
  Stopwatch clock_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Installs a SIGINT/SIGTERM handler for its lifetime that only sets a flag, so a command can stop
// its workers and clean up its partial output instead of dying mid-write. A loader's waits poll
// the flag through Loader::set_wait_check (kInterruptPoll), so a wait for a batch ends too.
inline constexpr std::chrono::milliseconds kInterruptPoll{50};

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  static bool interrupted();
  // What a command that stopped for a signal exits with: 128 + the signal's number (130 for
  // SIGINT, 143 for SIGTERM), as a shell reports a process the signal killed; 130 when no
  // signal came (a cancellation of another kind).
  static int exit_status();
};

// This process's peak resident set size so far (VmHWM), in bytes; 0 where /proc says nothing.
std::uint64_t resident_peak_bytes();

// Worker threads for file-bound work: `requested` when positive, else the hardware threads capped
// at `cap` (beyond that the disk, not the cores, sets the pace).
int worker_count(int requested, int cap);

}  // namespace sluice::cli
