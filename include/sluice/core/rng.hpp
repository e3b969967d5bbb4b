// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). Every random choice in
// sluice is a pure function of (seed, stream, counter), so results do not depend on which thread
// draws them or in what order: the root of "same seed, same batches at 1 thread or 16".
//
// Written here rather than taken from a library: Boost 1.74 (Debian 12) has no Philox, and
// <random>'s engines are sequential, which is exactly what we must avoid.
#pragma once

#include <array>
#include <cstdint>

namespace sluice {

// One Philox4x32-10 block: 128 random bits from a 64-bit key and a 128-bit counter.
std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 2> key,
                                        std::array<std::uint32_t, 4> counter);

// Mixes a seed and a stream id into a key (splitmix64), so streams of one seed are unrelated.
std::uint64_t derive_key(std::uint64_t seed, std::uint64_t stream);

// A stream of draws for one (key, a, b), e.g. (op key, epoch, sample). Cheap to construct;
// construct one where a random choice is needed rather than carrying generator state around.
class CounterRng {
 public:
  CounterRng(std::uint64_t key, std::uint64_t a, std::uint32_t b);

  std::uint32_t next_u32();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) without modulo bias; n > 0.
  std::uint64_t below(std::uint64_t n);
  bool bernoulli(double p) { return uniform() < p; }

 private:
  std::array<std::uint32_t, 2> key_;
  std::array<std::uint32_t, 4> counter_;
  std::array<std::uint32_t, 4> block_{};
  int used_ = 4;
};

}  // namespace sluice
