// `sluice prepare shards --data DIR --out DIR [--shard-size 1GiB] [--prefix NAME]`: an image folder
// as uncompressed tar shards in WebDataset's layout, the samples in from_folder's order: for each
// file, KEY.EXT (its bytes, unchanged, under its own lowercased extension: .jpg, .png, .webp, ...) and KEY.cls (its label as from_folder gives it, an integer),
// KEY being its path inside the folder without the extension. from_shards on the result gives the
// same items, labels and order as from_folder on DIR (tests/cli/shards_cli_test.cpp checks the
// batches' checksums), and PREFIX-classes.txt lists the class names in label order.
//
// Never overwrites: the shards' names are checked before anything is written; each shard is
// written under a temporary name created exclusively, synced, then linked to its name (which
// fails rather than replace a file that appeared meanwhile). A failure or Ctrl-C removes the
// files this run created, and only those.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/source/source.hpp"
#include "stages/tar/tar_format.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;

struct ShardOptionsCli {
  std::string data;
  std::string out;
  std::string shard_size = "1GiB";
  std::string prefix;  // default: the data folder's name
};

struct Sample {
  std::string path;     // the file
  std::string key;      // its key in the shard
  std::int32_t label = 0;
  std::uint64_t bytes = 0;
  std::int64_t mtime = 0;
};

// Keys: the path inside the folder without its extension; a dot would end the key early
// (WebDataset splits at the first dot of the name), so dots become '_', and a key that then
// repeats gets "_2", "_3"...
std::string key_of(const std::string& relative, std::set<std::string>& taken) {
  std::string key = relative.substr(0, relative.rfind('.'));
  const std::size_t slash = key.rfind('/');
  for (std::size_t i = slash == std::string::npos ? 0 : slash + 1; i < key.size(); ++i) {
    if (key[i] == '.') key[i] = '_';
  }
  std::string unique = key;
  for (int n = 2; !taken.insert(unique).second; ++n) unique = key + "_" + std::to_string(n);
  return unique;
}

// What one sample adds to a shard: two headers, its bytes and its label, with their padding.
std::uint64_t sample_bytes(const Sample& s) {
  return 2 * stages::tar::kBlock + stages::tar::padded(s.bytes) + stages::tar::kBlock;
}

struct Listing {
  std::vector<Sample> samples;
  std::vector<std::string> class_names;
};

Listing list_samples(const std::string& folder) {
  const stages::Dataset dataset = stages::load_dataset(spec::Folder{folder});
  Listing listing{{}, dataset.class_names};
  std::vector<Sample>& samples = listing.samples;
  std::set<std::string> taken;
  for (std::int64_t i = 0; i < dataset.items.size(); ++i) {
    Sample s;
    s.path = dataset.items.path(i);
    const std::string relative = fs::path(s.path).lexically_relative(folder).generic_string();
    s.key = key_of(relative, taken);
    s.label = dataset.items.label(i);
    struct stat st {};
    if (::stat(s.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      throw Error(ErrorCode::kNotFound, "cannot read this file: " + std::string(std::strerror(errno)), s.path);
    }
    s.bytes = static_cast<std::uint64_t>(st.st_size);
    s.mtime = st.st_mtim.tv_sec;
    samples.push_back(std::move(s));
  }
  return listing;
}

// The files this run created; removed unless the run completes.
class Created {
 public:
  ~Created() {
    if (keep_) return;
    for (const std::string& path : paths_) ::unlink(path.c_str());
  }
  void add(std::string path) { paths_.push_back(std::move(path)); }
  void keep() { keep_ = true; }

 private:
  std::vector<std::string> paths_;
  bool keep_ = false;
};

void write_all(int fd, const std::vector<std::uint8_t>& bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorCode::kIo, std::string("cannot write: ") + std::strerror(n < 0 ? errno : EIO), path);
    done += static_cast<std::size_t>(n);
  }
}

// Writes `name` through an exclusive temporary file, synced, then linked into place.
class NewFile {
 public:
  NewFile(const std::string& name, Created& created) : name_(name), created_(created) {
    const std::size_t slash = name.rfind('/');
    temp_ = name.substr(0, slash + 1) + "." + name.substr(slash + 1) + ".partial-" + std::to_string(::getpid());
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) throw Error(ErrorCode::kIo, std::string("cannot create: ") + std::strerror(errno), temp_);
  }
  ~NewFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;

  void write(const std::vector<std::uint8_t>& bytes) { write_all(fd_, bytes, temp_); }

  void commit() {
    if (::fsync(fd_) != 0) throw Error(ErrorCode::kIo, std::string("cannot sync: ") + std::strerror(errno), temp_);
    ::close(fd_);
    fd_ = -1;
    if (::link(temp_.c_str(), name_.c_str()) != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  errno == EEXIST ? "appeared while prepare ran; it was not overwritten"
                                  : std::string("cannot create: ") + std::strerror(errno),
                  name_);
    }
    created_.add(name_);
  }

 private:
  std::string name_;
  Created& created_;
  std::string temp_;
  int fd_ = -1;
};

std::string six_digits(std::size_t index) {
  char number[24];
  std::snprintf(number, sizeof number, "%06zu", index);
  return number;
}

