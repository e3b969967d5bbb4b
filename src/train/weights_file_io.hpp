// The byte-level pieces the two weights file formats share (checkpoint.cpp: dense weights;
// compressed_weights.cpp: pruned weights as bitmaps and values): appending little-endian values to
// a buffer, reading them back with a clear error when the bytes run out, and rebuilding a Shape
// from the dimensions a table stores. Internal to the train module.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/shape.hpp"

namespace sluice::train::weights_io {

// Appends v's bytes (the formats are little-endian, as every platform sluice builds for).
template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

// Reads little-endian values from a byte range. Running out throws sluice::Error(kCorruptData)
// "<what> ends mid-entry" with the file's path.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size, std::string path, std::string what)
      : p_(data), end_(data + size), path_(std::move(path)), what_(std::move(what)) {}
  template <class T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
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
