// DiskCacheStore across processes (fork): a writer killed with SIGKILL at a random moment and inside a
// write, two processes reading one cache at once, and a second writer that must become a reader.
// Children report through their exit status only (gtest assertions do not cross fork).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "disk_cache_test_util.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/cache/disk_cache_format.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using cache_test::FaultyFileOps;
using cache_test::key_for;
using cache_test::options_for;
using cache_test::payload_for;
using cache_test::size_of;
using test::TempDir;

constexpr std::size_t kMax = 30000;

struct Tally {
  int hits = 0;
  int wrong = 0;  // served bytes that differ from the original: must never happen
};

Tally look_up_all(DiskCacheStore& cache, int count) {
  Tally t;
  AlignedBuffer out;
  for (int i = 0; i < count; ++i) {
    const std::optional<std::size_t> n = cache.lookup(key_for(i), out);
    if (!n) continue;
    const std::vector<std::uint8_t> expected = payload_for(i, kMax);
    if (*n == expected.size() && std::equal(expected.begin(), expected.end(), out.data())) {
      ++t.hits;
    } else {
      ++t.wrong;
    }
  }
  return t;
}

// Runs `body` in a child process; its return value is the exit status.
pid_t spawn(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int status = 99;
    try {
      status = body();
    } catch (...) {
      status = 98;
    }
    ::_exit(status);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

void send(int fd) { ASSERT_EQ(::write(fd, "x", 1), 1); }
void receive(int fd) {
  char c;
  ASSERT_EQ(::read(fd, &c, 1), 1);
}

// After a crash: only complete, checksum-valid entries; a fresh writer completes the cache, and
// a run through it gives every original byte for byte.
void expect_recovers(const fs::path& path, int entries) {
  int before = 0;
  {
    DiskCacheStore cache(options_for(path));
    const Tally t = look_up_all(cache, entries);
    EXPECT_EQ(t.wrong, 0);
    EXPECT_EQ(t.hits, cache.stats().entries);
    EXPECT_EQ(cache.stats().dropped_corrupt, 0);
    before = t.hits;
    AlignedBuffer out;
    for (int i = 0; i < entries; ++i) {
      if (!cache.lookup(key_for(i), out)) {
        ASSERT_TRUE(cache.insert(key_for(i), payload_for(i, kMax)));
      }
    }
  }
  DiskCacheStore cache(options_for(path));
  const Tally t = look_up_all(cache, entries);
  EXPECT_EQ(t.wrong, 0);
  EXPECT_EQ(t.hits, entries) << before << " entries survived the crash";
  EXPECT_TRUE(cache.stats().note.empty()) << cache.stats().note;
}

TEST(DiskCacheProcess, WriterKilledAtARandomMomentLeavesOnlyCompleteEntries) {
  constexpr int kEntries = 3000;
  std::mt19937 rng(2024);
  int killed_midway = 0;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir;
    const fs::path path = dir / "c.cache";
    int started[2];
    ASSERT_EQ(::pipe(started), 0);
    const pid_t pid = spawn([&] {
      ::close(started[0]);
      DiskCacheStore cache(options_for(path));
      std::atomic<int> next{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
          for (int i; (i = next.fetch_add(1)) < kEntries;) {
            cache.insert(key_for(i), payload_for(i, kMax));
            if (i == 100) send(started[1]);
          }
        });
      }
      for (std::thread& t : threads) t.join();
      return 0;
    });
    ::close(started[1]);
    receive(started[0]);
    ::close(started[0]);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    ::kill(pid, SIGKILL);
    if (wait_for(pid) == 1000 + SIGKILL) ++killed_midway;
    expect_recovers(path, kEntries);
  }
  EXPECT_GT(killed_midway, 0) << "the writer always finished before the kill: the test proved little";
}

TEST(DiskCacheProcess, WriterKilledInsideAWrite) {
  constexpr int kEntries = 20;
  const std::size_t payload = payload_for(10, kMax).size();
  const std::size_t meta = disk_cache_format::metadata_bytes(key_for(10).path.size());
  // Entry 10 is cut: in its payload, after its payload (no header), inside its header, inside
  // its path.
  for (const std::size_t budget : {payload / 2, payload, payload + 20, payload + meta - 20}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    TempDir dir;
    const fs::path path = dir / "c.cache";
    const pid_t pid = spawn([&] {
      FaultyFileOps ops(path.string());
      ops.at_budget = FaultyFileOps::AtBudget::kKill;
      DiskCacheStore cache(options_for(path, 42, &ops));
      for (int i = 0; i < kEntries; ++i) {
        if (i == 10) ops.write_budget = static_cast<std::int64_t>(budget);
        cache.insert(key_for(i), payload_for(i, kMax));
      }
      return 0;
    });
    ASSERT_EQ(wait_for(pid), 1000 + SIGKILL);
    {
      DiskCacheStore cache(options_for(path));
      EXPECT_EQ(cache.stats().entries, 10);
      EXPECT_NE(cache.stats().note.find("recovered"), std::string::npos) << cache.stats().note;
    }
    expect_recovers(path, kEntries);
  }
}

