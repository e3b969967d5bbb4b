// `sluice inspect DIR [--json] [--decode] [--strict-decode]`: what an image folder holds before a
// pipeline reads it: files and classes (labelled as from_folder labels them), bytes, file-size and
// dimension histograms, greyscale / progressive / CMYK counts, every file that would fail, with its
// cause, every file read in spite of libjpeg warnings ("recovered"), with the first, the formats
// (by content) and the files whose extension says another. Headers are parsed with the
// pipeline's own JpegDecoder and ImageDecoder, so "fails here" means "fails there"; --decode
// also runs the full decode, which catches truncated and corrupt scan data.
// `sluice inspect --shards PATTERN` does the same for tar shards, read as from_shards reads them
// (damaged members are failures at the "read" stage; indexing them writes their index files); a
// pattern of URLs is fetched into the remote shard cache first.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "pipeline/json_text.hpp"
#include "cli/number_flags.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "cli/remote_options.hpp"
#include "sluice/core/error.hpp"
#include "cli/inspect_formats.hpp"
#include "cli/inspect_histograms.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "stages/source/read_file.hpp"
#include "stages/source/source.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 30;  // larger is surely not an image
constexpr std::size_t kListedFailures = 20;                       // text output; --json has all
constexpr std::size_t kListedClasses = 40;

struct InspectOptions {
  fs::path dir;
  std::string shards;  // --shards PATTERN instead of DIR (URLs too: docs/remote.md)
  RemoteFlags remote;
  bool json = false;
  bool decode = false;
  bool strict_decode = false;  // libjpeg warnings are failures, as with DecodeOptions::strict
  int threads = 0;
  bool allow_outside_root = false;   // symlinks that lead out of the folder
  bool allow_empty_classes = false;  // class folders without images
};

// What from_folder would read: class folders (sorted, label = index) or a flat folder.
struct Listing {
  std::vector<std::string> classes;
  std::vector<std::int32_t> class_labels;  // the label each class has in a batch (shards: the .cls number)
  bool flat = true;
  std::vector<fs::path> files;
  std::vector<int> labels;      // per file
  std::uint64_t other_files = 0;  // not an image extension, or beside the class folders
  stages::ItemTable members;      // --shards: what files[i] names ("shard.tar:member")
  std::size_t shards = 0;
};

struct FileReport {
  std::uint64_t bytes = 0;
  bool header_ok = false;
  stages::JpegHeader header;  // for the other formats: their size, and 1 or 3 components
  stages::ImageProbe probe;   // every format's: bit depth, alpha, animation
  stages::ImageFormat content = stages::ImageFormat::kUnknown;
  const char* failed_at = nullptr;  // "read", "header" or "decode"; null when the file is fine
  std::string cause;
  std::string warning;  // libjpeg's first, for a file read in spite of warnings ("recovered")
};

bool is_hidden(const fs::path& path) { return path.filename().string().starts_with('.'); }

// The label class `c` has in a batch: its index, or for shards labelled by number the number
// itself (labels 0, 1, 2, 4 are four classes, the last one label 4, not 3).
std::int32_t label_of(const Listing& listing, std::size_t c) {
  return c < listing.class_labels.size() ? listing.class_labels[c] : static_cast<std::int32_t>(c);
}

// Regular files under root, hidden ones and hidden folders skipped, as the source stage skips them.
std::uint64_t count_visible_files(const fs::path& root) {
  // Through error codes: an entry that cannot be resolved (a symlink loop, a dangling link) is
  // not a regular file here, as the source stage does not list it, and never ends the count.
  std::uint64_t count = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::follow_directory_symlink |
                                                fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (is_hidden(it->path())) {
      if (it->is_directory(type_ec)) it.disable_recursion_pending();
      continue;
    }
    count += it->is_regular_file(type_ec) ? 1 : 0;
  }
  return count;
}

