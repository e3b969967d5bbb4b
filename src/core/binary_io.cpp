// Reading whole input files with one set of checks (binary_io.hpp).
#include "sluice/detail/core/binary_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sluice/core/error.hpp"

namespace sluice::core {

namespace {

template <class Bytes>
Bytes read_whole(const std::string& path, std::uint64_t max_bytes, const std::string& noun) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const ErrorCode code = err == ENOENT || err == ENOTDIR ? ErrorCode::kNotFound
                           : err == EACCES || err == EPERM ? ErrorCode::kPermissionDenied
                                                           : ErrorCode::kIo;
    throw Error(code, "cannot open the " + noun + ": " + std::strerror(err), path);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(ErrorCode::kIo, "cannot stat the " + noun + ": " + std::strerror(errno), path);
  if (!S_ISREG(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument,
                "the " + noun + " is not a regular file (" +
                    (S_ISDIR(st.st_mode) ? "a folder" : "a FIFO, socket or device") + ")",
                path);
  }
  const auto too_large = [&] {
    return Error(ErrorCode::kTooLarge, "the " + noun + " is larger than " + std::to_string(max_bytes) +
                                           " bytes, the most sluice reads of it", path);
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) throw too_large();
  Bytes out;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  for (;;) {
    if (done == out.size()) {
      // The file may have grown since fstat: read on, within the bound.
      if (out.size() >= max_bytes) {
        char probe;
        ssize_t n;
        do {
          n = ::read(fd, &probe, 1);
        } while (n < 0 && errno == EINTR);
        if (n > 0) throw too_large();
        if (n < 0) throw Error(ErrorCode::kIo, "cannot read the " + noun + ": " + std::strerror(errno), path);
        break;
      }
      out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(max_bytes, out.size() + 65536)));
    }
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::kIo, "cannot read the " + noun + ": " + std::strerror(errno), path);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace

const std::uint8_t* WindowReader::at(std::uint64_t offset, std::size_t bytes, std::size_t read_bytes) {
  if (offset >= window_offset_ && offset - window_offset_ <= window_bytes_ &&
      bytes <= window_bytes_ - (offset - window_offset_)) {
    return window_.data() + (offset - window_offset_);
  }
  if (offset > file_bytes_ || bytes > file_bytes_ - offset) return nullptr;
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(std::max(bytes, read_bytes), file_bytes_ - offset));
  if (window_.size() < want) window_.resize(want);
  window_offset_ = offset;
  window_bytes_ = 0;
  const long got = read_(window_.data(), want, offset);
  if (got < 0) throw Error(ErrorCode::kIo, std::string("cannot read: ") + std::strerror(errno), path_);
  window_bytes_ = static_cast<std::size_t>(got);
  return window_bytes_ >= bytes ? window_.data() : nullptr;  // short: the file shrank under us
}

std::vector<std::uint8_t> read_regular_file(const std::string& path, std::uint64_t max_bytes,
                                            const std::string& noun) {
  return read_whole<std::vector<std::uint8_t>>(path, max_bytes, noun);
}

std::string read_regular_text(const std::string& path, std::uint64_t max_bytes, const std::string& noun) {
  return read_whole<std::string>(path, max_bytes, noun);
}

}  // namespace sluice::core
