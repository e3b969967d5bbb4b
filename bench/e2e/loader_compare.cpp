// loader_compare: sluice against its peers and the decode limit on the same files, in one run,
// behind one command line (Taskflow's benchmarks/ idea), printing ratios rather than bare times
// because the machines we measure on are shared and noisy:
//
//   loader_compare --data ../shared/datasets/wallpaper-crops --transform eval --size 224
//                  --batch 64 --threads 2 --epochs 2 --systems sluice,limit,torch,opencv --json
//
// Systems: sluice (public API), sluice-cached (the same with a memory cache), limit (threads x
// single-thread full-size tjDecompress2 over preloaded bytes), parallel (that decode on all threads
// at once), read-decode (the same, each file read from disk first: a bare read-and-decode loop),
// torch (DataLoader subprocess), opencv (hand-written OpenCV loop), and sluice-bilinear and
// opencv-bilinear (both resizing with plain bilinear, no antialiasing: like for like). Each one
// runs an untimed warm-up epoch first, so all of them read the files from the page cache.
// With --rounds N the systems run N times in turn: rates are the medians over the rounds (with
// their spread), ratios the medians of each round's ratio (systems measured minutes apart see
// different loads). Every system's CPU seconds, and the cores every other process on the machine
// took while it ran, are printed beside its rate; when the load average before the run exceeds
// the thread count, or other processes took more than a quarter of a core beyond what the systems'
// threads leave free, the run is "under load" and the targets get no verdict. sluice's epoch 0
// (the warm-up every system gets) is timed on its own and set against its steady state, in wall
// time and in the process's CPU per image: the load moves the CPU an image costs far less than
// the wall time, so that ratio says what epoch 0 does beyond the later epochs on a shared machine.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "decode_limit.hpp"
#include "image_list.hpp"
#include "opencv_loop.hpp"
#include "run_conditions.hpp"
#include "scenario.hpp"
#include "sluice_system.hpp"
#include "torch_peer.hpp"

