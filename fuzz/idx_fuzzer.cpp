// idx_fuzzer: the IDX reader of `sluice prepare` (src/cli/idx_reader.cpp) on crafted files
// parse_idx_images / parse_idx_labels on the bytes as they are, and read_gzip_file on
// them as a file (zlib passes non-gzip data through), capped at 1 MiB of output.
//
// Input: [0] flags: bit 0 labels instead of images, bit 1 through read_gzip_file   [1..] the file
// Expected: images or labels whose sizes agree with the header, or sluice::Error. A finding: a
// crash, a sanitizer report, another exception, kInternal, or a result whose pixel buffer does
// not hold count x rows x cols bytes.
#include <cstdint>
#include <vector>

#include "cli/idx_reader.hpp"
#include "fuzz_support.hpp"

namespace sluice::fuzz {

std::vector<std::uint8_t> be32s(std::initializer_list<std::uint32_t> values) {
  std::vector<std::uint8_t> out;
  for (const std::uint32_t v : values) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
  }
  return out;
}

void write_seeds(const std::filesystem::path& folder) {
  std::vector<std::uint8_t> images = be32s({cli::kIdxImagesMagic, 3, 4, 5});
  for (int i = 0; i < 60; ++i) images.push_back(static_cast<std::uint8_t>(i * 7));
  std::vector<std::uint8_t> labels = be32s({cli::kIdxLabelsMagic, 6});
  for (int i = 0; i < 6; ++i) labels.push_back(static_cast<std::uint8_t>(i));
  for (const std::uint8_t flags : {0, 2}) {
    std::vector<std::uint8_t> seed = {flags};
    seed.insert(seed.end(), images.begin(), images.end());
    write_seed(folder, "images_" + std::to_string(flags), seed);
    seed = {static_cast<std::uint8_t>(flags | 1)};
    seed.insert(seed.end(), labels.begin(), labels.end());
    write_seed(folder, "labels_" + std::to_string(flags), seed);
  }
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  using namespace sluice::fuzz;
  if (size < 1) return -1;
  const std::uint8_t flags = data[0];
  std::vector<std::uint8_t> bytes(data + 1, data + size);
  try {
    if ((flags & 2) != 0) {
      static const std::filesystem::path path = scratch() / "f.idx";
      write_file(path, bytes.data(), bytes.size());
      bytes = cli::read_gzip_file(path, std::size_t{1} << 20);
    }
    if ((flags & 1) != 0) {
      const std::size_t n = bytes.size();
      const cli::IdxLabels labels = cli::parse_idx_labels(std::move(bytes), "fuzz");
      if (labels.labels.size() + 8 != n) finding("labels", "size disagrees with the file");
    } else {
      const cli::IdxImages images = cli::parse_idx_images(std::move(bytes), "fuzz");
      if (images.pixels.size() != std::uint64_t{images.count} * images.rows * images.cols) {
        finding("images", "pixels disagree with the header");
      }
      if (images.count > 0) (void)*images.image(images.count - 1);
    }
  } catch (const Error& e) {
    check_error(e, "idx");
  }
  return 0;
}
