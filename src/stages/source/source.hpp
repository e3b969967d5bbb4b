// Sources: turn a folder of class sub-folders, a list file, an in-memory list or tar shards into
// the data set's item table, in a fixed order (the identity every per-sample random choice is
// keyed on).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/pipeline/spec.hpp"
#include "stages/source/item_table.hpp"

namespace sluice::stages {

class FileOps;

// Brings the shards that a list of items lives in to local files as those items are read:
// remote shards streamed once an epoch (or build()'s size probe) is about to read them
// (stages/tar/shard_fetcher.hpp). Called on the consumer's thread before the epoch's samples are
// submitted; it may return before the bytes are there (a read waits for its member's bytes,
// ItemTable::Shard::fetch_failure). A shard that cannot be fetched makes its samples fail when
// read, as under the build-time fetch. `stop` (may be empty) is asked every 50 ms or so while it
// waits on the network: true ends the fetch with Error(kCancelled). stop() ends what is in
// flight, waking reads that wait for it: the loader calls it before it joins its workers.
// interrupt() ends the reads waiting now (kCancelled), not the fetch: the loader calls it when
// it abandons an epoch, whose samples it then waits for.
class ShardFetcher {
 public:
  virtual ~ShardFetcher() = default;
  virtual void fetch(std::span<const std::int64_t> items, const std::function<bool()>& stop) = 0;
  virtual void stop() {}
  virtual void interrupt() {}
  // Waits for the transfers of the stream in flight to end (`stop`, may be empty, ends the wait
  // as fetch()'s does): the loader calls it when an epoch's last batch is out, so the counters
  // then hold each shard's end, which arrives after its last member has been read.
  virtual void settle(const std::function<bool()>& stop) { (void)stop; }
  // Shards streamed through memory (remote cache_limit 0): sizes their buffers to hold what a
  // window of `positions` consecutive reads of an epoch's order may straddle, plus read-ahead,
  // and returns those bytes (what the loader reserves from its budget); 0 when shards are read
  // from files.
  virtual std::uint64_t reserve_window(std::int64_t positions) {
    (void)positions;
    return 0;
  }
};

struct Dataset {
  ItemTable items;
  // Label i is class_names[i]: the sorted class folders, or the sorted class names of shards
  // labelled by name; empty for lists, items and shards labelled by number.
  std::vector<std::string> class_names;
  // Set when some shards are fetched on demand (load_dataset's fetch_on_demand): who fetches them.
  std::shared_ptr<ShardFetcher> fetcher;
};

// The shard (by its place among a shards source's names) the loader's first epoch reads first,
// given their count, where its order tells it without the item table; -1 where it does not.
using FirstShard = std::function<std::ptrdiff_t(std::size_t shards)>;

// Folder: labels are the indices of the sorted class sub-folder names; files are taken
// recursively within each class folder, sorted by path; only .jpg/.jpeg/.jpe/.jfif names
// (any case), hidden files skipped. A folder without sub-folders is one class, label 0. Only
// regular files are listed (FIFOs, sockets, devices are not); a symlink whose target leaves the
// folder throws unless Folder::allow_outside_root; a class folder without JPEGs throws unless
// Folder::allow_empty_classes.
// List file: "path<TAB>label" per line, '#' comments and blank lines ignored, relative paths
// resolved against the list's folder; entries that leave it throw unless
// ListFile::allow_outside_root. A regular file under 256 MiB only. Throws sluice::Error naming the path (and line).
// Shards: see stages/tar/tar_source.hpp. `ops` (null: the real file system) is what shards and their
// index files are opened through. `fetch_on_demand` (a rank of several splitting tar shards by
// shards): remote shards whose index file the server has are fetched when read, not in here;
// the one `first` names, if remote, comes with the index files (stages/tar/tar_source.hpp).
Dataset load_dataset(const spec::Source& source, FileOps* ops = nullptr, bool fetch_on_demand = false,
                     const FirstShard& first = {});

// Whether the name ends in an image extension the decode stage reads (any case): .jpg, .jpeg,
// .png, .webp, .bmp, .gif, .tif, .tiff, .ppm, .pgm, .pbm and their kin (image_format.hpp). The
// decoder goes by the file's first bytes; the name only says which files of a folder are images.
bool has_image_extension(std::string_view filename);

// A file or folder name as sluice writes it into a text file or message, losslessly and on one
// line: a backslash as two, newline, carriage return and tab as \n, \r, \t, any other control
// byte and any byte that is not part of well-formed UTF-8 as \xHH; everything else as it is.
// A class folder named with a newline no longer shifts the lines of PREFIX-classes.txt.
std::string escape_name(std::string_view name);

}  // namespace sluice::stages
