// The local shard cache's folder: names, ownership, the copies' metadata and eviction.
#include "stages/remote/shard_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::stages::remote {

namespace {

constexpr const char* kMarkerText = "sluice remote shard cache 1\n";

std::string hash_name(const std::string& url) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(url.data(), url.size())));
  return hex;
}

bool is_hex16(const std::string& s, std::size_t at) {
  if (s.size() < at + 16) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(at), s.begin() + static_cast<std::ptrdiff_t>(at + 16),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw Error(ErrorCode::kIo, std::string("cannot list the remote shard cache: ") + std::strerror(errno), dir);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  return out;
}

[[noreturn]] void foreign(const std::string& dir, const std::string& name) {
  throw Error(ErrorCode::kInvalidArgument,
              "the remote shard cache folder holds '" + name +
                  "', which sluice did not write: give an empty folder or one sluice made (it deletes files in it)",
              dir);
}

void make_dirs(const std::string& dir) {
  for (std::size_t slash = dir.find('/', 1); ; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      throw Error(ErrorCode::kIo, std::string("cannot create the remote shard cache folder: ") + std::strerror(errno), part);
    }
    if (slash == std::string::npos) return;
  }
}

// Temporaries of processes that are gone (killed mid-download, Ctrl-C): ".<hash>...tmp-PID-N".
void remove_orphans_of(const std::string& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const std::size_t tmp = name.find(".tmp-");
    if (name[0] != '.' || tmp == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + tmp + 5, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink((dir + "/" + name).c_str());
  }
}

}  // namespace

bool is_cache_file_name(const std::string& name) {
  if (name == ShardCache::kMarker) return true;
  const bool dot = !name.empty() && name[0] == '.';
  const std::size_t at = dot ? 1 : 0;
  if (!is_hex16(name, at)) return false;
  const std::string rest = name.substr(at + 16);
  if (!dot) return rest == ".tar" || rest == ".meta" || rest == ".tar.sluice-idx";
  // Temporaries: a download's, an index file's (stages/tar/tar_source.cpp), a .meta's.
  return rest.starts_with(".tar.tmp-") || rest.starts_with(".tar.sluice-idx.tmp-") || rest.starts_with(".meta.tmp-");
}

std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/sluice/remote";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && home[0] != '\0' ? home : "/tmp") + "/.cache/sluice/remote";
}

ShardCache::ShardCache(std::string dir, std::uint64_t limit) : dir_(std::move(dir)), limit_(limit) {
  if (dir_.empty()) dir_ = default_cache_dir();
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  struct stat st {};
  if (::lstat(dir_.c_str(), &st) != 0) {
    make_dirs(dir_);
  } else if (!S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument, "the remote shard cache is not a folder (or is a link)", dir_);
  }
  const std::vector<std::string> names = list_names(dir_);
  const bool ours = std::find(names.begin(), names.end(), kMarker) != names.end();
  if (!ours && !names.empty()) foreign(dir_, names.front());
  for (const std::string& name : names) {
    struct stat f {};
    if (!is_cache_file_name(name) || ::lstat((dir_ + "/" + name).c_str(), &f) != 0 || !S_ISREG(f.st_mode)) foreign(dir_, name);
  }
  const std::string marker = dir_ + "/" + kMarker;
  if (ours) {
    // Another process (or loader) that made the folder just now may not have written the
    // marker's text yet (it creates the file, then writes): a prefix of it is waited on, for a
    // second at most; anything else is not ours.
    std::string text;
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::ifstream in(marker);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (text == kMarkerText || !std::string_view(kMarkerText).starts_with(text)) break;
      ::usleep(10'000);
    }
    if (text != kMarkerText) foreign(dir_, kMarker);
    remove_orphans(names);
    return;
  }
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == EEXIST) return;  // another process (a rank on this node) made the folder just now
  if (fd < 0) throw Error(ErrorCode::kIo, std::string("cannot mark the remote shard cache folder: ") + std::strerror(errno), marker);
  const ssize_t w = ::write(fd, kMarkerText, std::strlen(kMarkerText));
  ::close(fd);
  if (w != static_cast<ssize_t>(std::strlen(kMarkerText))) throw Error(ErrorCode::kIo, "cannot mark the remote shard cache folder", marker);
}

