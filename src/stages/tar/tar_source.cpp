// Tar shards into the item table: patterns, the index files beside shards, labels.
#include "stages/tar/tar_source.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/log.hpp"
#include "stages/remote/remote_shards.hpp"
#include "stages/remote/remote_url.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/tar/shard_fetcher.hpp"
#include "stages/tar/shard_manifest.hpp"
#include "stages/tar/tar_index.hpp"

namespace sluice::stages {

namespace {

[[noreturn]] void bad(const std::string& message, const std::string& path = {}) {
  throw Error(ErrorCode::kInvalidArgument, message, path);
}

void push_name(std::string name, std::vector<std::string>& out) {
  if (out.size() >= kMaxShards) {
    bad("the shard patterns name more than " + std::to_string(kMaxShards) + " shards", name);
  }
  out.push_back(std::move(name));
}

// "A..B" with A and B decimal: the numbers, zero-padded as bash pads them.
std::optional<std::vector<std::string>> numeric_range(std::string_view inner) {
  const std::size_t dots = inner.find("..");
  if (dots == std::string_view::npos || dots == 0 || dots + 2 >= inner.size()) return std::nullopt;
  const std::string_view a = inner.substr(0, dots);
  const std::string_view b = inner.substr(dots + 2);
  const auto number = [](std::string_view s) -> std::optional<std::uint64_t> {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || s.size() > 18) return std::nullopt;
    return v;
  };
  const std::optional<std::uint64_t> from = number(a);
  const std::optional<std::uint64_t> to = number(b);
  if (!from || !to) return std::nullopt;
  const std::uint64_t count = (*from <= *to ? *to - *from : *from - *to) + 1;
  if (count > kMaxShards) {
    bad("the shard range {" + std::string(inner) + "} names more than " + std::to_string(kMaxShards) + " shards");
  }
  const bool padded = (a.size() > 1 && a[0] == '0') || (b.size() > 1 && b[0] == '0');
  const std::size_t width = padded ? std::max(a.size(), b.size()) : 0;
  std::vector<std::string> out;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string s = std::to_string(*from <= *to ? *from + i : *from - i);
    if (s.size() < width) s.insert(0, width - s.size(), '0');
    out.push_back(std::move(s));
  }
  return out;
}

// The alternatives of "a,b,{c,d}" split at its top-level commas.
std::vector<std::string> alternatives(std::string_view inner) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '{') ++depth;
    if (inner[i] == '}') --depth;
    if (inner[i] == ',' && depth == 0) {
      out.emplace_back(inner.substr(start, i - start));
      start = i + 1;
    }
  }
  out.emplace_back(inner.substr(start));
  return out;
}

void expand_braces(const std::string& pattern, std::vector<std::string>& out) {
  for (std::size_t open = pattern.find('{'); open != std::string::npos; open = pattern.find('{', open + 1)) {
    int depth = 0;
    std::size_t close = std::string::npos;
    for (std::size_t i = open; i < pattern.size() && close == std::string::npos; ++i) {
      if (pattern[i] == '{') ++depth;
      if (pattern[i] == '}' && --depth == 0) close = i;
    }
    if (close == std::string::npos) break;  // unbalanced: the rest is literal
    const std::string_view inner = std::string_view(pattern).substr(open + 1, close - open - 1);
    std::vector<std::string> parts = alternatives(inner);
    if (parts.size() == 1) {
      std::optional<std::vector<std::string>> range = numeric_range(inner);
      if (!range) continue;  // "{x}" is literal, as in a shell
      parts = std::move(*range);
    }
    const std::string prefix = pattern.substr(0, open);
    const std::string suffix = pattern.substr(close + 1);
    for (const std::string& part : parts) expand_braces(prefix + part + suffix, out);
    return;
  }
  push_name(pattern, out);
}

