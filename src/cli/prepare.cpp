// `sluice prepare fashion-mnist --out DIR`: turns the IDX files of Debian's dataset-fashion-mnist
// into a JPEG image folder, DIR/{train,test}/<class>/<index>.jpg, the layout from_folder reads.
//
// Safe to rerun and to interrupt: images go to DIR/.partial-<pid> first, are renamed into place
// when complete, and DIR/prepared.json is written last, so its presence means DIR is whole. A
// lock on DIR serialises concurrent runs; the second one then finds the marker and returns.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "cli/idx_reader.hpp"
#include "cli/number_flags.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "sluice/detail/core/atomic_file.hpp"
#include "sluice/detail/core/binary_io.hpp"
#include "sluice/core/error.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kDefaultSource = "/usr/share/datasets/fashion-mnist";
constexpr const char* kInstallHint =
    "Fashion-MNIST comes from Debian: apt-get install dataset-fashion-mnist (or scripts/setup), "
    "or pass --source DIR with its four IDX files";
constexpr const char* kMarkerName = "prepared.json";
constexpr std::uint32_t kSide = 28;

// Class folder names sort in label order ("0_..." to "9_..."), so from_folder's rule (label =
// index of the sorted class names) gives back Fashion-MNIST's own labels.
constexpr std::array<const char*, 10> kClassFolders = {
    "0_tshirt_top", "1_trouser", "2_pullover", "3_dress", "4_coat",
    "5_sandal",     "6_shirt",   "7_sneaker",  "8_bag",   "9_ankle_boot"};

struct SplitSpec {
  const char* name;
  const char* images_file;
  const char* labels_file;
  std::uint32_t count;
};
constexpr std::array<SplitSpec, 2> kSplits = {{
    {"train", "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 60000},
    {"test", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 10000},
}};

struct PrepareOptions {
  std::string dataset;
  fs::path out;
  fs::path source = kDefaultSource;
  int quality = 95;
  bool force = false;
  std::uint32_t limit = 0;  // 0: every image
  int threads = 0;          // 0: hardware threads, at most 4
};

struct Split {
  const SplitSpec* spec = nullptr;
  IdxImages images;
  IdxLabels labels;
  std::uint32_t take = 0;                        // images written: min(limit, count)
  std::array<std::string, 10> class_dirs;        // under the partial folder
  std::atomic<std::uint64_t> bytes{0};
};

// "<name>.gz", else the uncompressed "<name>" (someone may have gunzipped them).
fs::path find_source_file(const fs::path& source, const char* name) {
  const fs::path gz = source / (std::string(name) + ".gz");
  std::error_code ec;
  if (fs::exists(gz, ec)) return gz;
  if (fs::exists(source / name, ec)) return source / name;
  if (!fs::is_directory(source, ec)) {
    throw Error(ErrorCode::kNotFound, std::string("no such folder; ") + kInstallHint,
                source.string());
  }
  throw Error(ErrorCode::kNotFound, std::string("missing; ") + kInstallHint, gz.string());
}

// Reads and checks one split against what Fashion-MNIST is: 28x28, the published counts, labels
// 0-9, as many labels as images.
void load_split(Split& split, const fs::path& source) {
  const SplitSpec& spec = *split.spec;
  const fs::path images_path = find_source_file(source, spec.images_file);
  const fs::path labels_path = find_source_file(source, spec.labels_file);
  // The two image files are most of the work (26 MB of gzip); the caller runs splits in parallel.
  split.images = read_idx_images(images_path);
  split.labels = read_idx_labels(labels_path);
  if (split.images.rows != kSide || split.images.cols != kSide) {
    throw Error(ErrorCode::kCorruptData,
                "images are " + std::to_string(split.images.rows) + "x" +
                    std::to_string(split.images.cols) + ", Fashion-MNIST's are 28x28",
                images_path.string());
  }
  if (split.images.count != spec.count) {
    throw Error(ErrorCode::kCorruptData,
                "holds " + std::to_string(split.images.count) + " images, Fashion-MNIST's " +
                    spec.name + " split has " + std::to_string(spec.count),
                images_path.string());
  }
  if (split.labels.labels.size() != spec.count) {
    throw Error(ErrorCode::kCorruptData,
                "holds " + std::to_string(split.labels.labels.size()) + " labels, Fashion-MNIST's " +
                    spec.name + " split has " + std::to_string(spec.count),
                labels_path.string());
  }
  const auto& labels = split.labels.labels;
  const auto bad = std::find_if(labels.begin(), labels.end(), [](std::uint8_t l) { return l >= 10; });
  if (bad != labels.end()) {
    throw Error(ErrorCode::kCorruptData,
                "label " + std::to_string(*bad) + " at index " +
                    std::to_string(bad - labels.begin()) + " is not a class (0-9)",
                labels_path.string());
  }
}

std::string errno_text(int err) { return std::strerror(err); }

void write_file(const std::string& path, const unsigned char* data, unsigned long size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorCode::kIo, "cannot create: " + errno_text(errno), path);
  unsigned long written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd, data + written, size - written);
    if (n < 0 && errno == EINTR) continue;  // Ctrl-C lands here; the loop checks the flag
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw Error(ErrorCode::kIo, "cannot write: " + errno_text(err), path);
    }
    written += static_cast<unsigned long>(n);
  }
  if (::close(fd) != 0) throw Error(ErrorCode::kIo, "cannot write: " + errno_text(errno), path);
}