TEST(DiskCacheProcess, WriterKilledWithAnUnfinishedEntryBeforeFinishedOnes) {
  // Entry 10's write is still in progress on one thread while another completes entries 11..15
  // after it in the file; then the process dies. Only 10 may be lost, and its bytes never served.
  constexpr int kEntries = 20;
  const std::size_t payload = payload_for(10, kMax).size();
  for (const std::size_t budget : {payload / 2, payload, payload + 20}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    TempDir dir;
    const fs::path path = dir / "c.cache";
    const pid_t pid = spawn([&] {
      FaultyFileOps ops(path.string());
      ops.at_budget = FaultyFileOps::AtBudget::kStall;
      DiskCacheStore cache(options_for(path, 42, &ops));
      for (int i = 0; i < 10; ++i) cache.insert(key_for(i), payload_for(i, kMax));
      std::thread slow([&] {
        ops.only_thread = std::this_thread::get_id();
        ops.write_budget = static_cast<std::int64_t>(budget);
        cache.insert(key_for(10), payload_for(10, kMax));
      });
      slow.detach();
      ops.stalled.wait(false);
      for (int i = 11; i < 16; ++i) cache.insert(key_for(i), payload_for(i, kMax));
      ::raise(SIGKILL);
      return 0;
    });
    ASSERT_EQ(wait_for(pid), 1000 + SIGKILL);
    {
      DiskCacheStore cache(options_for(path));
      EXPECT_EQ(cache.stats().entries, 15);
      const Tally t = look_up_all(cache, kEntries);
      EXPECT_EQ(t.hits, 15);
      EXPECT_EQ(t.wrong, 0);
      EXPECT_EQ(cache.stats().dropped_corrupt, 0);
    }
    expect_recovers(path, kEntries);
  }
}

TEST(DiskCacheProcess, TwoProcessesReadOneCacheAtOnce) {
  constexpr int kEntries = 400;
  TempDir dir;
  const fs::path path = dir / "c.cache";
  {
    DiskCacheStore cache(options_for(path));
    for (int i = 0; i < kEntries; ++i) ASSERT_TRUE(cache.insert(key_for(i), payload_for(i, kMax)));
  }
  const std::vector<std::uint8_t> data_before = test::read_bytes(path);
  const std::vector<std::uint8_t> index_before = test::read_bytes(dir / "c.cache.idx");
  int ready[2];
  int go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    children.push_back(spawn([&] {
      DiskCacheStore cache(options_for(path));
      send(ready[1]);
      receive(go[0]);
      for (int pass = 0; pass < 3; ++pass) {
        const Tally t = look_up_all(cache, kEntries);
        if (t.hits != kEntries || t.wrong != 0) return 1;
      }
      return cache.stats().dropped_corrupt == 0 ? 0 : 2;
    }));
  }
  receive(ready[0]);
  receive(ready[0]);  // both have opened before either reads
  send(go[1]);
  send(go[1]);
  for (const pid_t pid : children) EXPECT_EQ(wait_for(pid), 0);
  EXPECT_EQ(test::read_bytes(path), data_before);
  EXPECT_EQ(test::read_bytes(dir / "c.cache.idx"), index_before);
  DiskCacheStore cache(options_for(path));
  EXPECT_EQ(look_up_all(cache, kEntries).hits, kEntries);
}

TEST(DiskCacheProcess, SecondWriterProcessOpensReadOnly) {
  constexpr int kEntries = 400;
  TempDir dir;
  const fs::path path = dir / "c.cache";
  DiskCacheStore writer(options_for(path));
  for (int i = 0; i < kEntries / 2; ++i) ASSERT_TRUE(writer.insert(key_for(i), payload_for(i, kMax)));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = spawn([&] {
    DiskCacheStore cache(options_for(path));
    send(ready[1]);
    const DiskCacheStats s = cache.stats();
    if (s.writable || s.note.find("writing this cache") == std::string::npos) return 1;
    if (cache.insert(key_for(kEntries + 1), payload_for(1, kMax))) return 2;
    // While the writer appends, everything that was complete when this process opened is served.
    for (int pass = 0; pass < 5; ++pass) {
      const Tally t = look_up_all(cache, kEntries);
      if (t.wrong != 0 || t.hits < kEntries / 2) return 3;
    }
    return 0;
  });
  receive(ready[0]);
  for (int i = kEntries / 2; i < kEntries; ++i) ASSERT_TRUE(writer.insert(key_for(i), payload_for(i, kMax)));
  EXPECT_EQ(wait_for(pid), 0);
  EXPECT_EQ(look_up_all(writer, kEntries).hits, kEntries);
  EXPECT_TRUE(writer.stats().writable);
}

}  // namespace
}  // namespace sluice::stages
