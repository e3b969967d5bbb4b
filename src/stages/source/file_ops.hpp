// FileOps: the file-system calls of the disk cache behind one small virtual seam, so tests (and the
// fault injection) can make them fail (EIO, ENOSPC), come back short or flip bytes
// without a special file system. Each member mirrors the POSIX call of the same name: the same
// arguments, the same return value, errno set on failure. The base class performs the real call,
// so an injector derives from FileOps, overrides only what it perturbs and calls FileOps::pread
// (etc.) to pass the rest through.
//
// The virtual call costs nanoseconds next to the system call it wraps; callers hold a FileOps&
// chosen once (real_file_ops() unless a test supplies its own).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace sluice::stages {

class FileOps {
 public:
  FileOps() = default;
  virtual ~FileOps() = default;
  FileOps(const FileOps&) = delete;
  FileOps& operator=(const FileOps&) = delete;

  virtual int open(const char* path, int flags, mode_t mode);
  virtual int close(int fd);
  virtual ssize_t pread(int fd, void* buffer, std::size_t count, off_t offset);
  virtual ssize_t pwrite(int fd, const void* buffer, std::size_t count, off_t offset);
  virtual int fsync(int fd);
  virtual int ftruncate(int fd, off_t length);
  virtual int fstat(int fd, struct stat* status);
  virtual int flock(int fd, int operation);
  virtual int rename(const char* from, const char* to);
  // Creates `to` as another name of `from`; fails with EEXIST when `to` exists (never replaces).
  virtual int link(const char* from, const char* to);
  virtual int unlink(const char* path);
};

// The real file system; one process-wide instance with no state.
FileOps& real_file_ops();

// Reads up to `count` bytes at `offset`, retrying EINTR and short reads: returns the bytes read
// (fewer than `count` only at end of file) or -1 with errno set.
ssize_t pread_full(FileOps& ops, int fd, void* buffer, std::size_t count, std::uint64_t offset);

// Writes all `count` bytes at `offset`, retrying EINTR and short writes. Returns 0, or the errno
// of the failure (EIO when the system reports zero bytes written without an error).
int pwrite_full(FileOps& ops, int fd, const void* buffer, std::size_t count, std::uint64_t offset);

}  // namespace sluice::stages
