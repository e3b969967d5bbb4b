// `sluice bench`: runs a pipeline over a data set and reports throughput (epoch 0 and the steady
// state apart), per-stage busy time, peak memory, skipped files and, with --checksum, a checksum
// of every batch (equal checksums mean identical batches: the CLI's determinism contract). The JSON object it ends with is read by scripts and
// by bench/e2e, so its keys only ever grow.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "pipeline/json_text.hpp"
#include "pipeline/stats_json.hpp"
#include "cli/number_flags.hpp"
#include "sluice/detail/core/atomic_file.hpp"
#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "stages/source/source.hpp"
#include "cli/remote_options.hpp"
#include "stages/remote/remote_stats.hpp"
#include "stages/remote/remote_url.hpp"
#include "stages/tar/tar_source.hpp"

namespace sluice::cli {
namespace {

using nlohmann::json;

struct BenchOptions {
  std::string spec;          // --spec FILE: pipeline and build options from a JSON spec
  bool threads_given = false;
  std::string data;
  std::string list;
  std::string shards;        // --shards PATTERN: tar shards (brace ranges, globs; URLs too)
  std::string shard_by = "shards";  // --shard-by: how shard(rank, world) splits them
  RemoteFlags remote;        // --remote-cache, --remote-cache-limit, --no-sign-request
  std::string transform = "eval";
  int size = 224;
  int padding = 4;
  int batch = 64;
  std::string threads = "auto";
  int epochs = 1;
  std::uint64_t seed = 0;
  std::string out = "f32";
  std::string layout = "nchw";
  std::string on_error = "fail";
  bool strict_decode = false;  // libjpeg warnings fail the file (DecodeOptions::strict)
  std::string budget;
  std::string cache = "none";
  std::string dct = "fast";
  std::string color = "rgb";
  std::vector<float> mean;  // default: ImageNet's for rgb, 0.5 for grey
  std::vector<float> std;
  int prefetch = 0;          // 0: the default (2), or tuned with --threads auto
  int in_flight = 0;         // 0: the default, or tuned with --threads auto
  std::int64_t shuffle_buffer = 0;
  bool shuffle = false;
  bool drop_cache = false;   // evict the data set's pages before epoch 0 (a cold first epoch)
  std::string device = "host";
  std::int64_t stop_after_batches = 0;  // 0: run every epoch
  bool allow_outside_root = false;      // list entries and symlinks that leave the data set's folder
  bool allow_empty_classes = false;     // class folders without images
  std::string save_state;               // where to write the loader's state when stopping
  std::string resume;                   // a state file to continue from
  bool per_batch = false;               // --json gets batch_checksums
  bool checksum = false;                // hash every batch (XXH3: a few % of the run's CPU)
  bool normalize_on_device = false;
  bool json = false;
};

// Asks the kernel to drop the data set's pages from its cache (posix_fadvise DONTNEED), so the
// first epoch reads from the device: every file, or every shard and its index file. Only clean,
// unmapped pages go; no privileges needed (docs/shards.md checks it as an unprivileged user).
void drop_page_cache(const PipelineSpec& spec) {
  const auto drop = [](const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  };
  if (const auto* shards = std::get_if<spec::Shards>(&spec.source)) {
    for (const std::string& shard : stages::expand_shard_patterns(shards->patterns, shards->remote)) {
      if (stages::remote::is_remote_url(shard)) continue;  // its copy is in the remote cache, not here
      drop(shard);
      drop(stages::shard_index_path(shard));
    }
    return;
  }
  const stages::Dataset dataset = stages::load_dataset(spec.source);
  for (std::int64_t i = 0; i < dataset.items.size(); ++i) drop(dataset.items.path(i));
}

// Peak resident set size of this process (VmHWM), in bytes.
std::uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// --cache none | memory | memory:SIZE | disk:PATH, optionally ",decoded" to cache after decode
// (",encoded", the default, is accepted too). Any other word after the last comma is refused:
// "disk:X,encdoed" must not create a cache file named "X,encdoed".
struct CacheChoice {
  std::optional<spec::Cache> cache;
  bool decoded = false;
};

CacheChoice parse_cache(std::string text) {
  CacheChoice c;
  const auto comma = text.rfind(',');
  if (comma != std::string::npos) {
    const std::string option = text.substr(comma + 1);
    if (option != "decoded" && option != "encoded") {
      throw Error(ErrorCode::kInvalidArgument, "--cache: unknown option \"" + option.substr(0, 40) +
                                                   "\" after the comma (expected decoded or encoded)");
    }
    c.decoded = option == "decoded";
    text.erase(comma);
    if (text.find(',') != std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument, "--cache: one option after a comma at most (decoded or encoded)");
    }
  }
  if (text == "none") return c;
  if (text == "memory" || text.rfind("memory:", 0) == 0) {
    MemoryCache m;
    if (text.size() > 7) {
      const auto bytes = parse_size(text.substr(7));
      if (!bytes) throw Error(ErrorCode::kInvalidArgument, "--cache memory:SIZE: cannot read \"" + text.substr(7) + "\" as a size");
      m.max_bytes = *bytes;
    }
    c.cache = spec::Cache{m};
  } else if (text.rfind("disk:", 0) == 0 && text.size() > 5) {
    c.cache = spec::Cache{DiskCache{text.substr(5), 0}};
  } else {
    throw Error(ErrorCode::kInvalidArgument, "--cache must be none, memory, memory:SIZE or disk:PATH (optionally ,decoded)");
  }
  return c;
}

void add_cache(Pipeline& p, const spec::Cache& cache) {
  std::visit([&p](const auto& store) { p.cache(store); }, cache.store);
}

DeviceId parse_device(const std::string& text) {
  if (text == "host") return host();
  if (text.rfind("cuda:", 0) == 0) {
    try {
      return cuda(std::stoi(text.substr(5)));
    } catch (const std::exception&) {
    }
  }
  throw Error(ErrorCode::kInvalidArgument, "--device must be host or cuda:N, got \"" + text + "\"");
}

Pipeline make_pipeline(const BenchOptions& o) {
  Pipeline p = !o.shards.empty() ? Pipeline::from_shards(o.shards, {.shard_by = o.shard_by == "samples" ? ShardBy::kSamples : ShardBy::kShards,
                                                                   .remote = remote_options(o.remote)})
               : o.list.empty()   ? Pipeline::from_folder(o.data, {.allow_outside_root = o.allow_outside_root,
                                                                   .allow_empty_classes = o.allow_empty_classes})
                                  : Pipeline::from_list(o.list, {.allow_outside_root = o.allow_outside_root});
  if (o.shuffle) p.shuffle_files(o.seed);
  const CacheChoice cache = parse_cache(o.cache);
  p.read();
  if (cache.cache && !cache.decoded) add_cache(p, *cache.cache);
  p.decode_jpeg({.color = o.color == "grey" ? Color::kGrey : Color::kRGB, .fast_dct = o.dct == "fast",
                 .strict = o.strict_decode});
  if (cache.cache && cache.decoded) add_cache(p, *cache.cache);
  // The library's presets (sluice/pipeline/presets.hpp), as train and the benchmarks use them.
  if (o.transform == "eval") {
    presets::eval_crop(o.size).apply(p);
  } else if (o.transform == "train") {
    presets::resized_crop_flip(o.size).apply(p);
  } else if (o.transform == "pad-crop") {
    presets::pad_crop_flip(o.size, o.padding).apply(p);
  } else if (o.transform != "none") {
    throw Error(ErrorCode::kInvalidArgument, "--transform must be eval, train, pad-crop or none");
  }
  const DType dtype = *parse_dtype(o.out);
  const Layout layout = o.layout == "nhwc" ? Layout::kNHWC : Layout::kNCHW;
  if (dtype == DType::kU8) {
    p.normalize({.mean = {}, .std = {}, .layout = layout, .dtype = dtype});
  } else {
    const bool grey = o.color == "grey";
    std::vector<float> mean = o.mean.empty() ? (grey ? std::vector<float>{0.5f} : presets::imagenet_stats().mean) : o.mean;
    std::vector<float> std = o.std.empty() ? (grey ? std::vector<float>{0.5f} : presets::imagenet_stats().std) : o.std;
    p.normalize({.mean = std::move(mean), .std = std::move(std), .layout = layout, .dtype = dtype});
  }
  if (o.shuffle_buffer > 0) p.shuffle(o.shuffle_buffer);
  p.batch(o.batch);
  if (o.prefetch > 0) p.prefetch(o.prefetch);
  if (o.device != "host" || o.normalize_on_device) p.to_device(parse_device(o.device), {.normalize_on_device = o.normalize_on_device});
  return p;
}

BuildOptions build_options(const BenchOptions& o) {
  BuildOptions b;
  b.threads = o.threads == "auto" ? autotune : std::stoi(o.threads);
  b.on_error = o.on_error == "skip" ? OnError::kSkip : OnError::kFail;
  b.seed = o.seed;
  if (!o.budget.empty()) {
    const auto bytes = parse_size(o.budget);
    if (!bytes) throw Error(ErrorCode::kInvalidArgument, "--budget: cannot read \"" + o.budget + "\" as a size (e.g. 512MiB)");
    b.memory_budget = *bytes;
  }
  if (o.in_flight > 0) b.samples_in_flight = o.in_flight;
  return b;
}

// --spec FILE: the whole pipeline and its build options come from a JSON spec
// (docs/json-spec.md); only --threads overrides it. The report's batch, out and device keys then
// describe the spec's pipeline, and transform says "spec".
PipelineDocument load_spec(BenchOptions& o) {
  PipelineDocument doc = load_pipeline_json(o.spec);
  if (o.threads_given) doc.build.threads = o.threads == "auto" ? autotune : std::stoi(o.threads);
  o.transform = "spec";
  o.size = 0;
  o.out = "u8";
  for (const spec::Stage& s : doc.spec.stages) {
    if (const auto* b = std::get_if<spec::Batch>(&s)) o.batch = b->size;
    if (const auto* n = std::get_if<spec::Normalize>(&s)) o.out = std::string(to_string(n->options.dtype));
    if (const auto* t = std::get_if<spec::ToDevice>(&s)) o.device = to_string(t->device);
  }
  return doc;
}

// What the epochs delivered: a hash of every batch's bytes and labels in order with --checksum
// (and each batch's own with --per-batch), images and the cache's hit rate per epoch, and whether
// --stop-after-batches cut the run short.
struct EpochsRun {
  std::string checksum_hex;  // empty without --checksum
  json batch_checksums = json::array();
  json per_epoch = json::array();
  std::int64_t images = 0;
  bool stopped = false;
  double seconds = 0;
  double first_batch = 0;  // from the first epoch's start to its first batch in hand
};

EpochsRun run_epochs(Loader& loader, const BenchOptions& o, std::int64_t first_epoch) {
  EpochsRun run;
  std::atomic<std::uint64_t> done{0};
  XXH3_state_t* hash = XXH3_createState();
  XXH3_64bits_reset(hash);
  std::int64_t delivered = 0;
  std::int64_t last_hits = 0;
  std::int64_t last_misses = 0;
  Stopwatch clock;
  {
    ProgressLine progress("bench", static_cast<std::uint64_t>(loader.samples_per_epoch()) * o.epochs, done,
                          stderr_is_terminal() && !o.json);
    for (std::int64_t e = first_epoch; e < o.epochs && !run.stopped; ++e) {
      Stopwatch epoch_clock;
      std::int64_t images = 0;
      for (Batch& b : loader.epoch(e)) {
        if (e == first_epoch && images == 0) run.first_batch = epoch_clock.seconds();
        if (o.checksum) {
          XXH3_64bits_update(hash, b.data().data, b.data().bytes());
          XXH3_64bits_update(hash, b.labels().data(), b.labels().size_bytes());
        }
        if (o.per_batch) {
          char hex[17];
          const std::uint64_t one = XXH3_64bits(b.data().data, b.data().bytes()) ^
                                    XXH3_64bits(b.labels().data(), b.labels().size_bytes());
          std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(one));
          run.batch_checksums.push_back(hex);
        }
        images += b.size() - b.padding();  // a rank's padding repeats samples it delivered
        done.fetch_add(static_cast<std::uint64_t>(b.size() - b.padding()), std::memory_order_relaxed);
        if (InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted");
        if (o.stop_after_batches > 0 && ++delivered == o.stop_after_batches) {
          run.stopped = true;
          break;
        }
      }
      // Copies to a device are asynchronous: an epoch ends when the last one has landed.
      if (o.device != "host") Stream::wrap(parse_device(o.device), nullptr).synchronize();
      const double s = epoch_clock.seconds();
      const CacheStats c = loader.stats().cache;
      const std::int64_t hits = c.hits - last_hits;
      const std::int64_t misses = c.misses - last_misses;
      last_hits = c.hits;
      last_misses = c.misses;
      run.per_epoch.push_back({{"epoch", e}, {"images", images}, {"seconds", s}, {"images_per_sec", images / s},
                               {"cache_hit_rate", hits + misses > 0 ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0}});
    }
  }
  run.seconds = clock.seconds();
  run.images = static_cast<std::int64_t>(done.load());
  char checksum_hex[17];
  std::snprintf(checksum_hex, sizeof checksum_hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(hash)));
  XXH3_freeState(hash);
  if (o.checksum) run.checksum_hex = checksum_hex;
  return run;
}