// The listing is the source stage's own (load_dataset), so the classes, labels and files shown
// are exactly those from_folder would read; only the count of other files is ours.
Listing list_folder(const fs::path& root, const InspectOptions& options) {
  const stages::Dataset dataset = stages::load_dataset(
      spec::Folder{root.string(), options.allow_outside_root, options.allow_empty_classes});
  Listing listing;
  listing.classes = dataset.class_names;
  std::error_code ec;
  if (listing.classes.size() == 1 && listing.classes[0].empty()) {  // "DIR/" has no filename
    listing.classes[0] = fs::weakly_canonical(root, ec).filename().string();
  }
  listing.files.reserve(static_cast<std::size_t>(dataset.items.size()));
  listing.labels.reserve(static_cast<std::size_t>(dataset.items.size()));
  for (std::int64_t i = 0; i < dataset.items.size(); ++i) {
    listing.files.emplace_back(dataset.items.path(i));
    listing.labels.push_back(dataset.items.label(i));
  }
  // A flat folder is one class named after the folder; class folders are its sub-folders.
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    listing.flat = listing.flat && !(entry.is_directory() && !is_hidden(entry.path()));
  }
  const std::uint64_t visible = count_visible_files(root);
  listing.other_files = visible > listing.files.size() ? visible - listing.files.size() : 0;
  return listing;
}

// What from_shards would read: the samples of every shard, labelled as it labels them (class
// names, or the distinct label numbers in order).
Listing list_shards(const std::string& pattern, const RemoteOptions& remote) {
  stages::Dataset dataset = stages::load_dataset(spec::Shards{{pattern}, ShardIndex::kBesideShard, ShardBy::kShards, remote});
  Listing listing;
  listing.flat = false;
  listing.shards = dataset.items.shards().size();
  std::map<std::int32_t, int> numbers;  // label number -> class index
  if (dataset.class_names.empty()) {
    for (std::int64_t i = 0; i < dataset.items.size(); ++i) numbers.emplace(dataset.items.label(i), 0);
    for (auto& [number, index] : numbers) {
      index = static_cast<int>(listing.classes.size());
      listing.classes.push_back(std::to_string(number));
      listing.class_labels.push_back(number);
    }
  } else {
    listing.classes = dataset.class_names;
  }
  listing.files.reserve(static_cast<std::size_t>(dataset.items.size()));
  for (std::int64_t i = 0; i < dataset.items.size(); ++i) {
    listing.files.emplace_back(dataset.items.path(i));
    const std::int32_t label = dataset.items.label(i);
    listing.labels.push_back(numbers.empty() ? std::max(0, label) : numbers.at(label));
  }
  listing.members = std::move(dataset.items);
  return listing;
}

// What the bytes look like when they are no image format sluice reads (those go to their decoder).
const char* sniff_other(std::span<const std::uint8_t> bytes) {
  if (bytes.size() >= 12 && std::memcmp(bytes.data() + 4, "ftyp", 4) == 0) return "HEIF/AVIF/MP4";
  if (!bytes.empty() && (bytes[0] == '<' || (bytes.size() >= 3 && std::memcmp(bytes.data(), "\xEF\xBB\xBF", 3) == 0))) {
    return "text";
  }
  return nullptr;
}

// Reads the whole file into `bytes` (reused across files); on failure fills report and
// returns false.
bool read_whole_file(const fs::path& path, std::vector<std::uint8_t>& bytes, FileReport& report) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    report.failed_at = "read";
    report.cause = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct stat info {};
  ::fstat(fd, &info);
  report.bytes = static_cast<std::uint64_t>(info.st_size);
  if (report.bytes > kMaxFileBytes) {
    ::close(fd);
    report.failed_at = "read";
    report.cause = "larger than 1 GiB, not read";
    return false;
  }
  bytes.resize(report.bytes);
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      report.failed_at = "read";
      report.cause = n < 0 ? std::string("cannot read: ") + std::strerror(errno)
                           : std::string("file shrank while being read");
      ::close(fd);
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return true;
}