// One class folder of one split: the unit a worker takes. Each folder has a single writer
// because creating a file takes its directory's lock, so workers sharing folders would queue on
// it. Creating 70,000 files is most of the run (openat is ~80% of the time in `strace -c`), so
// the encoding threads matter less than the file system.
struct Chunk {
  Split* split;
  std::uint8_t label;
  std::vector<std::uint32_t> indices;
};

// Encodes and writes every chunk. Workers pull chunks from a shared counter; the first error
// stops the others and is rethrown here, on the caller's thread.
void encode_all(std::vector<Split>& splits, int quality, int threads,
                std::atomic<std::uint64_t>& done) {
  std::vector<Chunk> chunks;
  for (Split& split : splits) {
    const std::size_t first = chunks.size();
    for (std::uint8_t label = 0; label < kClassFolders.size(); ++label) {
      chunks.push_back({&split, label, {}});
    }
    for (std::uint32_t i = 0; i < split.take; ++i) {
      chunks[first + split.labels.labels[i]].indices.push_back(i);
    }
  }
  // Largest first, so the last chunk to start is a small one and the workers finish together.
  std::stable_sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) {
    return a.indices.size() > b.indices.size();
  });
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;

  auto worker = [&] {
    try {
      std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitCompress(), tjDestroy);
      if (!tj) throw Error(ErrorCode::kInternal, "tjInitCompress failed");
      const unsigned long capacity = tjBufSize(kSide, kSide, TJSAMP_GRAY);
      std::vector<unsigned char> buffer(capacity);
      char name[32];
      std::string path;
      for (;;) {
        const std::size_t c = next.fetch_add(1);
        if (c >= chunks.size() || failed.load() || InterruptGuard::interrupted()) return;
        const Chunk& chunk = chunks[c];
        Split& split = *chunk.split;
        const std::string& dir = split.class_dirs[chunk.label];
        std::uint64_t chunk_bytes = 0;
        std::uint64_t since_report = 0;
        for (const std::uint32_t i : chunk.indices) {
          if (InterruptGuard::interrupted() || failed.load(std::memory_order_relaxed)) return;
          unsigned char* out = buffer.data();
          unsigned long size = capacity;
          if (tjCompress2(tj.get(), split.images.image(i), kSide, kSide, kSide, TJPF_GRAY, &out,
                          &size, TJSAMP_GRAY, quality, TJFLAG_NOREALLOC) != 0) {
            throw Error(ErrorCode::kInternal,
                        std::string("JPEG encoding failed: ") + tjGetErrorStr2(tj.get()));
          }
          std::snprintf(name, sizeof name, "/%05u.jpg", i);
          path = dir;
          path += name;
          write_file(path, out, size);
          chunk_bytes += size;
          if (++since_report == 256) {  // often enough for the progress line, rarely enough
            done.fetch_add(since_report, std::memory_order_relaxed);
            since_report = 0;
          }
        }
        split.bytes.fetch_add(chunk_bytes, std::memory_order_relaxed);
        done.fetch_add(since_report, std::memory_order_relaxed);
      }
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      failed.store(true);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

// Holds an exclusive flock on DIR itself (no lock file left behind) for the object's lifetime.
class DirLock {
 public:
  explicit DirLock(const fs::path& dir) {
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorCode::kIo, "cannot open: " + errno_text(errno), dir.string());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      std::cerr << "sluice: waiting for another `sluice prepare` into " << dir.string() << '\n';
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~DirLock() { ::close(fd_); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

json request_json(const PrepareOptions& options, const fs::path& source) {
  return {{"dataset", options.dataset},
          {"source", source.string()},
          {"quality", options.quality},
          {"limit", options.limit == 0 ? json(nullptr) : json(options.limit)}};
}

std::string describe(const json& request) {
  return "quality " + request["quality"].dump() + ", " +
         (request["limit"].is_null() ? std::string("every image")
                                     : "limit " + request["limit"].dump()) +
         ", from " + request["source"].get<std::string>();
}

// The marker, or null when DIR holds none. A marker we cannot read is an error, not a reason to
// overwrite: the user decides with --force.
json read_marker(const fs::path& out) {
  const fs::path marker = out / kMarkerName;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(marker, ec))) return nullptr;
  // A regular file under a bound (a FIFO or a device planted there is refused, never read).
  const std::string text = core::read_regular_text(marker.string(), core::kMaxTextInputBytes, "marker file");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kCorruptData,
                std::string("unreadable (") + e.what() + "); pass --force to prepare again",
                marker.string());
  }
}

