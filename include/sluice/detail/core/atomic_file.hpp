// The one way sluice writes a file it produces (weights, profiles, loader states, sweep files,
// shard sets and their manifests, and, through the same rule, caches and indexes): an exclusively
// created temporary in the target's folder (O_EXCL | O_NOFOLLOW, so nothing planted there is
// followed or reused), written, fsynced, then renamed over the target, and only when the target is
// absent or is a file of sluice's own kind. A reader never sees a torn file; a full disk leaves the
// old file as it was; a symlink, a FIFO, a folder or a foreign file at the target is refused with a
// message, unless the caller was told to force it (then the link itself is replaced, never what it
// points to). docs/reliability.md lists the cases.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sluice::core {

// What is written where, and what may be replaced there.
struct OutputFile {
  std::string path;
  std::string noun = "file";  // "weights file", "profile": says what in every message
  unsigned mode = 0644;       // of the new file; 0600 for caches and indexes (they hold the reader's data)
  // True when the first bytes of the regular file already at `path` (at most kOwnHeadBytes) show it
  // is one sluice wrote of this kind. Null: only an absent target or an empty file is replaced.
  std::function<bool(std::string_view head)> is_ours;
  bool force = false;  // replace anything that is not a folder (a foreign file, a symlink)
};

inline constexpr std::size_t kOwnHeadBytes = 4096;

// Throws sluice::Error naming the path when `target` could not be written: its folder missing or
// not writable (checked by creating and removing a temporary there, so a long run finds out before
// it starts, not after), or what is at the path may not be replaced.
void check_output(const OutputFile& target);

// Streams a file to a temporary beside the target; commit() publishes it. Destroying the writer
// before commit() removes the temporary. Errors throw sluice::Error naming the target and the
// system's reason (ENOSPC, EACCES, ...).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(OutputFile target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // The temporary, for a writer that is another program (the sweep's plot): it writes there, then
  // commit() publishes what it wrote.
  const std::string& temp_path() const { return temp_; }
  // fsync, check the target again, rename over it, fsync the folder.
  void commit();

 private:
  OutputFile target_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// write + commit of a whole buffer.
void write_file_atomically(const OutputFile& target, std::string_view bytes);

// Whether what is at `target.path` may be replaced (absent, an empty regular file, a regular file
// is_ours accepts, or anything but a folder under force); the reason it may not otherwise.
struct Replaceable {
  bool ok = true;
  std::string why;
};
Replaceable replaceable(const OutputFile& target);

}  // namespace sluice::core
