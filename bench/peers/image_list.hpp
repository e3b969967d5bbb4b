// The one file list every system in a comparison reads: an image folder scanned the way
// torchvision's ImageFolder does it (class = sub-folder, classes and files sorted by name; a flat
// folder of images is one class, label 0), so sluice, the decode limit, the OpenCV loop and the
// PyTorch DataLoader see the same files in the same order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sluice::bench {

struct ImageEntry {
  std::string path;
  std::int32_t label = 0;
};

struct ImageList {
  std::vector<ImageEntry> entries;
  std::vector<std::string> classes;  // label -> class name; a flat folder has one, named ""
  std::uint64_t total_bytes = 0;     // sum of file sizes, for the report
};

// Throws std::runtime_error when dir is missing or holds no JPEG (.jpg .jpeg .jpe .jfif, any
// case; hidden files and folders are skipped).
ImageList scan_image_folder(const std::filesystem::path& dir);

// Writes "path<TAB>label" lines (the list format sluice's from_list and the torch peer read) to
// a fresh file under the system's temporary folder; the file is removed when the object dies.
class ListFile {
 public:
  explicit ListFile(const ImageList& list);
  ~ListFile();
  ListFile(const ListFile&) = delete;
  ListFile& operator=(const ListFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace sluice::bench