// A PNG, WebP, GIF, BMP, PNM or TIFF file, through the pipeline's own ImageDecoder.
void inspect_other_format(std::span<const std::uint8_t> bytes, bool decode, stages::ImageDecoder& decoder,
                          std::vector<std::uint8_t>& pixels, FileReport& report) {
  try {
    report.probe = decoder.probe(bytes);
    report.header.width = report.probe.width;
    report.header.height = report.probe.height;
    report.header.components = report.probe.channels <= 2 ? 1 : 3;
    report.header_ok = true;
    if (!decode) return;
    report.failed_at = "decode";
    const int channels = decoder.channels();
    pixels.resize(static_cast<std::size_t>(report.probe.width) * report.probe.height * channels);
    decoder.decode(bytes, report.probe, ImageView{pixels.data(), report.probe.width, report.probe.height, channels,
                                                  static_cast<std::ptrdiff_t>(report.probe.width) * channels});
    report.failed_at = nullptr;
    if (const stages::FormatWarnings& w = decoder.warnings(); w.count > 0) report.warning = w.first;
  } catch (const Error& e) {
    if (report.failed_at == nullptr) report.failed_at = "header";
    report.cause = e.cause();
  }
}

void inspect_bytes(std::span<const std::uint8_t> bytes, bool decode, stages::JpegDecoder& decoder,
                   stages::ImageDecoder& others, std::vector<std::uint8_t>& pixels, FileReport& report) {
  if (bytes.empty()) {
    report.failed_at = "header";
    report.cause = "empty file";
    return;
  }
  report.content = stages::sniff_format(bytes);
  if (stages::ImageDecoder::handles(bytes)) {
    inspect_other_format(bytes, decode, others, pixels, report);
    return;
  }
  try {
    report.header = decoder.read_header(bytes);
    report.header_ok = true;
    report.probe.format = stages::ImageFormat::kJpeg;
    report.probe.width = report.header.width;
    report.probe.height = report.header.height;
    report.probe.channels = report.header.components;
    if (const stages::JpegWarnings w = decoder.warnings(); w.count > 0) report.warning = w.first;
  } catch (const Error& e) {
    report.failed_at = "header";
    report.cause = e.cause();
    if (const char* format = sniff_other(bytes)) {
      report.cause += std::string(" (the data looks like ") + format + ")";
    }
    return;
  }
  if (!decode) return;
  try {
    const stages::JpegRequest whole{};
    const Rect region = decoder.decoded_region(report.header, whole);
    const int channels = decoder.channels();
    pixels.resize(static_cast<std::size_t>(region.width) * region.height * channels);
    const ImageView out{pixels.data(), region.width, region.height, channels,
                        static_cast<std::ptrdiff_t>(region.width) * channels};
    decoder.decode(bytes, report.header, whole, out);
    if (const stages::JpegWarnings w = decoder.warnings(); w.count > 0) report.warning = w.first;
  } catch (const Error& e) {
    report.failed_at = "decode";
    report.cause = e.cause();
  }
}

// Item i of the listing: a file read whole, or a member read as the pipeline reads it.
struct ItemInspector {
  ItemInspector(bool decode, bool strict)
      : decode(decode), decoder(DecodeOptions{.strict = strict}), others(DecodeOptions{.strict = strict}) {}
  bool decode;
  stages::JpegDecoder decoder;
  stages::ImageDecoder others;
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint8_t> pixels;
  stages::ItemReader reader;
  AlignedBuffer member;

  void inspect(const Listing& listing, std::size_t i, FileReport& report) {
    if (listing.members.empty()) {
      if (read_whole_file(listing.files[i], bytes, report)) inspect_bytes(bytes, decode, decoder, others, pixels, report);
      return;
    }
    std::span<const std::uint8_t> data;
    try {
      data = reader.read(listing.members, static_cast<std::int64_t>(i), member, kMaxFileBytes);
    } catch (const Error& e) {
      report.failed_at = "read";
      report.cause = e.cause();
      return;
    }
    report.bytes = data.size();
    inspect_bytes(data, decode, decoder, others, pixels, report);
  }
};