void expand_glob(const std::string& pattern, const RemoteOptions& remote_options, std::vector<std::string>& out) {
  if (remote::is_s3_url(pattern) && pattern.find_first_of("*?[") != std::string::npos) {
    for (std::string& url : remote::list_s3_glob(pattern, remote_options)) push_name(std::move(url), out);
    return;
  }
  // An http(s) URL is taken as written ('?' starts its query): a web server has no listing.
  if (remote::is_remote_url(pattern) || pattern.find_first_of("*?[") == std::string::npos) return push_name(pattern, out);
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &found);
  std::vector<std::string> matches;
  for (std::size_t i = 0; rc == 0 && i < found.gl_pathc; ++i) {
    struct stat st {};
    // Regular files only (through symlinks): a FIFO named *.tar would block the open.
    if (::stat(found.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode)) matches.emplace_back(found.gl_pathv[i]);
  }
  ::globfree(&found);
  if (matches.empty()) bad("no shard file matches this pattern", pattern);
  std::sort(matches.begin(), matches.end());  // byte-wise: glob's own order follows the locale
  for (std::string& m : matches) push_name(std::move(m), out);
}

// ---- one shard --------------------------------------------------------------------------------

class Descriptor {
 public:
  Descriptor(FileOps& ops, int fd) : ops_(ops), fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ops_.close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  FileOps& ops_;
  int fd_;
};

[[noreturn]] void cannot_open(int err, const std::string& path) {
  if (err == ENOENT || err == ENOTDIR) throw Error(ErrorCode::kNotFound, "no such shard file", path);
  if (err == EACCES || err == EPERM) throw Error(ErrorCode::kPermissionDenied, "cannot open shard: permission denied", path);
  throw Error(ErrorCode::kIo, std::string("cannot open shard: ") + std::strerror(err), path);
}

enum class IndexFile : std::uint8_t { kAbsent, kOurs, kForeign };

struct Existing {
  IndexFile file = IndexFile::kAbsent;
  std::optional<IndexedShard> index;  // when it is ours and current
};

constexpr std::uint64_t kMaxIndexFileBytes = std::uint64_t{4} << 30;

Existing read_index_file(FileOps& ops, const std::string& path, std::uint64_t shard_size, std::int64_t mtime_ns) {
  // O_NOFOLLOW: a symlink of that name is not ours to follow (nor, later, to replace).
  const int fd = ops.open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0);
  if (fd < 0) return {errno == ENOENT ? IndexFile::kAbsent : IndexFile::kForeign, std::nullopt};
  const Descriptor file(ops, fd);
  struct stat st {};
  if (ops.fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > kMaxIndexFileBytes) {
    return {IndexFile::kForeign, std::nullopt};
  }
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.st_size));
  const ssize_t got = pread_full(ops, fd, bytes.data(), bytes.size(), 0);
  if (got < 0) return {IndexFile::kForeign, std::nullopt};
  bytes.resize(static_cast<std::size_t>(got));
  if (!is_shard_index(bytes)) return {IndexFile::kForeign, std::nullopt};
  std::string why;
  std::optional<IndexedShard> index = decode_shard_index(bytes, shard_size, mtime_ns, why);
  if (!index && log_enabled(LogLevel::kInfo)) log(LogLevel::kInfo, path + ": rebuilding the shard index: " + why);
  return {IndexFile::kOurs, std::move(index)};
}

