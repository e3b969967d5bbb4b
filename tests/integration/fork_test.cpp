// A process that forks (DataLoader workers, multiprocessing pools, a helper a training script
// starts): a child of a process whose loaders started workers fails at once with a message that
// says to use the spawn start method, whether it builds a new loader or iterates the parent's,
// and leaving that loader behind does not hang its exit; a child of a process that never built a
// loader works. Each child runs under an alarm, so a hang fails the test instead of blocking it.
// The first test must run before any loader in this process starts workers: ctest runs each
// test in a process of its own, and gtest runs them in the order written here.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

constexpr int kWorks = 10;
constexpr int kRefused = 11;
constexpr int kOtherError = 12;

Pipeline small_pipeline(const fs::path& dir) {
  return Pipeline::from_folder(dir.string()).read().decode_jpeg().resize(8, 8).batch(2);
}

// Runs `child` in a forked process under a 30 s alarm; returns its exit code, or 128 + signal.
template <class F>
int in_child(F child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(30);
    int code = kOtherError;
    try {
      code = child();
    } catch (const Error& e) {
      code = std::string(e.what()).find("'spawn' start method") != std::string::npos ? kRefused : kOtherError;
    } catch (...) {
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ForkedChild, OfAProcessWithoutLoadersWorks) {
  test::TempDir dir;
  test::make_image_folder(dir.path(), 2, 2, 16, 16);
  const int code = in_child([&] {
    Loader loader = small_pipeline(dir.path()).build({.threads = 2});
    int batches = 0;
    for ([[maybe_unused]] Batch& b : loader.epoch(0)) ++batches;
    return batches == 2 ? kWorks : kOtherError;
  });
  EXPECT_EQ(code, kWorks);
}

TEST(ForkedChild, OfAProcessWithWorkersFailsAtOnceWithTheSpawnAdvice) {
  test::TempDir dir;
  test::make_image_folder(dir.path(), 2, 2, 16, 16);
  Loader parent = small_pipeline(dir.path()).build({.threads = 2});
  for ([[maybe_unused]] Batch& b : parent.epoch(0)) {
  }
  // A new loader in the child.
  EXPECT_EQ(in_child([&] {
              Loader loader = small_pipeline(dir.path()).build({.threads = 2});
              for ([[maybe_unused]] Batch& b : loader.epoch(0)) {
              }
              return kWorks;
            }),
            kRefused);
  // The parent's loader, copied into the child, iterated there, then left to the child's exit.
  EXPECT_EQ(in_child([&] {
              for ([[maybe_unused]] Batch& b : parent.epoch(1)) {
              }
              return kWorks;
            }),
            kRefused);
  // The parent's loader destroyed in the child: returns (no join of threads that are not there).
  EXPECT_EQ(in_child([&] {
              { Loader moved = std::move(parent); }
              return kWorks;
            }),
            kWorks);
  // The parent goes on as before.
  int batches = 0;
  for ([[maybe_unused]] Batch& b : parent.epoch(2)) ++batches;
  EXPECT_EQ(batches, 2);
}

}  // namespace
}  // namespace sluice
