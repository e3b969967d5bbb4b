// pread of whole files. No stdio and no std::ifstream: one open, preads straight into the pooled
// buffer (an fstat only when the buffer fills), one close, every call through the FileOps seam.
// Tar members: one pread of header and data from a shard held open.
#include "stages/source/read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/remote/remote_timeline.hpp"
#include "stages/tar/tar_format.hpp"

namespace sluice::stages {

namespace {

[[noreturn]] void throw_errno(int err, const char* what, const std::string& path) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      throw Error(ErrorCode::kNotFound, "no such file", path);
    case EACCES:
    case EPERM:
      throw Error(ErrorCode::kPermissionDenied, std::string(what) + ": permission denied", path);
    case EISDIR:
      throw Error(ErrorCode::kIo, "is a folder, not a file", path);
    case ESPIPE:  // pread on a FIFO
    case ENXIO:   // open of a socket
      throw Error(ErrorCode::kIo, "not a regular file (a FIFO, socket or device)", path);
    default:
      throw Error(ErrorCode::kIo, std::string(what) + ": " + std::strerror(err), path);
  }
}

// Closes through the same FileOps that opened it, so an injector sees the descriptor go.
class FileDescriptor {
 public:
  FileDescriptor(FileOps& ops, int fd) : ops_(ops), fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ops_.close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  FileOps& ops_;
  int fd_;
};

// O_NONBLOCK: a FIFO named in a list (or swapped in after listing) opens at once instead of
// waiting for a writer, and reads as empty or EAGAIN, an error naming it; a socket fails to open
// (ENXIO). O_NOCTTY: a terminal never becomes ours. Neither changes reads of regular files.
constexpr int kOpenFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

std::uint64_t checked_size(FileOps& ops, int fd, const std::string& path) {
  struct stat st {};
  if (ops.fstat(fd, &st) != 0) throw_errno(errno, "cannot stat", path);
  if (S_ISDIR(st.st_mode)) throw_errno(EISDIR, "cannot read", path);
  if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::kIo, "not a regular file", path);
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace

// Always through the seam, no direct-call fast path: it adds three or four virtual calls per file
// to as many system calls, which cost far more, and neither a loop of read_file nor the loader
// benchmark tells it from direct calls (docs/performance.md, "Figures behind choices in the code").
std::uint64_t file_size(const std::string& path, FileOps* ops_or_null) {
  FileOps& ops = ops_or_null != nullptr ? *ops_or_null : real_file_ops();
  FileDescriptor fd(ops, ops.open(path.c_str(), kOpenFlags, 0));
  if (fd.get() < 0) throw_errno(errno, "cannot open", path);
  return checked_size(ops, fd.get(), path);
}

