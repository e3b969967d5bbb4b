// Byte-level input and output that several modules share: little-endian put/get of fixed-width
// integers (every format sluice writes is little-endian), and reading a whole input file that
// must be a regular file under a size limit (states, specs, lists, weights, class lists), so
// that /dev/zero cannot grow a buffer without end and a FIFO cannot block a reader forever.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace sluice::core {

static_assert(std::endian::native == std::endian::little,
              "sluice's file formats are little-endian; add byte swaps for this target");

template <class T>
void put_le(std::uint8_t* out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(out, &v, sizeof v);
}

template <class T>
void append_le(std::vector<std::uint8_t>& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <class T>
T get_le(const std::uint8_t* in) {
  static_assert(std::is_trivially_copyable_v<T>);
  T v;
  std::memcpy(&v, in, sizeof v);
  return v;
}

// Reads a file through a window, for parsers that walk headers (a tar shard's, a disk cache's):
// at(offset, bytes) answers from the window when it holds those bytes, else with one new read of
// at least `read_bytes` at that offset (fewer at the file's end). One error handling for every
// such reader: a failed read throws sluice::Error(kIo) naming the path and the system's reason;
// bytes the file does not hold (past its end, or a file that shrank) are nullptr.
class WindowReader {
 public:
  // Reads `bytes` at `offset` whole (retrying short reads and EINTR): the count read, fewer only
  // at the end of the file, or -1 with errno set. Callers pass their own seam (FileOps).
  using FullRead = std::function<long(void* buffer, std::size_t bytes, std::uint64_t offset)>;

  WindowReader(FullRead read, std::uint64_t file_bytes, std::string path, std::size_t read_bytes)
      : read_(std::move(read)), file_bytes_(file_bytes), path_(std::move(path)), read_bytes_(read_bytes) {}

  void set_read_bytes(std::size_t bytes) { read_bytes_ = bytes; }
  const std::uint8_t* at(std::uint64_t offset, std::size_t bytes) { return at(offset, bytes, read_bytes_); }
  // The same with this call's least read size.
  const std::uint8_t* at(std::uint64_t offset, std::size_t bytes, std::size_t read_bytes);

 private:
  FullRead read_;
  std::uint64_t file_bytes_;
  std::string path_;
  std::size_t read_bytes_;
  std::vector<std::uint8_t> window_;
  std::uint64_t window_offset_ = 0;
  std::size_t window_bytes_ = 0;
};

// The bounds of read_regular_file for the kinds of input files.
inline constexpr std::uint64_t kMaxTextInputBytes = std::uint64_t{256} << 20;    // specs, lists, class lists
inline constexpr std::uint64_t kMaxStateBytes = std::uint64_t{1} << 30;          // loader states
inline constexpr std::uint64_t kMaxWeightsBytes = std::uint64_t{64} << 30;       // weights files

// Reads the file at `path` whole. Throws sluice::Error naming the path and `noun` ("state file"):
// kNotFound or kPermissionDenied when it cannot be opened; kInvalidArgument when it is not a
// regular file (it is opened without blocking, so a FIFO is refused at once, and never followed
// into a device); kTooLarge when it holds more than `max_bytes` (checked on the size and again
// while reading, for a file that grows); kIo on a read error.
std::vector<std::uint8_t> read_regular_file(const std::string& path, std::uint64_t max_bytes,
                                            const std::string& noun);
std::string read_regular_text(const std::string& path, std::uint64_t max_bytes, const std::string& noun);

}  // namespace sluice::core