std::string shard_name(const std::string& out, const std::string& prefix, std::size_t index) {
  return out + "/" + prefix + "-" + six_digits(index) + ".tar";
}

// The file's own extension, lowercased (".png", ".jpg"): each image keeps its format in the shard,
// and from_shards takes the member as an image by that extension, as from_folder took the file.
std::string image_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

void append_sample(std::vector<std::uint8_t>& tar, const Sample& s) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(s.bytes));
  const int fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(ErrorCode::kIo, std::string("cannot open: ") + std::strerror(errno), s.path);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (done != bytes.size()) throw Error(ErrorCode::kIo, "the file changed size while prepare read it", s.path);
  stages::tar::append_file_header(tar, s.key + image_extension(s.path), s.bytes, s.mtime);
  tar.insert(tar.end(), bytes.begin(), bytes.end());
  stages::tar::append_padding(tar, s.bytes);
  const std::string label = std::to_string(s.label);
  stages::tar::append_file_header(tar, s.key + ".cls", label.size(), s.mtime);
  tar.insert(tar.end(), label.begin(), label.end());
  stages::tar::append_padding(tar, label.size());
}

void run_prepare_shards(const ShardOptionsCli& o) {
  Stopwatch clock;
  const std::optional<std::uint64_t> limit = parse_size(o.shard_size);
  if (!limit || *limit < 4 * stages::tar::kBlock) {
    throw Error(ErrorCode::kInvalidArgument, "--shard-size: expected a size of at least 2KiB (e.g. 1GiB), got \"" +
                                                 o.shard_size + "\"");
  }
  const std::string folder = fs::path(o.data).lexically_normal().string();
  const std::string prefix = !o.prefix.empty() ? o.prefix : fs::path(folder).filename().string();
  if (prefix.empty() || prefix.find('/') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "--prefix must be a file name without '/'");
  }
  const Listing listing = list_samples(folder);
  const std::vector<Sample>& samples = listing.samples;

  // Which samples go to which shard: a new one when the next sample would pass the size.
  std::vector<std::size_t> starts = {0};
  std::uint64_t size = 2 * stages::tar::kBlock;  // the end marker
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (i > starts.back() && size + sample_bytes(samples[i]) > *limit) {
      starts.push_back(i);
      size = 2 * stages::tar::kBlock;
    }
    size += sample_bytes(samples[i]);
  }
  starts.push_back(samples.size());
  fs::create_directories(o.out);
  const std::string classes_name = o.out + "/" + prefix + "-classes.txt";
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
    if (fs::exists(fs::symlink_status(shard_name(o.out, prefix, s)))) {
      throw Error(ErrorCode::kInvalidArgument, "exists: prepare never overwrites a file; remove it or choose another "
                  "--out or --prefix", shard_name(o.out, prefix, s));
    }
  }

  InterruptGuard interrupt_guard;
  Created created;
  std::atomic<std::uint64_t> done{0};
  std::uint64_t written = 0;
  {
    ProgressLine progress("prepare shards", samples.size(), done);
    for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
      NewFile shard(shard_name(o.out, prefix, s), created);
      std::vector<std::uint8_t> tar;
      for (std::size_t i = starts[s]; i < starts[s + 1]; ++i) {
        if (InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted; removed the shards written");
        append_sample(tar, samples[i]);
        if (tar.size() >= (std::size_t{8} << 20)) {  // write in 8 MiB pieces
          shard.write(tar);
          written += tar.size();
          tar.clear();
        }
        done.fetch_add(1, std::memory_order_relaxed);
      }
      stages::tar::append_end(tar);
      shard.write(tar);
      written += tar.size();
      shard.commit();
    }
    progress.finish();
  }
  if (!fs::exists(fs::symlink_status(classes_name))) {
    NewFile classes(classes_name, created);
    std::string text;
    for (const std::string& name : listing.class_names) text += name + "\n";
    classes.write({text.begin(), text.end()});
    classes.commit();
  }
  created.keep();
  const std::size_t shards = starts.size() - 1;
  std::cout << "prepared " << samples.size() << " samples of " << folder << " as " << shards << " shard(s) in "
            << o.out << ", " << format_bytes(written) << ", " << format_seconds(clock.seconds()) << "\n"
            << "  read them with --shards '" << o.out << "/" << prefix << "-{000000.." << six_digits(shards - 1)
            << "}.tar'\n";
}

}  // namespace

void add_prepare_shards_command(CLI::App& prepare) {
  auto options = std::make_shared<ShardOptionsCli>();
  CLI::App* cmd = prepare.add_subcommand(
      "shards", "Write an image folder as tar shards (KEY.jpg + KEY.cls), in from_folder's order and labels");
  cmd->add_option("--data", options->data, "Image folder (class sub-folders, or flat)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--out,-o", options->out, "Folder for the shards (created; existing files are never overwritten)")
      ->required();
  cmd->add_option("--shard-size", options->shard_size, "Largest shard, e.g. 1GiB (a larger sample gets its own)")
      ->capture_default_str();
  cmd->add_option("--prefix", options->prefix, "Shard names: PREFIX-000000.tar... (default: the folder's name)");
  cmd->callback([options] { run_prepare_shards(*options); });
}

}  // namespace sluice::cli