// The rate of the epochs after the first (the steady state: the batch ring's slots and every
// worker's buffers exist, and the files are in the page cache after the first pass), or nothing
// with fewer than two epochs.
std::optional<double> steady_state_rate(const EpochsRun& run) {
  std::int64_t images = 0;
  double seconds = 0;
  for (std::size_t e = 1; e < run.per_epoch.size(); ++e) {
    images += run.per_epoch[e]["images"].get<std::int64_t>();
    seconds += run.per_epoch[e]["seconds"].get<double>();
  }
  if (seconds <= 0) return std::nullopt;
  return static_cast<double>(images) / seconds;
}

// The bytes the read stage produced: the data set's bytes read, for MB/s.
std::int64_t read_bytes_of(const Stats& stats) {
  for (const auto& s : stats.stages) {
    if (s.name == "read") return s.bytes;
  }
  return 0;
}

// The statistics in their one schema (docs/stats.md: stats_json, as C and Python write them),
// then the run's own keys.
nlohmann::ordered_json bench_json(const BenchOptions& o, const Stats& stats, const EpochsRun& run,
                                  double setup_seconds, std::uint64_t baseline_rss) {
  const std::int64_t images = run.images;
  const double seconds = run.seconds;
  nlohmann::ordered_json result = stats_json(stats);
  result["images"] = images;
  result["epochs"] = o.epochs;
  result["seconds"] = seconds;
  result["setup_seconds"] = setup_seconds;
  // Cold start to the first batch: build() (remote shards fetched, or their index files) plus
  // the first epoch's start (a rank's shards fetched on demand) and its first batch.
  result["first_batch_seconds"] = setup_seconds + run.first_batch;
  result["images_per_sec"] = images / seconds;
  result["mb_per_sec"] = static_cast<double>(read_bytes_of(stats)) / 1e6 / seconds;
  result["peak_rss_bytes"] = peak_rss_bytes();
  result["baseline_rss_bytes"] = baseline_rss;
  result["batch"] = o.batch;
  result["transform"] = o.transform;
  result["size"] = o.size;
  result["out"] = o.out;
  result["per_epoch"] = run.per_epoch;
  const std::optional<double> steady = steady_state_rate(run);
  result["steady_state_images_per_sec"] = steady ? nlohmann::ordered_json(*steady) : nlohmann::ordered_json(nullptr);
  result["checksum"] = run.checksum_hex.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.checksum_hex);
  result["device"] = o.device;
  result["stopped_early"] = run.stopped;
  if (o.per_batch) result["batch_checksums"] = run.batch_checksums;
  // Shards named by URL: what the transport did (requests, bytes, retries by cause, cache hits).
  if (stages::remote::remote_stats().snapshot().requests > 0) result["remote"] = remote_stats_json();
  return result;
}

