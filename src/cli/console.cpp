// Progress line, size and duration formatting, and the interrupt flag for the CLI commands.
#include "cli/console.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "stages/remote/http_transport.hpp"

namespace sluice::cli {

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  if (bytes < 1000) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000.0 && unit < 5) {
    value /= 1000.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, value < 10.0 ? "%.2f %s" : value < 100.0 ? "%.1f %s" : "%.0f %s",
                value, kUnits[unit]);
  return text;
}

std::string format_seconds(double seconds) {
  char text[48];
  if (seconds < 60.0) {
    std::snprintf(text, sizeof text, seconds < 10.0 ? "%.2f s" : "%.1f s", seconds);
  } else {
    const auto whole = static_cast<long>(seconds + 0.5);
    std::snprintf(text, sizeof text, "%ld min %02ld s", whole / 60, whole % 60);
  }
  return text;
}

ProgressLine::ProgressLine(std::string label, std::uint64_t total,
                           const std::atomic<std::uint64_t>& done, bool enabled)
    : label_(std::move(label)), total_(total), done_(done), enabled_(enabled) {
  if (enabled_) thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::finish() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  draw(true);
}

void ProgressLine::loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
    draw(false);
  }
}

void ProgressLine::draw(bool final_draw) {
  if (final_draw) {
    // Clear the line: the caller's summary replaces it.
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    return;
  }
  const std::uint64_t done = std::min(done_.load(std::memory_order_relaxed), total_);
  const double pct = total_ == 0 ? 100.0 : 100.0 * static_cast<double>(done) / total_;
  std::fprintf(stderr, "\r\033[K%s %llu/%llu (%.0f%%) %s", label_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
               pct, format_seconds(clock_.seconds()).c_str());
  std::fflush(stderr);
}

namespace {

volatile std::sig_atomic_t g_interrupted = 0;  // the signal's number, 0 before one
volatile std::sig_atomic_t g_last_signal = 0;   // kept after the guard goes, for the exit status

extern "C" void on_interrupt(int signal) {
  g_interrupted = signal;
  g_last_signal = signal;
}

struct sigaction g_previous_int;
struct sigaction g_previous_term;

}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted = 0;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
  // Network waits end too, build()'s fetch of remote shards included.
  stages::remote::set_process_stop(&InterruptGuard::interrupted);
}

InterruptGuard::~InterruptGuard() {
  stages::remote::set_process_stop(nullptr);
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

bool InterruptGuard::interrupted() { return g_interrupted != 0; }

int InterruptGuard::exit_status() { return g_last_signal != 0 ? 128 + g_last_signal : 128 + SIGINT; }

int worker_count(int requested, int cap) {
  if (requested > 0) return requested;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(hardware, 1, cap);
}

std::uint64_t resident_peak_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace sluice::cli
