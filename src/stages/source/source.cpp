// Listing of folders and list files into the item table.
#include "stages/source/source.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"
#include "stages/remote/remote_shards.hpp"
#include "stages/remote/remote_stats.hpp"
#include "stages/remote/remote_url.hpp"
#include "stages/tar/tar_source.hpp"

namespace sluice::stages {

namespace fs = std::filesystem;

bool has_image_extension(std::string_view filename) { return format_of_extension(filename) != ImageFormat::kUnknown; }

std::string escape_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  const auto hex = [&out](unsigned char c) {
    static constexpr char kDigits[] = "0123456789abcdef";
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  };
  for (std::size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == '\\') { out += "\\\\"; ++i; continue; }
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c == '\r') { out += "\\r"; ++i; continue; }
    if (c == '\t') { out += "\\t"; ++i; continue; }
    if (c < 0x20 || c == 0x7f) { hex(c); ++i; continue; }
    if (c < 0x80) { out += static_cast<char>(c); ++i; continue; }
    // A well-formed UTF-8 sequence is kept; any other byte is escaped.
    const int length = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    bool valid = length > 0 && i + static_cast<std::size_t>(length) <= name.size();
    for (int k = 1; valid && k < length; ++k) valid = (static_cast<unsigned char>(name[i + k]) & 0xc0) == 0x80;
    if (valid && length == 3) {
      const auto c1 = static_cast<unsigned char>(name[i + 1]);
      valid = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogates
    }
    if (valid && length == 4) {
      const auto c1 = static_cast<unsigned char>(name[i + 1]);
      valid = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (!valid) { hex(c); ++i; continue; }
    out.append(name.substr(i, static_cast<std::size_t>(length)));
    i += static_cast<std::size_t>(length);
  }
  return out;
}

namespace {

bool hidden(std::string_view name) { return !name.empty() && name[0] == '.'; }

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

// A symlink's target must stay inside the root unless allowed. A dangling symlink is
// left to the read, which names it ("no such file").
void check_symlink(const std::string& path, const Root& root) {
  if (root.allow_outside) return;
  std::error_code ec;
  const fs::path target = fs::canonical(path, ec);
  if (ec || inside(target, root.canonical)) return;
  throw Error(ErrorCode::kInvalidArgument,
              "symlink to " + target.string() + " leaves the data set's folder; allow it with "
              "allow_outside_root (JSON \"allow_outside_root\": true, on the command line --allow-outside-root) "
              "if that is intended",
              path);
}

[[noreturn]] void cannot_list(const std::string& dir, int err) {
  throw Error(ErrorCode::kIo, "cannot list folder: " + std::error_code(err, std::generic_category()).message(), dir);
}

// Collects the JPEG paths under `dir` (which ends in '/'), recursively, following folder symlinks,
// relative to the first folder listed (so sorting them compares only what differs), into one
// arena: a string per file cost a malloc and a free each, a tenth of the listing.
// readdir's d_type answers "file or folder" for almost every entry, so only symlinks (and file
// systems without d_type) cost a stat: std::filesystem's iterator stat'ed every file, a third of
// the listing time on 1.28M files. What is listed: regular files (through symlinks too) and names
// that do not resolve (the read reports them); FIFOs, sockets and devices named .jpg are not:
// reading one would block a worker or never end.
class TreeLister {
 public:
  // Each path found: its offset and length in `arena`.
  using Found = std::vector<std::pair<std::size_t, std::size_t>>;
  TreeLister(const Root& root, std::size_t base, std::string& arena, Found& found)
      : root_(root), base_(base), arena_(arena), found_(found) {}