// Write permission alone is not enough: root has it everywhere, and a data set chmod'ed read-only
// asks to be left as it is.
bool may_write_beside(const std::string& shard, const struct stat& shard_st) {
  const std::size_t slash = shard.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : shard.substr(0, slash);
  struct stat dir_st {};
  return (shard_st.st_mode & 0222) != 0 && ::access(shard.c_str(), W_OK) == 0 && ::stat(dir.c_str(), &dir_st) == 0 &&
         (dir_st.st_mode & 0222) != 0 && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

void write_index_file(FileOps& ops, const std::string& path, IndexFile existing, const IndexedShard& index) {
  static std::atomic<std::uint64_t> counter{0};
  const std::size_t slash = path.rfind('/');
  const std::string temp = path.substr(0, slash + 1) + "." + path.substr(slash + 1) + ".tmp-" +
                           std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  // 0600: the index names the shard's members, which others may not be allowed to read.
  const int fd = ops.open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;  // a read-only file system, a full disk...: the index stays in memory
  const std::vector<std::uint8_t> bytes = encode_shard_index(index);
  bool written = false;
  {
    const Descriptor file(ops, fd);
    // Synced before it takes the index's name: a crash must not leave a torn file there that
    // (without the magic) sluice would then never replace.
    written = pwrite_full(ops, fd, bytes.data(), bytes.size(), 0) == 0 && ops.fsync(fd) == 0;
  }
  if (written && existing == IndexFile::kAbsent) {
    // link() never replaces: a file someone created meanwhile stays. File systems without hard
    // links fall back to a rename after checking the name is still free.
    if (ops.link(temp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) ops.rename(temp.c_str(), path.c_str());
    }
  } else if (written && existing == IndexFile::kOurs) {
    if (ops.rename(temp.c_str(), path.c_str()) == 0) return;
  }
  ops.unlink(temp.c_str());
}

struct Loaded {
  IndexedShard index;
  bool from_file = false;
};

// The shard's index: its index file's when that is current, else read from its headers (and
// saved beside it when allowed).
Loaded index_of(FileOps& ops, const std::string& path, sluice::ShardIndex policy) {
  const int fd = ops.open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
  if (fd < 0) cannot_open(errno, path);
  const Descriptor shard(ops, fd);
  struct stat st {};
  if (ops.fstat(fd, &st) != 0) throw Error(ErrorCode::kIo, std::string("cannot stat shard: ") + std::strerror(errno), path);
  if (!S_ISREG(st.st_mode)) bad("not a regular file (a folder, FIFO, socket or device), so not a shard", path);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::int64_t mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  const bool beside = policy == sluice::ShardIndex::kBesideShard;
  const std::string index_path = shard_index_path(path);
  Existing existing;
  if (beside) {
    existing = read_index_file(ops, index_path, size, mtime_ns);
    if (existing.index) return {std::move(*existing.index), true};
  }
  Loaded made{scan_shard(ops, fd, size, mtime_ns, path), false};
  if (beside && existing.file != IndexFile::kForeign && may_write_beside(path, st)) {
    write_index_file(ops, index_path, existing.file, made.index);
  }
  return made;
}

// What the samples' label members said, across all shards.
struct Labels {
  std::map<std::string, std::int32_t> class_ids;  // name -> id in order of first appearance
  std::string first_number;                       // a sample labelled by key.cls, for messages
  std::string first_name;                         // one labelled by key.class
};

void add_samples(ItemTable& table, std::int32_t shard, const std::string& path, IndexedShard& index, Labels& labels) {
  for (ShardSample& s : index.samples) {
    if (!s.damage.empty()) {
      table.add_damaged_member(shard, s.name, s.offset, std::move(s.damage));
      continue;
    }
    std::int32_t label = -1;
    if (s.label_kind == LabelKind::kNumber) {
      label = s.number;
      if (labels.first_number.empty()) labels.first_number = path + ":" + s.name;
    } else if (s.label_kind == LabelKind::kClassName) {
      if (labels.class_ids.size() >= static_cast<std::size_t>(INT32_MAX)) bad("more class names than labels", path);
      label = labels.class_ids.try_emplace(s.class_name, static_cast<std::int32_t>(labels.class_ids.size())).first->second;
      if (labels.first_name.empty()) labels.first_name = path + ":" + s.name;
    }
    table.add_member(shard, s.name, s.offset, s.size, label,
                     s.header_size_agrees ? ItemTable::SizeField::kHoldsSize : ItemTable::SizeField::kOverridden);
  }
}

// Class names become the indices of the sorted names; samples without a label, when others
// have one, are damaged; without any label member, every label is 0.
void resolve_labels(Dataset& dataset, const Labels& labels) {
  if (!labels.first_number.empty() && !labels.first_name.empty()) {
    bad("the shards label some samples with a number (key.cls, e.g. " + labels.first_number +
        ") and others with a class name (key.class, e.g. " + labels.first_name + "): use one kind");
  }
  ItemTable& table = dataset.items;
  const bool labelled = !labels.first_number.empty() || !labels.first_name.empty();
  if (labelled) {
    std::string name;
    for (std::int64_t i = 0; i < table.size(); ++i) {
      if (table.label(i) != -1 || table.locate(i).damage != nullptr) continue;
      const std::string_view member = table.locate(i).name;
      const std::string_view key = member.substr(0, member.find('.', member.rfind('/') + 1));
      table.mark_damaged(i, "no label member (" + std::string(key) + ".cls or .class), while other samples have one");
    }
  }
  std::vector<std::int32_t> relabel(labels.class_ids.size());
  std::int32_t rank = 0;
  for (const auto& [name, id] : labels.class_ids) {  // std::map: sorted by name
    relabel[static_cast<std::size_t>(id)] = rank++;
    dataset.class_names.push_back(name);
  }
  table.relabel(relabel, 0);
}

// The index files of the remote shards in `urls` that the server has beside them and that
// decode (an index checks its own size and mtime fields against the shard's, which here are
// only known from the index itself: each read checks the member's header anyway).
std::vector<std::optional<IndexedShard>> remote_indexes(const std::vector<std::string>& urls, const RemoteOptions& options,
                                                        std::ptrdiff_t early, bool* early_current) {
  std::vector<std::vector<std::uint8_t>> files = remote::fetch_remote_indexes(urls, options, early, early_current);
  std::vector<std::optional<IndexedShard>> out(urls.size());
  for (std::size_t i = 0; i < urls.size(); ++i) {
    const std::vector<std::uint8_t>& bytes = files[i];
    if (bytes.size() < kShardIndexHeaderBytes || !is_shard_index(bytes)) continue;
    std::string why;
    out[i] = decode_shard_index(bytes, core::get_le<std::uint64_t>(bytes.data() + 16),
                                core::get_le<std::int64_t>(bytes.data() + 24), why);
    if (!out[i] && log_enabled(LogLevel::kInfo)) log(LogLevel::kInfo, urls[i] + ": fetched whole: its index file " + why);
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& patterns, const RemoteOptions& remote) {
  if (patterns.empty()) bad("from_shards() was given no shard pattern");
  std::vector<std::string> braced;
  for (const std::string& pattern : patterns) {
    if (pattern.empty()) bad("an empty shard pattern");
    expand_braces(pattern, braced);
  }
  std::vector<std::string> names;
  for (const std::string& b : braced) expand_glob(b, remote, names);
  std::set<std::string_view> seen;
  for (const std::string& n : names) {
    if (!seen.insert(n).second) bad("the shard patterns name this shard twice", n);
  }
  return names;
}

std::string shard_index_path(const std::string& shard) { return shard + ".sluice-idx"; }

Dataset load_shards(const spec::Shards& shards, FileOps* ops_or_null, bool fetch_on_demand, const FirstShard& first) {
  FileOps& ops = ops_or_null != nullptr ? *ops_or_null : real_file_ops();
  const std::vector<std::string> names = expand_shard_patterns(shards.patterns, shards.remote);
  std::vector<std::string> urls;
  std::vector<std::string> local;
  for (const std::string& name : names) (remote::is_remote_url(name) ? urls : local).push_back(name);
  // A local set that a killed prepare run left is refused, not read as whole.
  check_shard_manifests(local);
  // Remote shards are fetched into the shard cache first, all at once, then read as local ones;
  // on demand, those the server has an index file for wait until an epoch reads them.
  std::vector<std::optional<IndexedShard>> deferred(urls.size());
  std::vector<std::string> copies;
  std::ptrdiff_t early = -1;  // among urls
  bool early_current = false;
  if (fetch_on_demand && !urls.empty()) {
    const std::ptrdiff_t at = first ? first(names.size()) : -1;
    if (at >= 0 && static_cast<std::size_t>(at) < names.size() && remote::is_remote_url(names[static_cast<std::size_t>(at)])) {
      early = std::find(urls.begin(), urls.end(), names[static_cast<std::size_t>(at)]) - urls.begin();
    }
    deferred = remote_indexes(urls, shards.remote, early, &early_current);
    // Under cache_limit 0 a shard streams through memory and has no copy (nor cache folder).
    copies = shards.remote.cache_limit == 0 ? urls : remote::remote_copy_paths(urls, shards.remote);
  }
  std::vector<std::string> now;
  for (std::size_t i = 0; i < urls.size(); ++i) {
    if (!deferred[i]) now.push_back(urls[i]);
  }
  std::vector<remote::RemoteShard> fetched = now.empty() ? std::vector<remote::RemoteShard>{}
                                                         : remote::fetch_remote_shards(now, shards.remote);
  std::size_t next_remote = 0;
  std::size_t next_fetched = 0;
  std::vector<OnDemandShards::Shard> on_demand;
  Dataset dataset;
  Labels labels;
  int from_files = 0;
  for (const std::string& name : names) {
    const bool is_url = remote::is_remote_url(name);
    const std::size_t r = is_url ? next_remote++ : 0;
    std::optional<IndexedShard>* index = is_url ? &deferred[r] : nullptr;
    if (index != nullptr && index->has_value()) {
      // The early shard's copy, fetched with the index files, is current (the stream still
      // fetches it when it is not the size its index says).
      OnDemandShards::Shard later{.url = name, .copy = copies[r],
                                  .size = (*index)->shard_size, .first = dataset.items.size(),
                                  .failure = std::make_shared<FetchFailure>(),
                                  .validated = early_current && static_cast<std::ptrdiff_t>(r) == early};
      const std::int32_t shard = dataset.items.add_shard(
          ItemTable::Shard{later.copy, later.size, ItemTable::Shard::kAnyMtime, name, later.failure});
      add_samples(dataset.items, shard, name, **index, labels);
      later.end = dataset.items.size();
      on_demand.push_back(std::move(later));
      continue;
    }
    const remote::RemoteShard* copy = is_url ? &fetched[next_fetched++] : nullptr;
    if (copy != nullptr && copy->local_path.empty()) {
      // Still failing after its retries: one damaged sample in the shard's place, so the error
      // policy decides (kSkip goes on without it, kFail stops at it naming the URL and cause).
      const std::int32_t shard = dataset.items.add_shard(ItemTable::Shard{name, 0, 0, name});
      dataset.items.add_damaged_member(shard, "*", 0, "the shard could not be fetched: " + copy->error);
      continue;
    }
    const std::string& path = copy != nullptr ? copy->local_path : name;
    Loaded indexed = index_of(ops, path, shards.index);
    from_files += indexed.from_file ? 1 : 0;
    const std::int32_t shard = dataset.items.add_shard(
        ItemTable::Shard{path, indexed.index.shard_size, indexed.index.mtime_ns, copy != nullptr ? name : std::string()});
    add_samples(dataset.items, shard, name, indexed.index, labels);
  }
  if (dataset.items.empty()) {
    bad("no samples (key.jpg with key.cls members) in " + std::to_string(names.size()) + " shard(s)", names.front());
  }
  resolve_labels(dataset, labels);
  if (!on_demand.empty()) {
    if (log_enabled(LogLevel::kInfo)) {
      log(LogLevel::kInfo, std::to_string(on_demand.size()) + " remote shards indexed from their index files, fetched when read");
    }
    dataset.fetcher = std::make_shared<OnDemandShards>(shards.remote, std::move(on_demand));
  }
  if (log_enabled(LogLevel::kInfo)) {
    log(LogLevel::kInfo, std::to_string(names.size()) + " shards, " + std::to_string(dataset.items.size()) +
                             " samples (" + std::to_string(dataset.items.damaged()) + " damaged); " +
                             std::to_string(from_files) + " indexes read from their files");
  }
  return dataset;
}

}  // namespace sluice::stages
