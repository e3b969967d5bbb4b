// A batch's bytes and labels hashed (FNV-1a, 64 bits), and an epoch's batches as a list of such
// hashes: what the tests compare when they ask "the same batches" of two loaders (local and
// remote shards, a folder and its shards, one rank and another).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <sluice/sluice.hpp>

namespace sluice::test {

inline std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline std::uint64_t hash_batch(const Batch& b) {
  return hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes()));
}

inline std::vector<std::uint64_t> batch_hashes(Loader& loader, std::int64_t epoch) {
  std::vector<std::uint64_t> out;
  for (Batch& b : loader.epoch(epoch)) out.push_back(hash_batch(b));
  return out;
}

}  // namespace sluice::test
