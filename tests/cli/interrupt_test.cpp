// SIGINT and SIGTERM stop the command line within a second, with exit status 128 + the signal
// (130, 143), through its normal shutdown: the message says it was interrupted and the disk
// cache it was writing leaves no temporary file. Before, `bench` had no handler: the signal
// killed it wherever it was, a cache's temporary stayed behind, and nothing was said.
//
// The batches are large (256 imagenette photos on 2 threads: a second or more each), so the signal lands
// while the consumer waits for a batch: the wait itself must end, not only the loop around it. They
// are u8, so that build()'s faulting-in of the batch ring's slots (which a signal does not cut
// short) is over well before the signal.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "cli_test_support.hpp"
#include "test_support.hpp"

extern char** environ;

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

struct Stopped {
  int exit_code = -1;  // 128 + signal when the signal killed it
  double seconds_after_signal = 0;
  std::string err;
};

// Starts the CLI, sends `signal` after `after`, and waits (at most 30 s) for it to end.
Stopped signal_after(const std::vector<std::string>& args, int signal, std::chrono::milliseconds after,
                     const std::filesystem::path& err_file) {
  const pid_t pid = spawn_cli(args, err_file.string());
  EXPECT_GT(pid, 0) << "cannot start " << SLUICE_CLI;
  std::this_thread::sleep_for(after);
  Stopped out;
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != 0) {
    ADD_FAILURE() << "the command ended before the signal";
    return out;
  }
  kill(pid, signal);
  const auto sent = std::chrono::steady_clock::now();
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - sent > 30s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "still running 30 s after the signal";
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  out.seconds_after_signal = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_file);
  std::stringstream text;
  text << in.rdbuf();
  out.err = text.str();
  return out;
}

// Reads every file of the data set once, so the run under test reads from the page cache: what
// is timed is the shutdown, not how long a cold disk takes to answer the reads in flight.
void warm_page_cache(const std::filesystem::path& root) {
  std::vector<char> buffer(1 << 20);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
    }
  }
}

void expect_clean_stop(int signal, int expected_code) {
  SLUICE_REQUIRE_DATASET(data, "imagenette-val");
  warm_page_cache(data);
  TempDir dir;
  const std::filesystem::path cache = dir / "train.cache";
  const std::vector<std::string> args{"bench", "--data", data.string(), "--transform", "train", "--size", "224",
                                      "--batch", "256", "--out", "u8", "--threads", "2", "--epochs", "50",
                                      "--cache", "disk:" + cache.string()};
  const Stopped s = signal_after(args, signal, 1500ms, dir / "stderr.txt");
  EXPECT_EQ(s.exit_code, expected_code) << s.err;
  // A second on an idle machine; a busy one (CI runs two tests at once, a developer compiles
  // beside them) stretches every step of the shutdown by about the load per core.
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double allowed = std::max(1.0, load / cores);
  EXPECT_LT(s.seconds_after_signal, allowed)
      << "took " << s.seconds_after_signal << " s to stop (allowed " << allowed << " s at load " << load << ")";
  EXPECT_NE(s.err.find("interrupted"), std::string::npos) << "stderr: " << s.err;
  for (const auto& file : list_files(dir.path())) {
    EXPECT_EQ(file.string().find(".tmp"), std::string::npos) << "left behind: " << file;
  }
}

TEST(CliInterrupt, SigintStopsBenchWithin1sWith130AndNoTemporaries) { expect_clean_stop(SIGINT, 130); }

TEST(CliInterrupt, SigtermStopsBenchWithin1sWith143AndNoTemporaries) { expect_clean_stop(SIGTERM, 143); }

}  // namespace
}  // namespace sluice::test