  void list(std::string& dir) {
    std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), &::closedir);
    if (!handle) cannot_list(dir, errno);
    struct stat self {};
    if (::fstat(::dirfd(handle.get()), &self) != 0) cannot_list(dir, errno);
    // A folder symlink back to a folder being listed would recurse until the path is too long.
    for (const auto& [dev, ino] : stack_) {
      if (dev == self.st_dev && ino == self.st_ino) {
        throw Error(ErrorCode::kInvalidArgument, "symlink loop: this folder leads back to a folder that contains it", dir);
      }
    }
    stack_.emplace_back(self.st_dev, self.st_ino);
    const std::size_t length = dir.size();
    errno = 0;
    while (const dirent* entry = ::readdir(handle.get())) {
      const std::string_view name(entry->d_name);
      if (hidden(name)) continue;  // ".", ".." and hidden files and folders
      dir.resize(length);
      dir += name;
      visit(dir, entry->d_type, name);
      errno = 0;
    }
    if (errno != 0) cannot_list(dir.substr(0, length), errno);
    dir.resize(length);
    stack_.pop_back();
  }

 private:
  void visit(std::string& path, unsigned char type, std::string_view name) {
    if (type == DT_DIR) return descend(path);
    if (type == DT_REG) {
      if (has_image_extension(name)) add(path);
      return;
    }
    if (type != DT_LNK && type != DT_UNKNOWN) return;  // FIFO, socket, device
    struct stat st {};
    const bool symlink = type == DT_LNK || (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT && symlink && has_image_extension(name)) add(path);  // dangling
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      if (symlink) check_symlink(path, root_);  // before the walk enters it
      return descend(path);
    }
    if (!S_ISREG(st.st_mode) || !has_image_extension(name)) return;
    if (symlink) check_symlink(path, root_);
    add(path);
  }

  void add(const std::string& path) {
    found_.emplace_back(arena_.size(), path.size() - base_);
    arena_.append(path, base_);
  }

  void descend(std::string& path) {
    path += '/';
    list(path);
  }

  const Root& root_;
  std::size_t base_;
  std::string& arena_;
  Found& found_;
  std::vector<std::pair<dev_t, ino_t>> stack_;
};

void append_images(const fs::path& dir, std::int32_t label, const Root& root, ItemTable& out) {
  std::string arena;
  TreeLister::Found found;
  std::string start = dir.string();
  if (start.empty() || start.back() != '/') start += '/';
  const std::size_t base = start.size();
  TreeLister(root, base, arena, found).list(start);
  std::vector<std::string_view> paths;
  paths.reserve(found.size());
  for (const auto& [offset, length] : found) paths.emplace_back(arena.data() + offset, length);
  std::sort(paths.begin(), paths.end());
  for (const std::string_view p : paths) {
    start.resize(base);
    start += p;
    out.add_path(start, label);
  }
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
    if (!hidden(entry.path().filename().string()) && entry.is_directory()) {
      if (entry.is_symlink()) check_symlink(entry.path().string(), checked);
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
      const std::int64_t before = dataset.items.size();
      append_images(classes[i], static_cast<std::int32_t>(i), checked, dataset.items);
      // As ImageFolder: a class without images (an output folder put inside the data set, a
      // folder still being copied) would shift every later label without a word.
      if (dataset.items.size() == before && !folder.allow_empty_classes) {
        throw Error(ErrorCode::kInvalidArgument,
                    "class folder " + escape_name(classes[i].filename().string()) +
                        " holds no image files, which would shift every later class's label; remove it, or allow "
                        "it with allow_empty_classes (JSON \"allow_empty_classes\": true, on the command line "
                        "--allow-empty-classes)",
                    folder.path);
      }
    }
  }
  if (dataset.items.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "no image files found (expected class sub-folders holding .jpg, .jpeg, .png, .webp, .bmp, .gif, .tif, "
                ".tiff, .ppm, .pgm or .pbm files)",
                folder.path);
  }
  return dataset;
}
// One rule for every way a list entry can leave the list's folder: climbing out with "..", an
// absolute path elsewhere, or a symlink (the entry itself or a folder on its way) whose target
// is elsewhere. Judged on where the entry resolves; an entry that does not exist is left to the
// read, which names it.
void check_list_entry(const fs::path& entry, const fs::path& canonical_base, const std::string& where) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(entry, ec);
  if (ec || inside(resolved, canonical_base)) return;
  throw Error(ErrorCode::kInvalidArgument,
              "the entry leaves the list's folder (it resolves to " + resolved.string() +
                  "); allow it with allow_outside_root (JSON \"allow_outside_root\": true, on the command line "
                  "--allow-outside-root) if that is intended",
              where);
}

// An entry of a list named by URL: a URL as it is, a path from the bucket's or host's root
// ("/a/b.jpg"), or relative to the list's own URL ("b.jpg" beside it).
std::string entry_url(const std::string& list_url, const std::string& entry) {
  if (remote::is_remote_url(entry)) return entry;
  if (entry.starts_with('/')) return remote::origin_of(list_url) + entry;
  const std::size_t end = list_url.find_first_of("?#");
  const std::string base = list_url.substr(0, end);
  return base.substr(0, base.rfind('/') + 1) + entry;
}