std::size_t read_file(const std::string& path, AlignedBuffer& buffer, std::uint64_t max_bytes,
                      FileOps* ops_or_null) {
  FileOps& ops = ops_or_null != nullptr ? *ops_or_null : real_file_ops();
  FileDescriptor fd(ops, ops.open(path.c_str(), kOpenFlags, 0));
  if (fd.get() < 0) throw_errno(errno, "cannot open", path);
  // No fstat in the common case: a pread into a buffer larger than the file returns short, and a
  // short read of a regular file means end of file. Only a full buffer (a file at least as large
  // as any seen so far) asks the size, to check the limit and grow.
  std::size_t done = 0;
  bool sized = false;
  while (true) {
    if (buffer.capacity() == 0 || done == buffer.capacity()) {
      const std::uint64_t size = checked_size(ops, fd.get(), path);
      if (size > max_bytes) {
        throw Error(ErrorCode::kTooLarge,
                    "file is " + format_bytes(size) + ", above the maximum file size (" +
                        format_bytes(max_bytes) + ")",
                    path);
      }
      if (sized || size <= done) break;  // the file did not grow beyond what we hold
      // Grow through reserve (which accounts against the buffer's budget, if any) and read again
      // from the start: it happens a handful of times per worker, never in steady state.
      buffer.reserve(static_cast<std::size_t>(size) + 1);  // +1: the read that sees EOF
      done = 0;
      sized = true;
    }
    const ssize_t n = ops.pread(fd.get(), buffer.data() + done, buffer.capacity() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot read", path);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done < buffer.capacity()) break;  // short read: end of file
  }
  if (done == 0) {
    checked_size(ops, fd.get(), path);  // /dev/null reads empty too: say what it is
    throw Error(ErrorCode::kCorruptData, "empty file", path);
  }
  if (done > max_bytes) {
    throw Error(ErrorCode::kTooLarge,
                "file is larger than the maximum file size (" + format_bytes(max_bytes) + ")", path);
  }
  return done;
}

ItemReader::ItemReader(FileOps* ops) : ops_(ops != nullptr ? ops : &real_file_ops()) {}

ItemReader::~ItemReader() { close_all(); }

void ItemReader::close_all() {
  for (OpenShard& open : open_) {
    if (open.fd >= 0) ops_->close(open.fd);
    open = OpenShard{};
  }
}

void ItemReader::use(FileOps* ops) {
  FileOps* wanted = ops != nullptr ? ops : &real_file_ops();
  if (wanted == ops_) return;
  close_all();
  ops_ = wanted;
}

const std::string& ItemReader::file_path(const ItemTable::Location& at) {
  path_.assign(at.folder);
  path_.append(at.name);
  return path_;
}

namespace {

// One read's wait for a streamed shard's bytes, polled: pause() throws when the epoch was
// abandoned (kCancelled) or the shard's wait limit has passed (kIo), else sleeps, 200 us doubling
// to 5 ms between looks.
class ByteWait {
 public:
  ByteWait(const FetchFailure& f, const std::string& name)
      : f_(f),
        name_(name),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.wait_limit_s))),
        interrupts_(f.interrupts != nullptr ? f.interrupts->load(std::memory_order_acquire) : 0) {}

  void pause() {
    if (f_.interrupts != nullptr && f_.interrupts->load(std::memory_order_acquire) != interrupts_) {
      throw Error(ErrorCode::kCancelled, "the epoch was abandoned while this read waited for the shard's bytes", name_);
    }
    if (Clock::now() > deadline_) {
      throw Error(ErrorCode::kIo, "the shard's bytes did not arrive within " + std::to_string(static_cast<int>(f_.wait_limit_s)) + " s", name_);
    }
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::microseconds(5000));
  }

 private:
  using Clock = std::chrono::steady_clock;
  const FetchFailure& f_;
  const std::string& name_;
  Clock::time_point deadline_;
  std::uint64_t interrupts_;
  std::chrono::microseconds pause_{200};
};

// SLUICE_LOG=debug: each read of a remote shard streamed on demand, when its bytes were there and
// how long it waited for them, as a "read" line of the remote timeline (remote_timeline.hpp).
class ReadTimeline {
 public:
  explicit ReadTimeline(const std::string& name)
      : name_(name), asked_(remote::timeline_enabled() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
  ~ReadTimeline() {
    if (asked_ == std::chrono::steady_clock::time_point{}) return;
    char waited[48];
    std::snprintf(waited, sizeof waited, "waited_ms=%.3f",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked_).count());
    remote::timeline("read", name_, waited);
  }
  ReadTimeline(const ReadTimeline&) = delete;
  ReadTimeline& operator=(const ReadTimeline&) = delete;

 private:
  const std::string& name_;
  std::chrono::steady_clock::time_point asked_;
};

