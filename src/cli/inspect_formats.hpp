// What `sluice inspect` says about the files' formats: files and bytes per format (by content, as
// the decode stage tells them apart), bit depths, alpha and animation, and every file whose
// content does not match its extension (a PNG named .jpg decodes, but its name misleads).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "stages/decode/image_format.hpp"

namespace sluice::cli {

class FormatTally {
 public:
  // One file: its path, size, the format its bytes start like, and its header when one was read.
  void add(const std::string& path, std::uint64_t bytes, stages::ImageFormat content, const stages::ImageProbe* probe);
  nlohmann::json to_json() const;
  void print(std::ostream& out, std::size_t listed) const;

 private:
  struct PerFormat {
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
    std::uint64_t alpha = 0;
    std::uint64_t animated = 0;
    std::map<int, std::uint64_t> bit_depths;  // per sample, of the headers read
  };
  std::array<PerFormat, stages::kImageFormatCount> formats_{};
  nlohmann::json mismatches_ = nlohmann::json::array();
};

}  // namespace sluice::cli
