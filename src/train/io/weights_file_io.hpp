// What the two weights file formats share (checkpoint.cpp: dense weights; compressed_weights.cpp:
// pruned weights as bitmaps and values): the container both are written in, and the byte-level
// pieces of their tables. Internal to the train module.
//
// The container, little-endian:
//   header (40 B): magic (8 B) | version u32 | tensor count u32 | table bytes u64 | blob bytes u64 |
//                  XXH3-64 of table then blob u64 (version 1 of both formats held a CRC-32 and a
//                  zero u32 here; it is refused with a message saying so)
//   table (table bytes): the format's per-tensor records
//   blob (blob bytes): the format's tensor data
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sluice/detail/core/binary_io.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/shape.hpp"

namespace sluice::train::weights_io {

// Appends v's bytes (the formats are little-endian, as every platform sluice builds for).
template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  core::append_le(out, v);
}

// Reads little-endian values from a byte range. Running out throws sluice::Error(kCorruptData)
// "<what> ends mid-entry" with the file's path.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size, std::string path, std::string what)
      : p_(data), end_(data + size), path_(std::move(path)), what_(std::move(what)) {}
  template <class T>
  T get() {
    need(sizeof(T));
    const T v = core::get_le<T>(p_);
    p_ += sizeof(T);
    return v;
  }
  std::string text(std::size_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  bool done() const { return p_ == end_; }

 private:
  void need(std::size_t n) const {
    if (static_cast<std::size_t>(end_ - p_) < n) throw Error(ErrorCode::kCorruptData, what_ + " ends mid-entry", path_);
  }
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::string path_;
  std::string what_;
};

inline constexpr std::size_t kContainerHeaderBytes = 40;

// One format's identity in the container: its magic, the version this build writes and reads,
// and its noun in messages ("weights file", "pruned weights file").
struct ContainerFormat {
  const char* magic = nullptr;  // 8 bytes
  std::uint32_t version = 0;
  const char* noun = "";
};

// Writes header, table and blob through core::AtomicFileWriter: an exclusive temporary beside
// `path`, fsynced, renamed over `path` only when nothing is there or a file of the same format
// is. Throws sluice::Error naming the path and the system's reason (ENOSPC, EACCES), or
// kInvalidArgument when something else is at the path.
void write_container(const std::string& path, const ContainerFormat& format, std::uint32_t count,
                     const std::vector<std::uint8_t>& table, const std::vector<std::uint8_t>& blob);

// Throws what write_container would for a path it cannot write, before any work is done: a run
// that ends by saving checks first (`train --save`).
void check_container_output(const std::string& path, const ContainerFormat& format);

// XXH3-64 of the table then the blob, as the header stores it.
std::uint64_t container_checksum(const std::uint8_t* table, std::size_t table_bytes, const std::uint8_t* blob,
                                 std::size_t blob_bytes);

// A container read back whole and validated: magic, version, sizes (no truncation, nothing after
// the blob) and the CRC. `table` and `blob` point into `file`.
struct Container {
  Container() = default;
  Container(Container&&) = default;  // moving keeps file's buffer, so table and blob stay valid
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  std::vector<std::uint8_t> file;
  std::uint32_t count = 0;
  const std::uint8_t* table = nullptr;
  std::uint64_t table_bytes = 0;
  const std::uint8_t* blob = nullptr;
  std::uint64_t blob_bytes = 0;
};
// Throws sluice::Error naming the path: kNotFound when it cannot be opened, kUnsupportedFormat
// for another magic or version, kCorruptData when truncated, longer than announced or when the
// checksum does not match.
Container read_container(const std::string& path, const ContainerFormat& format);
// The same checks on bytes already in memory (`path` names them in errors): what read_container
// runs after reading, and what fuzz/weights_fuzzer feeds.
Container parse_container(std::vector<std::uint8_t> bytes, const std::string& path, const ContainerFormat& format);

// A Shape of `rank` from stored dimensions (Shape grows only through its initializer list).
inline Shape shape_of(const std::array<std::int64_t, Shape::kMaxRank>& d, int rank) {
  switch (rank) {
    case 0: return {};
    case 1: return {d[0]};
    case 2: return {d[0], d[1]};
    case 3: return {d[0], d[1], d[2]};
    case 4: return {d[0], d[1], d[2], d[3]};
    case 5: return {d[0], d[1], d[2], d[3], d[4]};
    default: return {d[0], d[1], d[2], d[3], d[4], d[5]};
  }
}

}  // namespace sluice::train::weights_io