// A streamed shard (FetchFailure's comment): waits until bytes [0, end) of it have arrived and
// says whether to read them from the partial file (true) or from the copy (false). Throws when
// the fetch failed, or when the bytes are not there within the shard's wait limit.
bool wait_for_bytes(const FetchFailure& f, std::uint64_t end, const std::string& name) {
  ByteWait wait(f, name);
  const ReadTimeline line(name);
  for (;;) {
    if (f.failed.load(std::memory_order_acquire)) throw Error(ErrorCode::kIo, "the shard could not be fetched: " + f.cause, name);
    if (!f.arriving.load(std::memory_order_acquire)) return false;
    const std::uint64_t arrived = f.arrived.load(std::memory_order_acquire);
    if (arrived == FetchFailure::kCopyCurrent) return false;
    if (arrived >= end) return true;
    wait.pause();
  }
}

// A shard streamed into memory (cache_limit 0): waits until bytes [0, end) of it are there, as
// wait_for_bytes does, and returns them (the caller holds them while it copies). Throws when the
// fetch failed or stopped, or when the epoch's last read of the shard has freed them already.
std::shared_ptr<std::uint8_t[]> wait_for_memory(const FetchFailure& f, std::uint64_t end, const std::string& name) {
  ByteWait wait(f, name);
  for (;;) {
    if (f.failed.load(std::memory_order_acquire)) throw Error(ErrorCode::kIo, "the shard could not be fetched: " + f.cause, name);
    const bool arriving = f.arriving.load(std::memory_order_acquire);
    if (f.arrived.load(std::memory_order_acquire) >= end) {
      const std::lock_guard<std::mutex> lock(f.memory->mutex);
      if (f.memory->bytes == nullptr) {
        throw Error(ErrorCode::kIo, "the shard's bytes were freed: every sample of it this epoch had been read", name);
      }
      return f.memory->bytes;
    }
    if (!arriving) throw Error(ErrorCode::kIo, "the shard is not being fetched (its stream was stopped)", name);
    f.memory->wanted.store(true, std::memory_order_release);
    wait.pause();
  }
}

// Counts a read of a shard streamed into memory, whatever its outcome: the epoch's last one
// frees the shard's bytes.
struct CountedRead {
  explicit CountedRead(FetchFailure::Memory* m) : memory(m) {}
  FetchFailure::Memory* memory = nullptr;
  CountedRead(const CountedRead&) = delete;
  CountedRead& operator=(const CountedRead&) = delete;
  ~CountedRead() {
    if (memory != nullptr && memory->unread.fetch_sub(1, std::memory_order_acq_rel) == 1) memory->release();
  }
};

// Copies item's header block and data out of its shard's memory into `buffer`.
void read_from_memory(const ItemTable& items, std::int64_t item, const ItemTable::Location& at, const FetchFailure& f,
                      AlignedBuffer& buffer) {
  const std::shared_ptr<std::uint8_t[]> bytes = wait_for_memory(f, at.offset + at.size, items.path(item));
  const std::size_t total = static_cast<std::size_t>(tar::kBlock + at.size);
  buffer.reserve(total);
  std::memcpy(buffer.data(), bytes.get() + (at.offset - tar::kBlock), total);
}

}  // namespace

int ItemReader::shard_fd(const ItemTable& items, std::int32_t shard, bool partial) {
  ++uses_;
  OpenShard* victim = &open_[0];
  for (OpenShard& open : open_) {
    if (open.table == &items && open.shard == shard) {
      open.last_use = uses_;
      return open.fd;
    }
    if (open.last_use < victim->last_use) victim = &open;
  }
  const ItemTable::Shard& s = items.shards()[static_cast<std::size_t>(shard)];
  // A shard still arriving is read from its partial file, whose size is not the shard's yet (the
  // member's header is checked as ever); once moved into place it is the copy (same file).
  int fd = partial ? ops_->open(s.fetch_failure->partial.c_str(), kOpenFlags, 0) : -1;
  if (fd < 0) {
    partial = false;
    fd = ops_->open(s.path.c_str(), kOpenFlags, 0);
  }
  if (fd < 0) throw_errno(errno, "cannot open shard", s.name());
  FileDescriptor guard(*ops_, fd);
  struct stat st {};
  if (ops_->fstat(fd, &st) != 0) throw_errno(errno, "cannot stat shard", s.name());
  const std::int64_t mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  const bool mtime_known = s.mtime_ns != ItemTable::Shard::kAnyMtime;
  if (!S_ISREG(st.st_mode) ||
      (!partial && (static_cast<std::uint64_t>(st.st_size) != s.size || (mtime_known && mtime_ns != s.mtime_ns)))) {
    throw Error(ErrorCode::kCorruptData,
                "the shard changed since it was indexed (its size or mtime differs): build the pipeline again",
                s.name());
  }
  if (victim->fd >= 0) ops_->close(victim->fd);
  *victim = OpenShard{&items, shard, guard.release(), uses_};
  return victim->fd;
}