void write_marker(const fs::path& out, const json& marker) {
  // Replaces only a marker (a JSON object with its "sluice_version"), through the atomic writer.
  core::write_file_atomically(
      core::OutputFile{.path = (out / kMarkerName).string(), .noun = "marker file", .mode = 0644,
                       .is_ours = [](std::string_view head) {
                         return head.starts_with("{") && head.find("\"sluice_version\"") != std::string_view::npos;
                       }},
      marker.dump(2) + "\n");
}

// Leftovers of runs that died (we hold the lock, so no live run owns them).
void remove_stale(const fs::path& out) {
  for (const fs::directory_entry& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".partial-") || name.starts_with(".old-") ||
        name.starts_with(".prepared.json.tmp-")) {
      fs::remove_all(entry.path());
    }
  }
}

// True when `out` already holds exactly what `request` asks for (and says so). Throws when it
// holds another preparation, or train/ or test/ without a marker, unless --force.
bool already_prepared(const PrepareOptions& options, const fs::path& out, const json& request) {
  std::error_code ec;
  const json marker = read_marker(out);
  if (!marker.is_null() && !options.force) {
    const json previous = {{"dataset", marker.value("dataset", "")},
                           {"source", marker.value("source", "")},
                           {"quality", marker.value("quality", 0)},
                           {"limit", marker.value("limit", json(nullptr))}};
    if (previous != request) {
      throw Error(ErrorCode::kInvalidArgument,
                  "already prepared with " + describe(previous) + "; this run asks for " +
                      describe(request) + ": pass --force to replace it, or choose another --out",
                  out.string());
    }
    std::cout << out.string() << ": already prepared (" << options.dataset << ", "
              << marker.value("files", 0) << " files, " << describe(request)
              << "); --force to prepare again\n";
    return true;
  }
  if (marker.is_null() && !options.force) {
    for (const SplitSpec& spec : kSplits) {
      if (fs::exists(out / spec.name, ec)) {
        throw Error(ErrorCode::kInvalidArgument,
                    std::string("holds ") + spec.name + "/ but no " + kMarkerName +
                        " (an interrupted run, or other data): pass --force to replace train/ "
                        "and test/, or choose another --out",
                    out.string());
      }
    }
  }
  return false;
}

// Every split's IDX files read and checked, the splits in parallel: they are independent, and
// decompressing their images is most of the time before encoding starts (docs/performance.md).
// On bad input, removes `out` when this run created it.
std::vector<Split> load_splits(const fs::path& source, const fs::path& out, bool created_out) {
  std::vector<Split> splits(kSplits.size());
  for (std::size_t s = 0; s < kSplits.size(); ++s) splits[s].spec = &kSplits[s];
  std::vector<std::future<void>> loads;
  for (Split& split : splits) {
    loads.push_back(std::async(std::launch::async, [&split, &source] { load_split(split, source); }));
  }
  for (auto& load : loads) load.wait();
  try {
    for (auto& load : loads) load.get();  // rethrows the first split's error
  } catch (...) {
    std::error_code ec;
    if (created_out) fs::remove(out, ec);  // bad input leaves no trace
    throw;
  }
  return splits;
}

// Puts the encoded splits in place of the old ones and writes the marker. Between removing the
// old marker and writing the new one `out` is visibly incomplete, so a crash in that window
// makes the next run ask for --force rather than trust half a tree.
void commit(const fs::path& out, const fs::path& partial, const std::vector<Split>& splits, const json& result) {
  std::error_code ec;
  fs::remove(out / kMarkerName, ec);
  const fs::path old = out / (".old-" + std::to_string(::getpid()));
  for (const Split& split : splits) {
    if (fs::exists(out / split.spec->name, ec)) {
      fs::create_directories(old);
      fs::rename(out / split.spec->name, old / split.spec->name);
    }
    fs::rename(partial / split.spec->name, out / split.spec->name);
  }
  write_marker(out, result);
  fs::remove_all(partial, ec);
  fs::remove_all(old, ec);
}

