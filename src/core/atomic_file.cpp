// The atomic writer of every file sluice produces (atomic_file.hpp): exclusive temporary, fsync,
// ownership check, rename, folder fsync.
#include "sluice/detail/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "sluice/core/error.hpp"

namespace sluice::core {

namespace {

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

ErrorCode code_of(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return ErrorCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS: return ErrorCode::kPermissionDenied;
    default: return ErrorCode::kIo;
  }
}

[[noreturn]] void fail(const OutputFile& target, const std::string& what, int err) {
  throw Error(code_of(err), "cannot write the " + target.noun + ": " + what + ": " + std::strerror(err),
              target.path);
}

// A name no other writer (another thread, another process, a dead run) uses: pid, a counter and
// random bits. Hidden, so a folder listing of a data set never picks it up.
std::string temp_name_for(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string name = name_of(path);
  if (name.size() > 200) name.resize(200);
  return folder_of(path) + "/." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1)) + "-" + std::to_string(random() & 0xffffff);
}

int create_exclusive(const OutputFile& target, std::string& temp) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    temp = temp_name_for(target.path);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          static_cast<mode_t>(target.mode));
    if (fd >= 0) return fd;  // the umask may narrow the mode further, never widen it
    if (errno != EEXIST) fail(target, "cannot create a temporary file in " + folder_of(target.path), errno);
  }
  fail(target, "cannot create a temporary file in " + folder_of(target.path), EEXIST);
}

void fsync_folder(const std::string& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename is done; a folder we cannot open cannot be synced either
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

Replaceable replaceable(const OutputFile& target) {
  struct stat st {};
  if (::lstat(target.path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return {false, std::string("cannot inspect it: ") + std::strerror(errno)};
  }
  if (S_ISDIR(st.st_mode)) return {false, "it is a folder"};
  if (target.force) return {};
  if (S_ISLNK(st.st_mode)) return {false, "it is a symbolic link (never written through); remove it or pass --force"};
  if (!S_ISREG(st.st_mode)) return {false, "it is not a regular file (a FIFO, socket or device)"};
  if (st.st_size == 0) return {};
  const std::string foreign = "a file that is not a sluice " + target.noun + " is there; it is left as it is "
                              "(remove it, choose another path, or pass --force)";
  if (!target.is_ours) return {false, foreign};
  const int fd = ::open(target.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return {false, std::string("cannot read what is there: ") + std::strerror(errno)};
  std::string head(kOwnHeadBytes, '\0');
  ssize_t got = 0;
  do {
    got = ::pread(fd, head.data(), head.size(), 0);
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got < 0) return {false, std::string("cannot read what is there: ") + std::strerror(errno)};
  head.resize(static_cast<std::size_t>(got));
  if (!target.is_ours(head)) return {false, foreign};
  return {};
}

void check_output(const OutputFile& target) {
  const Replaceable r = replaceable(target);
  if (!r.ok) throw Error(ErrorCode::kInvalidArgument, "will not write the " + target.noun + " here: " + r.why, target.path);
  std::string temp;
  const int fd = create_exclusive(target, temp);
  ::close(fd);
  ::unlink(temp.c_str());
}

AtomicFileWriter::AtomicFileWriter(OutputFile target) : target_(std::move(target)) {
  const Replaceable r = replaceable(target_);
  if (!r.ok) throw Error(ErrorCode::kInvalidArgument, "will not write the " + target_.noun + " here: " + r.why, target_.path);
  fd_ = create_exclusive(target_, temp_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(target_, "writing " + temp_, errno);
    }
    if (n == 0) fail(target_, "writing " + temp_, EIO);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) fail(target_, "syncing " + temp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(target_, "closing " + temp_, errno);
  // Checked again at the end: a long run may have found something else at the path by now.
  const Replaceable r = replaceable(target_);
  if (!r.ok) {
    throw Error(ErrorCode::kInvalidArgument, "will not replace what is at the path now: " + r.why, target_.path);
  }
  if (::rename(temp_.c_str(), target_.path.c_str()) != 0) fail(target_, "renaming " + temp_ + " into place", errno);
  committed_ = true;
  fsync_folder(target_.path);
}

void write_file_atomically(const OutputFile& target, std::string_view bytes) {
  AtomicFileWriter writer(target);
  writer.write(bytes);
  writer.commit();
}

}  // namespace sluice::core
