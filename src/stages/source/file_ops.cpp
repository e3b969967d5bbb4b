// The real file system behind FileOps, and the retrying whole-range read and write helpers that
// every user of the seam needs (pread and pwrite may transfer less than asked, and a signal may
// interrupt them).
#include "stages/source/file_ops.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace sluice::stages {

int FileOps::open(const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }

int FileOps::close(int fd) { return ::close(fd); }

ssize_t FileOps::pread(int fd, void* buffer, std::size_t count, off_t offset) {
  return ::pread(fd, buffer, count, offset);
}

ssize_t FileOps::pwrite(int fd, const void* buffer, std::size_t count, off_t offset) {
  return ::pwrite(fd, buffer, count, offset);
}

int FileOps::fsync(int fd) { return ::fsync(fd); }

int FileOps::ftruncate(int fd, off_t length) { return ::ftruncate(fd, length); }

int FileOps::fstat(int fd, struct stat* status) { return ::fstat(fd, status); }

int FileOps::flock(int fd, int operation) { return ::flock(fd, operation); }

int FileOps::rename(const char* from, const char* to) { return std::rename(from, to); }

int FileOps::link(const char* from, const char* to) { return ::link(from, to); }

int FileOps::unlink(const char* path) { return ::unlink(path); }

FileOps& real_file_ops() {
  static FileOps ops;
  return ops;
}

ssize_t pread_full(FileOps& ops, int fd, void* buffer, std::size_t count, std::uint64_t offset) {
  auto* out = static_cast<std::uint8_t*>(buffer);
  std::size_t done = 0;
  while (done < count) {
    const ssize_t n = ops.pread(fd, out + done, count - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;  // end of file
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

int pwrite_full(FileOps& ops, int fd, const void* buffer, std::size_t count, std::uint64_t offset) {
  const auto* in = static_cast<const std::uint8_t*>(buffer);
  std::size_t done = 0;
  while (done < count) {
    const ssize_t n = ops.pwrite(fd, in + done, count - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    // A regular file reports a full disk as ENOSPC on the next call; zero with no error would
    // loop forever, so it counts as an I/O error.
    if (n == 0) return EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace sluice::stages
