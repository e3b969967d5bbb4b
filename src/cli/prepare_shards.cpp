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
// files this run created, and only those; a run killed outright leaves its hidden
// ".NAME.partial-PID" file, which the next run removes once that PID is gone. Each file is read to
// its end when it is copied (one that grew or shrank since the listing is copied as it is then).
// PREFIX-manifest.json is written last (the shards, their members, bytes and XXH3, the class
// list): from_shards refuses a set its manifest says is cut (docs/shards.md). Class names are
// stored escaped (escape_name), one a line. A file that cannot be read (a dangling symlink) is a
// bad sample under --on-error: skipped and listed in the manifest (skip, the default), or the end
// of the run naming it (fail).
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/source/source.hpp"
#include "stages/tar/tar_format.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ShardOptionsCli {
  std::string data;
  std::string out;
  std::string shard_size = "1GiB";
  std::string prefix;  // default: the data folder's name
  std::string on_error = "skip";
  bool allow_empty_classes = false;
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
  std::vector<std::string> skipped;  // "path: why"
};

Listing list_samples(const std::string& folder, const ShardOptionsCli& o) {
  const stages::Dataset dataset =
      stages::load_dataset(spec::Folder{folder, false, o.allow_empty_classes});
  Listing listing{{}, dataset.class_names, {}};
  std::vector<Sample>& samples = listing.samples;
  std::set<std::string> taken;
  for (std::int64_t i = 0; i < dataset.items.size(); ++i) {
    Sample s;
    s.path = dataset.items.path(i);
    const std::string relative = fs::path(s.path).lexically_relative(folder).generic_string();
    s.key = key_of(relative, taken);
    s.label = dataset.items.label(i);
    struct stat st {};
    const int err = ::stat(s.path.c_str(), &st) != 0 ? errno : 0;
    if (err != 0 || !S_ISREG(st.st_mode)) {
      const std::string why = err == 0 ? "not a regular file" : std::strerror(err);
      if (o.on_error == "fail") {
        throw Error(ErrorCode::kNotFound, "cannot read this file: " + why + " (--on-error skip leaves it out)", s.path);
      }
      listing.skipped.push_back(s.path + ": " + why);
      continue;
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

// Largest file copied into a shard: a tar member's size field holds more, but a file this large
// in an image folder is a mistake (or a device), not an image.
constexpr std::uint64_t kMaxMemberBytes = std::uint64_t{4} << 30;

// Reads the file as it is now, to its end: a file replaced or grown since the listing (as rsync
// does) is copied whole, never cut at the listed size.
std::vector<std::uint8_t> read_to_end(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw Error(ErrorCode::kIo, std::string("cannot open: ") + std::strerror(errno), path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw Error(ErrorCode::kIo, "not a regular file any more", path);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      if (bytes.size() > kMaxMemberBytes) throw Error(ErrorCode::kTooLarge, "larger than 4 GiB", path);
      bytes.resize(bytes.size() * 2);
    }
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(ErrorCode::kIo, std::string("cannot read: ") + std::strerror(errno), path);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

// Appends the sample's two members; returns the image's bytes as copied.
std::uint64_t append_sample(std::vector<std::uint8_t>& tar, const Sample& s) {
  const std::vector<std::uint8_t> bytes = read_to_end(s.path);
  stages::tar::append_file_header(tar, s.key + image_extension(s.path), bytes.size(), s.mtime);
  tar.insert(tar.end(), bytes.begin(), bytes.end());
  stages::tar::append_padding(tar, bytes.size());
  const std::string label = std::to_string(s.label);
  stages::tar::append_file_header(tar, s.key + ".cls", label.size(), s.mtime);
  tar.insert(tar.end(), label.begin(), label.end());
  stages::tar::append_padding(tar, label.size());
  return bytes.size();
}

// Removes the hidden temporaries of runs that died (kill -9, a power cut) before they could: a
// ".PREFIX-....partial-PID" whose process no longer exists. A live run's are left alone.
void remove_dead_partials(const std::string& out, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("." + prefix + "-")) continue;
    const auto mark = name.rfind(".partial-");
    if (mark == std::string::npos) continue;
    const auto pid = core::parse_int(std::string_view(name).substr(mark + 9), 1, INT32_MAX);
    if (!pid || *pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH) ::unlink(entry.path().c_str());
  }
}

// True when `inner` is `outer` or inside it (both resolved as far as they exist).
bool within(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(inner, ec);
  const fs::path b = fs::weakly_canonical(outer, ec);
  auto i = a.begin();
  for (auto o = b.begin(); o != b.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == a.end() || *i != *o) return false;
  }
  return true;
}

std::string hex64(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// The shards' name: --prefix, or the data folder's name (of "dir/" too).
std::string shard_prefix(const ShardOptionsCli& o, const std::string& folder) {
  const std::string prefix = !o.prefix.empty() ? o.prefix : fs::path(folder).filename().string();
  if (!o.prefix.empty() && (prefix.find('/') != std::string::npos || prefix == "." || prefix == "..")) {
    throw Error(ErrorCode::kInvalidArgument, "--prefix must be a file name without '/'");
  }
  if (prefix.empty() || prefix == "." || prefix == ".." || prefix.find('/') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "cannot name the shards after --data " + o.data + ": give --prefix NAME");
  }
  return prefix;
}

// Writes one shard of `samples`; returns its manifest entry (name, samples, members, bytes, XXH3).
json write_shard(const std::string& name, std::span<const Sample> samples, Created& created,
                 std::atomic<std::uint64_t>& done) {
  NewFile shard(name, created);
  XXH3_state_t* hash = XXH3_createState();
  struct Freer {
    XXH3_state_t* state;
    ~Freer() { XXH3_freeState(state); }
  } freer{hash};
  XXH3_64bits_reset(hash);
  std::uint64_t shard_bytes = 0;
  const auto put = [&](std::vector<std::uint8_t>& tar) {
    XXH3_64bits_update(hash, tar.data(), tar.size());
    shard.write(tar);
    shard_bytes += tar.size();
    tar.clear();
  };
  std::vector<std::uint8_t> tar;
  for (const Sample& sample : samples) {
    if (InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted; removed the shards written");
    append_sample(tar, sample);
    if (tar.size() >= (std::size_t{8} << 20)) put(tar);  // write in 8 MiB pieces
    done.fetch_add(1, std::memory_order_relaxed);
  }
  stages::tar::append_end(tar);
  put(tar);
  shard.commit();
  return {{"name", fs::path(name).filename().string()},
          {"samples", samples.size()},
          {"members", 2 * samples.size()},
          {"bytes", shard_bytes},
          {"xxh3", hex64(XXH3_64bits_digest(hash))}};
}

// PREFIX-classes.txt (names escaped, one a line), then the manifest: written last, its presence
// says every file before it is complete.
void write_classes_and_manifest(const std::string& classes_name, const std::string& manifest_name,
                                const std::string& prefix, const Listing& listing, json shards, Created& created) {
  json classes_json = json::array();
  {
    NewFile classes(classes_name, created);
    std::string text;
    for (const std::string& name : listing.class_names) {
      text += stages::escape_name(name) + "\n";
      classes_json.push_back(stages::escape_name(name));
    }
    classes.write({text.begin(), text.end()});
    classes.commit();
  }
  json manifest = {{"format", "sluice shard set"},
                   {"version", 1},
                   {"prefix", prefix},
                   {"samples", listing.samples.size()},
                   {"shards", std::move(shards)},
                   {"classes", classes_json},
                   {"skipped", listing.skipped}};
  const std::string body = manifest.dump(1);
  manifest["checksum"] = hex64(XXH3_64bits(body.data(), body.size()));
  NewFile file(manifest_name, created);
  const std::string text = manifest.dump(1) + "\n";
  file.write({text.begin(), text.end()});
  file.commit();
}

void run_prepare_shards(const ShardOptionsCli& o) {
  Stopwatch clock;
  const std::optional<std::uint64_t> limit = parse_size(o.shard_size);
  if (!limit || *limit < 4 * stages::tar::kBlock) {
    throw Error(ErrorCode::kInvalidArgument, "--shard-size: expected a size of at least 2KiB (e.g. 1GiB), got \"" +
                                                 o.shard_size + "\"");
  }
  std::string folder = fs::path(o.data).lexically_normal().string();
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();  // "dir/" names "dir"
  const std::string prefix = shard_prefix(o, folder);
  // Shards inside the data set would be listed by the next run over it (an empty class folder
  // at first, then a folder of .tar files): refused.
  if (within(o.out, folder)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--out is inside --data: the shards would become part of the data set; choose a folder outside it",
                o.out);
  }
  const Listing listing = list_samples(folder, o);
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
  remove_dead_partials(o.out, prefix);
  const std::string classes_name = o.out + "/" + prefix + "-classes.txt";
  const std::string manifest_name = o.out + "/" + prefix + "-manifest.json";
  const auto refuse_existing = [](const std::string& name) {
    if (fs::exists(fs::symlink_status(name))) {
      throw Error(ErrorCode::kInvalidArgument, "exists: prepare never overwrites a file; remove it or choose another "
                  "--out or --prefix", name);
    }
  };
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
    if (fs::exists(fs::symlink_status(shard_name(o.out, prefix, s)))) {
      const bool finished = fs::exists(fs::symlink_status(manifest_name));
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("exists: prepare never overwrites a file; remove it or choose another --out or --prefix") +
                      (finished ? "" : " (without " + fs::path(manifest_name).filename().string() +
                                           " beside them, these shards are what an interrupted run left)"),
                  shard_name(o.out, prefix, s));
    }
  }

  refuse_existing(classes_name);
  refuse_existing(manifest_name);

  InterruptGuard interrupt_guard;
  Created created;
  std::atomic<std::uint64_t> done{0};
  std::uint64_t written = 0;
  json manifest_shards = json::array();
  {
    ProgressLine progress("prepare shards", samples.size(), done);
    for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
      manifest_shards.push_back(write_shard(shard_name(o.out, prefix, s),
                                            std::span<const Sample>(samples).subspan(starts[s], starts[s + 1] - starts[s]),
                                            created, done));
      written += manifest_shards.back()["bytes"].get<std::uint64_t>();
    }
    progress.finish();
  }
  write_classes_and_manifest(classes_name, manifest_name, prefix, listing, std::move(manifest_shards), created);
  created.keep();
  for (const std::string& skipped : listing.skipped) std::cerr << "sluice: skipped " << skipped << "\n";
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
  cmd->add_option("--on-error", options->on_error,
                  "A file that cannot be read (a dangling symlink): skip (left out, listed in the manifest) or fail")
      ->check(CLI::IsMember({"skip", "fail"}))->capture_default_str();
  cmd->add_flag("--allow-empty-classes", options->allow_empty_classes,
                "Keep an empty class folder as a class without samples (refused by default, as ImageFolder does)");
  cmd->callback([options] { run_prepare_shards(*options); });
}

}  // namespace sluice::cli
