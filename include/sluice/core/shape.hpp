// Tensor shapes (up to 6 dimensions, no allocation) and a non-owning typed tensor view.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "sluice/core/dtype.hpp"

namespace sluice {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) {
    for (std::int64_t d : dims) dims_[rank_++] = d;
  }

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[i]; }
  std::int64_t& operator[](int i) { return dims_[i]; }
  std::int64_t elements() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  const std::int64_t* begin() const { return dims_.data(); }
  const std::int64_t* end() const { return dims_.data() + rank_; }

  // "(256, 3, 224, 224)"
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i) {
      if (a.dims_[i] != b.dims_[i]) return false;
    }
    return true;
  }

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// A dense, row-major tensor somewhere in host memory.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kU8;
  Shape shape;

  std::size_t bytes() const { return static_cast<std::size_t>(shape.elements()) * size_of(dtype); }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
};

}  // namespace sluice
