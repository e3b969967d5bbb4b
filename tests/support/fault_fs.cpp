// FaultFs: the rule matching and the perturbed calls. Every call takes the one mutex for its
// bookkeeping only; the real system call runs outside it, so a slow or blocking read on one
// worker never serialises the others.
#include "fault_fs.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sluice::test {

const char* to_string(FsOp op) {
  switch (op) {
    case FsOp::kOpen: return "open";
    case FsOp::kClose: return "close";
    case FsOp::kPread: return "pread";
    case FsOp::kPwrite: return "pwrite";
    case FsOp::kFsync: return "fsync";
    case FsOp::kFtruncate: return "ftruncate";
    case FsOp::kFstat: return "fstat";
    case FsOp::kFlock: return "flock";
    case FsOp::kRename: return "rename";
    case FsOp::kUnlink: return "unlink";
  }
  return "?";
}

void FaultFs::fail(FsOp op, const std::string& path, int err, int nth, int times) {
  const std::lock_guard lock(mutex_);
  failures_.push_back(FailRule{op, path, err, std::max(nth, 1), times});
}

void FaultFs::truncate_reads(const std::string& path, std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  truncations_[path] = bytes;
}

void FaultFs::flip_byte(const std::string& path, std::uint64_t offset, std::uint8_t mask) {
  const std::lock_guard lock(mutex_);
  flips_.push_back(Flip{path, offset, mask});
}

void FaultFs::clear() {
  const std::lock_guard lock(mutex_);
  failures_.clear();
  truncations_.clear();
  flips_.clear();
}

int FaultFs::injected() const {
  const std::lock_guard lock(mutex_);
  return injected_;
}

int FaultFs::calls(FsOp op, const std::string& path) const {
  const std::lock_guard lock(mutex_);
  int total = 0;
  for (const auto& [key, count] : calls_) {
    if (key.first == op && (path.empty() || key.second == path)) total += count;
  }
  return total;
}

int FaultFs::check_locked(FsOp op, const std::string& path) {
  ++calls_[{op, path}];
  int err = 0;
  // Every matching rule counts the call, even when an earlier one already fires, so each rule's
  // "nth" means the nth call since it was added whatever the other rules do.
  for (FailRule& rule : failures_) {
    if (rule.op != op || (!rule.path.empty() && rule.path != path)) continue;
    const int index = ++rule.seen;
    const bool hit = index >= rule.nth && (rule.times == kAlways || index < rule.nth + rule.times);
    if (hit && err == 0) err = rule.err;
  }
  if (err != 0) ++injected_;
  return err;
}

std::string FaultFs::path_of_locked(int fd) const {
  const auto it = open_paths_.find(fd);
  return it == open_paths_.end() ? std::string() : it->second;
}

int FaultFs::gate(FsOp op, const std::string& path) {
  int err = 0;
  {
    const std::lock_guard lock(mutex_);
    err = check_locked(op, path);
  }
  if (err == 0) return 0;
  errno = err;
  return -1;
}

int FaultFs::gate_fd(FsOp op, int fd, std::string* path) {
  int err = 0;
  {
    const std::lock_guard lock(mutex_);
    const std::string p = path_of_locked(fd);
    err = check_locked(op, p);
    if (path != nullptr) *path = p;
  }
  if (err == 0) return 0;
  errno = err;
  return -1;
}

int FaultFs::open(const char* path, int flags, mode_t mode) {
  if (gate(FsOp::kOpen, path) != 0) return -1;
  const int fd = FileOps::open(path, flags, mode);
  if (fd >= 0) {
    const std::lock_guard lock(mutex_);
    open_paths_[fd] = path;
  }
  return fd;
}

int FaultFs::close(int fd) {
  std::string path;
  {
    // Forget the descriptor whatever happens: after close() its number may be reused at once.
    const std::lock_guard lock(mutex_);
    path = path_of_locked(fd);
    open_paths_.erase(fd);
    if (const int err = check_locked(FsOp::kClose, path); err != 0) {
      // POSIX leaves the descriptor state unspecified after a failed close; Linux always frees
      // it, and so do we, or a test that injects this would leak descriptors.
      FileOps::close(fd);
      errno = err;
      return -1;
    }
  }
  return FileOps::close(fd);
}

ssize_t FaultFs::pread(int fd, void* buffer, std::size_t count, off_t offset) {
  std::string path;
  if (gate_fd(FsOp::kPread, fd, &path) != 0) return -1;
  std::uint64_t limit = UINT64_MAX;
  std::vector<Flip> flips;
  {
    const std::lock_guard lock(mutex_);
    if (const auto it = truncations_.find(path); it != truncations_.end()) limit = it->second;
    for (const Flip& f : flips_) {
      if (f.path == path) flips.push_back(f);
    }
  }
  const auto start = static_cast<std::uint64_t>(offset);
  std::size_t want = count;
  bool shortened = false;
  if (limit != UINT64_MAX) {
    const std::uint64_t room = start >= limit ? 0 : limit - start;
    if (room < want) {
      want = static_cast<std::size_t>(room);
      shortened = true;
    }
  }
  const ssize_t n = want == 0 ? 0 : FileOps::pread(fd, buffer, want, offset);
  if (n < 0) return n;
  bool flipped = false;
  auto* bytes = static_cast<std::uint8_t*>(buffer);
  for (const Flip& f : flips) {
    if (f.offset >= start && f.offset < start + static_cast<std::uint64_t>(n)) {
      bytes[f.offset - start] ^= f.mask;
      flipped = true;
    }
  }
  // A read the limit cut counts as injected only when the file really had more to give.
  if (flipped || (shortened && static_cast<std::size_t>(n) == want && want < count)) {
    const std::lock_guard lock(mutex_);
    ++injected_;
  }
  return n;
}

ssize_t FaultFs::pwrite(int fd, const void* buffer, std::size_t count, off_t offset) {
  if (gate_fd(FsOp::kPwrite, fd) != 0) return -1;
  return FileOps::pwrite(fd, buffer, count, offset);
}

int FaultFs::fsync(int fd) {
  if (gate_fd(FsOp::kFsync, fd) != 0) return -1;
  return FileOps::fsync(fd);
}

int FaultFs::ftruncate(int fd, off_t length) {
  if (gate_fd(FsOp::kFtruncate, fd) != 0) return -1;
  return FileOps::ftruncate(fd, length);
}

int FaultFs::fstat(int fd, struct stat* status) {
  std::string path;
  if (gate_fd(FsOp::kFstat, fd, &path) != 0) return -1;
  const int rc = FileOps::fstat(fd, status);
  if (rc != 0) return rc;
  const std::lock_guard lock(mutex_);
  if (const auto it = truncations_.find(path); it != truncations_.end()) {
    status->st_size = std::min<off_t>(status->st_size, static_cast<off_t>(it->second));
  }
  return 0;
}

int FaultFs::flock(int fd, int operation) {
  if (gate_fd(FsOp::kFlock, fd) != 0) return -1;
  return FileOps::flock(fd, operation);
}

int FaultFs::rename(const char* from, const char* to) {
  if (gate(FsOp::kRename, from) != 0) return -1;
  return FileOps::rename(from, to);
}

int FaultFs::unlink(const char* path) {
  if (gate(FsOp::kUnlink, path) != 0) return -1;
  return FileOps::unlink(path);
}

}  // namespace sluice::test