std::span<const std::uint8_t> ItemReader::read(const ItemTable& items, std::int64_t item, AlignedBuffer& buffer,
                                               std::uint64_t max_bytes) {
  const ItemTable::Location at = items.locate(item);
  if (at.kind == ItemTable::Kind::kFile) {
    const std::size_t n = read_file(file_path(at), buffer, max_bytes, ops_);
    return {buffer.data(), n};
  }
  const FetchFailure* failure = items.shards()[static_cast<std::size_t>(at.shard)].fetch_failure.get();
  const CountedRead counted{failure != nullptr ? failure->memory.get() : nullptr};
  if (at.damage != nullptr) throw Error(ErrorCode::kCorruptData, *at.damage, items.path(item));
  if (at.size > max_bytes) {
    throw Error(ErrorCode::kTooLarge,
                "member is " + format_bytes(at.size) + ", above the maximum file size (" + format_bytes(max_bytes) + ")",
                items.path(item));
  }
  if (at.size == 0) throw Error(ErrorCode::kCorruptData, "empty member", items.path(item));
  // The header too: one read, and the check below that the index still describes this shard.
  const std::size_t total = static_cast<std::size_t>(tar::kBlock + at.size);
  if (counted.memory != nullptr) {
    read_from_memory(items, item, at, *failure, buffer);
  } else {
    const bool partial = failure != nullptr && wait_for_bytes(*failure, at.offset + at.size, items.path(item));
    const int fd = shard_fd(items, at.shard, partial);
    buffer.reserve(total);
    const ssize_t got = pread_full(*ops_, fd, buffer.data(), total, at.offset - tar::kBlock);
    if (got < 0) throw_errno(errno, "cannot read", items.path(item));
    if (static_cast<std::size_t>(got) < total) {
      throw Error(ErrorCode::kCorruptData,
                  "cut: the shard ends inside this member (" + std::to_string(at.size) + " bytes when indexed)",
                  items.path(item));
    }
  }
  tar::Header header;
  std::string why;
  if (tar::parse_header(buffer.data(), header, why) != tar::Block::kHeader || !tar::is_regular(header.type) ||
      (at.size_in_header && header.size != at.size)) {
    throw Error(ErrorCode::kCorruptData,
                "the member's header does not match the shard's index (" + (why.empty() ? "another member" : why) +
                    "): the shard changed since it was indexed",
                items.path(item));
  }
  return {buffer.data() + tar::kBlock, static_cast<std::size_t>(at.size)};
}

std::uint64_t ItemReader::workspace_requirements(std::uint64_t bytes, ItemTable::Kind kind) {
  return kind == ItemTable::Kind::kMember ? bytes + tar::kBlock : bytes;  // read_member's header block
}

std::uint64_t ItemReader::size(const ItemTable& items, std::int64_t item) {
  const ItemTable::Location at = items.locate(item);
  if (at.kind == ItemTable::Kind::kFile) return file_size(file_path(at), ops_);
  if (at.damage != nullptr) throw Error(ErrorCode::kCorruptData, *at.damage, items.path(item));
  return at.size;
}

}  // namespace sluice::stages