std::vector<FileReport> inspect_files(const Listing& listing, const InspectOptions& options) {
  std::vector<FileReport> reports(listing.files.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done{0};
  const int threads = worker_count(options.threads, 8);
  ProgressLine progress(options.decode ? "inspect (decode)" : "inspect", reports.size(), done);
  auto worker = [&] {
    ItemInspector inspector(options.decode, options.strict_decode);
    for (std::size_t i; (i = next.fetch_add(1)) < reports.size();) {
      try {
        inspector.inspect(listing, i, reports[i]);
      } catch (const std::exception& e) {  // e.g. bad_alloc on an absurd header: still data
        reports[i].failed_at = "decode";
        reports[i].cause = e.what();
      }
      done.fetch_add(1, std::memory_order_relaxed);
      if (InterruptGuard::interrupted()) return;
    }
  };
  InterruptGuard interrupt_guard;
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  progress.finish();
  if (InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted");
  return reports;
}

// What the files add up to: per class, the histograms, the dimensions and kinds the headers
// say, and the failures.
struct Summary {
  struct ClassTotals {
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<ClassTotals> classes;
  std::vector<Bucket> sizes = size_buckets();
  std::vector<Bucket> sides = side_buckets();
  std::vector<std::pair<std::pair<int, int>, std::uint64_t>> common;  // the 5 most common sizes
  std::uint64_t bytes = 0, headers = 0, grey = 0, colour = 0, cmyk = 0, progressive = 0;
  std::uint64_t pixels = 0;
  int min_w = 0, max_w = 0, min_h = 0, max_h = 0;
  json failures = json::array();
  json recovered = json::array();  // files read in spite of libjpeg warnings
  FormatTally formats;
};

Summary summarize(const Listing& listing, const std::vector<FileReport>& reports) {
  Summary t;
  t.classes.resize(listing.classes.size());
  std::map<std::pair<int, int>, std::uint64_t> exact_sizes;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const FileReport& r = reports[i];
    if (r.failed_at == nullptr && !r.warning.empty()) {
      t.recovered.push_back({{"path", listing.files[i].string()}, {"warning", r.warning}});
    }
    t.classes[listing.labels[i]].files += 1;
    t.classes[listing.labels[i]].bytes += r.bytes;
    t.bytes += r.bytes;
    t.formats.add(listing.files[i].string(), r.bytes, r.content, r.header_ok ? &r.probe : nullptr);
    if (r.failed_at == nullptr || std::strcmp(r.failed_at, "read") != 0) count_into(t.sizes, r.bytes);
    if (r.failed_at != nullptr) {
      t.failures.push_back({{"path", listing.files[i].string()}, {"stage", r.failed_at},
                            {"cause", r.cause}});
    }
    if (!r.header_ok) continue;
    const stages::JpegHeader& h = r.header;
    t.min_w = t.headers == 0 ? h.width : std::min(t.min_w, h.width);
    t.min_h = t.headers == 0 ? h.height : std::min(t.min_h, h.height);
    t.max_w = std::max(t.max_w, h.width);
    t.max_h = std::max(t.max_h, h.height);
    ++t.headers;
    t.pixels += static_cast<std::uint64_t>(h.width) * h.height;
    count_into(t.sides, static_cast<std::uint64_t>(std::min(h.width, h.height)));
    ++exact_sizes[{h.width, h.height}];
    t.grey += h.components == 1;
    t.colour += h.components == 3;
    t.cmyk += h.components == 4;
    t.progressive += h.progressive;
  }
  t.common.assign(exact_sizes.begin(), exact_sizes.end());
  std::stable_sort(t.common.begin(), t.common.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  t.common.resize(std::min<std::size_t>(t.common.size(), 5));
  return t;
}

void print_json(const InspectOptions& options, const Listing& listing, const Summary& t, std::size_t files,
                double seconds) {
  json out;
  out["root"] = options.shards.empty() ? options.dir.string() : options.shards;
  out["layout"] = !options.shards.empty() ? "shards" : listing.flat ? "flat" : "class-folders";
  if (!options.shards.empty()) out["shards"] = listing.shards;
  out["files"] = files;
  out["bytes"] = t.bytes;
  out["other_files"] = listing.other_files;
  json class_list = json::array();
  for (std::size_t c = 0; c < t.classes.size(); ++c) {
    class_list.push_back({{"label", label_of(listing, c)}, {"name", listing.classes[c]},
                          {"files", t.classes[c].files}, {"bytes", t.classes[c].bytes}});
  }
  out["classes"] = class_list;
  out["size_histogram"] = buckets_json(t.sizes);
  json common_json = json::array();
  for (const auto& [size, n] : t.common) {
    common_json.push_back({{"width", size.first}, {"height", size.second}, {"files", n}});
  }
  out["dimensions"] = {{"headers_read", t.headers},
                       {"min_width", t.min_w}, {"max_width", t.max_w},
                       {"min_height", t.min_h}, {"max_height", t.max_h},
                       {"mean_megapixels", t.headers ? t.pixels / 1e6 / t.headers : 0.0},
                       {"shorter_side_histogram", buckets_json(t.sides)},
                       {"most_common", common_json}};
  out["colour"] = t.colour;
  out["greyscale"] = t.grey;
  out["cmyk"] = t.cmyk;
  out["progressive"] = t.progressive;
  out["formats"] = t.formats.to_json();
  out["decoded"] = options.decode;
  out["failed"] = t.failures.size();
  out["failures"] = t.failures;
  out["recovered"] = t.recovered.size();
  out["recovered_files"] = t.recovered;
  out["seconds"] = seconds;
  std::cout << dump_json(out) << '\n';  // names that are not UTF-8 stay escaped (docs/stats.md)
}

void print_text(const InspectOptions& options, const Listing& listing, const Summary& t, std::size_t files,
                double seconds) {
  std::ostream& out = std::cout;
  out << (options.shards.empty() ? options.dir.string() : options.shards) << ": " << files << " image files, "
      << format_bytes(t.bytes) << ", " << t.classes.size() << (t.classes.size() == 1 ? " class" : " classes")
      << (listing.flat ? " (flat folder)" : "");
  if (!options.shards.empty()) out << " in " << listing.shards << " shard(s)";
  out << '\n';
  if (listing.other_files > 0) {
    out << "  (" << listing.other_files
        << " other files ignored: not an image extension, or beside the class folders)\n";
  }
  out << (options.shards.empty() ? "classes (label = index of the sorted folder names):\n"
                                  : "classes (label = the key.cls number, or the index of the sorted key.class names):\n");
  for (std::size_t c = 0; c < t.classes.size() && c < kListedClasses; ++c) {
    char line[96];
    std::snprintf(line, sizeof line, "  %5d %8llu %10s  ", label_of(listing, c),
                  static_cast<unsigned long long>(t.classes[c].files),
                  format_bytes(t.classes[c].bytes).c_str());
    out << line << stages::escape_name(listing.classes[c]) << '\n';  // a newline in a name stays on its line
  }
  if (t.classes.size() > kListedClasses) {
    out << "  ... and " << t.classes.size() - kListedClasses << " more (--json lists all)\n";
  }
  out << "file sizes:\n";
  print_buckets(out, t.sizes);
  if (t.headers > 0) {
    out << "dimensions (shorter side), width " << t.min_w << "-" << t.max_w << ", height " << t.min_h
        << "-" << t.max_h << ":\n";
    print_buckets(out, t.sides);
    out << "  most common:";
    for (const auto& [size, n] : t.common) {
      out << ' ' << size.first << 'x' << size.second << " (" << n << ")";
    }
    out << '\n';
    out << "colour: " << t.colour << " colour, " << t.grey << " greyscale, " << t.cmyk << " CMYK; "
        << t.progressive << " progressive\n";
  }
  t.formats.print(out, kListedFailures);
  out << "failures: " << t.failures.size();
  out << (options.decode ? " (headers and full decode)\n" : " (headers only; --decode decodes)\n");
  for (std::size_t i = 0; i < t.failures.size() && i < kListedFailures; ++i) {
    out << "  " << t.failures[i]["path"].get<std::string>() << ": "
        << t.failures[i]["cause"].get<std::string>() << '\n';
  }
  if (t.failures.size() > kListedFailures) {
    out << "  ... and " << t.failures.size() - kListedFailures << " more (--json lists all)\n";
  }
  if (!t.recovered.empty()) {
    out << "recovered: " << t.recovered.size() << " (read in spite of libjpeg warnings, as Pillow reads them; "
        << "--strict-decode counts them as failures)\n";
    for (std::size_t i = 0; i < t.recovered.size() && i < kListedFailures; ++i) {
      out << "  " << t.recovered[i]["path"].get<std::string>() << ": " << t.recovered[i]["warning"].get<std::string>()
          << '\n';
    }
    if (t.recovered.size() > kListedFailures) {
      out << "  ... and " << t.recovered.size() - kListedFailures << " more (--json lists all)\n";
    }
  }
  out << "inspected in " << format_seconds(seconds) << '\n';
}

void report(const InspectOptions& options, const Listing& listing,
            const std::vector<FileReport>& reports, double seconds) {
  const Summary summary = summarize(listing, reports);
  if (options.json) {
    print_json(options, listing, summary, reports.size(), seconds);
  } else {
    print_text(options, listing, summary, reports.size(), seconds);
  }
}

void run_inspect(const InspectOptions& options) {
  Stopwatch clock;
  Listing listing;
  try {
    listing = options.shards.empty() ? list_folder(options.dir, options) : list_shards(options.shards, remote_options(options.remote));
  } catch (const fs::filesystem_error& e) {
    // A folder we may not list is an input problem like any other: name it.
    throw Error(e.code() == std::errc::permission_denied ? ErrorCode::kPermissionDenied
                                                         : ErrorCode::kIo,
                "cannot list: " + e.code().message(), e.path1().string());
  }
  const std::vector<FileReport> reports = inspect_files(listing, options);
  report(options, listing, reports, clock.seconds());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Summarise an image folder: classes, sizes, dimensions, formats, bad files");
  auto* dir = cmd->add_option("dir", options->dir, "Image folder (class sub-folders, or flat)");
  auto* shards = cmd->add_option("--shards", options->shards,
                                 "Tar shards instead of a folder: a pattern with brace ranges or globs");
  shards->excludes(dir);
  add_remote_options(cmd, options->remote);
  cmd->add_flag("--json", options->json, "Print one JSON object (the last line of stdout)");
  cmd->add_flag("--decode", options->decode,
                "Decode every file too (finds truncated or corrupt image data; slower)");
  cmd->add_flag("--strict-decode", options->strict_decode,
                "Count files libjpeg warns about as failures (default: as recovered, when every row is there)");
  cmd->add_flag("--allow-outside-root", options->allow_outside_root,
                "Follow symlinks that lead out of the folder (refused by default)");
  cmd->add_flag("--allow-empty-classes", options->allow_empty_classes,
                "Keep class folders without images as classes (refused by default, as ImageFolder does)");
  cmd->add_option("--threads", options->threads, "Worker threads (default: cores, at most 8)")
      ->check(integer_in(0, core::max_threads()));
  cmd->callback([options, dir, shards] {
    if (dir->count() == 0 && shards->count() == 0) throw CLI::RequiredError("DIR or --shards");
    run_inspect(*options);
  });
}

}  // namespace sluice::cli
