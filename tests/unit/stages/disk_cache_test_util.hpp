// Shared by the disk cache tests: deterministic keys and payloads (so a child process and its
// parent agree on them without talking), and a FileOps that injects the faults the contract
// covers: a full disk after N bytes, a kill in the middle of a write, a flipped byte on read.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/source/file_ops.hpp"

namespace sluice::stages::cache_test {

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline CacheKey key_for(int i) {
  return {"/data/train/class" + std::to_string(i % 10) + "/image_" + std::to_string(i) + ".jpg",
          static_cast<std::uint64_t>(1000 + i), 1'700'000'000'000'000'000 + i};
}

// A payload of 1..max_bytes bytes (sizes vary so entries straddle pages and windows).
inline std::vector<std::uint8_t> payload_for(int i, std::size_t max_bytes = 20000) {
  const std::size_t size = 1 + mix(static_cast<std::uint64_t>(i)) % max_bytes;
  std::vector<std::uint8_t> bytes(size);
  std::uint64_t state = mix(static_cast<std::uint64_t>(i) + 7777);
  for (std::size_t k = 0; k < size; k += 8) {
    state = mix(state);
    std::memcpy(bytes.data() + k, &state, std::min<std::size_t>(8, size - k));
  }
  return bytes;
}

inline DiskCacheOptions options_for(const std::filesystem::path& path, std::uint64_t fingerprint = 42,
                                    FileOps* ops = nullptr, std::uint64_t max_bytes = 0) {
  DiskCacheOptions o;
  o.path = path.string();
  o.fingerprint = fingerprint;
  o.file_ops = ops;
  o.max_bytes = max_bytes;
  return o;
}

// True when the lookup hit and returned exactly `expected`.
inline bool hit_equals(DiskCacheStore& cache, const CacheKey& key, const std::vector<std::uint8_t>& expected,
                       AlignedBuffer& out) {
  const std::optional<std::size_t> n = cache.lookup(key, out);
  return n && *n == expected.size() && std::equal(expected.begin(), expected.end(), out.data());
}

inline std::uint64_t size_of(const std::filesystem::path& path) {
  return static_cast<std::uint64_t>(std::filesystem::file_size(path));
}

// Faults on the cache's data file (the descriptor opened on `data_path`); everything else passes.
class FaultyFileOps : public FileOps {
 public:
  explicit FaultyFileOps(std::string data_path) : data_path_(std::move(data_path)) {}

  int open(const char* path, int flags, mode_t mode) override {
    const int fd = FileOps::open(path, flags, mode);
    if (fd >= 0 && data_path_ == path) data_fd_ = fd;
    return fd;
  }

  ssize_t pread(int fd, void* buffer, std::size_t count, off_t offset) override {
    const ssize_t n = FileOps::pread(fd, buffer, count, offset);
    if (fd == data_fd_ && n > 0) {
      data_bytes_read += static_cast<std::uint64_t>(n);
      if (flip_next_read.exchange(false)) static_cast<std::uint8_t*>(buffer)[n / 2] ^= 0x20;
    }
    return n;
  }

  // What happens to the write that exhausts the budget and to the writes after it.
  enum class AtBudget {
    kFail,   // the crossing write comes back short, the next fails with fail_errno
    kKill,   // the process is killed right after the crossing write (a crash mid-write)
    kStall,  // the writing thread stops for good (a write still in progress); `stalled` is set
  };

  // With a budget set, writes to the data file stop after that many more bytes (by the thread
  // in only_thread, when set).
  ssize_t pwrite(int fd, const void* buffer, std::size_t count, off_t offset) override {
    const std::thread::id only = only_thread.load();
    if (fd != data_fd_ || write_budget.load() < 0 ||
        (only != std::thread::id() && only != std::this_thread::get_id())) {
      return FileOps::pwrite(fd, buffer, count, offset);
    }
    ssize_t done = -1;
    {
      std::lock_guard lock(mutex_);
      const std::int64_t budget = write_budget.load();
      if (budget > 0) {
        done = FileOps::pwrite(fd, buffer, std::min<std::size_t>(count, static_cast<std::size_t>(budget)), offset);
        if (done > 0) write_budget -= done;
      }
    }
    if (write_budget.load() == 0 && at_budget == AtBudget::kKill) ::raise(SIGKILL);
    if (write_budget.load() == 0 && at_budget == AtBudget::kStall) {
      stalled = true;
      stalled.notify_all();
      for (;;) ::pause();
    }
    if (done < 0) errno = fail_errno;
    return done;
  }

  std::atomic<std::int64_t> write_budget{-1};  // -1: no limit
  AtBudget at_budget = AtBudget::kFail;
  int fail_errno = ENOSPC;
  std::atomic<std::thread::id> only_thread{};
  std::atomic<bool> stalled{false};
  std::atomic<bool> flip_next_read{false};
  std::atomic<std::uint64_t> data_bytes_read{0};

 private:
  std::string data_path_;
  std::atomic<int> data_fd_{-1};
  std::mutex mutex_;
};

}  // namespace sluice::stages::cache_test