Dataset load_list(const spec::ListFile& list) {
  // A list named by URL is fetched whole (bounded as a local one is) and its entries are URLs.
  const bool remote_list = remote::is_remote_url(list.path);
  // A regular file under a bound: a FIFO would wait for a writer, a device might never end.
  const std::string text = remote_list ? remote::fetch_remote_text(list.path, list.remote, core::kMaxTextInputBytes)
                                       : core::read_regular_text(list.path, core::kMaxTextInputBytes, "list file");
  const fs::path base = remote_list ? fs::path() : fs::path(list.path).parent_path();
  std::error_code ec;
  const fs::path canonical_base = remote_list ? fs::path() : fs::canonical(base.empty() ? fs::path(".") : base, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot resolve the list's folder: " + ec.message(), list.path);
  std::vector<std::pair<std::string, std::int32_t>> entries;  // path or URL, label; in list order
  std::vector<std::string> urls;        // the entries named by URL
  std::vector<std::size_t> url_entries;  // where each is in `entries`
  std::size_t at = 0;
  for (int number = 1; at < text.size(); ++number) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.rfind('\t');
    const auto where = list.path + ":" + std::to_string(number);
    // Messages never quote the line: a list file may be anything, a secret included.
    if (tab == std::string_view::npos || tab == 0) {
      throw Error(ErrorCode::kInvalidArgument, "expected \"path<TAB>label\" (a path, a tab, a label)", where);
    }
    const auto label = core::parse_int(line.substr(tab + 1), 0, INT32_MAX);
    if (!label) {
      throw Error(ErrorCode::kInvalidArgument, "the label must be a whole number from 0 to 2147483647", where);
    }
    const std::string entry(line.substr(0, tab));
    if (remote_list || remote::is_remote_url(entry)) {
      urls.push_back(remote_list ? entry_url(list.path, entry) : entry);
      url_entries.push_back(entries.size());
      entries.emplace_back(urls.back(), static_cast<std::int32_t>(*label));
      continue;
    }
    fs::path path(entry);
    if (path.is_relative()) path = base / path;
    path = path.lexically_normal();
    if (!list.allow_outside_root) check_list_entry(path, canonical_base, where);
    entries.emplace_back(path.string(), static_cast<std::int32_t>(*label));
  }
  if (entries.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "list file has no entries", list.path);
  }
  // Objects named by URL are fetched into the remote cache folder, as remote shards are
  // (docs/remote.md), and read from their copies. One still failing after its retries keeps its
  // URL as its path, so reading it fails naming the URL and the error policy decides; a
  // 403/404 fails build() at once.
  if (!urls.empty()) {
    const std::vector<remote::RemoteShard> got = remote::fetch_remote_shards(urls, list.remote);
    for (std::size_t i = 0; i < urls.size(); ++i) {
      if (!got[i].local_path.empty()) entries[url_entries[i]].first = got[i].local_path;
    }
  }
  Dataset dataset;
  for (const auto& [path, label] : entries) dataset.items.add_path(path, label);
  return dataset;
}

Dataset load_items(const spec::Items& items) {
  if (items.items.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "from_items() was given an empty list");
  }
  Dataset dataset;
  for (const Item& item : items.items) {
    if (item.label < 0) {
      throw Error(ErrorCode::kInvalidArgument, "label must be non-negative", item.path);
    }
    dataset.items.add_path(item.path, item.label);
  }
  return dataset;
}

}  // namespace

Dataset load_dataset(const spec::Source& source, FileOps* ops, bool fetch_on_demand, const FirstShard& first) {
  struct Visitor {
    FileOps* ops;
    bool on_demand;
    const FirstShard& first;
    Dataset operator()(const spec::Folder& f) const { return load_folder(f); }
    Dataset operator()(const spec::ListFile& l) const { return load_list(l); }
    Dataset operator()(const spec::Items& i) const { return load_items(i); }
    Dataset operator()(const spec::Shards& s) const { return load_shards(s, ops, on_demand, first); }
  };
  Dataset dataset = std::visit(Visitor{ops, fetch_on_demand, first}, source);
  dataset.items.finish();
  return dataset;
}

}  // namespace sluice::stages
