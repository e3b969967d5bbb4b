// The histograms `sluice inspect` draws (file sizes, shorter sides): buckets [min, max) counted
// file by file, printed as bars over the span that holds files, and written as JSON.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::cli {

// Histogram buckets [min, max); max 0 means unbounded.
struct Bucket {
  std::uint64_t min;
  std::uint64_t max;
  const char* label;
  std::uint64_t files = 0;
};

std::vector<Bucket> size_buckets();
// By the shorter side: what resize_shorter and the crops care about.
std::vector<Bucket> side_buckets();
void count_into(std::vector<Bucket>& buckets, std::uint64_t value);
nlohmann::json buckets_json(const std::vector<Bucket>& buckets);
void print_buckets(std::ostream& out, const std::vector<Bucket>& buckets);

}  // namespace sluice::cli