ShardCache::~ShardCache() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void ShardCache::lock() {
  if (lock_fd_ >= 0) return;
  const std::string marker = dir_ + "/" + kMarker;
  lock_fd_ = ::open(marker.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (lock_fd_ < 0) throw Error(ErrorCode::kIo, std::string("cannot open the remote shard cache's marker: ") + std::strerror(errno), marker);
  while (::flock(lock_fd_, LOCK_EX) != 0) {
    if (errno != EINTR) throw Error(ErrorCode::kIo, std::string("cannot lock the remote shard cache: ") + std::strerror(errno), marker);
  }
}

std::string ShardCache::path_of(const std::string& url) const { return dir_ + "/" + hash_name(url) + ".tar"; }

std::string ShardCache::temp_path_of(const std::string& url) const {
  static std::atomic<std::uint64_t> counter{0};
  return dir_ + "/." + hash_name(url) + ".tar.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

std::string ShardCache::cached_etag(const std::string& url) const {
  std::ifstream in(dir_ + "/" + hash_name(url) + ".meta");
  std::string meta_url, etag, size;
  if (!std::getline(in, meta_url) || !std::getline(in, etag) || !std::getline(in, size) || meta_url != url) return {};
  struct stat st {};
  if (::stat(path_of(url).c_str(), &st) != 0 || std::to_string(st.st_size) != size) return {};
  return etag;
}

void ShardCache::commit(const std::string& url, const std::string& temp, const std::string& etag, std::uint64_t size) {
  const std::string meta = dir_ + "/" + hash_name(url) + ".meta";
  const std::string meta_temp = dir_ + "/." + hash_name(url) + ".meta.tmp-" + std::to_string(::getpid());
  if (!etag.empty() && cached_etag(url) == etag) {
    // Another process (a rank on this node) kept the same object meanwhile: its copy stays, so
    // that a copy someone has indexed is never replaced under them.
    ::unlink(temp.c_str());
    return;
  }
  if (::rename(temp.c_str(), path_of(url).c_str()) != 0) {
    ::unlink(temp.c_str());
    throw Error(ErrorCode::kIo, std::string("cannot keep the shard's local copy: ") + std::strerror(errno), path_of(url));
  }
  std::ofstream out(meta_temp, std::ios::trunc);
  out << url << '\n' << etag << '\n' << size << '\n';
  out.close();
  if (!out || ::rename(meta_temp.c_str(), meta.c_str()) != 0) ::unlink(meta_temp.c_str());  // no ETag: fetched again next time
}

void ShardCache::remove_orphans(const std::vector<std::string>& names) const { remove_orphans_of(dir_, names); }

void ShardCache::touch(const std::string& url) const {
  // The access time only: the tar index beside the copy is keyed on its mtime.
  const timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  ::utimensat(AT_FDCWD, path_of(url).c_str(), times, AT_SYMLINK_NOFOLLOW);
}

std::uint64_t ShardCache::used() const {
  std::uint64_t total = 0;
  for (const std::string& name : list_names(dir_)) {
    struct stat st {};
    if (::lstat((dir_ + "/" + name).c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

void ShardCache::evict(const std::set<std::string>& keep) const {
  std::uint64_t total = used();
  if (total <= limit_) return;
  struct Copy {
    std::string stem;  // dir/<hash>
    std::int64_t atime_ns = 0;
  };
  std::vector<Copy> copies;
  for (const std::string& name : list_names(dir_)) {
    if (name.size() != 20 || !name.ends_with(".tar")) continue;
    const std::string path = dir_ + "/" + name;
    struct stat st {};
    if (keep.count(path) != 0 || ::lstat(path.c_str(), &st) != 0) continue;
    copies.push_back({path.substr(0, path.size() - 4), st.st_atim.tv_sec * 1'000'000'000LL + st.st_atim.tv_nsec});
  }
  std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.atime_ns < b.atime_ns; });
  for (const Copy& c : copies) {
    if (total <= limit_) return;
    for (const char* suffix : {".tar", ".tar.sluice-idx", ".meta"}) {
      const std::string path = c.stem + suffix;
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && ::unlink(path.c_str()) == 0) total -= std::min<std::uint64_t>(total, static_cast<std::uint64_t>(st.st_size));
    }
  }
}

}  // namespace sluice::stages::remote