namespace {

namespace sb = sluice::bench;
using nlohmann::json;

const std::vector<std::string> kSystems = {"sluice", "sluice-cached", "sluice-bilinear", "limit", "parallel",
                                           "read-decode", "torch", "opencv", "opencv-bilinear"};

const std::map<std::string, std::string> kSystemTitles = {
    {"sluice", "sluice"},
    {"sluice-cached", "sluice, mem cache"},
    {"sluice-bilinear", "sluice, bilinear"},
    {"limit", "decode limit"},
    {"parallel", "decode, N threads"},
    {"read-decode", "read+decode, N thr."},
    {"torch", "torch DataLoader"},
    {"opencv", "OpenCV loop"},
    {"opencv-bilinear", "OpenCV, bilinear"}};

// Pairs measured like for like, printed and kept in the JSON beside the table's sluice / system
// ratios: both resize with plain bilinear (no antialiasing).
const std::vector<std::pair<std::string, std::string>> kLikeForLike = {{"sluice-bilinear", "opencv-bilinear"}};

// The acceptance targets (sluice / system >= min), per transform: what sluice is tuned
// to meet. Printed next to the measured ratio; they never change what is measured. cifar's two
// are alternatives: the decode limit (2 x one thread), or the decode the 2 threads sustain.
struct Target {
  std::string system;
  double min = 0;
};
const std::map<sb::Transform, std::vector<Target>> kTargets = {
    {sb::Transform::kEval, {{"limit", 1.1}, {"torch", 3.5}, {"opencv", 2.0}}},
    {sb::Transform::kTrain, {{"limit", 1.25}}},
    {sb::Transform::kCifar, {{"limit", 0.85}, {"parallel", 1.0}}}};

// The target for a user's first epoch: at least this share of the steady state.
constexpr double kFirstEpochTarget = 0.9;
// Cores other processes may take, beyond those the systems' threads leave free, before a run is
// "under load": a quarter of a core already moves a 2-thread rate on 2 cores by about 12%.
constexpr double kOthersCoresAllowed = 0.25;

struct Measured {
  std::vector<double> rates;  // images/s of each round
  std::vector<double> first_epoch_rates;  // epoch 0's images/s of each round (sluice systems)
  std::vector<double> setup_seconds;      // the build of each round (sluice systems)
  std::vector<double> first_epoch_cpu_us;  // epoch 0's CPU microseconds per image, each round (sluice systems)
  std::vector<double> cpu_us;              // the timed epochs' CPU microseconds per image, each round
  std::vector<double> cpu_seconds;   // this process's (and the torch peer's) CPU seconds, each round
  std::vector<double> others_cores;  // cores the rest of the machine used during each round's run
  sb::LoaderResult last;      // the last round's figures, for the JSON
  json extra = json::object();
  std::string error;
};

// Reads every file once, so that the first system of the first round (and its epoch 0) reads from
// the page cache as every later one does, not from the disk.
void warm_page_cache(const sb::ImageList& list) {
  std::vector<char> buffer(1 << 20);
  for (const sb::ImageEntry& e : list.entries) {
    const int fd = ::open(e.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // the systems report it
    while (::read(fd, buffer.data(), buffer.size()) > 0) {
    }
    ::close(fd);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median over rounds of a[r] / b[r]: each ratio pairs runs made seconds apart, so a load that
// drifts across the whole run cancels out better than in a ratio of medians. A system that failed
// stopped running, so the rounds both completed are the first min(size) ones.
std::optional<double> paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n == 0) return std::nullopt;
  std::vector<double> ratios;
  for (std::size_t r = 0; r < n; ++r) ratios.push_back(a[r] / b[r]);
  return median(ratios);
}

// (max - min) / median of the rounds, as "+-N%" (half of it each way), or "-" for one round.
std::string spread_of(const std::vector<double>& v) {
  if (v.size() < 2) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "+-%.0f%%", 50.0 * (*hi - *lo) / median(v));
  return buffer;
}

std::vector<std::string> split_systems(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream in(csv);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name.empty()) continue;
    if (std::find(kSystems.begin(), kSystems.end(), name) == kSystems.end()) {
      throw CLI::ValidationError("--systems", "unknown system '" + name +
                                                  "' (sluice, sluice-cached, sluice-bilinear, limit, parallel, "
                                                  "read-decode, torch, opencv, opencv-bilinear)");
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// What one invocation runs on and what it measured so far.
struct Run {
  std::string data;
  std::string transform_name = "eval";
  sb::Scenario sc;
  std::vector<std::string> systems;
  int rounds = 1;
  double min_decode_seconds = 1.0;
  sb::TorchPeerOptions torch_options{SLUICE_BENCH_PYTHON, SLUICE_BENCH_TORCH_SCRIPT};
  sb::ImageList list;
  std::int64_t n = 0;
  std::map<std::string, Measured> measured;
  double load_before = 0, load_after = 0, load_max = 0, others_max = 0;
  bool under_load = false;
};

// One system, once: its figures into m.last (and m.extra for the decode limits).
void run_system(const Run& run, const std::string& system, const sb::ListFile& list_file, Measured& m) {
  const sb::Scenario& sc = run.sc;
  sb::Scenario bilinear = sc;
  bilinear.resampling = sb::Resampling::kBilinear;
  if (system == "sluice") {
    m.last = sb::run_sluice(run.data, sc, run.n);
  } else if (system == "sluice-bilinear") {
    m.last = sb::run_sluice(run.data, bilinear, run.n);
  } else if (system == "opencv-bilinear") {
    m.last = sb::run_opencv_loop(run.list, bilinear);
  } else if (system == "sluice-cached") {
    m.last = sb::run_sluice(run.data, sc, run.n, sb::EncodedFiles::kInMemory);
  } else if (system == "limit") {
    const sb::DecodeLimitResult r = sb::measure_decode_limit(run.list, {.min_seconds = run.min_decode_seconds});
    m.last = {r.images, r.seconds, r.single_thread_per_sec * sc.threads, 0};
    m.extra = {{"single_thread_images_per_sec", r.single_thread_per_sec},
               {"factor", sc.threads}, {"preloaded_bytes", r.preloaded_bytes},
               {"timed_seconds", r.seconds}, {"timed_passes", r.passes},
               {"decode", "tjDecompress2 TJPF_RGB TJFLAG_FASTDCT full size"}};
  } else if (system == "parallel") {
    const sb::DecodeLimitResult r =
        sb::measure_parallel_decode(run.list, sc.threads, {.min_seconds = run.min_decode_seconds});
    m.last = {r.images, r.seconds, r.single_thread_per_sec * sc.threads, 0};
    m.extra = {{"threads", sc.threads},
               {"decode", "tjDecompress2 TJPF_RGB TJFLAG_FASTDCT full size, all threads at once"}};
  } else if (system == "read-decode") {
    const sb::DecodeLimitResult r = sb::measure_parallel_decode(
        run.list, sc.threads, {.min_seconds = run.min_decode_seconds, .read_files = true});
    m.last = {r.images, r.seconds, r.single_thread_per_sec * sc.threads, 0};
    m.extra = {{"threads", sc.threads},
               {"decode", "open, pread, close, then tjDecompress2 TJPF_RGB TJFLAG_FASTDCT full size, all threads"}};
  } else if (system == "torch") {
    const sb::TorchPeerResult r = sb::run_torch_peer(list_file.path().string(), sc, run.torch_options);
    m.last = r.loader;
    m.extra = {{"torch_version", r.torch_version}, {"workers", sc.threads}};
  } else {
    m.last = sb::run_opencv_loop(run.list, sc);
  }
}

// Every system in turn, `rounds` times, each with its CPU time and what the rest of the machine
// took meanwhile; then the load verdict.
void run_rounds(Run& run) {
  const sb::ListFile list_file(run.list);
  warm_page_cache(run.list);
  run.load_before = sb::load_average();
  run.load_max = run.load_before;
  for (int round = 0; round < run.rounds; ++round) {
    for (const std::string& system : run.systems) {
      Measured& m = run.measured[system];
      if (!m.error.empty()) continue;
      std::cerr << "  [" << round + 1 << "/" << run.rounds << "] " << system << " ..." << std::flush;
      run.load_max = std::max(run.load_max, sb::load_average());
      const sb::CpuSnapshot cpu_before = sb::cpu_snapshot();
      try {
        run_system(run, system, list_file, m);
        const sb::CpuUse use = sb::cpu_use(cpu_before, sb::cpu_snapshot());
        m.rates.push_back(m.last.images_per_sec);
        m.cpu_seconds.push_back(use.own_cpu_seconds);
        m.others_cores.push_back(use.others_cores);
        if (m.last.first_epoch_images_per_sec > 0) {
          m.first_epoch_rates.push_back(m.last.first_epoch_images_per_sec);
          m.setup_seconds.push_back(m.last.setup_seconds);
          m.first_epoch_cpu_us.push_back(m.last.first_epoch_cpu_us_per_image);
          m.cpu_us.push_back(m.last.cpu_us_per_image);
        }
        std::cerr << " " << format("%.1f", m.last.images_per_sec) << " images/s";
        if (m.last.first_epoch_images_per_sec > 0) {
          std::cerr << " (epoch 0: " << format("%.1f", m.last.first_epoch_images_per_sec) << ")";
        }
        if (system == "limit" || system == "parallel" || system == "read-decode") {
          std::cerr << ", timed " << format("%.2f", m.last.seconds) << " s after the warm-up";
        }
        std::cerr << ", CPU " << format("%.2f", use.own_cpu_seconds) << " s, others "
                  << format("%.2f", use.others_cores) << " cores\n";
      } catch (const std::exception& e) {
        m.error = e.what();
        std::cerr << " failed: " << m.error << "\n";
      }
    }
  }
  run.load_after = sb::load_average();
  run.load_max = std::max(run.load_max, run.load_after);
  for (const auto& [name, m] : run.measured) {
    for (double c : m.others_cores) run.others_max = std::max(run.others_max, c);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  const double spare_cores = std::max(0.0, static_cast<double>(cores) - run.sc.threads);
  run.under_load = run.load_before > run.sc.threads || run.others_max > spare_cores + kOthersCoresAllowed;
  std::printf("\nload average (1 min, %u cores): %.2f before, %.2f after, %.2f at most between systems; "
              "other processes took up to %.2f cores during a system's run\n",
              cores, run.load_before, run.load_after, run.load_max, run.others_max);
  if (run.under_load) {
    std::printf("UNDER LOAD: the load before the run exceeded %d threads, or other processes took over %.2f "
                "cores: no verdict on the targets (re-run on an idle machine)\n",
                run.sc.threads, spare_cores + kOthersCoresAllowed);
  }
}

std::optional<double> rate_of(const Run& run, const std::string& system) {
  const auto it = run.measured.find(system);
  if (it == run.measured.end() || it->second.rates.empty()) return std::nullopt;
  return median(it->second.rates);
}

const std::vector<double>& rates_of(const Run& run, const std::string& system) {
  static const std::vector<double> no_rates;
  const auto it = run.measured.find(system);
  return it == run.measured.end() ? no_rates : it->second.rates;
}

std::optional<double> target_for(const Run& run, const std::string& system) {
  for (const Target& t : kTargets.at(run.sc.transform)) {
    if (t.system == system) return t.min;
  }
  return std::nullopt;
}

// Epoch 0 against the steady state (the sluice systems), printed under the system's row.
void report_first_epoch(const Run& run, const Measured& m, json& entry) {
  const double first = *paired_ratio(m.first_epoch_rates, m.rates);
  std::printf("%-18s %12.1f %7s   epoch 0 = %.2fx its steady state (>= %.2fx %s); set-up %.3f s\n",
              "  epoch 0", median(m.first_epoch_rates), spread_of(m.first_epoch_rates).c_str(), first,
              kFirstEpochTarget, run.under_load ? "under load" : first >= kFirstEpochTarget ? "met" : "MISSED",
              median(m.setup_seconds));
  // The same in CPU per image, which the load moves far less: what epoch 0 does beyond the rest.
  const double cpu_ratio = *paired_ratio(m.first_epoch_cpu_us, m.cpu_us);
  std::printf("%-18s %12.1f us/image CPU in epoch 0, %.1f in the timed epochs: epoch 0 = %.2fx their CPU\n", "  epoch 0 CPU",
              median(m.first_epoch_cpu_us), median(m.cpu_us), cpu_ratio);
  entry["epoch0_cpu_us_per_image"] = median(m.first_epoch_cpu_us);
  entry["cpu_us_per_image"] = median(m.cpu_us);
  entry["epoch0_cpu_over_steady_cpu"] = cpu_ratio;
  entry["epoch0_images_per_sec"] = median(m.first_epoch_rates);
  entry["rounds_epoch0_images_per_sec"] = m.first_epoch_rates;
  entry["epoch0_over_steady_state"] = first;
  entry["setup_seconds"] = median(m.setup_seconds);
}

// One row of the table: the system's median rate, its spread, its share of the decode limit,
// sluice's ratio to it and the target that ratio is held to; its JSON entry.
json report_system(const Run& run, const std::string& system, json& j_ratios, json& j_targets) {
  const Measured& m = run.measured.at(system);
  const double rate = *rate_of(run, system);
  json entry = m.extra;
  const std::optional<double> share = paired_ratio(m.rates, rates_of(run, "limit"));
  const std::string of_limit = share ? format("%.2fx", *share) : "-";
  std::string ratio = "-";
  std::string target = "";
  const std::optional<double> min = target_for(run, system);
  if (rate_of(run, "sluice") && system != "sluice") {
    const double r = *paired_ratio(rates_of(run, "sluice"), m.rates);
    ratio = format("%.2fx", r);
    j_ratios["sluice/" + system] = r;
    if (min) {
      target = format(">= %.2fx ", *min) + (run.under_load ? "under load" : r >= *min ? "met" : "MISSED");
      j_targets.push_back({{"ratio", "sluice/" + system}, {"min", *min}, {"value", r},
                           {"met", run.under_load ? json(nullptr) : json(r >= *min)}, {"under_load", run.under_load}});
    }
  } else if (min) {
    target = format(">= %.2fx", *min);
  }
  const double others = *std::max_element(m.others_cores.begin(), m.others_cores.end());
  std::printf("%-18s %12.1f %7s %10s %16s %7.2f %7.2f %18s\n", kSystemTitles.at(system).c_str(), rate,
              spread_of(m.rates).c_str(), of_limit.c_str(), ratio.c_str(), median(m.cpu_seconds), others,
              target.c_str());
  if (system == "limit") {
    // The limit is threads x the single-thread rate, so the median's share is the median.
    entry["single_thread_images_per_sec"] = rate / run.sc.threads;
    std::printf("%-18s %12.1f   (x%d threads = the limit; timed %.2f s, %lld whole passes, after 64 warm-up decodes)\n",
                "  1-thread decode", rate / run.sc.threads, run.sc.threads, m.last.seconds,
                static_cast<long long>(m.extra.value("timed_passes", std::int64_t{0})));
  }
  if (!m.first_epoch_rates.empty()) report_first_epoch(run, m, entry);
  entry["images_per_sec"] = rate;
  entry["rounds_images_per_sec"] = m.rates;
  entry["rounds_cpu_seconds"] = m.cpu_seconds;
  entry["rounds_others_cores"] = m.others_cores;
  entry["images"] = m.last.images;
  entry["seconds"] = m.last.seconds;
  if (share) entry["of_limit"] = *share;
  return entry;
}

// The table: rates are medians over the rounds; "of limit" is each system's share of the decode
// limit and "sluice / system" the ratio the targets are stated in, both the median of the rounds'
// own ratios. Returns whether every system ran.
bool report(const Run& run, bool emit_json) {
  std::printf("\n%-18s %12s %7s %10s %16s %7s %7s %18s\n", "system", "images/s", "spread", "of limit",
              "sluice / system", "CPU s", "others", "target");
  bool all_ran = true;
  json j_systems = json::object();
  json j_ratios = json::object();
  json j_targets = json::array();
  for (const std::string& system : run.systems) {
    if (!rate_of(run, system)) {
      const Measured& m = run.measured.at(system);
      all_ran = false;
      std::printf("%-18s %12s   (%s)\n", kSystemTitles.at(system).c_str(), "failed", m.error.c_str());
      json entry = m.extra;
      entry["error"] = m.error;
      j_systems[system] = entry;
      continue;
    }
    j_systems[system] = report_system(run, system, j_ratios, j_targets);
  }
  for (const auto& [a, b] : kLikeForLike) {
    const std::optional<double> r = paired_ratio(rates_of(run, a), rates_of(run, b));
    if (!r) continue;
    std::printf("like for like: %s / %s = %.2fx\n", kSystemTitles.at(a).c_str(), kSystemTitles.at(b).c_str(), *r);
    j_ratios[a + "/" + b] = *r;
  }
  if (emit_json) {
    const sb::Scenario& sc = run.sc;
    const json out = {
        {"data", std::filesystem::absolute(run.data).lexically_normal().string()},
        {"images_per_epoch", run.n},
        {"classes", run.list.classes.size()},
        {"bytes", run.list.total_bytes},
        {"transform", run.transform_name},
        {"size", sc.size},
        {"batch", sc.batch},
        {"threads", sc.threads},
        {"epochs", sc.epochs},
        {"warmup_epochs", 1},
        {"rounds", run.rounds},
        {"seed", sc.seed},
        {"cores", std::thread::hardware_concurrency()},
        {"load_average_before", run.load_before},
        {"load_average_after", run.load_after},
        {"load_average_max", run.load_max},
        {"others_cores_max", run.others_max},
        {"under_load", run.under_load},
        {"systems", j_systems},
        {"ratios", j_ratios},
        {"targets", j_targets}};
    std::printf("%s\n", out.dump().c_str());
  }
  return all_ran;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice against its peers and the decode limit, same files, one run"};
  Run run;
  sb::Scenario& sc = run.sc;
  sc.size = 0;
  std::string systems_csv = "sluice,limit,parallel,torch,opencv";
  bool emit_json = false;
  app.add_option("--data", run.data, "image folder: class sub-folders, or flat (one class)")
      ->required()->check(CLI::ExistingDirectory);
  app.add_option("--transform", run.transform_name, "eval, train or cifar")
      ->check(CLI::IsMember({"eval", "train", "cifar"}))->capture_default_str();
  app.add_option("--size", sc.size, "output side (default: 224; cifar: 32)");
  app.add_option("--batch", sc.batch, "batch size")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", sc.threads, "worker threads of every system (limit: the factor)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--epochs", sc.epochs, "timed epochs, after one untimed warm-up epoch")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", sc.seed, "seed of the random transforms")->capture_default_str();
  app.add_option("--systems", systems_csv,
                 "comma-separated: sluice, sluice-cached, sluice-bilinear, limit, parallel, read-decode, torch, "
                 "opencv, opencv-bilinear")
      ->capture_default_str();
  app.add_option("--rounds", run.rounds, "run every system this many times in turn; report medians")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--min-decode-seconds", run.min_decode_seconds,
                 "the decode limit repeats passes over the files at least this long")
      ->capture_default_str();
  app.add_option("--python", run.torch_options.python, "interpreter with torch and torchvision")
      ->capture_default_str();
  app.add_option("--torch-script", run.torch_options.script, "the torch peer")->capture_default_str();
  app.add_flag("--json", emit_json, "end stdout with one JSON object holding every figure");
  CLI11_PARSE(app, argc, argv);

  try {
    run.systems = split_systems(systems_csv);
  } catch (const CLI::Error& e) {
    return app.exit(e);
  }
  sc.transform = *sb::parse_transform(run.transform_name);
  if (sc.size <= 0) sc.size = sc.transform == sb::Transform::kCifar ? 32 : 224;
  try {
    run.list = sb::scan_image_folder(run.data);
  } catch (const std::exception& e) {
    std::cerr << "loader_compare: " << e.what() << "\n";
    return 2;
  }
  run.n = static_cast<std::int64_t>(run.list.entries.size());
  std::cerr << "loader_compare: " << run.n << " images in " << run.list.classes.size() << " class(es), "
            << format("%.1f", static_cast<double>(run.list.total_bytes) / 1e6) << " MB, "
            << run.transform_name << " " << sc.size << ", batch " << sc.batch << ", " << sc.threads
            << " threads, " << sc.epochs << " timed epoch(s) after 1 warm-up, " << run.rounds
            << " round(s)\n";
  run_rounds(run);
  return report(run, emit_json) ? 0 : 1;
}
