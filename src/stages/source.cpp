// Listing of folders and list files into items.
#include "stages/source.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "sluice/core/error.hpp"

namespace sluice::stages {

namespace fs = std::filesystem;

bool has_jpeg_extension(const std::string& filename) {
  const auto dot = filename.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = filename.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "jpg" || ext == "jpeg" || ext == "jpe" || ext == "jfif";
}

namespace {

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// The folder being listed: its canonical path, for telling whether a symlink's target leaves it.
struct Root {
  fs::path canonical;
  bool allow_outside = false;
};

bool inside(const fs::path& canonical_target, const fs::path& root) {
  auto t = canonical_target.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++t) {
    if (t == canonical_target.end() || *t != *r) return false;
  }
  return true;
}

// A symlink's target must stay inside the root (issue 14) unless allowed. A dangling symlink is
// left to the read, which names it ("no such file").
void check_symlink(const fs::directory_entry& entry, const Root& root) {
  std::error_code ec;
  if (root.allow_outside || !entry.is_symlink(ec)) return;
  const fs::path target = fs::canonical(entry.path(), ec);
  if (ec || inside(target, root.canonical)) return;
  throw Error(ErrorCode::kInvalidArgument,
              "symlink to " + target.string() + " leaves the data set's folder; use from_folder(dir, "
              "{.allow_outside_root = true}) (JSON: \"allow_outside_root\": true) if that is intended",
              entry.path().string());
}

// What a folder lists: regular files (through symlinks too) and names that do not resolve (the
// read reports them). FIFOs, sockets and devices named .jpg are not listed: reading one would
// block a worker or never end.
bool listable(const fs::directory_entry& entry) {
  std::error_code ec;
  const fs::file_status status = entry.status(ec);
  return fs::is_regular_file(status) || status.type() == fs::file_type::not_found;
}

void append_images(const fs::path& dir, std::int32_t label, const Root& root, std::vector<Item>& out) {
  std::vector<std::string> paths;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot list folder: " + ec.message(), dir.string());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw Error(ErrorCode::kIo, "cannot list folder: " + ec.message(), dir.string());
    if (hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    const bool folder = it->is_directory(ec);
    if (!folder && !has_jpeg_extension(it->path().filename().string())) continue;
    if (!folder && !listable(*it)) continue;
    check_symlink(*it, root);  // a folder symlink before the walk enters it
    if (!folder) paths.push_back(it->path().string());
  }
  std::sort(paths.begin(), paths.end());
  for (auto& p : paths) out.push_back(Item{std::move(p), label});
}

Dataset load_folder(const spec::Folder& folder) {
  const fs::path root(folder.path);
  std::error_code ec;
  if (!fs::exists(root, ec)) throw Error(ErrorCode::kNotFound, "no such folder", folder.path);
  if (!fs::is_directory(root, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "not a folder (use from_list for a list file)",
                folder.path);
  }
  // The root itself may be a symlink (data/train -> /mnt/big/train): what is inside is judged
  // against where it resolves.
  const Root checked{fs::canonical(root, ec), folder.allow_outside_root};
  if (ec) throw Error(ErrorCode::kIo, "cannot resolve folder: " + ec.message(), folder.path);
  std::vector<fs::path> classes;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!hidden(entry.path()) && entry.is_directory()) {
      check_symlink(entry, checked);
      classes.push_back(entry.path());
    }
  }
  if (ec) throw Error(ErrorCode::kIo, "cannot list folder: " + ec.message(), folder.path);
  std::sort(classes.begin(), classes.end());

  Dataset dataset;
  if (classes.empty()) {
    dataset.class_names.push_back(root.filename().string());
    append_images(root, 0, checked, dataset.items);
  } else {
    for (std::size_t i = 0; i < classes.size(); ++i) {
      dataset.class_names.push_back(classes[i].filename().string());
      append_images(classes[i], static_cast<std::int32_t>(i), checked, dataset.items);
    }
  }
  if (dataset.items.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "no JPEG files found (expected class sub-folders holding .jpg or .jpeg files)",
                folder.path);
  }
  return dataset;
}

Dataset load_list(const spec::ListFile& list) {
  // Only a regular file: opening a FIFO would wait for a writer, a device might never end.
  struct stat st {};
  if (::stat(list.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument,
                S_ISDIR(st.st_mode) ? "is a folder, not a list file (use from_folder)" : "not a regular file",
                list.path);
  }
  std::ifstream in(list.path);
  if (!in) {
    std::error_code ec;
    const bool exists = fs::exists(list.path, ec);
    throw Error(exists ? ErrorCode::kPermissionDenied : ErrorCode::kNotFound,
                exists ? "cannot open list file" : "no such list file", list.path);
  }
  const fs::path base = fs::path(list.path).parent_path();
  Dataset dataset;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.rfind('\t');
    const auto where = list.path + ":" + std::to_string(number);
    if (tab == std::string::npos || tab == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "expected \"path<TAB>label\", got \"" + line + "\"", where);
    }
    std::int32_t label = -1;
    const char* first = line.data() + tab + 1;
    const char* last = line.data() + line.size();
    const auto [ptr, ec] = std::from_chars(first, last, label);
    if (ec != std::errc{} || ptr != last || label < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "label must be a non-negative integer, got \"" + std::string(first, last) + "\"",
                  where);
    }
    fs::path path(line.substr(0, tab));
    if (path.is_relative()) {
      // A relative entry must stay inside the list's folder: a list from elsewhere must not
      // reach files its author did not mean to share.
      const fs::path inside = path.lexically_normal();
      if (!list.allow_outside_root && !inside.empty() && *inside.begin() == "..") {
        throw Error(ErrorCode::kInvalidArgument,
                    "entry \"" + path.string() + "\" leaves the list's folder; use from_list(path, "
                    "{.allow_outside_root = true}) if that is intended",
                    where);
      }
      path = base / inside;
    }
    dataset.items.push_back(Item{path.lexically_normal().string(), label});
  }
  if (dataset.items.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "list file has no entries", list.path);
  }
  return dataset;
}

Dataset load_items(const spec::Items& items) {
  if (items.items.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "from_items() was given an empty list");
  }
  for (const Item& item : items.items) {
    if (item.label < 0) {
      throw Error(ErrorCode::kInvalidArgument, "label must be non-negative", item.path);
    }
  }
  return Dataset{items.items, {}};
}

}  // namespace

Dataset load_dataset(const spec::Source& source) {
  struct Visitor {
    Dataset operator()(const spec::Folder& f) const { return load_folder(f); }
    Dataset operator()(const spec::ListFile& l) const { return load_list(l); }
    Dataset operator()(const spec::Items& i) const { return load_items(i); }
  };
  return std::visit(Visitor{}, source);
}

}  // namespace sluice::stages