void print_report(const Stats& stats, const EpochsRun& run, double setup_seconds) {
  const std::int64_t images = run.images;
  const double seconds = run.seconds;
  std::cout << "sluice bench: " << images << " images in " << format_seconds(seconds) << ", "
            << static_cast<std::int64_t>(images / seconds) << " images/s, "
            << format_bytes(static_cast<std::uint64_t>(read_bytes_of(stats) / seconds)) << "/s read, "
            << stats.threads << " threads\n";
  for (const auto& e : run.per_epoch) {
    std::cout << "  epoch " << e["epoch"].get<int>() << ": " << static_cast<std::int64_t>(e["images_per_sec"].get<double>())
              << " images/s\n";
  }
  if (const std::optional<double> steady = steady_state_rate(run)) {
    const double first = run.per_epoch[0]["images_per_sec"].get<double>();
    char line[160];
    std::snprintf(line, sizeof line, "  steady state (epochs after the first): %.0f images/s; epoch 0 at %.2fx of it\n",
                  *steady, first / *steady);
    std::cout << line;
  }
  std::cout << "  set-up (build) " << format_seconds(setup_seconds) << ", first batch after "
            << format_seconds(setup_seconds + run.first_batch) << "\n";
  std::cout << "  busy time per stage (summed over threads):\n";
  for (const auto& s : stats.stages) {
    if (s.items == 0) continue;
    char line[160];
    std::snprintf(line, sizeof line, "    %-12s %8.2f s  %6.1f us/item  %s\n", s.name.c_str(), s.busy_seconds,
                  1e6 * s.busy_seconds / static_cast<double>(s.items), format_bytes(static_cast<std::uint64_t>(s.bytes)).c_str());
    std::cout << line;
  }
  std::cout << "  consumer waited " << format_seconds(stats.consumer_wait_seconds) << "; peak RSS "
            << format_bytes(peak_rss_bytes()) << "; checksum "
            << (run.checksum_hex.empty() ? "off (--checksum)" : run.checksum_hex) << "\n";
  std::cout << "  memory: accounted peak " << format_bytes(stats.memory_peak);
  if (stats.memory_budget != 0) std::cout << " of a " << format_bytes(stats.memory_budget) << " budget";
  std::cout << " (";
  bool first = true;
  for (const auto& m : stats.memory) {
    if (m.peak == 0) continue;
    std::cout << (first ? "" : ", ") << m.use << " " << format_bytes(m.peak);
    first = false;
  }
  std::cout << ")\n";
  if (!stats.cache.kind.empty()) {
    std::cout << "  " << stats.cache.kind << " cache: " << stats.cache.hits << " hits, " << stats.cache.misses
              << " misses, " << stats.cache.entries << " entries, " << format_bytes(stats.cache.bytes);
    if (!stats.cache.note.empty()) std::cout << " (" << stats.cache.note << ")";
    std::cout << "\n";
  }
  std::cout << "  samples in flight " << stats.tuning.samples_in_flight << ", prefetch " << stats.tuning.prefetch
            << (stats.tuning.autotuned ? " (autotuned, " + std::to_string(stats.tuning.decisions) + " changes)" : "")
            << "\n";
  std::cout << "  skipped " << stats.skipped << " file(s), " << stats.skip_events << " replacement(s)";
  for (const auto& s : stats.skipped_samples) std::cout << "\n    " << s.path << ": " << s.cause;
  std::cout << "\n";
  if (stats.recovered > 0) {
    std::cout << "  recovered " << stats.recovered << " file(s) in spite of libjpeg warnings (--strict-decode fails them)";
    for (const auto& r : stats.recovered_samples) std::cout << "\n    " << r.path << ": " << r.warning;
    std::cout << "\n";
  }
}

