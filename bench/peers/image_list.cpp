// Scanning an image folder into the shared, sorted file list, and writing it as a list file for
// the out-of-process torch peer.
#include "image_list.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;

// The extensions and the hidden-file rule of sluice's from_folder (the formats of
// bench/formats/ included), so both scans find the same files (loader_compare also checks the
// counts agree).
bool is_jpeg_name(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.empty() || name[0] == '.') return false;
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".jpe" || ext == ".jfif" || ext == ".png" || ext == ".webp" ||
         ext == ".bmp" || ext == ".gif" || ext == ".tif" || ext == ".tiff" || ext == ".ppm" || ext == ".pgm";
}

// Sorted by file name, like ImageFolder (which sorts os.scandir results): the byte order of the
// names, not the locale's.
std::vector<fs::path> sorted_jpegs(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && is_jpeg_name(e.path())) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void append_class(ImageList& list, const fs::path& dir, std::int32_t label) {
  for (const fs::path& file : sorted_jpegs(dir)) {
    list.total_bytes += fs::file_size(file);
    list.entries.push_back({file.string(), label});
  }
}

}  // namespace

ImageList scan_image_folder(const fs::path& dir) {
  if (!fs::is_directory(dir)) {
    throw std::runtime_error("not a folder: " + dir.string());
  }
  std::vector<fs::path> class_dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && !name.empty() && name[0] != '.') class_dirs.push_back(e.path());
  }
  std::sort(class_dirs.begin(), class_dirs.end());

  ImageList list;
  // ImageFolder's rule (sub-folders are the classes); a folder without sub-folders is one class,
  // label 0, as sluice's from_folder reads it.
  if (class_dirs.empty()) {
    list.classes.push_back("");
    append_class(list, dir, 0);
  } else {
    for (const fs::path& class_dir : class_dirs) {
      const auto label = static_cast<std::int32_t>(list.classes.size());
      list.classes.push_back(class_dir.filename().string());
      append_class(list, class_dir, label);
    }
  }
  if (list.entries.empty()) {
    throw std::runtime_error("no image files in " + dir.string());
  }
  return list;
}

ListFile::ListFile(const ImageList& list) {
  std::string pattern = (fs::temp_directory_path() / "loader_compare_XXXXXX.tsv").string();
  // mkstemps keeps the suffix: a unique name that no concurrent run (other engineers share the
  // machine) can collide with.
  const int fd = mkstemps(pattern.data(), 4);
  if (fd < 0) throw std::runtime_error("cannot create a temporary list file in /tmp");
  close(fd);
  path_ = pattern;
  std::ofstream out(path_);
  for (const ImageEntry& e : list.entries) out << e.path << '\t' << e.label << '\n';
  if (!out) throw std::runtime_error("cannot write " + path_.string());
}

ListFile::~ListFile() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

}  // namespace sluice::bench