void run_prepare(PrepareOptions options) {
  Stopwatch clock;
  std::error_code ec;
  fs::path source = options.source;
  if (fs::path canonical = fs::weakly_canonical(source, ec); !ec) source = canonical;
  const fs::path out = options.out;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "exists and is not a folder", out.string());
  }
  const bool created_out = fs::create_directories(out);
  DirLock lock(out);

  const json request = request_json(options, source);
  if (already_prepared(options, out, request)) return;
  remove_stale(out);
  std::vector<Split> splits = load_splits(source, out, created_out);

  InterruptGuard interrupt_guard;
  const fs::path partial = out / (".partial-" + std::to_string(::getpid()));
  std::uint64_t total = 0;
  for (Split& split : splits) {
    split.take = options.limit == 0 ? split.images.count
                                    : std::min(options.limit, split.images.count);
    total += split.take;
    for (std::size_t c = 0; c < kClassFolders.size(); ++c) {
      const fs::path dir = partial / split.spec->name / kClassFolders[c];
      fs::create_directories(dir);
      split.class_dirs[c] = dir.string();
    }
  }

  const int threads = worker_count(options.threads, 4);
  std::atomic<std::uint64_t> done{0};
  try {
    ProgressLine progress("prepare " + options.dataset, total, done);
    encode_all(splits, options.quality, threads, done);
    progress.finish();
    if (InterruptGuard::interrupted()) {
      throw Error(ErrorCode::kCancelled, "interrupted; removed the partial output", out.string());
    }
  } catch (...) {
    fs::remove_all(partial, ec);
    if (created_out) fs::remove(out, ec);  // only if empty: never someone else's files
    throw;
  }

  json result = request;
  result["format"] = "jpeg, greyscale, 28x28";
  result["layout"] = "<split>/<class>/<index>.jpg; label = index of the sorted class folder names";
  result["classes"] = kClassFolders;
  std::uint64_t bytes = 0;
  for (const Split& split : splits) {
    result["splits"][split.spec->name] = {{"files", split.take}, {"bytes", split.bytes.load()}};
    bytes += split.bytes.load();
  }
  result["files"] = total;
  result["bytes"] = bytes;
  result["sluice_version"] = SLUICE_VERSION;
  commit(out, partial, splits, result);

  std::cout << "prepared " << options.dataset << " in " << out.string() << ": " << total
            << " files (";
  for (std::size_t s = 0; s < splits.size(); ++s) {
    std::cout << (s ? ", " : "") << splits[s].spec->name << ' ' << splits[s].take;
  }
  std::cout << "), " << format_bytes(bytes) << ", " << format_seconds(clock.seconds()) << " ("
            << threads << (threads == 1 ? " thread)\n" : " threads)\n");
}

}  // namespace

void add_prepare_command(CLI::App& app) {
  auto options = std::make_shared<PrepareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "prepare", "Write a public dataset as a JPEG image folder: OUT/<split>/<class>/<index>.jpg; "
                 "`prepare shards` writes an image folder as tar shards");
  auto* dataset = cmd->add_option("dataset", options->dataset, "The dataset (fashion-mnist)")
                     ->check(CLI::IsMember({"fashion-mnist"}));
  auto* out = cmd->add_option("--out,-o", options->out, "Folder to write (created; reruns are no-ops)");
  cmd->add_option("--source", options->source, "Folder with the dataset's IDX files (.gz or not)")
      ->capture_default_str();
  cmd->add_option("--quality", options->quality, "JPEG quality, 1-100")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--force", options->force, "Prepare again even if OUT is already prepared");
  cmd->add_option("--limit", options->limit, "Only the first N images of each split")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", options->threads, "Encoding threads (default: cores, at most 4)")
      ->check(integer_in(0, core::max_threads()));
  add_prepare_shards_command(*cmd);
  cmd->callback([cmd, options, dataset, out] {
    if (!cmd->get_subcommands().empty()) return;  // `prepare shards` ran
    if (dataset->count() == 0) throw CLI::RequiredError("dataset (fashion-mnist) or the shards subcommand");
    if (out->count() == 0) throw CLI::RequiredError("--out");
    run_prepare(*options);
  });
}

}  // namespace sluice::cli