// A loader state file (Loader::state(), which starts with "SLST"): only one of those, or nothing,
// is replaced at --save-state's path.
core::OutputFile state_output(const std::string& path) {
  return core::OutputFile{.path = path, .noun = "state file", .mode = 0644,
                          .is_ours = [](std::string_view head) { return head.starts_with("SLST"); }};
}

void run_bench(const BenchOptions& given) {
  BenchOptions o = given;
  const std::optional<PipelineDocument> doc = o.spec.empty() ? std::nullopt : std::optional(load_spec(o));
  const std::uint64_t baseline_rss = peak_rss_bytes();  // before the pipeline holds anything
  const Pipeline pipeline = doc ? Pipeline(doc->spec) : make_pipeline(o);
  if (o.drop_cache) drop_page_cache(pipeline.spec());
  Stopwatch setup;
  // SIGINT/SIGTERM end the run within the poll interval, waits for a batch included, through the
  // loader's destructor (workers stopped, caches' temporaries removed) and exit 130/143.
  const InterruptGuard interrupt_guard;
  Loader loader = pipeline.build(doc ? doc->build : build_options(o));
  loader.set_wait_check(&InterruptGuard::interrupted, kInterruptPoll);
  const double setup_seconds = setup.seconds();

  std::int64_t first_epoch = 0;
  if (!o.resume.empty()) {
    // A regular file under a bound: /dev/zero or a FIFO is refused at once, naming the path.
    loader.restore(core::read_regular_file(o.resume, core::kMaxStateBytes, "state file"));
    first_epoch = loader.resume_epoch();
  }
  if (!o.save_state.empty()) core::check_output(state_output(o.save_state));  // before the run, not after
  const EpochsRun run = [&] {
    try {
      return run_epochs(loader, o, first_epoch);
    } catch (const Error& e) {  // a wait for a batch the signal cancelled
      if (e.code() == ErrorCode::kCancelled && InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted");
      throw;
    }
  }();
  if (!o.save_state.empty()) {
    const std::vector<std::uint8_t> state = loader.state();
    core::write_file_atomically(state_output(o.save_state),
                                std::string_view(reinterpret_cast<const char*>(state.data()), state.size()));
  }
  const Stats stats = loader.stats();
  // Built before the report prints: peak_rss_bytes() is read at the same point as before.
  const nlohmann::ordered_json result = bench_json(o, stats, run, setup_seconds, baseline_rss);
  print_report(stats, run, setup_seconds);
  if (o.json) std::cout << dump_json(result) << "\n";  // paths that are not UTF-8 stay escaped
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Run a pipeline over a data set and report throughput");
  auto* data = cmd->add_option("--data", options->data, "Image folder (class sub-folders)")->check(CLI::ExistingDirectory);
  auto* list = cmd->add_option("--list", options->list, "List file: path<TAB>label per line")->check(CLI::ExistingFile);
  auto* shards = cmd->add_option("--shards", options->shards,
                                 "Tar shards: a pattern with brace ranges or globs, e.g. 'train-{000000..000146}.tar'");
  data->excludes(list);
  shards->excludes(data)->excludes(list);
  cmd->add_option("--shard-by", options->shard_by,
                  "With --shards: shards (each rank a contiguous run of whole shards) or samples (every rank every "
                  "world-th sample: the same global steps at every world size); docs/distributed.md")
      ->check(CLI::IsMember({"shards", "samples"}))->needs(shards)->capture_default_str();
  add_remote_options(cmd, options->remote);
  cmd->add_option("--transform", options->transform,
                  "eval: resize shorter side to size*256/224, center crop; train: random resized crop + flip; "
                  "pad-crop: random crop with --padding + flip; none")
      ->check(CLI::IsMember({"eval", "train", "pad-crop", "none"}))->capture_default_str();
  cmd->add_option("--size", options->size, "Output side in pixels")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--padding", options->padding, "Padding for pad-crop")->check(integer_in(0, core::kMaxImageSide))->capture_default_str();
  cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--threads", options->threads, "Worker threads, or auto")->check(thread_count(true))->capture_default_str();
  cmd->add_option("--epochs", options->epochs, "Epochs to run")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of every random choice")->check(unsigned_up_to(UINT64_MAX))->capture_default_str();
  cmd->add_flag("--shuffle", options->shuffle, "Reshuffle the file order every epoch");
  cmd->add_option("--out", options->out, "Output dtype")->check(CLI::IsMember({"u8", "f32", "f16", "bf16"}))->capture_default_str();
  cmd->add_option("--layout", options->layout, "Batch layout")->check(CLI::IsMember({"nchw", "nhwc"}))->capture_default_str();
  cmd->add_option("--dct", options->dct, "JPEG IDCT: fast (tf.data's default) or accurate")
      ->check(CLI::IsMember({"fast", "accurate"}))->capture_default_str();
  cmd->add_option("--color", options->color, "Decoded colour: rgb or grey")->check(CLI::IsMember({"rgb", "grey"}))->capture_default_str();
  cmd->add_option("--mean", options->mean, "Per-channel mean in [0, 1] (default ImageNet's, 0.5 for grey)")->delimiter(',');
  cmd->add_option("--std", options->std, "Per-channel std in [0, 1] (default ImageNet's, 0.5 for grey)")->delimiter(',');
  cmd->add_option("--prefetch", options->prefetch, "Batches prepared ahead (default 2, or tuned with --threads auto)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--in-flight", options->in_flight, "Samples in flight (default 2 x threads, or tuned)")->check(CLI::PositiveNumber);
  cmd->add_option("--shuffle-buffer", options->shuffle_buffer, "Shuffle buffer of N samples (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--on-error", options->on_error, "fail or skip bad files")->check(CLI::IsMember({"fail", "skip"}))->capture_default_str();
  cmd->add_flag("--strict-decode", options->strict_decode,
                "Fail files libjpeg warns about (default: decode them when every row is there, and count them)");
  cmd->add_option("--budget", options->budget, "Memory budget every buffer fits in, e.g. 512MiB");
  cmd->add_option("--cache", options->cache, "none | memory | memory:SIZE | disk:PATH, optionally ,decoded")
      ->capture_default_str();
  cmd->add_option("--device", options->device, "Where batches go: host or cuda:N")->capture_default_str();
  cmd->add_flag("--normalize-on-device", options->normalize_on_device,
                "Ship u8 and normalise on the device (with --device cuda:N)");
  cmd->add_option("--stop-after-batches", options->stop_after_batches, "Stop after N batches (with --save-state)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--save-state", options->save_state, "Write the loader's state here when the run ends");
  cmd->add_flag("--allow-outside-root", options->allow_outside_root,
                "Read list entries and symlinks that lead out of the data set's folder (refused by default)");
  cmd->add_flag("--allow-empty-classes", options->allow_empty_classes,
                "Keep class folders without images as classes (refused by default, as ImageFolder does)");
  cmd->add_option("--resume", options->resume, "Continue from a state written by --save-state")->check(CLI::ExistingFile);
  cmd->add_flag("--checksum", options->checksum, "Hash every batch in order (XXH3) and report the checksum");
  cmd->add_flag("--per-batch", options->per_batch, "Add batch_checksums (one per batch, in order) to --json");
  cmd->add_flag("--drop-cache", options->drop_cache, "Drop the data set's pages from the OS cache first (cold epoch 0)");
  cmd->add_flag("--json", options->json, "End stdout with one JSON object");
  cmd->add_option("--spec", options->spec, "JSON pipeline spec (docs/json-spec.md) instead of --data/--list and "
                  "the pipeline options; --threads still overrides it")->check(CLI::ExistingFile);
  cmd->callback([cmd, options, data, list, shards] {
    if (!options->spec.empty()) {
      for (const char* name : {"--data", "--list", "--shards", "--shard-by", "--transform", "--size", "--padding", "--batch", "--seed",
                               "--shuffle", "--out", "--layout", "--dct", "--color", "--mean", "--std", "--prefetch",
                               "--in-flight", "--shuffle-buffer", "--on-error", "--strict-decode", "--budget", "--cache",
                               "--device", "--normalize-on-device"}) {
        if (cmd->count(name) > 0) {
          throw CLI::ValidationError("--spec", std::string("excludes ") + name + ": the spec describes the whole pipeline");
        }
      }
    } else if (data->count() == 0 && list->count() == 0 && shards->count() == 0) {
      throw CLI::RequiredError("--data, --list, --shards or --spec");
    }
    options->threads_given = cmd->count("--threads") > 0;
    run_bench(*options);
  });
}

}  // namespace sluice::cli
