// The histograms of `sluice inspect` (inspect_histograms.hpp).
#include "cli/inspect_histograms.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace sluice::cli {

std::vector<Bucket> size_buckets() {
  constexpr std::uint64_t k = 1024;
  return {{0, 1, "empty"},
          {1, k, "< 1 KiB"},
          {k, 4 * k, "1-4 KiB"},
          {4 * k, 16 * k, "4-16 KiB"},
          {16 * k, 64 * k, "16-64 KiB"},
          {64 * k, 256 * k, "64-256 KiB"},
          {256 * k, k * k, "256 KiB-1 MiB"},
          {k * k, 4 * k * k, "1-4 MiB"},
          {4 * k * k, 16 * k * k, "4-16 MiB"},
          {16 * k * k, 0, ">= 16 MiB"}};
}

std::vector<Bucket> side_buckets() {
  return {{0, 32, "< 32"},          {32, 64, "32-63"},       {64, 128, "64-127"},
          {128, 256, "128-255"},    {256, 512, "256-511"},   {512, 1024, "512-1023"},
          {1024, 2048, "1024-2047"}, {2048, 4096, "2048-4095"}, {4096, 0, ">= 4096"}};
}

void count_into(std::vector<Bucket>& buckets, std::uint64_t value) {
  for (Bucket& b : buckets) {
    if (value >= b.min && (b.max == 0 || value < b.max)) {
      ++b.files;
      return;
    }
  }
}

nlohmann::json buckets_json(const std::vector<Bucket>& buckets) {
  nlohmann::json out = nlohmann::json::array();
  for (const Bucket& b : buckets) {
    out.push_back({{"min", b.min}, {"max", b.max == 0 ? nlohmann::json(nullptr) : nlohmann::json(b.max)},
                   {"label", b.label}, {"files", b.files}});
  }
  return out;
}

void print_buckets(std::ostream& out, const std::vector<Bucket>& buckets) {
  // Only the span that holds files: a dozen empty rows hide the shape.
  std::size_t first = buckets.size();
  std::size_t last = 0;
  std::uint64_t peak = 1;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].files == 0) continue;
    first = std::min(first, i);
    last = i;
    peak = std::max(peak, buckets[i].files);
  }
  for (std::size_t i = first; i <= last && first < buckets.size(); ++i) {
    const auto width = static_cast<std::size_t>(40 * buckets[i].files / peak);
    char line[160];
    std::snprintf(line, sizeof line, "  %-14s %8llu  %s\n", buckets[i].label,
                  static_cast<unsigned long long>(buckets[i].files), std::string(width, '#').c_str());
    out << line;
  }
}

}  // namespace sluice::cli
