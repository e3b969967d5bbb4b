// FaultFs: a FileOps (stages/source/file_ops.hpp) for tests that passes every call to the real file
// system except the ones it was told to perturb: the Nth open or pread (or write, fstat...) of a
// path fails with a chosen errno, reads of a file stop after K bytes as if it had been cut
// short, a byte reads back flipped. It is how the reliability tests make a file vanish,
// fail with EIO or shrink under a running pipeline without a special file system or root.
//
// Hand it by pointer wherever a FileOps* is taken (stages::read_file, SampleProgramConfig::
// file_ops, DiskCacheOptions::file_ops, and whole pipelines through runtime::build_loader in
// src/runtime/loader_build.hpp). It is safe to call from every worker thread at once and to
// reconfigure while a pipeline runs (one mutex: the calls it wraps cost microseconds, the lock
// nanoseconds). Descriptors are mapped back to the path they were opened with, so faults on pread
// follow the file, not the fd number. It must outlive whatever uses it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "stages/source/file_ops.hpp"

namespace sluice::test {

// The calls a fault can target, one per FileOps member.
enum class FsOp : std::uint8_t { kOpen, kClose, kPread, kPwrite, kFsync, kFtruncate, kFstat, kFlock, kRename, kUnlink };

const char* to_string(FsOp op);

class FaultFs : public stages::FileOps {
 public:
  // As a path: every path (and descriptors FaultFs did not see opened).
  static inline const std::string kAnyPath{};
  // As `times`: every matching call from the nth on.
  static constexpr int kAlways = -1;

  FaultFs() = default;

  // Calls of `op` on `path` are counted from now; calls nth .. nth + times - 1 (1-based) fail
  // with errno `err` (EIO, ENOENT, ENOSPC, EACCES...) without reaching the file system. Rules
  // are independent: each counts its own matches.
  void fail(FsOp op, const std::string& path, int err, int nth = 1, int times = 1);
  // From now on, `path` looks `bytes` long to readers: pread returns nothing past it and fstat
  // reports at most that size (a file truncated under a running epoch). Replaces an earlier
  // limit on the same path.
  void truncate_reads(const std::string& path, std::uint64_t bytes);
  // Byte `offset` of `path` reads back XORed with `mask` (a bit rot or a torn page).
  void flip_byte(const std::string& path, std::uint64_t offset, std::uint8_t mask = 0xFF);
  // Drops every rule; counts and open descriptors are kept.
  void clear();

  // Faults that fired so far (failed calls, reads shortened or altered).
  int injected() const;
  // Calls of `op` on `path` seen so far (kAnyPath: all of them), faulted or not.
  int calls(FsOp op, const std::string& path = kAnyPath) const;

  int open(const char* path, int flags, mode_t mode) override;
  int close(int fd) override;
  ssize_t pread(int fd, void* buffer, std::size_t count, off_t offset) override;
  ssize_t pwrite(int fd, const void* buffer, std::size_t count, off_t offset) override;
  int fsync(int fd) override;
  int ftruncate(int fd, off_t length) override;
  int fstat(int fd, struct stat* status) override;
  int flock(int fd, int operation) override;
  int rename(const char* from, const char* to) override;
  int unlink(const char* path) override;

 private:
  struct FailRule {
    FsOp op;
    std::string path;
    int err;
    int nth;
    int times;
    int seen = 0;
  };
  struct Flip {
    std::string path;
    std::uint64_t offset;
    std::uint8_t mask;
  };

  // Counts the call and returns the errno a rule injects into it, or 0 to let it through.
  // Caller holds mutex_.
  int check_locked(FsOp op, const std::string& path);
  // The path `fd` was opened with through this FaultFs, or empty. Caller holds mutex_.
  std::string path_of_locked(int fd) const;
  // Runs `op` on `path` through the rules: -1 with errno set when a rule fires, else 0.
  int gate(FsOp op, const std::string& path);
  int gate_fd(FsOp op, int fd, std::string* path = nullptr);

  mutable std::mutex mutex_;
  std::unordered_map<int, std::string> open_paths_;
  std::vector<FailRule> failures_;
  std::map<std::string, std::uint64_t> truncations_;
  std::vector<Flip> flips_;
  std::map<std::pair<FsOp, std::string>, int> calls_;
  int injected_ = 0;
};

}  // namespace sluice::test
