// Philox4x32-10 and the draw helpers built on it.
#include "sluice/core/rng.hpp"

namespace sluice {

namespace {
constexpr std::uint32_t kMul0 = 0xD2511F53u;
constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}
}  // namespace

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 2> key,
                                        std::array<std::uint32_t, 4> ctr) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, ctr[0], hi0, lo0);
    mulhilo(kMul1, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

std::uint64_t derive_key(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

CounterRng::CounterRng(std::uint64_t key, std::uint64_t a, std::uint32_t b)
    : key_{static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)},
      counter_{0, b, static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(a >> 32)} {}

std::uint32_t CounterRng::next_u32() {
  if (used_ == 4) {
    block_ = philox4x32(key_, counter_);
    ++counter_[0];
    used_ = 0;
  }
  return block_[used_++];
}

double CounterRng::uniform() {
  const std::uint64_t hi = next_u32() >> 5;  // 27 bits
  const std::uint64_t lo = next_u32() >> 6;  // 26 bits
  return static_cast<double>((hi << 26) | lo) * 0x1p-53;
}

std::uint64_t CounterRng::below(std::uint64_t n) {
  // Lemire's multiply-shift with rejection, on 64 random bits.
  while (true) {
    const std::uint64_t x = (static_cast<std::uint64_t>(next_u32()) << 32) | next_u32();
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * n;
    const std::uint64_t low = static_cast<std::uint64_t>(m);
    if (low >= n || low >= (-n) % n) return static_cast<std::uint64_t>(m >> 64);
  }
}

}  // namespace sluice
